"""Running: the run, setup, list and test commands, notebook execution with papermill, the environments and kernels,
and which GPU build fits this machine. It writes the records of a results folder (runner/run_folder.py).

`environments`, `compatibility`, `batch` and `setup_commands` import the standard library only, so run_all.py can
check its arguments and build the runner's own environment before papermill is installed.
"""
