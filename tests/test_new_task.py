"""Adding a task is one task module and its notebooks: proven on a throwaway one.

In a temporary copy of the repository, a task "mlp" (a two-layer perceptron on generated points) gets its module,
common/tasks/mlp.py, and two notebooks, PyTorch's (the same-weights check's reference) and JAX's; nothing else
changes. The runner then runs both, the same-weights check holds JAX's to PyTorch's from shared weights, the
report's table has the task's own table with both rows, and the Rosetta pages set the two notebooks side by side.
The environments are this checkout's, adopted in the copy (no build).
"""

import json

import nbformat
import pytest
from test_new_framework import copy_repository, run

from common import tasks
from runner import catalog
from runner.run import environments

TASK_MODULE = '''"""A throwaway task of tests/test_new_task.py: a two-layer perceptron on generated points."""

from common.hyperparams import Rule
from common.tasks.task import TRAINING_SECTIONS, SameWeights, Task


def data(params, seed):
    """(x_train, y_train, x_test, y_test): points in `features` dimensions, classed by the sign of their product with
    one fixed direction."""
    import numpy as np

    rng = np.random.RandomState(seed)
    direction = np.random.RandomState(1234).standard_normal(params["features"])
    out = []
    for samples in (params["train_samples"] or TASK.train_split, params["test_samples"] or TASK.test_split):
        x = rng.standard_normal((samples, params["features"])).astype(np.float32)
        out += [x, (x @ direction > 0).astype(np.int64)]
    return tuple(out)


class MLP(Task):
    """Dense, ReLU, dense."""

    def weight_shapes(self, params):
        """Dense kernels (in, out) and their biases."""
        features, units, classes = params["features"], params["hidden_units"], params["num_classes"]
        return {"hidden/kernel": (features, units), "hidden/bias": (units,), "fc/kernel": (units, classes),
                "fc/bias": (classes,)}

    def training_flops(self, params):
        """Three forward passes of the two products."""
        return 3 * 2 * (params["features"] * params["hidden_units"] + params["hidden_units"] * params["num_classes"])


TASK = MLP(
    "mlp", "MLP", "MLP: a two-layer perceptron on generated points", TRAINING_SECTIONS,
    headline=("train_s", "training time (s)"), metrics=("train_s", "accuracy"), digits=2, train_split=512,
    test_split=128, parameters=("init_weights", "export_weights"), inputs="points",
    hyperparameters={"epochs": 3, "batch_size": 32, "lr": 0.5, "features": 8, "hidden_units": 16, "num_classes": 2,
                     "train_samples": None, "test_samples": None},
    profiles={"quick": {}, "smoke": {"epochs": 2}},
    rules={"features": Rule("integer", low=1), "hidden_units": Rule("integer", low=1)},
    same_weights=SameWeights({"train_samples": 32, "test_samples": 32, "epochs": 3},
                             weights_tolerance={"rtol": 1e-4, "atol": 1e-5}, forward_changes={"lr": 0.0, "epochs": 1}))
'''
PARAMETERS = '''profile = "full"
overrides = {}
data_source = "auto"
device = "auto"
precision = "auto"
compile_mode = "default"
threads = 0
seed = 0
result_path = ""
init_weights = ""
export_weights = ""'''
DATA = '''x_train, y_train, x_test, y_test = mlp.data(params, seed)
record["data"] = {"source": "synthetic", "description": "generated points: {} to train, {} to test".format(
    len(x_train), len(x_test))}'''
