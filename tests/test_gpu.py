"""The GPU as common/ sees it: nvidia-smi's answers and failures, device names in every framework's spelling,
the choice between GPU and CPU, and the peak table with its estimate for GPUs it lacks."""

import pytest
from fake_gpus import MACHINES, failing_nvidia_smi, fake_nvidia_smi, use_nvidia_smi

from common import environment, flops, gpu


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_nvidia_smi_is_read_on_every_machine(machine, tmp_path, monkeypatch):
    use_nvidia_smi(monkeypatch, fake_nvidia_smi(tmp_path, machine))
    found = gpu.query_nvidia_smi()
    name, driver, capability, memory, clock = MACHINES[machine]
    assert found["error"] is None
    assert found["gpus"] == [{"index": 0, "name": name, "driver": driver, "memory_mib": memory,
                              "max_sm_clock_mhz": clock, "compute_capability": capability}]
    assert gpu.describe(found["gpus"][0]) == "{} (compute capability {}, driver {}, {} MiB)".format(
        name, capability, driver, memory)


def test_an_old_driver_without_the_compute_cap_field_still_gives_the_capability(tmp_path, monkeypatch):
    script = fake_nvidia_smi(tmp_path, "T4")  # driver 470 refuses the field; the name tells the capability
    use_nvidia_smi(monkeypatch, script)
    assert "compute_cap" in script.read_text()
    assert gpu.query_nvidia_smi()["gpus"][0]["compute_capability"] == "7.5"


def test_a_failing_nvidia_smi_is_an_error_not_a_gpu(tmp_path, monkeypatch):
    use_nvidia_smi(monkeypatch, failing_nvidia_smi(tmp_path))
    found = gpu.query_nvidia_smi()
    assert found["gpus"] == []
    assert found["error"].startswith("nvidia-smi failed (exit 9): NVIDIA-SMI has failed because it couldn't communicate")


def test_no_nvidia_smi_means_no_gpu_and_no_error(monkeypatch):
    use_nvidia_smi(monkeypatch, None)
    assert gpu.query_nvidia_smi() == {"gpus": [], "error": None, "nvidia_smi": None}


def test_a_missing_nvidia_smi_named_explicitly_is_an_error(tmp_path, monkeypatch):
    use_nvidia_smi(monkeypatch, tmp_path / "absent" / "nvidia-smi")
    assert "failed" in gpu.query_nvidia_smi()["error"]


@pytest.mark.parametrize("name, kind", [
    ("cuda", "gpu"), ("cuda:0", "gpu"), ("CudaDevice(id=0)", "gpu"),  # PyTorch, JAX
    ("/GPU:0", "gpu"), ("/job:localhost/replica:0/task:0/device:GPU:0", "gpu"),  # TensorFlow
    ("gpu(0)", "gpu"), ("@cupy:0", "gpu"), ("gpu:0", "gpu"),  # MXNet, Chainer, Keras and CNTK records
    ("cpu", "cpu"), ("/CPU:0", "cpu"), ("cpu(0)", "cpu"), ("@numpy", "cpu"), ("TFRT_CPU_0", "cpu"), ("cpu:0", "cpu"),
    (None, "cpu"),
])
def test_device_names_of_every_framework(name, kind):
    assert gpu.device_kind(name) == kind


def test_gpu_used_names_the_gpu_of_a_gpu_run_only():
    assert environment.gpu_used({"device": "/GPU:0", "gpus": ["NVIDIA A100-SXM4-40GB"]}) == "NVIDIA A100-SXM4-40GB"
    assert environment.gpu_used({"device": "@cupy:0", "gpus": ["Tesla T4"]}) == "Tesla T4"
    assert environment.gpu_used({"device": "gpu(0)", "gpus": [], "gpu_details": [{"name": "NVIDIA L4"}]}) == "NVIDIA L4"
    assert environment.gpu_used({"device": "cpu", "gpus": ["NVIDIA H100 80GB HBM3"]}) is None
    label = environment.hardware_label({"device": "/GPU:0", "gpus": ["NVIDIA L4"], "gpu_count": 1, "cpu": "EPYC"})
    assert label == "NVIDIA L4 x1"


@pytest.mark.parametrize("name, row", [
    ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA A10", "A10"), ("NVIDIA A10G", None), ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA GH200 480GB", None), ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"), ("NVIDIA B200", "B200"),
    ("Tesla V100-PCIE-16GB", "V100-PCIE"), ("Tesla T4", "T4"), ("Tesla K80", "K80"),
])
def test_peak_table_matches_whole_names(name, row):
    found = flops.gpu_peak_tflops(name)
    assert (found and found["gpu"]) == row


