"""Checks that can fail: the same-weights check (`equivalence`) and the data-parallel check (`data_parallel`, with
the exact step of `float64_step`). They run notebooks through runner/run/ and write verdict files into a results
folder (runner/run_folder.py), which the report reads."""
