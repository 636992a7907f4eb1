"""Which checkout a process uses: the code it runs is where this package is; its environments, downloaded data and
requirement files are those of the checkout $ROSETTA_CHECKOUT names where set (on a Ray node, whose tasks run the
code Ray shipped from the run: runner/run/on_ray.py), else the same checkout."""

import os

INSTALL_VARIABLE = "ROSETTA_CHECKOUT"  # set on every Ray node (runner/run/on_ray.py start_node) and so in its kernels
CODE_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def install_folder():
    """The checkout whose environments, data and requirement files this process uses: $ROSETTA_CHECKOUT, else the one
    holding this code."""
    return os.environ.get(INSTALL_VARIABLE) or CODE_FOLDER
