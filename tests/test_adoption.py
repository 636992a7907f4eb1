"""Environments from what a machine already has: an adopted interpreter, a folder of wheels, and the one command
that adds a missing venv module; and the probe that asks each framework, in its own interpreter, for the GPU."""

import json
import subprocess
import sys
import zipfile

import pytest
from conftest import require_environment
from fake_gpus import fake_nvidia_smi, use_nvidia_smi

from common import hyperparams
from runner import catalog, cli
from runner.run import batch, compatibility, environments, execution, interpreters

# The built environments' interpreters, found before a test points the catalog at a scratch folder
BUILT = {name: env.python_path for name, env in catalog.ENVIRONMENTS.items()}


def built_python(name):
    """The interpreter of the built environment `name`, to adopt; the test fails where it is not built."""
    if not BUILT[name].exists():
        pytest.fail("environment {} is not built: run `python3 run_all.py setup {}`".format(name, name))
    return BUILT[name]


@pytest.fixture
def scratch_catalog(tmp_path, monkeypatch):
    """Environments and kernels under a temporary folder, so that nothing here touches .envs/ or .jupyter/."""
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(catalog, "JUPYTER_DIR", tmp_path / "jupyter")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return tmp_path


def test_adopting_an_interpreter_runs_a_notebook_on_it_and_every_record_says_so(scratch_catalog, capsys):
    """End to end: PyTorch's interpreter adopted as `pytorch`, its kernel registered, a smoke notebook run on it."""
    python = built_python("pytorch")  # an interpreter that has torch, numpy, ipykernel and keras
    env = catalog.ENVIRONMENTS["pytorch"]
    stamp = environments.adopt(env, python)
    out = capsys.readouterr().out
    assert "adopting {} (Python".format(python) in out
    assert "    torch                    2.14.1" in out and "pinned 2.14.1" in out
    assert stamp["build"] == "adopted" and stamp["probe"]["version"].startswith("2.14.1")
    assert environments.read_stamp(env) == stamp  # on disk, where `list` and the kernel read it
    assert environments.is_ready(env) and environments.interpreter(env) == python
    assert not environments.is_ready(env, env.requirements)  # `setup pytorch --cpu` would build a venv instead
    assert compatibility.plan(env, compatibility.Machine([])).requirements is None  # a plain run keeps it
    assert compatibility.plan(env, compatibility.Machine([]), build="cpu").requirements == env.requirements
    spec = json.loads(environments.kernel_spec_path(env).read_text())
    assert spec["argv"][0] == str(python)
    assert spec["env"]["ROSETTA_BUILD"] == "adopted {}".format(python)
    assert spec["env"]["PYTHONPATH"].split(":")[0] == str(catalog.REPO)
    job = catalog.select(["pytorch"], ["rnn"])[0]
    parameters = {"data_source": "synthetic", "device": "auto", "threads": 2, "seed": 0, "overrides": {}}
    (scratch_catalog / "run").mkdir()
    record = execution.run_job(job, scratch_catalog / "run", "smoke", parameters, timeout=600, show_output=False)
    assert record["status"] == "ok", record["error"]
    assert record["environment"]["build"] == "adopted {}".format(python)
    assert record["environment"]["framework_version"].startswith(stamp["versions"]["torch"])  # 2.14.1+cu130
    assert record["params"] == hyperparams.for_task("rnn", "smoke")


def test_an_interpreter_without_the_framework_is_refused_with_its_import_error(scratch_catalog):
    with pytest.raises(environments.SetupError, match=r"cannot serve as pytorch: ModuleNotFoundError: No module "
                                                      r"named 'torch'"):
        environments.adopt(catalog.ENVIRONMENTS["pytorch"], built_python("runner"), say=lambda line: None)
    assert not environments.is_ready(catalog.ENVIRONMENTS["pytorch"])


def test_an_interpreter_without_ipykernel_gets_the_command_that_adds_it(scratch_catalog, monkeypatch):
    bare = scratch_catalog / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    monkeypatch.setattr(environments, "probe", lambda env, python=None: {"framework": "PyTorch", "version": "2.14.1",
                                                                         "gpus": [], "gpu_ok": False, "error": None})
    python = bare / "bin" / "python"
    with pytest.raises(environments.SetupError) as raised:
        environments.adopt(catalog.ENVIRONMENTS["pytorch"], python, say=lambda line: None)
    assert str(raised.value) == ("{0} lacks ipykernel, which a Jupyter kernel needs: add it with `{0} -m pip install "
                                 "ipykernel==7.4.0`, or rerun with --install-missing".format(python))


