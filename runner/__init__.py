"""The runner behind run_all.py, in floors that run one way.

`catalog` (the registry) and `run_folder` (what a results folder holds) are the ground floor; `run/` runs notebooks
and writes records, `checks/` runs the checks and writes verdicts, `report/` reads only records and verdicts; `cli`
parses the command line and hands each command to its part. `catalog`, `run_folder`, `cli` and the run part's
command modules use the standard library only (and common/), so `run_all.py` can validate its arguments and build
the runner's own environment before papermill is installed.
"""
