"""The runner on fixture notebooks: one that works, one that raises, one that hangs, one that writes no record."""

import hashlib
import json
from pathlib import Path

import pytest
from conftest import FIXTURES, require_environment

from runner import catalog, cli, run_folder
from runner.report import table
from runner.run import batch, browser, build_steps, debian, environments, for_tests, setup_commands


def run_dirs(results):
    return sorted(p for p in results.iterdir() if p.is_dir())


def test_a_failure_and_a_hang_are_recorded_and_the_run_goes_on(fixture_catalog, tmp_path, capsys):
    status = cli.main(["run", "-f", "raises,hangs,silent,ok", "-t", "cnn", "-p", "smoke", "--timeout", "10",
                       "--data", "synthetic", "--results", str(tmp_path), "--set", "epochs=2"])
    assert status == 1  # some notebooks failed, after all of them ran
    (run_dir,) = run_dirs(tmp_path)
    records = {r["framework"]: r for r in table.load_records(run_dir)}
    assert records["Raises"]["status"] == "failed"
    assert records["Raises"]["error"] == "ValueError: planted failure for the runner tests"
    assert records["Hangs"]["status"] == "timeout" and "10" in records["Hangs"]["error"]
    assert records["Silent"]["status"] == "failed" and "no valid result record" in records["Silent"]["error"]
    assert records["OK"]["status"] == "ok" and records["OK"]["metrics"]["train_s"] == 1.25
    assert records["OK"]["params"] == {"epochs": 2}  # --set reached the notebook as a papermill parameter
    # every executed notebook is kept, the failed ones with what they printed before failing
    for name in ("Raises_CNN", "Hangs_CNN", "Silent_CNN", "OK_CNN"):
        assert (run_dir / (name + ".ipynb")).exists()
        assert records[name.split("_")[0]]["notebook"] == name + ".ipynb"
    raised = json.loads((run_dir / "Raises_CNN.ipynb").read_text())
    assert "about to fail" in json.dumps(raised["cells"][-1]["outputs"])
    hung = json.loads((run_dir / "Hangs_CNN.ipynb").read_text())
    assert "ran past its 10" in "".join(hung["cells"][-1]["source"])
    # the table names every row with its status
    markdown = (run_dir / "results.md").read_text()
    assert "failed: ValueError: planted failure" in markdown and "timeout: stopped after 10" in markdown
    assert (run_dir / "results.png").stat().st_size > 1000
    assert len((run_dir / "results.csv").read_text().strip().splitlines()) == 5
    out = capsys.readouterr().out
    assert "[1/4" in out and "RAISES" not in out and "Raises_CNN: FAILED" in out and "OK_CNN: OK" in out


def test_variants_and_a_sweep_are_rows_with_unsupported_and_out_of_memory_cells(fixture_catalog, tmp_path):
    status = cli.main(["run", "-f", "variants", "-t", "cnn", "-p", "smoke", "--precision", "bf16,fp16",
                       "--sweep", "batch_size=16,32,128", "--data", "synthetic", "--results", str(tmp_path), "-q"])
    assert status == 1  # the run that did not fit in memory failed; the unsupported ones did not
    (run_dir,) = run_dirs(tmp_path)
    records = {table.label(table.row(r)): r for r in table.load_records(run_dir)}
    assert list(records) == ["Variants · bf16 · batch_size=16", "Variants · bf16 · batch_size=32",
                             "Variants · bf16 · batch_size=128", "Variants · fp16 · batch_size=16",
                             "Variants · fp16 · batch_size=32", "Variants · fp16 · batch_size=128"]
    bf16 = records["Variants · bf16 · batch_size=32"]
    assert bf16["status"] == "ok" and bf16["params"]["batch_size"] == 32 and bf16["precision"] == "bf16"
    assert bf16["sweep"] == {"batch_size": 32} and bf16["notebook"] == "Variants_CNN-bf16-batch_size-32.ipynb"
    oom = records["Variants · bf16 · batch_size=128"]
    assert oom["status"] == "failed" and oom["error"].startswith("out of memory: OutOfMemoryError: CUDA out of memory")
    refused = records["Variants · fp16 · batch_size=16"]
    assert refused["status"] == "unsupported" and refused["precision"] == "fp16"
    assert refused["error"] == "Variants cannot run precision=fp16: this fixture has no float16"
    markdown = (run_dir / "results.md").read_text()
    assert "| Variants · bf16 · batch_size=16 |" in markdown and "unsupported: Variants cannot run" in markdown
    sweep = markdown.split("## Sweep")[1]
    header, _, bf16_line, fp16_line = [line for line in sweep.splitlines() if line.startswith("|")]
    assert header == "| Framework | batch_size=16 | batch_size=32 | batch_size=128 |"
    # 256 smoke samples in epochs of 64/batch_size seconds: 64 and 128 samples/s, then out of memory
    assert bf16_line == "| Variants · bf16 | 64.0 | 128.0 | out of memory |"
    assert fp16_line.count("unsupported: Variants cannot run precision=fp16") == 3
    assert (run_dir / "sweep.png").stat().st_size > 1000
    assert "data:image/png;base64," in (run_dir / "report.html").read_text()


