"""NVIDIA GPUs as the machine itself reports them, apart from any framework.

Two sources, both framework-free and without numpy, so the runner can ask before it builds anything
and a notebook can say when its framework cannot use a GPU that is there:
- `query_nvidia_smi()`: nvidia-smi's list (name, driver, memory, compute capability, clock), the
  runner's view of the machine; `ROSETTA_NVIDIA_SMI` names another nvidia-smi (the tests use fakes).
- `cuda_devices()`: the CUDA driver's own figures for the GPUs this process may see (multiprocessor
  count, clock, compute capability), through libcuda; what the GPU peak estimate needs.

`device_kind()` tells a GPU device name from a CPU one, in every framework's spelling.
"""

import ctypes
import os
import re
import shutil
import subprocess

NVIDIA_SMI_VARIABLE = "ROSETTA_NVIDIA_SMI"
QUERY_FIELDS = ("index", "name", "driver_version", "memory.total", "clocks.max.sm", "compute_cap")
# Compute capability by product name, for an nvidia-smi too old to report it (the compute_cap field came
# with the 510 drivers). Matched as whole words, first match first: the more specific names come first.
COMPUTE_CAPABILITY_BY_NAME = (
    ("K80", "3.7"), ("M60", "5.2"), ("P100", "6.0"), ("P40", "6.1"), ("P4", "6.1"), ("V100", "7.0"),
    ("T4", "7.5"), ("A100", "8.0"), ("A30", "8.0"), ("A10G", "8.6"), ("A10", "8.6"), ("A40", "8.6"),
    ("L40S", "8.9"), ("L40", "8.9"), ("L4", "8.9"), ("H100", "9.0"), ("H200", "9.0"), ("GH200", "9.0"),
    ("B200", "10.0"),
)
# Device names that mean a GPU, in every framework's spelling: cuda, cuda:0 and CudaDevice(id=0) (PyTorch,
# JAX), /GPU:0 and .../device:GPU:0 (TensorFlow), gpu(0) (MXNet), @cupy:0 (Chainer), gpu:0 (Keras, CNTK).
_GPU_DEVICE = re.compile(r"(?<![a-z])(cuda|gpu|cupy|rocm)")
# CUDA driver API attributes (cuda.h, CUdevice_attribute)
_CLOCK_RATE_KHZ, _MULTIPROCESSORS, _MAJOR, _MINOR = 13, 16, 75, 76


def device_kind(device):
    """'gpu' if a framework's device name (e.g. 'cuda:0', '/GPU:0', 'gpu(0)', '@cupy:0') is a GPU, else 'cpu'."""
    return "gpu" if _GPU_DEVICE.search(str(device or "").lower()) else "cpu"


def name_matches(key, name):
    """True if `key` (e.g. 'A10') stands in a GPU name as a whole word: 'NVIDIA A10', not 'NVIDIA A100'."""
    return re.search(r"(?<![A-Za-z0-9])" + re.escape(key) + r"(?![A-Za-z0-9])", str(name), re.I) is not None


def compute_capability_of(name):
    """The compute capability ('8.0') of a GPU known by name, or None."""
    for key, capability in COMPUTE_CAPABILITY_BY_NAME:
        if name_matches(key, name):
            return capability
    return None


def nvidia_smi_path():
    """The nvidia-smi to ask: $ROSETTA_NVIDIA_SMI, else the one on PATH; None if there is none."""
    return os.environ.get(NVIDIA_SMI_VARIABLE) or shutil.which("nvidia-smi")


def _run(command, timeout):
    out = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         timeout=timeout)
    return out.returncode, out.stdout


def _value(text):
    text = text.strip()
    return None if not text or text.startswith("[") else text  # [N/A], [Not Supported]


def _number(text):
    try:
        return int(float(text)) if text is not None else None
    except ValueError:
        return None


def query_nvidia_smi(timeout=30):
    """Ask nvidia-smi for this machine's GPUs: {"gpus": [...], "error": None or why it failed, "nvidia_smi": path}.

    Each GPU is a dict: index, name, driver, memory_mib, max_sm_clock_mhz, compute_capability (from
    nvidia-smi, or from the name where an old nvidia-smi lacks the field). No nvidia-smi: no GPUs, no error.
    """
    path = nvidia_smi_path()
    found = {"gpus": [], "error": None, "nvidia_smi": path}
    if not path:
        return found
    fields = list(QUERY_FIELDS)
    try:
        status, text = _run([path, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"], timeout)
        if status != 0 and "compute_cap" in text:  # drivers before 510 do not know the field
            fields.remove("compute_cap")
            status, text = _run([path, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"], timeout)
    except (OSError, subprocess.SubprocessError) as error:
        found["error"] = "{} failed: {}".format(path, error)
        return found
    lines = [line for line in text.splitlines() if line.strip()]
    if status != 0:
        found["error"] = "nvidia-smi failed (exit {}): {}".format(status, lines[0].strip() if lines else "no output")
        return found
    for line in lines:
        values = dict(zip(fields, [_value(part) for part in line.split(",")]))
        if values.get("name") is None:
            found["error"] = "nvidia-smi printed a line it should not: {}".format(line.strip())
            return found
        found["gpus"].append({
            "index": _number(values.get("index")),
            "name": values["name"],
            "driver": values.get("driver_version"),
            "memory_mib": _number(values.get("memory.total")),
            "max_sm_clock_mhz": _number(values.get("clocks.max.sm")),
            "compute_capability": values.get("compute_cap") or compute_capability_of(values["name"]),
        })
    return found


def describe(gpu):
    """One line naming a GPU of query_nvidia_smi(): 'NVIDIA H100 80GB HBM3 (compute capability 9.0, driver 580.65.06)'."""
    return "{} (compute capability {}, driver {}{})".format(
        gpu["name"], gpu.get("compute_capability") or "unknown", gpu.get("driver") or "unknown",
        ", {} MiB".format(gpu["memory_mib"]) if gpu.get("memory_mib") else "")


def cuda_devices():
    """The GPUs the CUDA driver shows this process: name, compute_capability, multiprocessors, max_clock_mhz.

    Asked through libcuda (the driver library every CUDA framework loads), so it is the same for every
    framework; [] where there is no driver or no visible GPU (CUDA_VISIBLE_DEVICES="" hides them all).
    """
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return []
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return []
    devices = []
    for ordinal in range(count.value):
        handle = ctypes.c_int(0)
        if cuda.cuDeviceGet(ctypes.byref(handle), ordinal) != 0:
            continue
        name = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGetName(name, 256, handle) != 0:
            name.value = b""
        values = {}
        for key, attribute in (("clock", _CLOCK_RATE_KHZ), ("sms", _MULTIPROCESSORS), ("major", _MAJOR),
                               ("minor", _MINOR)):
            value = ctypes.c_int(0)
            values[key] = value.value if cuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, handle) == 0 else None
        devices.append({
            "name": name.value.decode("utf-8", "replace") or None,
            "compute_capability": None if values["major"] is None else "{}.{}".format(values["major"], values["minor"]),
            "multiprocessors": values["sms"],
            "max_clock_mhz": None if values["clock"] is None else values["clock"] / 1000.0,
        })
    return devices
