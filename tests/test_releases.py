"""A framework at a release (`-f jax@0.6.2`, issue 48): the name's parser, the release environment it derives, the
requirements its lock is resolved from, its rows' names, and `prune`; fast, no environment built."""

import csv
import datetime
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from runner import catalog, cli
from runner.report import intervals, table
from runner.run import environments, execution, locks, setup_commands

# Jupyter's own rule for a kernel name (jupyter_client.kernelspec._kernel_name_pat)
KERNEL_NAME = re.compile(r"^[a-z0-9._\-]+$", re.IGNORECASE)


@pytest.mark.parametrize("name, message", [
    ("jax@", "jax@: name a release after '@', as in jax@1.2.3"),
    ("pytorch@nope", "pytorch@nope: 'nope' is not a release number (PEP 440, as in 2.9.1 or 2.16.0rc1)"),
    ("torchy@1.0", "unknown framework torchy; known frameworks: pytorch, "),
    ("mxnet@1.8.0", "mxnet@1.8.0: MXNet has no releases to choose from here; pytorch, tensorflow, keras, jax do"),
    ("lasagne@0.1", "lasagne@0.1: Lasagne has no releases to choose from here; pytorch, tensorflow, keras, jax do "
                    "(Lasagne runs in theano's environment, whose pins choose its release)"),
])
def test_a_bad_release_name_is_refused_in_one_line(name, message, capsys):
    assert cli.main(["-f", name, "-t", "cnn", "--no-setup"]) == cli.USAGE_ERROR
    error = capsys.readouterr().err
    assert error.startswith("run_all.py: error: " + message) and error.count("\n") == 1


@pytest.mark.parametrize("command", ["setup", "lock", "prune"])
def test_setup_lock_and_prune_refuse_the_same_names(command, capsys):
    assert cli.main([command, "jax@nope"]) == cli.USAGE_ERROR
    assert "'nope' is not a release number" in capsys.readouterr().err


def test_a_release_is_its_framework_in_an_environment_of_its_own():
    default, older = catalog.select(["jax", "jax@0.6.2"], ["cnn"])
    assert (default.framework.key, default.label, default.stem) == ("jax", "JAX", "JAX_CNN")
    assert (older.framework.key, older.label, older.stem) == ("jax@0.6.2", "JAX 0.6.2", "JAX_CNN@0.6.2")
    assert older.notebook == default.notebook  # the same notebook, unchanged, on another kernel
    env = older.environment
    assert (env.name, env.base, env.release) == ("jax@0.6.2", "jax", "0.6.2")
    assert env.path == catalog.ENVS_DIR / "jax@0.6.2"
    assert env.requirements == catalog.REQUIREMENTS_DIR / "versions" / "jax@0.6.2.txt"
    assert KERNEL_NAME.match(env.kernel_name) and env.kernel_name == "rosetta-jax-0.6.2"
    assert env.gpu_builds == () and env.framework_module == "jax"
    assert catalog.environment("jax@0.6.2") == env
    with pytest.raises(catalog.SelectionError, match="keras2@1.0: Keras 2 has no releases to choose from here"):
        catalog.environment("theano@1.0")  # Theano's environment is Keras 2's, which names no package
    with pytest.raises(catalog.SelectionError, match="unknown environment nothing@1.0"):
        catalog.environment("nothing@1.0")


def test_keras_at_a_release_is_keras_on_jax_in_an_environment_of_its_own(tmp_path, monkeypatch):
    """Keras 3 brings no environment: its release environment takes JAX's packages, and its rows are the jax
    variant's alone, beside Keras (jax)'s."""
    jax, older = catalog.select(["jax", "keras@3.6.0"], ["cnn"])
    assert (older.framework.key, older.variant.name, older.label, older.stem) == (
        "keras@3.6.0", "jax", "Keras 3.6.0 (jax)", "Keras_CNN@3.6.0-jax")
    assert older.variant.parameters == (("backend", "jax"),) and older.notebook == catalog.notebook_path(
        catalog.framework("keras"), "cnn")
    env = older.environment
    assert (env.name, env.base, env.release, env.display_name) == ("keras@3.6.0", "jax", "3.6.0",
                                                                  "Rosetta: Keras 3.6.0 on JAX")
    assert KERNEL_NAME.match(env.kernel_name) and env.kernel_name == "rosetta-keras-3.6.0"
    assert env.framework_module == "jax" and env.gpu_builds == () and env.python == jax.environment.python
    assert catalog.environment("keras@3.6.0") == env
    assert catalog.environments_for([older, jax]) == [jax.environment, env]  # beside the environment it is built on
    assert table.catalog_rank("Keras 3.6.0", "jax") == table.catalog_rank("Keras", "jax")
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", tmp_path)
    (tmp_path / "jax.txt").write_text("jax==0.10.2\nflax==0.12.8\nkeras==3.15.1\nnumpy==2.4.6\n")
    assert locks.release_pins(env, "keras") == ["jax", "flax", "keras==3.6.0", "numpy"]  # JAX moves with it
    assert "the packages of envs/jax.txt, keras pinned to 3.6.0" in locks.release_requirements_text(env, "keras", None)