def test_variant_options_multiply_the_jobs_and_bad_ones_are_one_line():
    args = cli.parse(["-f", "pytorch,keras", "-t", "cnn,inference", "--precision", "fp32,bf16", "--compile",
                      "default,on", "--sweep", "batch_size=1,8"])
    assert len(args.jobs) == 4 * 2 * 2 * 2 * 2  # (PyTorch + 3 Keras backends) x 2 tasks x 2 precisions x 2 modes x 2 values
    assert args.jobs[0].stem == "PyTorch_CNN-fp32-batch_size-1" and args.jobs[0].label == "PyTorch · fp32 · batch_size=1"
    assert args.jobs[3].stem == "PyTorch_CNN-fp32-compiled-batch_size-8"
    assert {job.stem for job in args.jobs if job.framework.key == "keras"} >= {"Keras_Inference-jax-bf16-compiled-batch_size-8"}
    only_inference = cli.parse(["-f", "jax", "--sweep", "batches=1,2"]).jobs  # tasks without the key run once
    assert [job.stem for job in only_inference] == ["JAX_CNN", "JAX_Inference-batches-1", "JAX_Inference-batches-2",
                                                    "JAX_RNN", "JAX_Transformer", "JAX_Train"]
    assert [job.stem for job in cli.parse(["-f", "jax"]).jobs] == [  # inference: its default and compiled rows
        "JAX_CNN", "JAX_Inference", "JAX_Inference-compiled", "JAX_RNN", "JAX_Transformer", "JAX_Train"]
    for options in (["--precision", "bf16"], ["--sweep", "batch_size=1,2"], ["--compile", "default"]):  # asked: as asked
        assert "compiled" not in " ".join(job.stem for job in cli.parse(["-f", "jax", "-t", "inference"] + options).jobs)


