"""Checks on the repository itself: notebook shape, no stored outputs, pins in step, lint, common's Python floor."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from common import concepts, tasks
from runner import catalog
from runner.run import interpreters

NOTEBOOKS = sorted(catalog.NOTEBOOKS.glob("*.ipynb"))


def load(path):
    return json.loads(Path(path).read_text())


def test_every_framework_has_a_notebook_per_task():
    assert {job.notebook for job in catalog.select()} <= set(NOTEBOOKS)
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    for cell in load(path)["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_its_task_skeleton(path):
    notebook = load(path)
    task = {t.notebook: t for t in tasks.TASKS.values()}[path.stem.split("_", 1)[1]]
    tags = []
    for cell in notebook["cells"]:
        for tag in cell["metadata"].get("tags", []):
            if tag.startswith(concepts.TAG_PREFIX):  # a concept's tag, beside the section's (tests/test_concepts.py)
                continue
            if not tags or tags[-1] != tag:
                tags.append(tag)
    assert tags == list(task.sections), path.name
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code[0]["metadata"]["tags"] == ["parameters"]
    assigned = [node.targets[0].id for node in ast.parse("".join(code[0]["source"])).body]
    common = list(tasks.PARAMETERS + task.parameters)
    assert assigned[:len(common)] == common, "every notebook of a task starts with the same parameters"
    framework = next(f for f in catalog.FRAMEWORKS if path.stem.startswith(f.notebook_prefix + "_"))
    variant_names = {name for variant in framework.variants for name, _ in variant.parameters}
    assert set(assigned[len(common):]) == variant_names, "extra parameters are those the variants set"
    assert all(cell["metadata"].get("tags") for cell in notebook["cells"][1:]), "every cell after the title is tagged"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_names_its_kernel_and_imports_no_star(path):
    notebook = load(path)
    framework = next(f for f in catalog.FRAMEWORKS if path.stem.startswith(f.notebook_prefix + "_"))
    kernels = {catalog.ENVIRONMENTS[v.env].kernel_name for v in framework.variants}
    assert notebook["metadata"]["kernelspec"]["name"] in kernels
    source = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    assert not re.search(r"^\s*from\s+\S+\s+import\s+\*", source, re.M)


def test_hyperparameters_are_not_repeated_in_notebooks():
    for path in NOTEBOOKS:
        source = "\n".join("".join(c["source"]) for c in load(path)["cells"] if c["cell_type"] == "code")
        assert not re.search(r"\b(lr|learning_rate|momentum|epochs|batch_size)\s*=\s*[0-9]", source), path.name


def test_environment_yml_pins_equal_the_runner_requirements():
    def pins(lines):
        return sorted(line.strip().lstrip("- ").strip() for line in lines if "==" in line and not line.strip().startswith("#"))

    yml = (catalog.REPO / "environment.yml").read_text().splitlines()
    txt = (catalog.REQUIREMENTS_DIR / "runner.txt").read_text().splitlines()
    assert pins(yml) == pins(txt) and pins(txt)


def test_every_environment_has_exact_pins():
    for env in catalog.ENVIRONMENTS.values():
        extras = tuple(env.extra_requirements(extra) for extra in env.extras)
        for requirements in (env.requirements,) + env.gpu_requirements + extras:
            for line in requirements.read_text().splitlines():
                line = line.split("#")[0].strip()
                if line and not line.startswith("-"):
                    assert "==" in line, "{}: {} is not pinned exactly".format(requirements.name, line)
    listed = {path.name for env in catalog.ENVIRONMENTS.values() for path in (env.requirements,) + env.gpu_requirements
              + tuple(env.extra_requirements(extra) for extra in env.extras)}
    extra = {path.name for path in catalog.REQUIREMENTS_DIR.glob("*.txt")} - listed - {interpreters.BOOTSTRAP}
    assert all(name.endswith(("-build.txt", "-debian.txt")) for name in extra), extra  # no orphan requirements
    for line in (catalog.REQUIREMENTS_DIR / interpreters.BOOTSTRAP).read_text().splitlines():
        line = line.split("#")[0].strip()
        assert not line or ("==" in line and "--hash=sha256:" in line), line  # installed with --require-hashes


def test_common_imports_no_framework():
    frameworks = {module for f in catalog.FRAMEWORKS for module in f.modules} | {"papermill", "matplotlib"}
    for path in (catalog.REPO / "common").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not {n.split(".")[0] for n in names} & frameworks, path.name


# What a module of frameworks/ may import besides the standard library, `common` and frameworks.probe: its own
# framework's modules (the registry's `modules`; a backend that is no framework of its own, such as Theano under
# Keras 2, its own package), and these.
EXTRA_IMPORTS = {"chainer": {"cupy"}, "cntk": {"numpy"}}


def allowed_imports(module):
    """The packages frameworks/<module>.py may import: its framework's own (nothing for probe and __init__)."""
    if module in ("probe", "__init__"):
        return set()
    own = {f.key: set(f.modules) for f in catalog.FRAMEWORKS}
    backends = {env.framework_module for env in catalog.ENVIRONMENTS.values() if env.framework_module}
    own.update({name: {name} for name in backends - set(own)})
    assert module in own, "frameworks/{}.py is not named after a framework or environment of the registry".format(module)
    return own[module] | EXTRA_IMPORTS.get(module, set())