def test_install_missing_adds_the_pinned_packages_from_a_folder_of_wheels(scratch_catalog, monkeypatch):
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", scratch_catalog)
    monkeypatch.setattr(catalog, "REPO", scratch_catalog)
    (scratch_catalog / "demo.txt").write_text("rosetta_offline_demo==1.0\nipykernel==9.9\nrosetta_test_tool==2.0\n")
    wheels = scratch_catalog / "wheels"
    wheels.mkdir()
    for name, version in (("rosetta_offline_demo", "1.0"), ("ipykernel", "9.9")):  # no rosetta_test_tool wheel
        _wheel(wheels, name, version)
    venv = scratch_catalog / "existing"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    monkeypatch.setattr(environments, "probe", lambda env, python=None: {"framework": "runner", "imports_ok": True,
                                                                         "gpus": [], "gpu_ok": False, "error": None})
    env = catalog.Environment("demo", "Demo", test_packages=("rosetta_test_tool",))
    lines = []
    stamp = environments.adopt(env, venv / "bin" / "python", install_missing=True, wheels=str(wheels), say=lines.append)
    assert stamp["versions"] == {"rosetta_offline_demo": "1.0", "ipykernel": "9.9", "rosetta_test_tool": None}
    assert any(line.startswith("[setup] demo: installing into") and "rosetta_test_tool" not in line for line in lines)
    assert any("rosetta_test_tool" in line and "(for the tests only)" in line for line in lines)


def test_adopting_the_runner_makes_run_all_use_that_interpreter(scratch_catalog, monkeypatch):
    runner = catalog.ENVIRONMENTS["runner"]
    existing = built_python("runner")
    stamp = environments.adopt(runner, existing, say=lambda line: None)
    assert stamp["probe"]["imports_ok"] and environments.interpreter(runner) == existing
    monkeypatch.setattr(cli.sys, "executable", str(existing))
    assert cli.in_runner_env()
    monkeypatch.setattr(cli.sys, "executable", "/usr/bin/some-other-python")
    assert not cli.in_runner_env()


def test_a_keras_row_on_an_adopted_interpreter_without_keras_says_how_to_add_it(scratch_catalog):
    env = catalog.ENVIRONMENTS["jax"]
    environments.write_stamp(env, {"build": "adopted", "python_path": "/opt/jax/bin/python", "python": "3.12.3",
                                   "requirements": "jax-gpu.txt", "versions": {"jax": "0.11.0", "keras": None}})
    keras, own = catalog.select(["keras"], ["cnn"])[1], catalog.select(["jax"], ["cnn"])[0]
    assert batch.missing_packages_reason(own) is None
    assert batch.missing_packages_reason(keras) == ("the adopted interpreter /opt/jax/bin/python lacks keras; "
                                                  "`/opt/jax/bin/python -m pip install keras==3.15.1` adds it")


def test_setup_with_python_checks_its_arguments(capsys):
    assert cli.main(["setup", "pytorch", "jax", "--python", sys.executable]) == 2
    assert "name exactly one" in capsys.readouterr().err
    assert cli.main(["setup", "pytorch", "--python", "/nonexistent/python"]) == 2
    assert "no such interpreter" in capsys.readouterr().err
    assert cli.main(["setup", "pytorch", "--install-missing"]) == 2
    assert "--install-missing goes with --python" in capsys.readouterr().err


def _wheel(folder, name, version):
    """A pure-Python wheel made by hand: one module, the metadata pip needs."""
    path = folder / "{}-{}-py3-none-any.whl".format(name, version)
    info = "{}-{}.dist-info/".format(name, version)
    with zipfile.ZipFile(str(path), "w") as archive:
        archive.writestr(name + ".py", "VERSION = {!r}\n".format(version))
        archive.writestr(info + "METADATA", "Metadata-Version: 2.1\nName: {}\nVersion: {}\n".format(name, version))
        archive.writestr(info + "WHEEL", "Wheel-Version: 1.0\nGenerator: rosetta-test\nRoot-Is-Purelib: true\n"
                                         "Tag: py3-none-any\n")
        archive.writestr(info + "RECORD", "")
    return path


