"""Which build of each environment a GPU machine gets, decided before anything is downloaded, and what the
setup, the run and `list` say about it: an H100 with driver 580, an A100 with 535, a T4 with 470, an L4,
no GPU, and an nvidia-smi that fails. Builds and probes are replaced by fakes here; tests/test_adoption.py
runs the real probe in every environment."""

import hashlib
import json

import pytest
from fake_gpus import MACHINES, failing_nvidia_smi, fake_nvidia_smi, use_nvidia_smi

from runner import catalog, cli
from runner.checks import stage
from runner.report import table
from runner.run import compatibility, debian, environments


def machine(name):
    """The Machine that nvidia-smi would report on `name` (a tests/fake_gpus.py machine)."""
    gpu_name, driver, capability, memory, clock = MACHINES[name]
    return compatibility.Machine([{"index": 0, "name": gpu_name, "driver": driver, "memory_mib": memory,
                                   "max_sm_clock_mhz": clock, "compute_capability": capability}])


def plans(name, libraries=False):
    """{environment: requirements file name, or the unavailable text} on machine `name`."""
    find = (lambda library: "/usr/lib/x86_64-linux-gnu/" + library) if libraries else (lambda library: None)
    decided = {}
    for env in catalog.ENVIRONMENTS.values():
        planned = compatibility.plan(env, machine(name), find_library=find)
        decided[env.name] = planned.unavailable or (planned.requirements.name if planned.requirements else None)
    return decided


# the environments without a GPU build, and how the reason their requirements give begins
NO_GPU_BUILD = {"chainer": "Chainer 7.8 computes on GPUs through CuPy 7",
                "theano": "Theano 1.0 computes on GPUs only through libgpuarray",
                "caffe": "Debian 11 carries Caffe's CPU build only"}


def test_every_gpu_build_states_what_its_wheels_need():
    for env in catalog.ENVIRONMENTS.values():
        for requirements in env.gpu_requirements:
            needs = compatibility.read_needs(requirements)
            assert needs.cuda and needs.driver and needs.sass, requirements.name
            assert compatibility.version_tuple(needs.driver) >= (410,), requirements.name
        if not env.gpu_builds and env.name != "runner":
            assert compatibility.no_gpu_build_reason(env).startswith(NO_GPU_BUILD[env.name]), env.name


def test_a_requirements_file_without_its_gpu_lines_is_refused(tmp_path):
    (tmp_path / "x-cuda12.txt").write_text("# gpu-cuda: 12.0\nfoo==1\n")
    with pytest.raises(ValueError, match="x-cuda12.txt lacks the header lines gpu-driver, gpu-sass, gpu-ptx"):
        compatibility.read_needs(tmp_path / "x-cuda12.txt")


def test_h100_with_driver_580():
    decided = plans("H100", libraries=True)
    assert decided["pytorch"] == "pytorch.txt" and decided["jax"] == "jax-cuda13.txt"
    assert decided["tensorflow"] == "tensorflow-cuda12.txt"  # through its PTX for 9.0; driver 580 compiles it
    assert decided["runner"] is None  # the runner computes nothing: whatever build it has
    assert decided["mxnet"] == ("unavailable on this GPU: mxnet-cuda112.txt (CUDA 11.2): this NVIDIA H100 80GB HBM3 is "
                                "compute capability 9.0; the wheels carry machine code for 5.0 to 8.6 and no PTX")
    assert decided["cntk"].startswith("unavailable on this GPU: cntk-cuda10.txt (CUDA 10.0): this NVIDIA H100 80GB "
                                      "HBM3 is compute capability 9.0; the wheels carry machine code for 3.0 to 7.5")
    assert decided["chainer"].startswith("unavailable on this GPU: no GPU build: Chainer 7.8 computes on GPUs through "
                                         "CuPy 7")
    assert decided["caffe2"].startswith("unavailable on this GPU: caffe2.txt (CUDA 10.2): this NVIDIA H100 80GB HBM3 "
                                        "is compute capability 9.0; the wheels carry machine code for 3.7 to 7.0")