RESULTS = '''record = results.write_training_result(result_path, record, epoch_seconds, accuracy)
weights.export_if_asked(export_weights, "mlp", params, export_canonical, logits_of, x_test[:params["batch_size"]])'''
IMPORTS = '''from common import datasets, environment, evaluation, hyperparams, results, timing, weights
from common.tasks import mlp

environment.prepare(threads, device)
'''
NOTEBOOKS = {
    "PyTorch": {
        "imports": IMPORTS + "import torch\nimport torch.nn as nn\n\nfrom frameworks.pytorch import choose_device, "
                             "set_variant, start_record",
        "setup": 'params = hyperparams.for_task("mlp", profile, overrides)\ntorch.manual_seed(seed)\n'
                 'dev = choose_device(device)\nset_variant(dev, precision, compile_mode)\n'
                 'record = start_record("mlp", profile, params, dev)',
        "model": 'model = nn.Sequential(nn.Linear(params["features"], params["hidden_units"]), nn.ReLU(),\n'
                 '                      nn.Linear(params["hidden_units"], params["num_classes"])).to(dev)\n'
                 'optimizer = torch.optim.SGD(model.parameters(), lr=params["lr"])\nloss_fn = nn.CrossEntropyLoss()',
        "weights": 'LAYERS = {"hidden": model[0], "fc": model[2]}\n\n\ndef export_canonical():\n'
                   '    return {name + "/" + part: (layer.weight.detach().cpu().numpy().T if part == "kernel" else\n'
                   '                                layer.bias.detach().cpu().numpy())\n'
                   '            for name, layer in LAYERS.items() for part in ("kernel", "bias")}\n\n\n'
                   'if init_weights:\n    arrays = weights.load_weights(init_weights, "mlp", params)\n'
                   '    with torch.no_grad():\n        for name, layer in LAYERS.items():\n'
                   '            layer.weight.copy_(torch.from_numpy(arrays[name + "/kernel"]).T)\n'
                   '            layer.bias.copy_(torch.from_numpy(arrays[name + "/bias"]))',
        "training": 'epoch_seconds = []\nfor epoch in range(params["epochs"]):\n    with timing.Timer() as timer:\n'
                    '        for xb, yb in datasets.batches(x_train, y_train, params["batch_size"]):\n'
                    '            optimizer.zero_grad()\n'
                    '            loss_fn(model(torch.from_numpy(xb).to(dev)), torch.from_numpy(yb).to(dev)).backward()\n'
                    '            optimizer.step()\n    epoch_seconds.append(timer.elapsed)',
        "evaluation": 'def logits_of(x):\n    with torch.no_grad():\n'
                      '        return model(torch.from_numpy(x).to(dev)).cpu().numpy()\n\n\n'
                      'accuracy, total = evaluation.test_accuracy(logits_of, x_test, y_test, params["batch_size"])',
    },
    "JAX": {
        "imports": IMPORTS + "import jax\nimport jax.numpy as jnp\nimport numpy as np\n\n"
                             "from frameworks.jax import choose_device, set_variant, start_record",
        "setup": 'params = hyperparams.for_task("mlp", profile, overrides)\ndev = choose_device(device)\n'
                 'set_variant(dev, precision, compile_mode)\nrecord = start_record("mlp", profile, params, dev)',
        "model": 'def dense(key, fan_in, fan_out):\n    bound = 1 / np.sqrt(fan_in)\n'
                 '    return {"kernel": jax.random.uniform(key, (fan_in, fan_out), minval=-bound, maxval=bound),\n'
                 '            "bias": jnp.zeros(fan_out)}\n\n\n'
                 'hidden_key, fc_key = jax.random.split(jax.random.PRNGKey(seed))\n'
                 'model = {"hidden": dense(hidden_key, params["features"], params["hidden_units"]),\n'
                 '         "fc": dense(fc_key, params["hidden_units"], params["num_classes"])}\n\n\n'
                 'def forward(model, x):\n'
                 '    hidden = jax.nn.relu(x @ model["hidden"]["kernel"] + model["hidden"]["bias"])\n'
                 '    return hidden @ model["fc"]["kernel"] + model["fc"]["bias"]',
        "weights": 'def export_canonical():\n'
                   '    return {name + "/" + part: np.asarray(value) for name, layer in model.items()\n'
                   '            for part, value in layer.items()}\n\n\n'
                   'if init_weights:\n    arrays = weights.load_weights(init_weights, "mlp", params)\n'
                   '    model = {name: {part: jnp.asarray(arrays[name + "/" + part]) for part in layer}\n'
                   '             for name, layer in model.items()}',
        "training": 'def loss_of(model, x, y):\n'
                    '    log_probabilities = jax.nn.log_softmax(forward(model, x))\n'
                    '    return -jnp.mean(jnp.take_along_axis(log_probabilities, y[:, None], axis=1))\n\n\n'
                    '@jax.jit\ndef train_step(model, x, y):\n    gradients = jax.grad(loss_of)(model, x, y)\n'
                    '    return jax.tree_util.tree_map(lambda p, g: p - params["lr"] * g, model, gradients)\n\n\n'
                    'epoch_seconds = []\nfor epoch in range(params["epochs"]):\n    with timing.Timer() as timer:\n'
                    '        for xb, yb in datasets.batches(x_train, y_train, params["batch_size"]):\n'
                    '            model = train_step(model, xb, yb)\n        jax.block_until_ready(model)\n'
                    '    epoch_seconds.append(timer.elapsed)',
        "evaluation": 'predict = jax.jit(forward)\n\n\ndef logits_of(x):\n    return np.asarray(predict(model, x))\n\n\n'
                      'accuracy, total = evaluation.test_accuracy(logits_of, x_test, y_test, params["batch_size"])',
    },
}
ENVIRONMENTS = {"PyTorch": "pytorch", "JAX": "jax"}