def test_each_framework_module_imports_only_its_framework():
    stdlib = {"atexit", "importlib", "json", "logging", "os", "platform", "shutil", "subprocess", "sys", "tempfile", "types"}
    modules = sorted((catalog.REPO / "frameworks").glob("*.py"))
    assert {env.framework_module for env in catalog.ENVIRONMENTS.values() if env.framework_module} <= {
        path.stem for path in modules}
    for path in modules:
        tree = ast.parse(path.read_text(), feature_version=(3, 6))  # CNTK's kernel runs Python 3.6
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names.add((node.module or "").split(".")[0])
        assert names - stdlib - {"common", "frameworks"} <= allowed_imports(path.stem), path.name
        assert ast.get_docstring(tree), path.name
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                assert ast.get_docstring(node), "{}: {}".format(path.name, node.name)


def test_each_environment_that_names_a_framework_module_has_it():
    for env in catalog.ENVIRONMENTS.values():
        if env.framework_module:
            assert (catalog.REPO / "frameworks" / (env.framework_module + ".py")).exists(), env.name


def test_common_public_names_have_docstrings():
    for path in (catalog.REPO / "common").glob("*.py"):
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), path.name
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                assert ast.get_docstring(node), "{}: {}".format(path.name, node.name)


def test_common_parses_as_python_3_6():
    for path in (catalog.REPO / "common").glob("*.py"):
        ast.parse(path.read_text(), feature_version=(3, 6))
        assert "dataclass" not in path.read_text() and "from __future__ import annotations" not in path.read_text()


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(catalog.REPO)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_rebinds_a_parameter(path):
    """A parameter keeps the value it was given (what was asked for): what a framework makes of it gets a name of its
    own, such as computed_precision."""
    cells = [cell for cell in load(path)["cells"] if cell["cell_type"] == "code"]
    parameters = {node.targets[0].id for node in ast.parse("".join(cells[0]["source"])).body}
    for cell in cells[1:]:
        lines = "".join(cell["source"]).splitlines()
        code = "\n".join(lines[1:] if lines and lines[0].startswith("%%") else lines)  # a cell magic's first line
        for node in ast.walk(ast.parse(code)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign, ast.For)) else []
            names = {leaf.id for target in targets for leaf in ast.walk(target) if isinstance(leaf, ast.Name)}
            assert not names & parameters, "{} rebinds {}".format(path.name, ", ".join(sorted(names & parameters)))
