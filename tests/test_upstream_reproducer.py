"""docs/upstream/jax_cpu_cnn.py, the pure-JAX reproducer meant for JAX's and XLA's maintainers: it imports nothing but
jax, numpy and the standard library (so it runs on any release, with no project code); it imports jax only once its
options are parsed (so `--help` works without JAX); and its network is the CNN task's, layer for layer."""

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

from common.hyperparams import for_task
from common.tasks import cnn

SCRIPT = Path(__file__).resolve().parent.parent / "docs" / "upstream" / "jax_cpu_cnn.py"
ALLOWED = set(sys.stdlib_module_names) | {"jax", "numpy"}


def imports(tree):
    """(top-level package, line, whether at module level) of every import in the script, functions included."""
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "line {}: a relative import".format(node.lineno)
            names = [node.module]
        else:
            continue
        for name in names:
            yield name.split(".")[0], node.lineno, id(node) in top


def load():
    spec = importlib.util.spec_from_file_location("jax_cpu_cnn", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_imports_only_jax_numpy_and_the_standard_library():
    found = list(imports(ast.parse(SCRIPT.read_text())))
    assert {package for package, _, _ in found} >= {"jax", "argparse"}
    outside = [(package, line) for package, line, _ in found if package not in ALLOWED]
    assert not outside, "imports outside jax, numpy and the standard library: {}".format(outside)
    early = [(package, line) for package, line, at_top in found if at_top and package not in sys.stdlib_module_names]
    assert not early, "imported at module level, before the options are parsed: {}".format(early)


def test_help_runs_without_jax():
    """The runner's interpreter has no JAX: --help must still print the options."""
    done = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for option in ("--steps", "--repeats", "--batch", "--threads", "--json"):
        assert option in done.stdout


def test_network_and_optimizer_are_the_cnn_tasks():
    script, params = load(), for_task("cnn")
    assert script.CONVS == tuple((cin, cout) for cin, cout, _ in cnn.CONVS)
    shapes = cnn.TASK.weight_shapes(params)
    assert script.DENSE == (shapes["fc1/kernel"], shapes["fc2/kernel"])
    assert (script.LR, script.MOMENTUM) == (params["lr"], params["momentum"])
    assert script.DROPOUT == (params["conv_dropout"], params["dense_dropout"])
    assert script.parse_args([]).batch == params["batch_size"]