@pytest.mark.parametrize("name, capability, multiprocessors, clock", [
    ("H100", "9.0", 132, 1980), ("A100", "8.0", 108, 1410), ("T4", "7.5", 40, 1590), ("L4", "8.9", 58, 2040),
    ("V100", "7.0", 80, 1530), ("K80", "3.7", 13, 875), ("L40S", "8.9", 142, 2520),
])
def test_the_estimate_reproduces_the_vendors_fp32_peaks(name, capability, multiprocessors, clock):
    listed = flops.gpu_peak_tflops("NVIDIA " + name)["fp32"]
    assert flops.gpu_peak_estimate(capability, multiprocessors, clock) == pytest.approx(listed, rel=0.02)


def test_the_estimate_needs_every_figure():
    assert flops.gpu_peak_estimate("8.6", 80, None) is None
    assert flops.gpu_peak_estimate(None, 80, 1710) is None
    assert flops.gpu_peak_estimate("8.6", 80, 1710) == pytest.approx(35.0, rel=0.01)  # an A10G


class _Seen:
    """A framework's view: the GPUs it sees, and its reason when it sees none (counting how often it was asked)."""

    def __init__(self, gpus, reason="FakeNet 1.0: found no NVIDIA driver"):
        self.gpus, self.reason, self.asked = gpus, reason, 0

    def why(self):
        self.asked += 1
        return self.reason


def test_choose_device_on_a_machine_without_a_gpu(monkeypatch):
    use_nvidia_smi(monkeypatch, None)
    seen = _Seen([])
    assert environment.choose_device("auto", "FakeNet", seen.gpus, seen.why) == ("cpu", None)
    assert environment.choose_device("cpu", "FakeNet", seen.gpus, seen.why) == ("cpu", None)
    with pytest.raises(environment.DeviceError) as raised:
        environment.choose_device("cuda", "FakeNet", seen.gpus, seen.why)
    assert str(raised.value) == ("device='cuda': FakeNet 1.0: found no NVIDIA driver; no NVIDIA GPU on this machine "
                                 "(nvidia-smi)")


def test_choose_device_when_the_framework_sees_the_gpu(monkeypatch, tmp_path):
    use_nvidia_smi(monkeypatch, fake_nvidia_smi(tmp_path, "H100"))
    seen = _Seen(["NVIDIA H100 80GB HBM3"])
    assert environment.choose_device("auto", "FakeNet", seen.gpus, seen.why) == ("gpu", None)
    assert environment.choose_device("cuda", "FakeNet", seen.gpus, seen.why) == ("gpu", None)
    assert environment.choose_device("cpu", "FakeNet", seen.gpus, seen.why) == ("cpu", None)
    assert seen.asked == 0


def test_a_gpu_the_framework_cannot_use_is_named_never_hidden(monkeypatch, tmp_path, capsys):
    use_nvidia_smi(monkeypatch, fake_nvidia_smi(tmp_path, "H100"))
    seen = _Seen([], "FakeNet 1.0 (CUDA 11.2): no kernel image is available for execution on the device")
    kind, note = environment.choose_device("auto", "FakeNet", seen.gpus, seen.why)
    assert kind == "cpu"
    assert note == ("FakeNet could not use this machine's NVIDIA H100 80GB HBM3: FakeNet 1.0 (CUDA 11.2): no kernel "
                    "image is available for execution on the device")
    assert "NOTICE: " + note + "; running on the CPU" in capsys.readouterr().out
    with pytest.raises(environment.DeviceError, match=r"^device='cuda': FakeNet 1\.0 \(CUDA 11\.2\): no kernel image"
                                                      r".*; this machine's NVIDIA H100 80GB HBM3$"):
        environment.choose_device("cuda", "FakeNet", seen.gpus, seen.why)


def test_a_bad_device_is_one_line():
    with pytest.raises(environment.DeviceError, match=r"^device='gpu': use one of 'auto', 'cpu', 'cuda'$"):
        environment.prepare(0, "gpu")


def test_tf32_from_compute_capability_8():
    assert [environment.tf32_allowed(c) for c in ("7.5", "8.0", "8.9", "9.0", None, "?")] == [
        False, True, True, True, False, False]


def test_facts_record_precision_the_unused_gpu_and_the_build(monkeypatch):
    monkeypatch.setenv(environment.BUILD_VARIABLE, "adopted /usr/bin/python3")
    facts = environment.facts("FakeNet", "1.0", "cpu", computed_precision="fp32", gpu_unused="FakeNet could not use X")
    assert (facts["computed_precision"], facts["gpu_unused"], facts["build"], facts["gpu_details"]) == (
        "fp32", "FakeNet could not use X", "adopted /usr/bin/python3", [])


def test_the_cuda_driver_agrees_with_nvidia_smi():
    """Where there is no GPU, no devices; on a GPU machine, the same GPUs, with the figures the estimate needs."""
    listed = gpu.query_nvidia_smi()["gpus"]
    devices = gpu.cuda_devices()
    assert [d["name"] for d in devices] == [g["name"] for g in listed]
    for device, smi in zip(devices, listed):
        assert device["compute_capability"] == smi["compute_capability"]
        assert device["multiprocessors"] > 0 and device["max_clock_mhz"] > 0