def test_a100_with_driver_535_gets_the_cuda_12_builds():
    decided = plans("A100")
    assert (decided["pytorch"], decided["jax"], decided["tensorflow"]) == (
        "pytorch-cuda12.txt", "jax-cuda12.txt", "tensorflow-cuda12.txt")
    planned = compatibility.plan(catalog.ENVIRONMENTS["pytorch"], machine("A100"))
    assert planned.note == "pytorch.txt (CUDA 13.0): its driver 535.183.01 is older than 580.65.06, which CUDA 13.0 needs"
    assert decided["mxnet"] == ("unavailable on this GPU: mxnet-cuda112.txt (CUDA 11.2): they load libcudart.so.11.0, "
                                "libcublas.so.11, libcufft.so.10, libcurand.so.10, libcusolver.so.11, libnvrtc.so.11.2, "
                                "libNvToolsExt.so.1, libcudnn.so.8, libnccl.so.2 from the system, which has none (install "
                                "the CUDA 11.2 runtime and cuDNN it was built with, or add their folder to "
                                "LD_LIBRARY_PATH)".replace("libNvToolsExt", "libnvToolsExt"))
    assert plans("A100", libraries=True)["mxnet"] == "mxnet-cuda112.txt"
    assert "compute capability 8.0" in decided["cntk"]


def test_t4_with_driver_470_keeps_only_the_old_builds():
    decided = plans("T4", libraries=True)
    assert decided["pytorch"] == (
        "unavailable on this GPU: pytorch.txt (CUDA 13.0): its driver 470.256.02 is older than 580.65.06, which CUDA "
        "13.0 needs | pytorch-cuda12.txt (CUDA 12.8): its driver 470.256.02 is older than 525.60.13, which CUDA 12.8 "
        "needs")
    assert decided["tensorflow"].startswith("unavailable on this GPU: tensorflow-cuda12.txt (CUDA 12.5): its driver "
                                            "470.256.02 is older than 525.60.13")
    assert decided["jax"].count("is older than") == 2
    assert (decided["mxnet"], decided["cntk"]) == ("mxnet-cuda112.txt", "cntk-cuda10.txt")  # sm_70 code runs on 7.5


def test_l4_runs_machine_code_built_for_an_earlier_minor_version():
    decided = plans("L4", libraries=True)
    assert (decided["pytorch"], decided["jax"], decided["tensorflow"], decided["mxnet"]) == (
        "pytorch-cuda12.txt", "jax-cuda12.txt", "tensorflow-cuda12.txt", "mxnet-cuda112.txt")  # mxnet: sm_86 on 8.9
    assert "compute capability 8.9" in decided["cntk"]


def test_ptx_that_the_driver_is_too_old_to_compile():
    h100_535 = compatibility.Machine([dict(machine("H100").gpu, driver="535.183.01")])
    planned = compatibility.plan(catalog.ENVIRONMENTS["tensorflow"], h100_535)
    assert planned.unavailable == (
        "unavailable on this GPU: tensorflow-cuda12.txt (CUDA 12.5): this NVIDIA H100 80GB HBM3 is compute "
        "capability 9.0, which only the wheels' PTX serves, and its driver 535.183.01 is older than 545.23.06, which "
        "compiles that PTX")


def test_without_a_gpu_or_asked_for_the_cpu_nothing_is_checked():
    none = compatibility.Machine([])
    for env in catalog.ENVIRONMENTS.values():
        assert compatibility.plan(env, none) == compatibility.Plan(env.name, None)  # keep what is there, or CPU
        assert compatibility.plan(env, machine("H100"), device="cpu") == compatibility.Plan(env.name, None)
        assert compatibility.plan(env, machine("H100"), build="cpu").requirements == env.requirements
    forced = compatibility.plan(catalog.ENVIRONMENTS["jax"], none, build="gpu")  # --gpu: build for a GPU elsewhere
    assert forced.requirements.name == "jax-cuda13.txt" and forced.gpu


class FakeSetup:
    """Records what the runner would build, leaving the stamp a build leaves in a scratch .envs/, and answers the
    probe the way a framework on the GPU would; the setup's own steps (its stamps included) are the real ones."""

    def __init__(self, monkeypatch, envs_dir, answers=None):
        self.built, self.answers = [], answers or {}
        monkeypatch.setattr(catalog, "ENVS_DIR", envs_dir)
        monkeypatch.setattr(environments, "ensure", self.ensure)
        monkeypatch.setattr(environments, "probe", self.probe)
        monkeypatch.setattr(debian, "system_library", lambda name: None)  # no CUDA 11 on the system

    def ensure(self, env, requirements=None, say=print, heartbeat=20.0, wheels=None):
        self.built.append((env.name, requirements.name if requirements else None))
        requirements = requirements or env.requirements
        environments.write_stamp(env, {"build": "gpu" if requirements in env.gpu_requirements else "cpu",
                                       "requirements": requirements.name})
        return True

    def probe(self, env, python=None, timeout=600):
        return self.answers.get(env.name, {"framework": env.name, "version": "1.0", "gpus": ["NVIDIA H100 80GB HBM3"],
                                           "gpu_ok": True, "error": None})


