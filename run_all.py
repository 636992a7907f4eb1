#!/usr/bin/env python3
"""Run every DL Rosetta Stone notebook on its framework's kernel, then build the comparison table and plot.

    python3 run_all.py                      # set up what is missing, run all notebooks (quick profile)
    python3 run_all.py -f pytorch -t cnn -p full
    python3 run_all.py setup | test | report RESULTS_DIR | list

The logic lives in the `runner` package; `python3 run_all.py -h` lists every option.
"""

import sys

from runner.cli import main

if __name__ == "__main__":
    sys.exit(main())
