"""Adding a framework is its notebooks, its environment file and one registry entry: proven on a throwaway one.

In a temporary copy of the repository, a framework "Toy" (NumPy models, on the runner's interpreter, adopted
as its environment) gets three notebooks that follow the tasks' sections, envs/toy.txt and one Framework
entry in runner/catalog.py; nothing else changes. The runner then runs its notebooks, the table and the
Rosetta pages show it, `list` names it, and the repository's shape tests pass for its notebooks.
"""

import os
import shutil
import subprocess
import sys

import nbformat
import pytest

from common import tasks
from runner import catalog
from runner.run import environments

ENTRY = '''    Framework("toy", "Toy", "Toy", (Variant(None, "toy"),),
              environment=Environment("toy", "Rosetta: Toy")),
'''
COMMON = ("from common import datasets, environment, {evaluation}hyperparams, results, timing\n\n"
          "environment.prepare(threads, device)\nimport numpy as np")
SETUP = ('params = hyperparams.for_task("{task}", profile, overrides)\n'
         'record = results.new_record("Toy", "{task}", profile, params=params)\n'
         'record.update(device="cpu", environment=environment.facts("Toy", np.__version__, "cpu", threads=threads))')
NO_WEIGHTS = 'if init_weights or export_weights:\n    raise ValueError("Toy has no mapping to the canonical weights")'
TRAINED = {
    "data": '{name} = datasets.load_{dataset}(data_source, train_samples=params["train_samples"],\n'
            '    test_samples=params["test_samples"], seed=seed)\n'
            'record["data"] = {{"source": {name}.source, "description": {name}.description}}',
    "model": 'features = {features}\nkernel = np.zeros((features, params["num_classes"]), np.float32)',
    "training": 'def logits_of(x):\n    return x.reshape(len(x), -1)[:, :features].astype(np.float32) @ kernel\n\n\n'
                'epoch_seconds = []\nfor _epoch in range(params["epochs"]):\n    with timing.Timer() as timer:\n'
                '        for xb, yb in datasets.batches({name}.x_train, {name}.y_train, params["batch_size"]):\n'
                '            error = np.exp(logits_of(xb)) / np.exp(logits_of(xb)).sum(axis=1, keepdims=True)\n'
                '            error[np.arange(len(yb)), yb] -= 1\n'
                '            kernel -= 1e-3 * xb.reshape(len(xb), -1)[:, :features].T @ error / len(yb)\n'
                '    epoch_seconds.append(timer.elapsed)',
    "evaluation": 'accuracy, total = evaluation.test_accuracy(logits_of, {name}.x_test, {name}.y_test,\n'
                  '                                          params["batch_size"])',
    "results": 'record["timings"] = timing.training_timings(epoch_seconds)\n'
               'record["metrics"] = {{"train_s": record["timings"]["train_s"], "accuracy": accuracy}}\n'
               'results.write_result(result_path, record)',
}
CODE = {
    "cnn": dict(TRAINED, name="cifar", dataset="cifar10", features="3 * 32 * 32"),
    "rnn": dict(TRAINED, name="imdb", dataset="imdb", features='params["maxlen"]'),
    "transformer": dict(TRAINED, name="imdb", dataset="imdb", features='params["maxlen"]'),
    "inference": {
        "data": 'images = datasets.fake_images(params["batch_size"] * params["batches"], params["image_size"], seed=seed)\n'
                'record["data"] = {"source": "synthetic", "description": "random images: timing only"}',
        "model": 'record["weights"], record["model"] = "random", "average pooling, NumPy"',
        "inference": 'pass_seconds = []\nfor _repeat in range(params["repeats"]):\n    with timing.Timer() as timer:\n'
                     '        features = images.reshape(len(images), -1)[:, :params["features"]] * 0.5\n'
                     '    pass_seconds.append(timer.elapsed)',
        "results": 'record["timings"] = timing.inference_timings(pass_seconds, len(images), 0.0)\n'
                   'record["metrics"] = {"s_per_1000_images": record["timings"]["s_per_1000_images"]["median"],\n'
                   '                     "images_per_s": record["timings"]["images_per_s"]["median"]}\n'
                   'results.write_result(result_path, record)',
    },
}
CODE["train"] = dict(CODE["inference"], **{  # a data-parallel "step" on one device: the same figures as inference
    "data": 'images = datasets.fake_images(params["batch_size"] * params["devices"], params["image_size"], seed=seed)\n'
            'record["data"] = {"source": "synthetic", "description": "random images: timing only"}',
    "training": CODE["inference"]["inference"].replace('params["features"]', "2048")})
PARAMETER_VALUES = {"profile": '"full"', "overrides": "{}", "data_source": '"auto"', "device": '"auto"',
                    "precision": '"auto"', "compile_mode": '"default"', "threads": "0",
                    "seed": "0", "result_path": '""', "init_weights": '""', "export_weights": '""',
                    "machine_rank": "0", "coordinator": '""'}