@pytest.mark.parametrize("argv, message", [
    (["--precision", "fp8"], "--precision fp8: use one or more of auto, fp32, tf32, bf16, fp16"),
    (["--precision", "bf16,bf16"], "--precision: each value once"),
    (["--compile", "max"], "--compile max: use one or more of default, on"),
    (["--sweep", "batch_size"], "expected KEY=VALUE,VALUE,..."),
    (["--sweep", "depth=1,2"], "--sweep depth: no selected task has that hyperparameter"),
    (["--sweep", "batch_size=0,8"], "--sweep: hyperparameter batch_size=0 for task cnn: must be an integer >= 1"),
    (["--sweep", "batch_size=8,8"], "--sweep batch_size: each value once"),
    (["--sweep", "epochs=1,2", "--set", "epochs=3"], "--sweep epochs and --set epochs exclude each other"),
    (["-t", "train", "--devices", "0"], "--devices 0: must be 1 or more"),
    (["-t", "train", "--devices", "2", "--sweep", "batch_size=2,4"], "--devices and --sweep exclude each other"),
    (["-t", "cnn", "--devices", "2"], "--sweep devices: no selected task has that hyperparameter"),
    (["-t", "train", "--devices", "2", "--set", "devices=2"], "--sweep devices and --set devices exclude each other"),
])
def test_bad_variant_options_are_one_line_and_exit_2(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("run_all.py: error: ") and message in err and err.count("\n") == 1


def test_devices_runs_the_data_parallel_notebooks_on_one_and_on_n_devices():
    args = cli.parse(["-f", "pytorch", "-t", "train,cnn", "--devices", "4"])
    assert [job.stem for job in args.jobs] == ["PyTorch_Train-devices-1", "PyTorch_Train-devices-4", "PyTorch_CNN"]
    assert [job.stem for job in cli.parse(["-f", "pytorch", "-t", "train", "--devices", "1"]).jobs] == [
        "PyTorch_Train-devices-1"]


def test_a_task_a_framework_lacks_is_a_row_that_says_why(tmp_path):
    lacking = [(f.key, task, reason) for f, task, reason in catalog.lacking(["pytorch", "jax", "caffe"],
                                                                             ["cnn", "train"])]
    assert [(key, task) for key, task, _ in lacking] == [("caffe", "train")]
    assert not catalog.select(["caffe"], ["train"])
    assert cli.main(["-f", "caffe", "-t", "train", "-p", "smoke", "--no-equivalence", "--data", "synthetic",
                     "--no-setup", "--results", str(tmp_path)]) == 0  # no job, no setup: `setup` of none is of every one
    (run_dir,) = run_dirs(tmp_path)
    records = table.load_records(run_dir)
    assert [(r["framework"], r["status"]) for r in records] == [("Caffe", "unavailable")]
    assert "unavailable: " + lacking[0][2] in (run_dir / "results.md").read_text()


def test_report_rebuilds_from_a_results_folder(fixture_catalog, tmp_path, capsys):
    assert cli.main(["-f", "ok", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--results", str(tmp_path), "-q"]) == 0
    (run_dir,) = run_dirs(tmp_path)
    (run_dir / "results.md").unlink()
    assert cli.main(["report", str(run_dir)]) == 0
    assert "| OK |" in (run_dir / "results.md").read_text()
    assert "fixture ran with" not in capsys.readouterr().out  # -q hides the notebook's output


@pytest.mark.parametrize("argv, message", [
    (["-f", "tensorflw"], "unknown framework tensorflw; known frameworks: " + ", ".join(catalog.framework_keys())),
    (["-t", "gan"], "unknown task gan"),
    (["-p", "fast"], "unknown profile 'fast'"),
    (["--data", "fake"], "unknown data source 'fake'"),
    (["--set", "epochs"], "expected KEY=VALUE"),
    (["--set", "depth=3"], "no selected task has that hyperparameter"),
    (["--timeout", "0"], "--timeout must be positive"),
    (["--set", "epochs=-1"], "hyperparameter epochs=-1 for task cnn: must be an integer >= 1"),
    (["-t", "rnn", "--set", "batch_size=0"], "hyperparameter batch_size=0 for task rnn: must be an integer >= 1"),
    (["--set", "lr=abc"], "hyperparameter lr='abc' for task cnn: must be a number >= 0.0"),
    (["-p", "full", "--set", "epochs=1.5"], "hyperparameter epochs=1.5 for task cnn: must be an integer >= 1"),
    (["-t", "inference", "--set", "image_size=64"], "image_size=64 for task inference: must be an integer >= 96"),
    (["setup", "nosuchenv"], "unknown environment nosuchenv"),
    (["setup", "--gpu", "--cpu"], "--gpu and --cpu exclude each other"),
    (["--gpu", "--cpu"], "--gpu and --cpu exclude each other"),
    (["setup", "--wheels", "/nonexistent/wheels"], "--wheels: no such folder"),
    (["--device", "tpu"], "invalid choice: 'tpu'"),
    (["report", "/nonexistent/run"], "no such results folder"),
    (["--frobnicate"], "unrecognized arguments"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_missing_environment_with_no_setup_is_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(environments, "is_ready", lambda env: False)
    assert cli.main(["-f", "pytorch", "--no-setup", "--results", str(tmp_path)]) == 2
    assert "environment pytorch is missing" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_an_environment_that_cannot_be_built_gives_unavailable_rows(monkeypatch, tmp_path, capsys):
    def refuse(env, requirements=None, say=print, wheels=None):
        raise environments.SetupError("environment pytorch needs Python 3.99, which was not found")

    monkeypatch.setattr(environments, "ensure", refuse)
    assert cli.main(["-f", "pytorch", "-p", "smoke", "--data", "synthetic", "--results", str(tmp_path)]) == 1
    (run_dir,) = run_dirs(tmp_path)
    records = table.load_records(run_dir)
    # CNN, Inference (default, compiled), RNN, Transformer, Train
    assert [r["status"] for r in records] == ["unavailable"] * 6
    assert "unavailable: environment pytorch needs Python 3.99" in (run_dir / "results.md").read_text()


def test_rows_this_machine_can_never_run_are_like_an_absent_framework_s_and_fail_no_run(monkeypatch, tmp_path, capsys):
    def lacking(env, requirements=None, say=print, wheels=None):
        raise environments.PythonMissing("needs Python 3.6: none found and no source of it is reachable from here")

    monkeypatch.setattr(environments, "ensure", lacking)  # as for CNTK on a machine without Python 3.6
    assert cli.main(["-f", "pytorch", "-t", "cnn,rnn", "-p", "smoke", "--data", "synthetic", "--results",
                     str(tmp_path)]) == 0
    (run_dir,) = run_dirs(tmp_path)
    assert [r["status"] for r in table.load_records(run_dir)] == ["unavailable"] * 2
    assert "unavailable: needs Python 3.6: none found" in (run_dir / "results.md").read_text()  # each row says why
    last = capsys.readouterr().out.strip().splitlines()[-1]  # and the run's last line lists them
    assert last == ("Not run here, as for an absent framework (this machine cannot have what environment pytorch "
                    "needs: needs Python 3.6: none found and no source of it is reachable from here): PyTorch_CNN, "
                    "PyTorch_RNN")


def test_selection_and_job_names():
    jobs = catalog.select(["PyTorch"], ["rnn", "cnn"])
    assert [job.stem for job in jobs] == ["PyTorch_RNN", "PyTorch_CNN"]
    assert all(job.notebook.exists() for job in catalog.select())
    keras = catalog.select(["keras"], ["cnn"])
    assert [(job.stem, job.label, job.environment.kernel_name) for job in keras] == [
        ("Keras_CNN-tensorflow", "Keras (tensorflow)", "rosetta-tensorflow"),
        ("Keras_CNN-jax", "Keras (jax)", "rosetta-jax"),
        ("Keras_CNN-torch", "Keras (torch)", "rosetta-pytorch"),
    ]
    assert [dict(job.variant.parameters) for job in keras] == [{"backend": b} for b in ("tensorflow", "jax", "torch")]


def test_kernel_specs_live_in_the_project(monkeypatch):
    env = catalog.ENVIRONMENTS["runner"]
    spec = json.loads(environments.kernel_spec_path(env).read_text())
    assert spec["argv"][0] == str(env.python_path)
    assert str(environments.kernel_spec_path(env)).startswith(str(catalog.REPO / ".jupyter"))
    monkeypatch.setenv("JUPYTER_PATH", "/elsewhere")
    assert environments.jupyter_path_env()["JUPYTER_PATH"].split(":") == [str(catalog.JUPYTER_DIR), "/elsewhere"]


def test_find_python_finds_this_interpreter_and_reports_missing_ones():
    import sys

    version = "{}.{}".format(*sys.version_info[:2])
    assert environments.find_python(version) is not None
    assert environments.find_python("2.1") is None


def test_the_command_line_starts_without_numpy_or_papermill():
    """run_all.py checks its arguments and builds the runner environment on a bare Python."""
    import subprocess
    import sys

    blocker = "import sys; sys.modules.update(numpy=None, papermill=None, nbformat=None, matplotlib=None); "
    code = blocker + "from runner import cli; raise SystemExit(cli.main(['-p', 'fast']))"
    out = subprocess.run([sys.executable, "-c", code], cwd=str(catalog.REPO), capture_output=True, text=True)
    assert out.returncode == 2 and "unknown profile 'fast'" in out.stderr, out.stderr


def test_data_sources_match_common():
    from common import datasets

    assert sorted(cli.DATA_SOURCES) == sorted(datasets.SOURCES)


def test_an_environment_remembers_its_build(tmp_path, monkeypatch):
    """is_ready: any build serves when none is asked for; another requirements file or new pins mean a rebuild."""
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(catalog, "JUPYTER_DIR", tmp_path / "jupyter")
    monkeypatch.setattr(catalog, "REPO", tmp_path)
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", tmp_path)
    (tmp_path / "demo.txt").write_text("numpy==2.4.6\n")
    (tmp_path / "demo-gpu.txt").write_text("numpy==2.4.6\ncupy==14\n")
    env = catalog.Environment("demo", "Demo", gpu_builds=("demo-gpu.txt",))
    assert env.gpu_requirements == (tmp_path / "demo-gpu.txt",) and not environments.is_ready(env)
    env.python_path.parent.mkdir(parents=True)
    env.python_path.write_text("")
    environments.write_stamp(env, {"build": "gpu", "python": "3.11.7", "requirements": "demo-gpu.txt",
                                   "requirements_sha256": __import__("hashlib").sha256(
                                       b"numpy==2.4.6\ncupy==14\n").hexdigest()})
    environments.write_kernel_spec(env)
    assert environments.is_ready(env) and environments.is_ready(env, tmp_path / "demo-gpu.txt")
    assert not environments.is_ready(env, env.requirements)
    assert environments.installation(env).for_gpu() is True and environments.build_label(env) == "venv gpu envs/demo-gpu.txt"
    spec = json.loads(environments.kernel_spec_path(env).read_text())
    assert spec["env"]["ROSETTA_BUILD"] == "venv gpu envs/demo-gpu.txt"  # every record says how it was built
    (tmp_path / "demo-gpu.txt").write_text("numpy==2.4.6\ncupy==15\n")
    assert not environments.is_ready(env)


def test_a_stamp_from_before_gpu_choices_still_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(catalog, "REPO", tmp_path)
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", tmp_path)
    (tmp_path / "demo-gpu.txt").write_text("cupy==14\n")
    env = catalog.Environment("demo", "Demo", gpu_builds=("demo-gpu.txt",))
    environments.write_stamp(env, {"build": "gpu", "python": "3.11.7", "requirements_sha256": "0"})
    assert environments.installation(env).requirements() == tmp_path / "demo-gpu.txt"


def test_everything_after_test_goes_to_pytest():
    args = cli.parse(["test", "-k", "datasets", "-x"])
    assert args.command == "test" and args.pytest_args == ["-k", "datasets", "-x"]


def test_a_missing_python_is_named_and_can_be_given_explicitly(tmp_path, monkeypatch):
    import sys

    monkeypatch.setenv("PATH", str(tmp_path))  # no python3.6 on PATH,
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))  # none under pyenv or conda
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.delenv("ROSETTA_PYTHON36", raising=False)
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", tmp_path)
    (tmp_path / "old.txt").write_text("six==1.17.0\n")
    env = catalog.Environment("old", "Old", python="3.6")
    assert environments.find_python("3.6") is None
    with pytest.raises(environments.PythonMissing, match=r"^needs Python 3\.6: .*set ROSETTA_PYTHON36"):
        environments.ensure(env, say=lambda line: None)
    version = "{}.{}".format(*sys.version_info[:2])
    monkeypatch.setenv(environments.python_variable(version), sys.executable)
    assert environments.find_python(version) == sys.executable


def test_the_tests_go_on_without_what_the_machine_lacks_and_stop_on_a_source_that_did_not_serve(monkeypatch, capsys):
    missing = {"cntk": environments.PythonMissing("needs Python 3.6: none found"),
               "caffe": environments.MachineLacks("needs a C compiler (cc, or $CC) to build its stand-in libx.so")}
    monkeypatch.setattr(setup_commands, "build_environments", lambda names, machine, **options: (missing, {}))
    monkeypatch.setattr(browser, "ensure_browser", lambda: "/usr/bin/chromium")
    prepared = []  # what the tests install without an index, obtained before pytest starts (here: only counted)
    monkeypatch.setattr(for_tests, "prepare", lambda: prepared.append(True))
    monkeypatch.setattr(setup_commands.os, "chdir", lambda path: None)
    monkeypatch.setenv(environments.UNAVAILABLE_VARIABLE, "{}")
    started = []
    monkeypatch.setattr(setup_commands.os, "execv", lambda path, argv: started.append(argv[1:]))
    run_tests, workers = setup_commands.test, setup_commands.TEST_WORKERS
    assert run_tests(cli.parse(["test", "-x"]).pytest_args) is None and started == [["-m", "pytest"] + workers + ["-x"]]
    assert run_tests(cli.parse(["test", "-n", "0"]).pytest_args) is None and started[-1] == ["-m", "pytest", "-n", "0"]
    assert run_tests(cli.parse(["test", "-p", "no:xdist"]).pytest_args) is None and started[-1] == [
        "-m", "pytest", "-p", "no:xdist"]
    assert run_tests(cli.parse(["test", "-p", "no:cacheprovider"]).pytest_args) is None and started[-1][2:4] == workers
    monkeypatch.setattr(environments, "is_ready", lambda env: False)  # and pytest skips its notebooks with the reason
    with pytest.raises(pytest.skip.Exception, match="caffe needs a C compiler"):
        require_environment(catalog.ENVIRONMENTS["caffe"])
    # a mirror that did not answer is no lack of the machine: no tests, exit 1 with the reason
    missing["caffe"] = build_steps.SourceUnreachable("needs Debian's bullseye packages, which none of "
                                                     "http://deb.debian.org/debian served (see .envs/caffe.log)")
    capsys.readouterr()
    assert run_tests(cli.parse(["test"]).pytest_args) == 1 and len(started) == 4
    assert capsys.readouterr().err == (
        "run_all.py: error: environment caffe could not be built, and the tests need it: needs Debian's bullseye "
        "packages, which none of http://deb.debian.org/debian served (see .envs/caffe.log)\n")
    with pytest.raises(pytest.fail.Exception, match="environment caffe is not built"):  # pytest alone: fails too
        require_environment(catalog.ENVIRONMENTS["caffe"])
    missing["caffe"] = environments.SetupError("building environment caffe failed")
    assert run_tests(cli.parse(["test"]).pytest_args) == 1 and len(started) == 4 and len(prepared) == 4
    del missing["caffe"]  # a package index that does not serve the tests' wheels: no tests, exit 1 with the reason
    capsys.readouterr()

    def index_that_does_not_serve():
        raise environments.SetupError("pip said no")

    monkeypatch.setattr(for_tests, "prepare", index_that_does_not_serve)
    assert run_tests(cli.parse(["test"]).pytest_args) == 1 and len(started) == 4
    assert capsys.readouterr().err == ("run_all.py: error: what the tests install without an index could not be "
                                       "obtained: pip said no\n")


def test_library_aliases_link_the_system_copy_and_reach_the_kernel(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(catalog, "JUPYTER_DIR", tmp_path / "jupyter")
    system_copy = tmp_path / "libdemo.so.40"
    system_copy.write_text("")
    monkeypatch.setattr(debian, "system_library", lambda name: str(system_copy) if name == "libdemo.so.40" else None)
    env = catalog.Environment("demo", "Demo", library_aliases=(("libdemo.so.12", "libdemo.so.40"),))
    with open(str(tmp_path / "setup.log"), "w") as log:
        debian.provide_libraries(env, log, say=lambda line: None, heartbeat=60)
    link = env.path / debian.LIBRARY_ALIASES_DIR / "libdemo.so.12"
    assert link.is_symlink() and link.resolve() == system_copy.resolve()
    environments.write_kernel_spec(env)
    spec = json.loads(environments.kernel_spec_path(env).read_text())
    assert spec["env"]["LD_LIBRARY_PATH"].split(":")[0] == str(link.parent)


def test_missing_libraries_without_apt_say_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(debian, "system_library", lambda name: None)
    monkeypatch.setattr(debian.shutil, "which", lambda name: None)
    env = catalog.Environment("cntk", "CNTK", library_aliases=(("libmpi.so.12", "libmpi.so.40"),))
    with open(str(tmp_path / "setup.log"), "w") as log:
        with pytest.raises(environments.SetupError, match="needs libmpi.so.40.*libopenmpi3"):
            debian.provide_libraries(env, log, say=lambda line: None, heartbeat=60)


def run_in_kernel(name, code):
    """Run `code` in environment `name`'s interpreter with its kernel spec's variables (require_environment: fail
    where it is not built, skip only where the machine lacks what it needs)."""
    import os
    import subprocess

    env = catalog.ENVIRONMENTS[name]
    require_environment(env)
    spec = json.loads(environments.kernel_spec_path(env).read_text())
    return subprocess.run([str(env.python_path), "-W", "ignore", "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, **spec["env"]))


def test_cntk_kernel_finds_openmpi_under_its_old_names():
    code = "import ctypes; ctypes.CDLL('libmpi.so.12'); ctypes.CDLL('libmpi_cxx.so.1'); import cntk; print(cntk.__version__)"
    out = run_in_kernel("cntk", code)
    assert out.returncode == 0 and out.stdout.strip() == "2.7", out.stderr[-2000:]


def test_a_kernel_variable_names_its_environment_s_folder_and_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path)
    monkeypatch.setenv(catalog.CACHE_VARIABLE, str(tmp_path / "shared"))
    env = catalog.Environment("toy", "Toy", kernel_env=(("CACHE", "dir={env}/cache,mode=1"), ("PLAIN", "1"),
                                                        ("SHARED", "dir={cache}/toy")))
    environ = environments.kernel_environment(env)
    assert (environ["CACHE"], environ["PLAIN"]) == ("dir={}/cache,mode=1".format(tmp_path / "toy"), "1")
    assert environ["SHARED"] == "dir={}/toy".format(tmp_path / "shared")


def test_the_user_cache_is_rosetta_cache_else_xdg_s_else_the_home_s(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(catalog.CACHE_VARIABLE, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert catalog.cache_dir() == tmp_path / "home" / ".cache" / "rosetta"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG specification: a relative path is invalid
    assert catalog.cache_dir() == tmp_path / "home" / ".cache" / "rosetta"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert catalog.cache_dir() == tmp_path / "xdg" / "rosetta"
    monkeypatch.setenv(catalog.CACHE_VARIABLE, str(tmp_path / "chosen"))
    assert catalog.cache_dir() == tmp_path / "chosen"


def test_theano_kernel_computes_in_float32_and_compiles_in_the_user_cache_by_versions():
    code = ("import numpy, platform, theano; print(theano.config.floatX, theano.config.compiledir, theano.__version__, "
            "numpy.__version__, platform.python_version())")
    out = run_in_kernel("theano", code)
    assert out.returncode == 0, out.stderr[-2000:]
    floatx, compiledir, theano_version, numpy_version, python_version = out.stdout.split()
    assert floatx == "float32"
    # outside the clone, so that a clean clone on this machine reuses the modules, in a folder that no other Theano,
    # NumPy or Python shares (the kernel spec says where, as `run_all.py test` wrote it before pytest started)
    assert Path(compiledir).parent == catalog.cache_dir() / "theano"
    name = Path(compiledir).name
    assert "-{}-".format(python_version) in name and name.endswith("-theano-{}-numpy-{}".format(theano_version,
                                                                                             numpy_version)), name


TWO_RUNS = (catalog.Framework("ok", "OK", "OK", (catalog.Variant("a", "runner"), catalog.Variant("b", "runner"),
                                                catalog.Variant("c", "runner"))),)


def test_an_interrupted_run_says_so_and_resume_finishes_it(fixture_catalog, tmp_path, monkeypatch, capsys):
    from runner.run import execution

    monkeypatch.setattr(catalog, "FRAMEWORKS", TWO_RUNS)
    real_run_job = execution.run_job

    def ctrl_c_on_b(job, *args, **kwargs):
        if job.stem == "OK_CNN-b":
            raise KeyboardInterrupt  # what Ctrl-C raises while papermill waits for the kernel
        return real_run_job(job, *args, **kwargs)

    monkeypatch.setattr(execution, "run_job", ctrl_c_on_b)
    argv = ["-f", "ok", "-t", "cnn", "-p", "smoke", "--set", "epochs=2", "--data", "synthetic", "--results", str(tmp_path), "-q"]
    assert cli.main(argv) == batch.INTERRUPTED
    (run_dir,) = run_dirs(tmp_path)
    assert "--resume {}".format(run_dir) in capsys.readouterr().out
    statuses = {path.name: json.loads(path.read_text())["status"] for path in run_dir.glob("*.result.json")}
    assert statuses == {"OK_CNN-a.result.json": "ok", "OK_CNN-b.result.json": "interrupted"}  # c never started
    assert "| interrupted (Ctrl-C) after " in (run_dir / "results.md").read_text()

    monkeypatch.setattr(execution, "run_job", real_run_job)
    first_a = (run_dir / "OK_CNN-a.result.json").read_text()
    assert cli.main(["run", "--resume", str(run_dir), "-q"]) == 0
    out = capsys.readouterr().out
    assert "2 of its 3 notebooks to run" in out and "OK_CNN-a:" not in out
    assert (run_dir / "OK_CNN-a.result.json").read_text() == first_a  # what had finished is kept as it was
    records = table.load_records(run_dir)
    assert [r["status"] for r in records] == ["ok"] * 3
    assert all(r["params"] == {"epochs": 2} for r in records)  # the stored parameters, not the defaults
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 1


def test_a_run_stopped_during_the_same_weights_check_says_so_in_its_table_and_resume_completes_it(
        fixture_catalog, tmp_path, monkeypatch, capsys):
    from runner.checks import equivalence

    monkeypatch.setattr(equivalence, "REFERENCE", "variants")  # the fixture Variants plays PyTorch's part
    compared = []

    def stopped(jobs, folder, say=print, cache=None):
        compared.append([job.stem for job in jobs])
        raise KeyboardInterrupt  # what Ctrl-C raises while the check waits for a notebook

    monkeypatch.setattr(equivalence, "check", stopped)
    argv = ["-f", "variants,raises", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--results", str(tmp_path), "-q"]
    assert cli.main(argv) == batch.INTERRUPTED
    (run_dir,) = run_dirs(tmp_path)
    out = capsys.readouterr().out
    assert "Interrupted (Ctrl-C) during the checks" in out and "--resume {}".format(run_dir) in out
    statuses = {r["framework"]: r["status"] for r in table.load_records(run_dir)}
    assert statuses == {"Variants": "ok", "Raises": "failed"}  # the notebooks had both run
    markdown = (run_dir / "results.md").read_text()
    assert "| Same as PyTorch |" in markdown and "for the runner tests | check interrupted |" in markdown, markdown

    def complete(jobs, folder, say=print, cache=None):
        compared.append([job.stem for job in jobs])
        results = [{"job": job.stem, "framework": job.label, "task": job.task, "error": "compared"} for job in jobs]
        (folder / run_folder.EQUIVALENCE_FILE).write_text(json.dumps({"cnn": {"task": "cnn", "results": results}}))

    monkeypatch.setattr(equivalence, "check", complete)
    assert cli.main(["run", "--resume", str(run_dir), "-q"]) == 1  # Raises fails again; then the check, complete
    assert compared[0] == compared[1] == ["Raises_CNN"]
    assert not (run_dir / run_folder.CHECKS_DIR / run_folder.EQUIVALENCE_INTERRUPTED_FILE).exists()
    markdown = (run_dir / "results.md").read_text()
    assert "check interrupted" not in markdown and "| check failed: compared |" in markdown, markdown


def test_resume_refuses_changed_notebooks_and_new_parameters(fixture_catalog, tmp_path, monkeypatch, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "OK_CNN.ipynb").write_text((FIXTURES / "OK_CNN.ipynb").read_text())
    monkeypatch.setattr(catalog, "NOTEBOOKS", notebooks)
    assert cli.main(["-f", "ok", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--results", str(tmp_path / "results"),
                     "-q"]) == 0
    (run_dir,) = run_dirs(tmp_path / "results")
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(run_dir), "-p", "full"]) == 2
    assert "--resume runs with the parameters stored in" in capsys.readouterr().err
    (notebooks / "OK_CNN.ipynb").write_text((FIXTURES / "OK_CNN.ipynb").read_text().replace("fixture ran", "edited"))
    assert cli.main(["run", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "notebook OK_CNN.ipynb changed since" in err and len(err.strip().splitlines()) == 1
    assert cli.main(["run", "--resume", str(tmp_path)]) == 2  # a folder no run started
    assert "run.json cannot be read" in capsys.readouterr().err


def test_a_sweep_resumes_with_its_swept_runs(fixture_catalog, tmp_path, capsys):
    assert cli.main(["-f", "ok", "-t", "cnn", "-p", "smoke", "--sweep", "epochs=1,2", "--data", "synthetic",
                     "--results", str(tmp_path), "-q"]) == 0
    (run_dir,) = run_dirs(tmp_path)
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(run_dir), "--no-setup", "-q"]) == 0  # nothing left: a setup would be of all
    assert "0 of its 2 notebooks to run" in capsys.readouterr().out


def test_each_dataset_is_fetched_once_before_the_notebooks(tmp_path, data_cache, monkeypatch, capsys):
    """fetch_data: a dataset that can be had is cached and verified for the notebooks ('auto' stays); one that
    cannot sends 'auto' notebooks to the stand-in at once and stops a 'real' run with the download's reason."""
    from common import datasets

    monkeypatch.setattr(datasets.time, "sleep", lambda seconds: None)
    payload = tmp_path / "cifar.tar.gz"
    payload.write_bytes(b"a CIFAR-10 archive, as far as the checksum knows")
    served = datasets.RemoteFile("CIFAR-10", payload.as_uri(), "cifar.tar.gz", "sha256",
                                 hashlib.sha256(payload.read_bytes()).hexdigest())
    gone = datasets.IMDB_FILE._replace(url="file:///nonexistent/imdb.npz")
    monkeypatch.setattr(datasets, "REMOTE_FILES", {"CIFAR-10": served, "IMDB": gone})

    assert batch.fetch_data(["cnn", "inference", "rnn"], "auto") == {"cnn": "auto", "inference": "auto", "rnn": "synthetic"}
    assert (data_cache / "cifar.tar.gz").read_bytes() == payload.read_bytes()
    out = capsys.readouterr().out
    assert "[data] IMDB: could not download IMDB" in out and "use the synthetic stand-in" in out
    assert batch.fetch_data(["cnn", "rnn"], "synthetic") == {"cnn": "synthetic", "rnn": "synthetic"}
    with pytest.raises(datasets.DownloadError, match="could not download IMDB"):
        batch.fetch_data(["rnn"], "real")
    assert cli.main(["run", "-f", "pytorch", "-t", "rnn", "--data", "real", "--no-setup", "--results",
                     str(tmp_path / "results")]) == 1
    assert "run_all.py: error: --data real: could not download IMDB" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()  # refused before a results folder was made


def test_an_absent_framework_has_rows_that_say_why(tmp_path, capsys):
    assert catalog.select(["nvcaffe"]) == [] and [a.label for a in catalog.absent_selected(["NVCaffe"])] == ["NVCaffe"]
    assert catalog.absent_selected(["pytorch"]) == [] and catalog.absent_selected() == list(catalog.ABSENT)
    assert cli.main(["-f", "nvcaffe", "-t", "cnn,rnn", "-p", "smoke", "--no-equivalence", "--data", "synthetic",
                     "--no-setup", "--results", str(tmp_path)]) == 0  # no job: a setup would be of every environment
    (run_dir,) = run_dirs(tmp_path)
    records = table.load_records(run_dir)
    assert [(r["framework"], r["task"], r["status"]) for r in records] == [
        ("NVCaffe", "cnn", "unavailable"), ("NVCaffe", "rnn", "unavailable")]
    assert "unavailable: absent: NVIDIA's Caffe fork" in (run_dir / "results.md").read_text()


def test_packages_of_another_debian_suite_come_through_a_private_apt_and_stand_ins_are_compiled(tmp_path, monkeypatch):
    import shutil
    import subprocess

    if not (shutil.which("dpkg-deb") and shutil.which("cc")):
        pytest.skip("needs dpkg-deb and a C compiler")
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(catalog, "JUPYTER_DIR", tmp_path / "jupyter")
    monkeypatch.setattr(catalog, "REPO", tmp_path)
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", tmp_path)
    monkeypatch.setattr(debian, "DEBIAN_KEYRING", str(tmp_path / "keyring.gpg"))
    (tmp_path / "keyring.gpg").write_text("")
    (tmp_path / "demo-debian.txt").write_text("# debian-suite: oldstable\n# debian-mirror: http://gone.example/debian\n"
                                              "# debian-mirror: http://archive.example/debian\nlibdemo1=1.0-1\n")
    (tmp_path / "demo-standin.c").write_text("int demo_stand_in(void) { return 42; }\n")
    package = tmp_path / "package"  # a real .deb: a library and a Python module
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN" / "control").write_text("Package: libdemo1\nVersion: 1.0-1\nArchitecture: amd64\n"
                                                "Maintainer: nobody <nobody@example.org>\nDescription: demo\n")
    (package / "usr/lib/x86_64-linux-gnu/sub").mkdir(parents=True)
    (package / "usr/lib/x86_64-linux-gnu/sub/libdemo.so.1").write_text("")
    subprocess.run(["dpkg-deb", "--build", str(package), str(tmp_path / "libdemo1.deb")], check=True,
                   capture_output=True)
    monkeypatch.setattr(debian, "system_library", lambda name: "/usr/lib/the-system-s/" + name)
    commands, real_run = [], build_steps.run_logged

    def apt(command, log, name, say, heartbeat, cwd=None):
        if command[0] != "apt-get":
            return real_run(command, log, name, say, heartbeat, cwd)
        commands.append((command, (env.path / "apt" / "sources.list").read_text()))
        if "gone.example" in commands[-1][1]:
            raise environments.SetupError("apt-get update failed")
        if command[-2:] == ["download", "libdemo1=1.0-1"]:
            shutil.copy(str(tmp_path / "libdemo1.deb"), cwd)

    monkeypatch.setattr(build_steps, "run_logged", apt)
    env = catalog.Environment("demo", "Demo", library_aliases=(("libdemo.so.1", "libdemo.so.1"),),
                              stand_in_libraries=(("libstandin.so.2", "demo-standin.c"),))
    said = []
    with open(str(tmp_path / "setup.log"), "w") as log:
        debian.provide_libraries(env, log, say=said.append, heartbeat=60)
    assert [c[-1] for c, _ in commands] == ["update", "update", "libdemo1=1.0-1"]  # the first mirror failed
    assert all("Dir::State={}".format(env.path / "apt") in c for c, _ in commands)  # not the system's apt
    assert commands[-1][1] == "deb [signed-by={}] http://archive.example/debian oldstable main\n".format(
        tmp_path / "keyring.gpg")
    assert any("not available from http://gone.example/debian" in line for line in said)
    aliases = env.path / debian.LIBRARY_ALIASES_DIR
    # another suite's packages are always used, never the system's copy; found in a subfolder
    assert (aliases / "libdemo.so.1").resolve() == (env.path / "debian/usr/lib/x86_64-linux-gnu/sub/libdemo.so.1")
    dynamic = subprocess.run(["readelf", "-d", str(aliases / "libstandin.so.2")], capture_output=True, text=True).stdout
    assert "Library soname: [libstandin.so.2]" in dynamic
    assert not (env.path / "apt").exists() and not (env.path / "debian-downloads").exists()
    assert environments.kernel_environment(env)["LD_LIBRARY_PATH"].split(":")[0] == str(aliases)
    (tmp_path / "demo-standin.c").write_text("int demo_stand_in(void) { return 43; }\n")
    assert b"43" in environments.recipe(env, tmp_path / "demo-debian.txt")  # a changed source rebuilds


def test_find_python_can_ask_for_a_shared_libpython(monkeypatch):
    import subprocess
    import sys

    version = "{}.{}".format(*sys.version_info[:2])
    monkeypatch.setenv(environments.python_variable(version), sys.executable)
    found = environments.find_python(version, shared=True)
    if found is not None:
        check = "import sysconfig; print(sysconfig.get_config_var('Py_ENABLE_SHARED'))"
        assert subprocess.run([found, "-c", check], capture_output=True, text=True).stdout.strip() == "1"
    assert environments.find_python("2.1", shared=True) is None


def test_caffe_kernel_runs_debian_s_caffe_on_openblas_with_its_stand_in_library(tmp_path):
    out = run_in_kernel("caffe", "import frameworks.caffe as c; print(c.VERSION); print(c.loaded_blas())")
    assert out.returncode == 0, out.stderr[-2000:]
    version, blas = out.stdout.strip().splitlines()[-2:]
    assert version == "1.0.0" and "openblas-pthread" in blas and "libopenblasp" in blas, blas
    (tmp_path / "list.txt").write_text("picture.jpg 0\n")  # an image file layer: the only caller of the stand-in
    net = ('layer {{ name: "data" type: "ImageData" top: "data" top: "label" '
           'image_data_param {{ source: "{}" batch_size: 1 }} }}').format(tmp_path / "list.txt")
    (tmp_path / "net.prototxt").write_text(net)
    out = run_in_kernel("caffe", "import caffe; caffe.Net({!r}, caffe.TEST)".format(str(tmp_path / "net.prototxt")))
    assert out.returncode != 0 and "OpenCV's cv::imread is not available" in out.stderr, out.stderr[-2000:]


def test_kernels_do_not_see_a_cluster_s_token_or_address(fixture_catalog, tmp_path, monkeypatch):
    secrets = catalog.Framework("secrets", "Secrets", "Secrets", (catalog.Variant(None, "runner"),))
    monkeypatch.setattr(catalog, "FRAMEWORKS", catalog.FRAMEWORKS + (secrets,))
    for name in ("RAY_AUTH_TOKEN", "RAY_ADDRESS", "ROSETTA_RAY_TOKEN"):  # as a Ray node's workers have them
        monkeypatch.setenv(name, "planted")
    assert cli.main(["-f", "secrets", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--results", str(tmp_path),
                     "-q"]) == 0  # the notebook raises where it sees any
