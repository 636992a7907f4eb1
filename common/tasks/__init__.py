"""The workloads of the Rosetta stone: one module per task (common/tasks/<key>.py), each owning every fact about its
task that code outside its notebooks reads: names and sections, hyperparameters and profiles, canonical weights, FLOP
count and headline figure, and its same-weights check. The runner, the checks and the report ask the task; adding one
is adding its module to this folder (TASK_ORDER places it in the tables; unlisted, it comes after those listed). The
runner (runner/catalog.py) declares the frameworks; together they are the project's registry. Standard library only
at import time: notebooks import this on Python 3.6.

One module a task, rather than one class each in a single module: a task is a unit of its own, added, read and
reviewed as one file beside its notebooks, as a framework is one module of frameworks/.
"""

import importlib
import pkgutil
from collections import OrderedDict

from common.tasks.task import PARAMETERS, SECTION_TITLES, SameWeights, Task

__all__ = ["PARAMETERS", "SECTION_TITLES", "SameWeights", "TASKS", "TASK_ORDER", "Task", "get", "section_title"]

# The order of the tables and the command line; a task module not named here follows them, by name
TASK_ORDER = ("cnn", "inference", "rnn", "transformer", "train")


def _task_modules():
    """Every module of this folder that defines TASK, in TASK_ORDER and then by name."""
    names = sorted((name for _, name, is_package in pkgutil.iter_modules(__path__) if not is_package and name != "task"),
                   key=lambda name: (TASK_ORDER.index(name) if name in TASK_ORDER else len(TASK_ORDER), name))
    modules = [importlib.import_module(__name__ + "." + name) for name in names]
    return [module for module in modules if isinstance(getattr(module, "TASK", None), Task)]


TASKS = OrderedDict((module.TASK.key, module.TASK) for module in _task_modules())


def get(key):
    """The task named `key`; ValueError naming the known tasks if there is none."""
    if key not in TASKS:
        raise ValueError("unknown task {!r}; known tasks: {}".format(key, ", ".join(TASKS)))
    return TASKS[key]


def section_title(tag):
    """The title of a section tag; ValueError for a tag SECTION_TITLES does not name."""
    if tag not in SECTION_TITLES:
        raise ValueError("section tag {!r} has no title; add it to common/tasks/task.py SECTION_TITLES".format(tag))
    return SECTION_TITLES[tag]