def toy_notebook(task):
    """A notebook of `task` with every section of the task, in order, as a new framework would have it."""
    spec = tasks.TASKS[task]
    cells = [nbformat.v4.new_markdown_cell("# Toy · {}\nA NumPy stand-in for a new framework.".format(spec.title))]
    code = dict(CODE[task], imports=COMMON.format(evaluation="evaluation, " if spec.trains else ""),
                setup=SETUP.format(task=task), weights=NO_WEIGHTS)
    code["parameters"] = "\n".join("{} = {}".format(name, PARAMETER_VALUES[name])
                                   for name in tasks.PARAMETERS + spec.parameters)
    for tag in spec.sections:
        source = code[tag].format(**CODE[task]) if task in ("cnn", "rnn", "transformer") and tag in TRAINED else code[tag]
        cells += [nbformat.v4.new_markdown_cell("## " + tasks.section_title(tag), metadata={"tags": [tag]}),
                  nbformat.v4.new_code_cell(source, metadata={"tags": [tag]})]
    cells.pop(1)  # the parameters section is its code cell alone, as in every notebook
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "rosetta-toy", "display_name": "Rosetta: Toy", "language": "python"}
    return notebook


LEFT_OUT = {".git", ".envs", ".jupyter", "results", "data", ".pytest_cache", ".ruff_cache", "__pycache__"}


def repository_files():
    """The repository's files: those git tracks and the new ones it does not ignore, or, outside a git checkout,
    every file but environments, caches, downloads and results."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                                cwd=str(catalog.REPO), capture_output=True, text=True, check=True).stdout.split("\0")
        return [name for name in listed if name]
    except (OSError, subprocess.CalledProcessError):
        return [str(path.relative_to(catalog.REPO)) for path in catalog.REPO.rglob("*")
                if not (path.is_dir() and not path.is_symlink())
                and not LEFT_OUT & set(path.relative_to(catalog.REPO).parts)]


def copy_repository(target):
    """The repository's files copied to `target`, links as links."""
    for name in repository_files():
        source, destination = catalog.REPO / name, target / name
        if not os.path.lexists(str(source)):
            continue  # deleted in the work tree
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(str(source), str(destination), follow_symlinks=False)


def add_toy_framework(repo):
    """The three things a new framework brings, and nothing else."""
    for task, spec in tasks.TASKS.items():
        nbformat.write(toy_notebook(task), str(repo / "notebooks" / "Toy_{}.ipynb".format(spec.notebook)))
    shutil.copy(str(repo / "envs" / "runner.txt"), str(repo / "envs" / "toy.txt"))
    registry = repo / "runner" / "catalog.py"
    text = registry.read_text()
    end = text.index("\n)\n", text.index("FRAMEWORKS: tuple[Framework, ...] = ("))
    registry.write_text(text[:end + 1] + ENTRY + text[end + 1:])


def run(repo, *args):
    out = subprocess.run([sys.executable] + list(args), cwd=str(repo), capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert out.returncode == 0, (args, out.stdout[-3000:], out.stderr[-3000:])
    return out.stdout


def test_a_new_framework_needs_its_notebooks_its_environment_file_and_one_registry_entry(tmp_path):
    if not environments.is_ready(catalog.ENVIRONMENTS["runner"]):
        pytest.fail("the runner environment is not built: run `python3 run_all.py setup runner`")
    repo = tmp_path / "repo"
    copy_repository(repo)
    add_toy_framework(repo)
    python = str(environments.interpreter(catalog.ENVIRONMENTS["runner"]))
    run(repo, "run_all.py", "setup", "runner", "--python", python)  # no venv builds: this interpreter serves
    run(repo, "run_all.py", "setup", "toy", "--python", python)
    listing = run(repo, "run_all.py", "list")
    assert "toy          Toy" in listing and "Tasks: " + ", ".join(tasks.TASKS) in listing
    results = tmp_path / "results"
    run(repo, "run_all.py", "-f", "toy", "-p", "smoke", "--data", "synthetic", "--no-equivalence", "-q",
        "--compile", "default", "--results", str(results))  # one row per task: the toy has no compiler to refuse
    (run_dir,) = results.iterdir()
    table = (run_dir / "results.md").read_text()
    assert table.count("| Toy |") == len(tasks.TASKS), table
    for task, spec in tasks.TASKS.items():
        page = (run_dir / "rosetta" / (task + ".html")).read_text()
        assert "Toy_{}.ipynb".format(spec.notebook) in page, task
    shape = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_repository.py"],
                           cwd=str(repo), capture_output=True, text=True, timeout=600)
    assert shape.returncode == 0 and " passed" in shape.stdout, shape.stdout[-3000:]
