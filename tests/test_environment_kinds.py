"""The three kinds of environment answer the same questions, and the rest of the runner asks only those."""

import ast
import hashlib
import os
import sys
from pathlib import Path

import pytest

from runner import catalog
from runner.run import debian, environments

RUNNER = Path(__file__).resolve().parent.parent / "runner"
KINDS = (environments.VirtualEnvironment, environments.VirtualEnvironmentWithLibraries, environments.AdoptedInterpreter)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(catalog, "JUPYTER_DIR", tmp_path / "jupyter")
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", tmp_path)
    (tmp_path / "demo.txt").write_text("numpy==2.4.6\n")
    return tmp_path


def built(env, requirements):
    """Make `env` look like a finished CPU build of `requirements`: its interpreter, stamp and kernel spec."""
    env.python_path.parent.mkdir(parents=True)
    env.python_path.write_text("")
    environments.write_stamp(env, {"build": "cpu", "python": "3.11.7", "requirements": requirements.name,
                                   "requirements_sha256": hashlib.sha256(environments.recipe(env, requirements)).hexdigest()})
    environments.write_kernel_spec(env)


def test_each_kind_is_what_its_stamp_and_the_catalog_say(scratch):
    plain = catalog.Environment("demo", "Demo")
    linked = catalog.Environment("demo", "Demo", library_aliases=(("libdemo.so.1", "libdemo.so.1"),))
    assert type(environments.installation(plain)) is environments.VirtualEnvironment
    assert type(environments.installation(linked)) is environments.VirtualEnvironmentWithLibraries
    environments.write_stamp(plain, {"build": "adopted", "python_path": sys.executable, "python": "3.11.7"})
    adopted = environments.installation(plain)
    assert type(adopted) is environments.AdoptedInterpreter and adopted.python() == Path(sys.executable)


def test_every_kind_answers_the_same_questions():
    questions = [name for name, value in vars(environments.Installation).items()
                 if callable(value) and not name.startswith("_")]
    assert {"build", "ready", "python", "describe"} <= set(questions)
    for kind in KINDS:
        for name in questions:  # answered by the kind itself or a kind it extends, never left to the base
            owner = next(cls for cls in kind.__mro__ if name in vars(cls))
            if name in ("build", "ready", "python", "describe", "label", "runs_this_process"):
                assert owner is not environments.Installation, (kind.__name__, name)


def test_a_virtual_environment_and_an_adopted_interpreter_side_by_side(scratch):
    env = catalog.Environment("demo", "Demo")
    built(env, scratch / "demo.txt")
    venv = environments.installation(env)
    assert venv.ready() and venv.ready(scratch / "demo.txt") and venv.python() == env.python_path
    assert (venv.label(), venv.describe()) == ("venv cpu envs/demo.txt", "envs/demo.txt, CPU build")
    assert venv.origin() == "Python 3.11.7, no lock"
    assert venv.kernel_variables() == {} and venv.missing(["keras"]) == [] and not venv.runs_this_process()
    (scratch / "demo.txt").write_text("numpy==2.4.7\n")  # a changed requirement: no longer what it was built from
    assert not venv.ready()

    environments.write_stamp(env, {"build": "adopted", "python_path": sys.executable, "python": "3.11.7",
                                   "versions": {"numpy": "2.4.6", "keras": None}})
    adopted = environments.installation(env)
    assert adopted.ready() and not adopted.ready(scratch / "demo.txt")  # an interpreter is not built from a file
    assert adopted.label() == "adopted " + sys.executable and adopted.describe().startswith("adopted ")
    assert adopted.missing(["numpy", "keras"]) == ["keras"] and adopted.requirements() is None
    assert adopted.kernel_variables()["PYTHONPATH"].split(os.pathsep)[0] == str(catalog.REPO)
    assert adopted.runs_this_process() and adopted.chosen_by_hand and not venv.chosen_by_hand


def test_libraries_reach_the_kernel_only_of_the_kind_that_provides_them(scratch):
    env = catalog.Environment("demo", "Demo", library_aliases=(("libdemo.so.1", "libdemo.so.1"),))
    folders = environments.installation(env).kernel_variables()["LD_LIBRARY_PATH"].split(os.pathsep)
    assert folders[0] == str(env.path / debian.LIBRARY_ALIASES_DIR)
    assert "LD_LIBRARY_PATH" not in environments.installation(catalog.Environment("plain", "Plain")).kernel_variables()


def test_no_module_outside_the_environments_asks_which_kind_an_environment_is():
    """The stamp's 'adopted' and the kind classes are read in runner/run/environments.py alone."""
    for path in sorted(RUNNER.rglob("*.py")):
        if path.name == "environments.py":
            continue
        tree = ast.parse(path.read_text())
        names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        assert not names & {"is_adopted", "AdoptedInterpreter", "VirtualEnvironment"}, path
        compared = [node for node in ast.walk(tree) if isinstance(node, ast.Compare)
                    and any(isinstance(c, ast.Constant) and c.value == "adopted" for c in node.comparators)]
        assert not compared, "{} compares a build with 'adopted'".format(path)