def test_an_environment_builds_from_a_folder_of_wheels_without_an_index(scratch_catalog, monkeypatch):
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", scratch_catalog)
    monkeypatch.setattr(catalog, "REPO", scratch_catalog)
    wheels = scratch_catalog / "wheels"
    wheels.mkdir()
    _wheel(wheels, "rosetta_offline_demo", "1.0")
    (scratch_catalog / "demo.txt").write_text("rosetta_offline_demo==1.0\n")
    env = catalog.Environment("demo", "Demo")
    lines = []
    assert environments.ensure(env, wheels=str(wheels), say=lines.append)
    assert any("and the wheels in {}".format(wheels) in line for line in lines)
    out = subprocess.run([str(env.python_path), "-c", "import rosetta_offline_demo as d; print(d.VERSION)"],
                         capture_output=True, text=True)
    assert out.stdout.strip() == "1.0"
    assert "--no-index" in (catalog.ENVS_DIR / "demo.log").read_text()
    (scratch_catalog / "demo.txt").write_text("rosetta_offline_demo==2.0\n")  # not in the folder: pip says so
    with pytest.raises(environments.SetupError, match="failed at"):
        environments.ensure(env, wheels=str(wheels), say=lambda line: None)


def test_a_python_without_venv_support_names_the_package_that_adds_it(scratch_catalog, monkeypatch):
    fake = scratch_catalog / "python3.11"
    fake.write_text("#!/bin/sh\ncase \"$*\" in *ensurepip*) echo \"ModuleNotFoundError: No module named 'ensurepip'\" >&2;"
                    " exit 1;; esac\necho 3.11.2\n")
    fake.chmod(0o755)
    monkeypatch.setattr(interpreters, "find", lambda version, shared=False: interpreters.Interpreter(str(fake), "3.11.2",
                                                                                                    "PATH"))
    with pytest.raises(environments.SetupError) as raised:
        environments.ensure(catalog.ENVIRONMENTS["chainer"], say=lambda line: None)
    assert str(raised.value).startswith("Python 3.11 at {} cannot create virtual environments (no ensurepip module); "
                                        "on Debian and Ubuntu add it with `sudo apt-get install python3.11-venv`".format(fake))
    assert not (catalog.ENVS_DIR / "chainer").exists()


@pytest.mark.parametrize("name", [name for name, env in catalog.ENVIRONMENTS.items() if env.framework_module])
def test_the_probe_asks_each_framework_in_its_own_interpreter(name, monkeypatch):
    """On this CPU machine every framework imports, sees no GPU, and says why in its own words."""
    env = catalog.ENVIRONMENTS[name]
    require_environment(env)
    use_nvidia_smi(monkeypatch, None)
    answer = environments.probe(env)
    assert answer["version"] and answer["gpu_ok"] is False and answer["gpus"] == []
    assert answer["error"].startswith(answer["framework"]), answer["error"]


def test_the_probe_reports_a_framework_that_does_not_import(tmp_path):
    broken = catalog.Environment("broken", "Broken", framework_module="no_such_framework")
    answer = environments.probe(broken, python=sys.executable)
    assert answer["gpu_ok"] is False and answer["error"].startswith("ModuleNotFoundError: No module named")


def test_a_notebook_on_a_gpu_machine_whose_gpu_its_framework_cannot_use(tmp_path, monkeypatch):
    """device="auto": a CPU run whose record names the GPU and PyTorch's reason; device="cuda": one line, failed."""
    job = catalog.select(["pytorch"], ["cnn"])[0]
    require_environment(job.environment)
    use_nvidia_smi(monkeypatch, fake_nvidia_smi(tmp_path, "H100"))  # the kernel inherits it: nvidia-smi sees an H100
    parameters = {"data_source": "synthetic", "device": "auto", "threads": 2, "seed": 0, "overrides": {"epochs": 1}}
    for folder in ("auto", "cuda"):
        (tmp_path / folder).mkdir()
    record = execution.run_job(job, tmp_path / "auto", "smoke", parameters, timeout=600, show_output=False)
    assert record["status"] == "ok", record["error"]
    assert record["device"] == "cpu" and record["environment"]["gpus"] == []
    assert record["environment"]["gpu_unused"].startswith("PyTorch could not use this machine's NVIDIA H100 80GB "
                                                          "HBM3: PyTorch 2.14.1")
    assert "Found no NVIDIA driver" in record["environment"]["gpu_unused"]
    record = execution.run_job(job, tmp_path / "cuda", "smoke", dict(parameters, device="cuda"), timeout=600,
                               show_output=False)
    assert record["status"] == "failed"
    assert record["error"].startswith("DeviceError: device='cuda': PyTorch 2.14.1")
    assert record["error"].endswith("this machine's NVIDIA H100 80GB HBM3")


def test_a_notebook_opened_from_notebooks_finds_common_and_frameworks_without_the_project_on_its_path():
    """A foreign kernel (a VM's own Jupyter) starts in the notebook's folder, with nothing of ours installed."""
    code = "import common.gpu, frameworks, sys; print(common.gpu.__file__)"
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=str(catalog.NOTEBOOKS), capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("common/gpu.py")
