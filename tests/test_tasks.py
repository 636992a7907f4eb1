"""A task is a unit of its own: one module in common/tasks/, which the runner, the checks, the report and the frameworks'
modules ask instead of naming it. Outside the task modules no code branches on a task's name (a comparison with one,
a membership test in a literal list of them, a dict of behaviour keyed by them); the registry's per-framework facts
keyed by task (runner/catalog.py `lacks`, `not_equivalent`, a framework module's table of refusals) are data, and stay.
"""

import ast
from pathlib import Path

import pytest

from common import hyperparams, tasks, weights

REPO = Path(__file__).resolve().parent.parent
SCANNED = ("common", "runner", "frameworks", "run_all.py")  # the code that must ask the task
TASK_MODULES = REPO / "common" / "tasks"


def literal_names(node, names):
    """The task names `node` spells as literals: a string, or a tuple, list or set of strings."""
    if isinstance(node, ast.Constant) and node.value in names:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [item.value for item in node.elts if isinstance(item, ast.Constant) and item.value in names]
    return []


def branches_on_task_names(source, names):
    """(line, what) for each place in `source` that branches on one of `names`: a comparison with it (==, !=, in, not
    in) or a dict literal keyed by it whose values are code (functions, lambdas), a dispatch table."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            spelled = [name for operand in [node.left] + node.comparators for name in literal_names(operand, names)]
            if spelled:
                found.append((node.lineno, "compares with " + ", ".join(spelled)))
        elif isinstance(node, ast.Dict):
            keyed = [key.value for key, value in zip(node.keys, node.values) if key is not None
                     and literal_names(key, names) and isinstance(value, (ast.Name, ast.Attribute, ast.Lambda))]
            if keyed:
                found.append((node.lineno, "dispatches on " + ", ".join(keyed)))
    return found


def scanned_files():
    """Every Python file of SCANNED outside the task modules."""
    for entry in SCANNED:
        path = REPO / entry
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            if TASK_MODULES not in file.parents:
                yield file


def test_no_code_outside_the_task_modules_branches_on_a_task_s_name():
    names = set(tasks.TASKS)
    found = ["{}:{}: {}".format(file.relative_to(REPO), line, what) for file in scanned_files()
             for line, what in branches_on_task_names(file.read_text(), names)]
    assert not found, "ask the task (common/tasks/<key>.py) instead:\n" + "\n".join(found)


@pytest.mark.parametrize("source, expected", [
    ('if task == "rnn":\n    pass\n', [(1, "compares with rnn")]),
    ('ok = record["task"] in ("inference", "train")\n', [(1, "compares with inference, train")]),
    ('run = {"cnn": cnn_step, "rnn": lambda p: p}[task]\n', [(1, "dispatches on cnn, rnn")]),
    ('lacks = {"train": "no data-parallel engine"}\nif task in lacks:\n    pass\n', []),  # data keyed by task
    ('if job.task == other.task:\n    pass\n', []),
])
def test_the_scan_finds_the_branches_it_names_and_only_those(source, expected):
    assert branches_on_task_names(source, {"cnn", "rnn", "inference", "train"}) == expected


def test_every_task_module_is_found_and_named_as_its_task():
    modules = sorted(path.stem for path in TASK_MODULES.glob("*.py") if path.stem not in ("__init__", "task"))
    assert sorted(tasks.TASKS) == modules  # a module's TASK carries the module's name
    assert list(tasks.TASKS)[:len(tasks.TASK_ORDER)] == list(tasks.TASK_ORDER)


@pytest.mark.parametrize("key", list(tasks.TASKS))
def test_a_task_s_facts_hold_together(key):
    task = tasks.get(key)
    for profile in hyperparams.PROFILES:
        params = hyperparams.for_task(key, profile)  # every profile keeps to the task's rules
    assert set(task.profiles) <= set(hyperparams.PROFILES) - {"full"}
    shapes = task.weight_shapes(params)
    reference = task.reference_weights(params, seed=0)
    assert {name: value.shape for name, value in reference.items()} == shapes
    weights.check(key, params, reference)
    assert task.optimises == (task.training_flops(params) is not None)  # a step that is trained is counted
    spec = task.same_weights
    if spec is not None:
        hyperparams.for_task(key, "smoke", spec.overrides)  # the check's overrides are the task's hyperparameters
        hyperparams.for_task(key, "smoke", spec.forward_overrides())
        assert not spec.steps or spec.weights_tolerance, key  # compared steps need their tolerance
        assert set(spec.representable or ()) <= set(shapes)
    assert task.devices({"devices": 4}) == (4 if task.data_parallel else 1)


def test_values_that_do_not_go_together_are_refused_by_their_task():
    with pytest.raises(ValueError, match="heads=3 for task transformer: must divide model_dim=128"):
        hyperparams.for_task("transformer", "smoke", {"heads": 3})
    with pytest.raises(ValueError, match="micro_batches=3 for task train: must divide batch_size=2"):
        hyperparams.for_task("train", "smoke", {"micro_batches": 3})
    with pytest.raises(ValueError, match="unknown hyperparameter 'heads' for task 'rnn'"):
        hyperparams.for_task("rnn", "smoke", {"heads": 2})  # another task's hyperparameter is not this one's