def test_the_requirements_pin_the_release_and_leave_the_rest_to_the_date(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", tmp_path)
    (tmp_path / "jax.txt").write_text("# the base\njax==0.10.2\nflax==0.12.8 # a comment\nkeras[extra]==3.15.1\n")
    env = catalog.environment("jax@0.6.2")
    uploaded = datetime.datetime(2025, 6, 17, 23, 10, 27, tzinfo=datetime.timezone.utc)
    text = locks.release_requirements_text(env, "jax", uploaded)
    assert text.splitlines()[2:] == ["# exclude-newer: 2025-06-20T23:10:27Z", "jax==0.6.2", "flax", "keras"]
    assert "never edit it: it follows envs/jax.txt" in text
    assert "# exclude-newer" not in locks.release_requirements_text(env, "jax", None)  # uv then says there is none
    (tmp_path / "versions").mkdir()
    env.requirements.write_text(text)
    assert not locks.release_current(env, "jax")  # no lock yet
    locks.lock_path(env.requirements).write_text(locks.PINS_LINE + locks.pins_digest(env.requirements) + "\n")
    assert locks.release_current(env, "jax")
    (tmp_path / "jax.txt").write_text("jax==0.10.2\nflax==0.12.8\nkeras==3.15.1\noptax==0.2.8\n")
    assert not locks.release_current(env, "jax")  # the base gained a package: the release follows it
    (tmp_path / "torch.txt").write_text("numpy==2.4.6\n")  # a base without the framework's package: it comes first
    torch = catalog.Environment("torch@2.9.1", "Torch 2.9.1", release="2.9.1")
    assert locks.release_pins(torch, "torch") == ["torch==2.9.1", "numpy"]


@pytest.mark.parametrize("filename, release", [
    ("jax-0.6.2-py3-none-any.whl", "0.6.2"), ("jax-0.6.2.tar.gz", "0.6.2"),
    ("tensorflow_cpu-2.16.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "2.16.1"),
    ("torch-2.9.1+cpu-cp311-cp311-linux_x86_64.whl", "2.9.1+cpu"), ("six-1.17.0.zip", "1.17.0"),
])
def test_a_file_is_known_by_its_release(filename, release):
    assert locks.file_release(filename) == release


def test_a_release_s_rows_are_its_own_and_sit_beside_its_framework(tmp_path):
    older = catalog.select(["jax@0.6.2"], ["cnn"])[0]
    record = execution.failure_record(older, "quick", "failed", "boom")
    assert (record["framework"], record["release"]) == ("JAX 0.6.2", "0.6.2")
    assert table.catalog_rank("JAX 0.6.2", None) == table.catalog_rank("JAX", None)
    assert table.catalog_rank("Keras 2", "theano") < table.catalog_rank("No Such 1.0", None)
    written = execution.write_not_run(tmp_path, older, "quick", "unavailable", "not built")
    assert json.loads((tmp_path / "JAX_CNN@0.6.2.result.json").read_text())["release"] == written["release"] == "0.6.2"


def test_prune_removes_release_environments_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / ".envs")
    monkeypatch.setattr(catalog, "JUPYTER_DIR", tmp_path / ".jupyter")
    for name in ("jax@0.6.2", "jax"):
        env = catalog.environment(name)
        (env.path / "lib").mkdir(parents=True)
        (env.path / "lib" / "big").write_bytes(b"x" * 100000)
        environments.kernel_spec_path(env).parent.mkdir(parents=True)
        (catalog.ENVS_DIR / (name + ".log")).write_text("log")
    (catalog.ENVS_DIR / "not@a-release").mkdir()
    assert [env.name for env in catalog.release_environments()] == ["jax@0.6.2"]
    assert setup_commands.prune([]) == 0
    assert not (catalog.ENVS_DIR / "jax@0.6.2").exists() and not (catalog.ENVS_DIR / "jax@0.6.2.log").exists()
    assert not environments.kernel_spec_path(catalog.environment("jax@0.6.2")).parent.exists()
    assert (catalog.ENVS_DIR / "jax" / "lib" / "big").exists() and (catalog.ENVS_DIR / "jax.log").exists()
    assert setup_commands.prune(["jax"]) == 0
    out = capsys.readouterr().out
    assert "[prune] jax@0.6.2: removed, 0.0 GB freed" in out and "[prune] jax: kept" in out
    assert (catalog.ENVS_DIR / "jax").exists()


def test_prune_is_a_command_with_its_own_help():
    out = subprocess.run([sys.executable, "run_all.py", "prune", "-h"], capture_output=True, text=True,
                         cwd=str(catalog.REPO), timeout=60)
    assert out.returncode == 0 and "release environments" in out.stdout


@pytest.mark.parametrize("framework, error, status", [
    ("jax@0.4.30", "AttributeError: module 'flax.nnx' has no attribute 'Rngs'", "unsupported"),
    ("jax@0.4.30", "TypeError: __init__() got an unexpected keyword argument 'rngs'", "unsupported"),
    ("jax@0.4.30", "ValueError: shapes (2,) and (3,) not aligned", "failed"),  # a wrong result is no missing API
    # Keras 3.0 (TensorFlow 2.16.1's) refusing an argument of a layer it does not have yet
    ("tensorflow@2.16.1", "ValueError: Unrecognized keyword arguments passed to GRU: {'use_cudnn': 'auto'}",
     "unsupported"),
    ("jax", "AttributeError: module 'flax.nnx' has no attribute 'Rngs'", "failed"),  # the framework's own pins: a bug
])
def test_a_release_lacking_what_a_notebook_calls_is_unsupported_with_its_own_error(framework, error, status, tmp_path):
    job = catalog.select([framework], ["cnn"])[0]
    record = execution.finish_record(job, tmp_path, "smoke", "failed", error, 1.0)
    assert (record["status"], record["error"]) == (status, error)


def release_record(framework, version, epochs, release=None, status="ok", error=None):
    """A CNN record of JAX at `version` with these epoch times; `release`: asked for with `-f jax@<release>`."""
    from common import environment, results, timing

    if status != "ok":
        record = results.failure_record(framework, "cnn", "quick", status, error)
    else:
        record = results.new_record(framework, "cnn", "quick")
        record.update(device="cpu", data={"source": "synthetic", "description": "x"},
                      environment=environment.facts("JAX", version, "cpu", threads=2))
        record["timings"] = timing.training_timings(epochs)
        record["metrics"] = {"train_s": sum(epochs), "accuracy": 0.5}
        record = results.write_result("", record)
    record["release"] = release
    return record


def test_a_run_holding_releases_gets_a_table_by_release_with_verdicts_against_the_newest(tmp_path):
    from runner.report import plots, run_report

    noise = np.random.default_rng(3)

    def epochs(seconds):
        return list(seconds * (1 + 0.02 * noise.standard_normal(8)))

    records = [release_record("JAX", "0.10.2", epochs(3.0)),  # the environment's own pin: the newest
               release_record("JAX 0.6.2", "0.6.2", epochs(4.5), release="0.6.2"),
               release_record("JAX 0.4.30", None, None, release="0.4.30", status="unsupported",
                              error="AttributeError: module 'flax' has no attribute 'nnx'"),
               release_record("JAX 0.9.0", "0.9.0", epochs(3.0), release="0.9.0"),
               release_record("PyTorch", "2.14.1", epochs(2.0))]  # one release only: no table
    (cnn,) = table.version_tables(records)
    assert cnn.title == "CNN: JAX by release" or cnn.title.endswith(": JAX by release")
    cells = {row.cells[0]: dict(zip([c.key for c in cnn.columns], row.cells)) for row in cnn.rows}
    assert list(cells) == ["0.4.30", "0.6.2", "0.9.0", "0.10.2 (its environment's)"]  # oldest first
    assert cells["0.10.2 (its environment's)"]["vs_newest"] == "newest"
    assert cells["0.6.2"]["verdict"] == "slower" and cells["0.6.2"]["vs_newest"].startswith("1.5")
    assert cells["0.9.0"]["verdict"] == "within noise"
    # one round each: epochs of one kernel, so the interval is widened by how far two runs of a notebook move apart
    low = float(re.search(r"\[([0-9.]+)–", cells["0.6.2"]["vs_newest"]).group(1))
    assert low < 1.5 / (1 + intervals.RUN_TO_RUN) + 0.01
    assert cells["0.4.30"]["status"].startswith("unsupported: AttributeError") and cells["0.4.30"]["vs_newest"] == ""
    assert plots.plot_versions(records, tmp_path / "versions.png") and (tmp_path / "versions.png").stat().st_size
    assert "## Releases" in run_report.markdown(records)
    assert table.version_tables(records[-1:]) == [] and not plots.plot_versions(records[-1:], tmp_path / "none.png")


def test_keras_s_releases_say_the_backend_release_each_ran_on():
    keras = []
    for version, backend, release, seconds in (("3.15.1", "0.10.2", None, 3.0), ("3.5.0", "0.4.31", "3.5.0", 3.3)):
        record = release_record("Keras" if release is None else "Keras " + release, version, [seconds] * 8, release)
        record.update(variant="jax")
        record["environment"].update(backend="jax", backend_version=backend)
        keras.append(record)
    (cnn,) = table.version_tables(keras)
    assert cnn.title.endswith(": Keras (jax) by release")
    assert [row.cells[0] for row in cnn.rows] == ["3.5.0 on jax 0.4.31", "3.15.1 on jax 0.10.2 (its environment's)"]


@pytest.mark.parametrize("older, newer", [("0.6.2", "0.10.2"), ("2.16.0rc1", "2.16.0"), ("2.9", "2.9.1")])
def test_releases_are_ordered_as_numbers(older, newer):
    assert table.release_order(older) < table.release_order(newer)


TOY_ENTRY = '''    Framework("toy", "Toy", "Toy", (Variant(None, "toy"),), package="idna",
              environment=Environment("toy", "Rosetta: Toy")),
'''
# the toy's releases: two of a small pure-Python package, recent enough that NumPy and ipykernel of their time have
# wheels for the Python the locks are resolved for
TOY_RELEASES = ("3.7", "3.10")


def test_a_toy_framework_at_a_release_goes_through_lock_setup_run_report_and_prune(tmp_path):
    """In a copy of the repository, the toy framework of test_new_framework.py names a package (idna): `lock`
    resolves it at an older release as PyPI had it then, `setup` builds that environment, a run holds the toy at both
    releases, the report lines them up, and `prune` removes the release environment."""
    from test_new_framework import add_toy_framework, copy_repository, run

    if not environments.is_ready(catalog.ENVIRONMENTS["runner"]):
        pytest.fail("the runner environment is not built: run `python3 run_all.py setup runner`")
    repo = tmp_path / "repo"
    copy_repository(repo)
    add_toy_framework(repo)
    registry = repo / "runner" / "catalog.py"
    registry.write_text(registry.read_text().replace('''    Framework("toy", "Toy", "Toy", (Variant(None, "toy"),),
              environment=Environment("toy", "Rosetta: Toy")),
''', TOY_ENTRY))
    (repo / "envs" / "toy.txt").write_text("idna=={}\nnumpy==2.4.6\nipykernel==7.4.0\n".format(TOY_RELEASES[1]))
    for notebook in (repo / "notebooks").glob("Toy_*.ipynb"):  # the toy's version is idna's, as a framework's is its own
        notebook.write_text(notebook.read_text().replace('environment.facts(\\"Toy\\", np.__version__',
                                                         'environment.facts(\\"Toy\\", __import__(\\"idna\\").__version__'))
    python = str(environments.interpreter(catalog.ENVIRONMENTS["runner"]))
    run(repo, "run_all.py", "setup", "runner", "--python", python)
    run(repo, "run_all.py", "setup", "toy", "--python", python)  # the toy's own release: this interpreter's idna
    older = "toy@" + TOY_RELEASES[0]
    locked = run(repo, "run_all.py", "lock", older)
    assert "[lock] envs/versions/{}.txt: idna {}, the other packages as PyPI had them on 2024-04-".format(
        older, TOY_RELEASES[0]) in locked, locked
    lock = (repo / "envs" / "versions" / (older + ".lock")).read_text()
    assert "idna=={} \\".format(TOY_RELEASES[0]) in lock and lock.count("--hash=sha256:") > 10
    built = run(repo, "run_all.py", "setup", older)
    assert "[setup] {}: a new environment of".format(older) in built, built
    assert "rosetta-toy-" + TOY_RELEASES[0] in (repo / ".jupyter" / "kernels" / ("rosetta-toy-" + TOY_RELEASES[0]) /
                                                 "kernel.json").parent.name
    results_dir = tmp_path / "results"
    run(repo, "run_all.py", "-f", "toy,{}".format(older), "-t", "cnn,inference", "-p", "smoke", "--data", "synthetic",
        "--no-equivalence", "-q", "--compile", "default", "--results", str(results_dir))
    (run_dir,) = results_dir.iterdir()
    report = (run_dir / "results.md").read_text()
    assert "| Toy {} |".format(TOY_RELEASES[0]) in report and "| Toy |" in report, report
    releases = report[report.index("## Releases"):]
    assert releases.count("by release") == 2 and "| {} |".format(TOY_RELEASES[0]) in releases, releases
    assert (run_dir / "versions.png").exists()
    rows = {row["framework"]: row for row in csv.DictReader(open(str(run_dir / "results.csv")))}
    assert rows["Toy " + TOY_RELEASES[0]]["release"] == TOY_RELEASES[0]
    assert rows["Toy " + TOY_RELEASES[0]]["framework_version"] == TOY_RELEASES[0]
    assert rows["Toy " + TOY_RELEASES[0]]["lock"].startswith("envs/versions/{}.lock@".format(older))
    listing = run(repo, "run_all.py", "list")
    assert re.search(r"{} +ready +0\.\d GB on disk".format(re.escape(older)), listing), listing
    pruned = run(repo, "run_all.py", "prune")
    assert "[prune] {}: removed".format(older) in pruned and not (repo / ".envs" / older).exists()
    assert (repo / "envs" / "versions" / (older + ".lock")).exists()  # what rebuilds it stays


# two of JAX's releases, their locks committed (envs/versions/): Flax 0.12.1 of November 2025 runs the notebooks as they
# stand; Flax 0.10.6 of June 2025 has no ahead-of-time lowering of nnx.jit, which the CNN notebook calls
JAX_RUNS, JAX_LACKS = "0.8.1", "0.6.2"


def test_jax_at_older_releases_runs_its_cnn_notebook_beside_its_own_and_is_checked_against_pytorch(tmp_path):
    """The real thing, on JAX (its CPU environment is under 1 GB): the run builds jax@0.8.1 and jax@0.6.2 from their
    committed locks where they are not built yet and runs the CNN smoke notebook, unchanged, on both and on JAX's own;
    the release that lacks what the notebook calls says so in one line, the other is held to PyTorch's reference like
    any row, and the report lines them up."""
    from conftest import require_environment

    require_environment(catalog.ENVIRONMENTS["jax"])
    require_environment(catalog.ENVIRONMENTS["pytorch"])  # the same-weights check's reference
    names = ["jax@" + JAX_LACKS, "jax@" + JAX_RUNS]
    for name in names:
        assert locks.release_current(catalog.environment(name), "jax"), "envs/versions/{}.lock is behind envs/jax.txt: " \
            "`python3 run_all.py lock {}` regenerates it".format(name, name)
    out = subprocess.run([sys.executable, "run_all.py", "-f", ",".join(names + ["jax"]), "-t", "cnn", "-p", "smoke",
                          "--data", "synthetic", "--recheck", "-q", "--results", str(tmp_path)],
                         cwd=str(catalog.REPO), capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (run_dir,) = tmp_path.iterdir()
    rows = {row["framework"]: row for row in csv.DictReader(open(str(run_dir / "results.csv")))}
    runs, lacks = rows["JAX " + JAX_RUNS], rows["JAX " + JAX_LACKS]
    assert runs["status"] == rows["JAX"]["status"] == "ok" and runs["framework_version"] == JAX_RUNS, rows
    assert runs["same_as_pytorch"].startswith("yes"), runs["same_as_pytorch"]
    assert (lacks["status"], lacks["error"]) == ("unsupported", "AttributeError: 'function' object has no attribute "
                                                                 "'lower'"), lacks
    assert lacks["same_as_pytorch"] == "not checked: the notebook does not run here"
    releases = (run_dir / "results.md").read_text().split("## Releases")[1]
    assert [line.split(" | ")[0].strip("| ") for line in releases.splitlines() if line.startswith("| 0.")] == [
        JAX_LACKS, JAX_RUNS, rows["JAX"]["framework_version"] + " (its environment's)"]