def task_notebook(framework):
    """The MLP notebook of `framework`, every section of a training task in order, as a new task's notebook has them."""
    code = dict(NOTEBOOKS[framework], parameters=PARAMETERS, data=DATA, results=RESULTS)
    cells = [nbformat.v4.new_markdown_cell("# {} · MLP\nA throwaway task's notebook.".format(framework))]
    for tag in tasks.task.TRAINING_SECTIONS:
        if tag != "parameters":
            cells.append(nbformat.v4.new_markdown_cell("## " + tasks.section_title(tag), metadata={"tags": [tag]}))
        cells.append(nbformat.v4.new_code_cell(code[tag], metadata={"tags": [tag]}))
    notebook = nbformat.v4.new_notebook(cells=cells)
    env = catalog.ENVIRONMENTS[ENVIRONMENTS[framework]]
    notebook.metadata["kernelspec"] = {"name": env.kernel_name, "display_name": env.kernel_name, "language": "python"}
    return notebook


def test_a_new_task_needs_its_module_and_its_notebooks(tmp_path):
    for name in ("runner", "pytorch", "jax"):
        if not environments.is_ready(catalog.ENVIRONMENTS[name]):
            pytest.fail("the {} environment is not built: run `python3 run_all.py setup {}`".format(name, name))
    repo = tmp_path / "repo"
    copy_repository(repo)
    (repo / "common" / "tasks" / "mlp.py").write_text(TASK_MODULE)
    for framework in NOTEBOOKS:
        nbformat.write(task_notebook(framework), str(repo / "notebooks" / "{}_MLP.ipynb".format(framework)))
    for name in ("runner", "pytorch", "jax"):  # this checkout's environments, adopted: nothing is built
        run(repo, "run_all.py", "setup", name, "--python", str(environments.interpreter(catalog.ENVIRONMENTS[name])))
    assert "Tasks: cnn, inference, rnn, transformer, train, mlp" in run(repo, "run_all.py", "list")
    results = tmp_path / "results"
    run(repo, "run_all.py", "-f", "pytorch,jax", "-t", "mlp", "-p", "smoke", "-q", "--results", str(results))
    (run_dir,) = results.iterdir()
    table = (run_dir / "results.md").read_text()
    assert "MLP: a two-layer perceptron on generated points" in table
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith(("| PyTorch", "| JAX"))}
    assert set(rows) == {"PyTorch", "JAX"}, table
    assert "reference" in rows["PyTorch"] and "| yes" in rows["JAX"], table  # the same-weights check's verdicts
    check = json.loads((run_dir / "equivalence" / "equivalence.json").read_text())["mlp"]
    (jax_result,) = check["results"]
    assert jax_result["failures"] == [] and jax_result["steps"] == 3 and jax_result["weights_max_abs"] < 1e-5
    assert check["tolerances"]["weights"] == {"rtol": 1e-4, "atol": 1e-5}  # the task's own
    records = {r["framework"]: r for r in map(json.loads, (p.read_text() for p in run_dir.glob("*.result.json")))}
    assert records["JAX"]["status"] == "ok" and records["JAX"]["metrics"]["accuracy"] > 0.5
    run(repo, "run_all.py", "report", str(run_dir))
    assert "MLP: a two-layer perceptron" in (run_dir / "results.md").read_text()
    run(repo, "run_all.py", "rosetta", "--out", str(tmp_path / "rosetta"))
    page = (tmp_path / "rosetta" / "mlp.html").read_text()
    assert "PyTorch_MLP.ipynb" in page and "JAX_MLP.ipynb" in page  # side by side, each section's code highlighted
    assert '<span class="o">.</span>SGD(' in page and '<span class="o">.</span>take_along_axis(' in page  # highlighted