def test_setup_on_an_h100_builds_the_gpu_builds_and_says_what_it_leaves(tmp_path, monkeypatch, capsys):
    use_nvidia_smi(monkeypatch, fake_nvidia_smi(tmp_path, "H100"))
    fake = FakeSetup(monkeypatch, tmp_path / "envs", {"pytorch": {
        "framework": "PyTorch", "version": "2.14.1", "gpus": [], "gpu_ok": False,
        "error": "RuntimeError: CUDA driver error: unknown"}})
    assert cli.main(["setup"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "[gpu] NVIDIA H100 80GB HBM3 (compute capability 9.0, driver 580.65.06, 81559 MiB)"
    assert dict(fake.built) == {"runner": None, "pytorch": "pytorch.txt", "tensorflow": "tensorflow-cuda12.txt",
                                "jax": "jax-cuda13.txt"}
    assert "[setup] mxnet: not built: unavailable on this GPU: mxnet-cuda112.txt (CUDA 11.2)" in out
    assert "with --device cpu its notebooks run on the CPU" in out
    assert "[setup] pytorch: GPU check FAILED: RuntimeError: CUDA driver error: unknown" in out
    assert "[setup] jax: GPU check: jax 1.0 computes on NVIDIA H100 80GB HBM3" in out
    kept = {name: json.loads((catalog.ENVIRONMENTS[name].path / environments.STAMP).read_text()).get("probe")
            for name, _ in fake.built}  # each GPU build's stamp on disk holds its probe's answer
    assert kept == {"runner": None, "pytorch": fake.probe(catalog.ENVIRONMENTS["pytorch"]),
                    "tensorflow": fake.probe(catalog.ENVIRONMENTS["tensorflow"]), "jax": fake.probe(catalog.ENVIRONMENTS["jax"])}


def test_setup_on_an_a100_says_why_it_took_the_cuda_12_build(tmp_path, monkeypatch, capsys):
    use_nvidia_smi(monkeypatch, fake_nvidia_smi(tmp_path, "A100"))
    fake = FakeSetup(monkeypatch, tmp_path / "envs")
    assert cli.main(["setup", "pytorch"]) == 0
    assert fake.built == [("pytorch", "pytorch-cuda12.txt")]
    assert ("[setup] pytorch: using envs/pytorch-cuda12.txt, since pytorch.txt (CUDA 13.0): its driver 535.183.01 is "
            "older than 580.65.06") in capsys.readouterr().out


def test_a_failing_nvidia_smi_builds_for_the_cpu_and_says_so(tmp_path, monkeypatch, capsys):
    use_nvidia_smi(monkeypatch, failing_nvidia_smi(tmp_path))
    fake = FakeSetup(monkeypatch, tmp_path / "envs")
    assert cli.main(["setup", "tensorflow"]) == 0
    assert fake.built == [("tensorflow", None)]  # whatever is there, else the CPU build
    assert capsys.readouterr().out.startswith("[gpu] nvidia-smi failed: nvidia-smi failed (exit 9): NVIDIA-SMI has "
                                              "failed because it couldn't communicate with the NVIDIA driver")


def test_a_run_on_an_h100_gives_the_rows_it_cannot_run_their_reason(tmp_path, monkeypatch, capsys):
    use_nvidia_smi(monkeypatch, fake_nvidia_smi(tmp_path, "H100"))
    FakeSetup(monkeypatch, tmp_path / "envs", {"pytorch": {
        "framework": "PyTorch", "version": "2.14.1", "gpus": [], "gpu_ok": False,
        "error": "PyTorch 2.14.1 (CUDA 13.0): CUDA driver version is insufficient"}})
    monkeypatch.setattr(stage, "check_equivalence", lambda jobs, run_dir, say=print, recheck=False: None)
    monkeypatch.setattr(cli, "in_runner_env", lambda: True)  # this process is the runner's; the scratch .envs/ has none
    status = cli.main(["-f", "mxnet,chainer,pytorch", "-t", "cnn", "-p", "smoke", "--data", "synthetic",
                       "--results", str(tmp_path / "r")])
    assert status == 1
    (run_dir,) = (tmp_path / "r").iterdir()
    rows = {r["framework"]: table.row(r) for r in table.load_records(run_dir)}
    assert {name: r["status"] for name, r in rows.items()} == {"MXNet": "unavailable", "Chainer": "unavailable",
                                                                 "PyTorch": "unavailable"}
    assert table.status_text(rows["MXNet"]).startswith("unavailable on this GPU: mxnet-cuda112.txt (CUDA 11.2): this "
                                                        "NVIDIA H100 80GB HBM3 is compute capability 9.0")
    assert table.status_text(rows["PyTorch"]) == ("unavailable on this GPU: PyTorch 2.14.1 (CUDA 13.0): CUDA driver "
                                                   "version is insufficient")
    markdown = (run_dir / "results.md").read_text()
    assert "| unavailable on this GPU: no GPU build: Chainer 7.8" in markdown
    assert "Hardware: -" in markdown  # nothing ran: no row claims the H100, none the CPU


def test_list_shows_the_gpu_and_what_each_environment_can_do_with_it(tmp_path, monkeypatch, capsys):
    use_nvidia_smi(monkeypatch, fake_nvidia_smi(tmp_path, "H100"))
    monkeypatch.setattr(debian, "system_library", lambda name: None)
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "GPU: NVIDIA H100 80GB HBM3 (compute capability 9.0, driver 580.65.06, 81559 MiB)" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and len(line.split()) > 2}
    assert "unavailable on this GPU: mxnet-cuda112.txt" in lines["mxnet"]
    assert "unavailable on this GPU: no GPU build" in lines["chainer"]
    for name in ("pytorch", "tensorflow", "jax"):  # CPU builds here: the GPU builds are what setup would make
        assert "for this GPU, setup builds envs/" in lines[name] or "GPU: " in lines[name], lines[name]


def test_list_on_a_machine_without_a_gpu_names_each_build(monkeypatch, capsys):
    use_nvidia_smi(monkeypatch, None)
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "GPU: none (no nvidia-smi on PATH)" in out
    if environments.is_ready(catalog.ENVIRONMENTS["pytorch"]) and not environments.installation(
            catalog.ENVIRONMENTS["pytorch"]).chosen_by_hand:
        assert "envs/pytorch.txt, GPU build (CUDA 13.0, runs on the CPU too)" in out
    if environments.is_ready(catalog.ENVIRONMENTS["tensorflow"]):
        assert "envs/tensorflow.txt, CPU build" in out


def built_for_the_gpu(env, requirements, answer):
    """Leave `env` in a scratch .envs/ as a build from `requirements` leaves it (stamp, kernel spec), with an
    interpreter that answers the probe with `answer`, as the framework would on a GPU this machine lacks."""
    env.python_path.parent.mkdir(parents=True)
    env.python_path.write_text("#!/bin/sh\necho '{}{}'\n".format(environments.PROBE_PREFIX, json.dumps(answer)))
    env.python_path.chmod(0o755)
    environments.write_stamp(env, {"build": "gpu", "requirements": requirements.name, "python": "3.11.7",
                                   "requirements_sha256": hashlib.sha256(environments.recipe(env, requirements)).hexdigest()})
    environments.write_kernel_spec(env)


def test_setup_keeps_the_probe_answer_in_the_stamp_and_list_reports_it(tmp_path, monkeypatch, capsys):
    """The real setup of a GPU build that is there: its probe runs the environment's interpreter, the answer lands
    in the stamp on disk, and `list` reads it from there."""
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(catalog, "JUPYTER_DIR", tmp_path / "jupyter")
    monkeypatch.setattr(debian, "system_library", lambda name: None)
    use_nvidia_smi(monkeypatch, fake_nvidia_smi(tmp_path, "H100"))
    env = catalog.ENVIRONMENTS["jax"]
    answer = {"framework": "JAX", "version": "0.10.2", "gpus": [], "gpu_ok": False, "error": "JAX 0.10.2: no cuda"}
    built_for_the_gpu(env, catalog.REQUIREMENTS_DIR / "jax-cuda13.txt", answer)
    assert cli.main(["setup", "jax"]) == 0
    out = capsys.readouterr().out
    assert "[setup] jax: ready (venv gpu envs/jax-cuda13.txt)" in out  # nothing built: the stamp is the one above
    assert "[setup] jax: GPU check FAILED: JAX 0.10.2: no cuda" in out
    assert json.loads((env.path / environments.STAMP).read_text())["probe"] == answer
    assert cli.main(["list"]) == 0
    environments_part = capsys.readouterr().out.split("\nEnvironments")[1]
    (line,) = [line for line in environments_part.splitlines() if line.startswith("  jax ")]
    assert "ready    envs/jax-cuda13.txt, GPU build (CUDA 13.0); GPU: no: JAX 0.10.2: no cuda;" in line


def test_system_libraries_are_found_on_ld_library_path_too(tmp_path, monkeypatch):
    (tmp_path / "libcudnn.so.8").write_text("")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    assert debian.system_library("libcudnn.so.8") == str(tmp_path / "libcudnn.so.8")
    assert debian.system_library("libno-such-library.so.1") is None
