"""The runner behind run_all.py: framework environments and kernels, notebook execution, result reports.

`catalog` and `environments` use the standard library only, so `run_all.py` can validate its
arguments and build the runner's own environment before papermill is installed; `execution` and
`report` run inside that environment.
"""
