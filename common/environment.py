"""Facts about the machine and software a result was measured on, and the choice of device.

The framework-specific facts (its version, the GPU it sees, CUDA and cuDNN versions) are passed in
by each framework's module (frameworks/<name>.py), which asks the framework itself; this module adds
what Python can see on its own, and decides between GPU and CPU the same way for every framework.
"""

import os
import platform

import numpy as np

from common import flops, gpu

DEVICES = ("auto", "cpu", "cuda")
# The float32 precision policy on GPUs: TF32 tensor cores allowed for matrix products and convolutions
# where the GPU has them (compute capability 8.0 and newer), as TensorFlow and JAX do by default; every
# framework's module sets it explicitly and records which it got.
TF32_FROM_COMPUTE_CAPABILITY = 8.0
BUILD_VARIABLE = "ROSETTA_BUILD"  # set by the runner in each kernel spec: how the environment was made
LOCK_VARIABLE = "ROSETTA_LOCK"  # set by the runner in each kernel spec: the lock it was built from, with its digest

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                    "TF_NUM_INTEROP_THREADS")
# Variables that choose which kernels a library runs (recorded, never changed): OpenBLAS's core type (NumPy, Chainer,
# Caffe), MKL's instruction sets, oneDNN's ISA and float32 math mode (PyTorch, TensorFlow, MXNet), TensorFlow's oneDNN
# switch, XLA's flags, PyTorch's ATen CPU capability, NumPy's disabled CPU features
KERNEL_VARIABLES = ("OPENBLAS_CORETYPE", "MKL_ENABLE_INSTRUCTIONS", "MKL_DEBUG_CPU_TYPE", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA",
                    "DNNL_MAX_CPU_ISA", "ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_DEFAULT_FPMATH_MODE", "TF_ENABLE_ONEDNN_OPTS",
                    "XLA_FLAGS", "ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES")


def kernel_variables():
    """{name: value} of the KERNEL_VARIABLES set in this process's environment."""
    return {name: os.environ[name] for name in KERNEL_VARIABLES if name in os.environ}


def cpu_model():
    """Return the CPU's model name (from /proc/cpuinfo on Linux, else platform.processor())."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def prepare(threads=0, device="auto"):
    """Set up this process before a framework is imported: CPU threads and, for device="cpu", no visible GPU.

    threads > 0 pins the process to that many cores and sets the thread-pool variables that PyTorch,
    TensorFlow, XLA and the BLAS libraries read at start-up, so every framework computes with the same
    number of threads. Returns the number of usable cores afterwards.
    """
    if threads:
        for name in THREAD_VARIABLES:
            os.environ[name] = str(threads)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])
    check_device(device)
    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    return usable_cores()


class DeviceError(RuntimeError):
    """A device that was asked for and cannot be used; the message says why in one line."""


def check_device(device):
    """Raise DeviceError unless `device` is one of DEVICES."""
    if device not in DEVICES:
        raise DeviceError("device={!r}: use one of {}".format(device, ", ".join(repr(d) for d in DEVICES)))


def check_machines(machines, machine_rank, coordinator):
    """Raise ValueError, in one line, unless `machine_rank` is 0 to machines - 1 and several machines name their
    coordinator (machine 0's "host:port")."""
    if machines > 1 and not coordinator:
        raise ValueError("machines={}: coordinator must name machine 0 as host:port".format(machines))
    if not 0 <= machine_rank < machines:
        raise ValueError("machine_rank={}: must be 0 to {} (machines={})".format(machine_rank, machines - 1, machines))


def choose_device(device, framework, framework_gpus, why_no_gpu):
    """Decide where a notebook computes: ("gpu" or "cpu", note). The same rule for every framework.

    device="cpu": the CPU. A GPU the framework sees: the GPU. Otherwise the reason is the framework's own
    (`why_no_gpu()`, asked only then): device="cuda" raises DeviceError with it; device="auto" runs on the
    CPU, and where nvidia-smi shows a GPU that the framework cannot use, `note` says so for the record
    (a CPU run on a GPU machine is never reported as a GPU run, nor silently as a plain CPU run).
    """
    check_device(device)
    if device == "cpu":
        return "cpu", None
    if framework_gpus:
        return "gpu", None
    machine = gpu.query_nvidia_smi()["gpus"]
    reason = why_no_gpu() or "{} sees no GPU".format(framework)
    if device == "cuda":
        where = "this machine's {}".format(machine[0]["name"]) if machine else "no NVIDIA GPU on this machine (nvidia-smi)"
        raise DeviceError("device='cuda': {}; {}".format(reason, where))
    if machine:
        note = "{} could not use this machine's {}: {}".format(framework, machine[0]["name"], reason)
        print("NOTICE: " + note + "; running on the CPU")
        return "cpu", note
    return "cpu", None


def tf32_allowed(compute_capability):
    """True where the precision policy allows TF32: a GPU of compute capability 8.0 or newer."""
    try:
        return float(compute_capability) >= TF32_FROM_COMPUTE_CAPABILITY
    except (TypeError, ValueError):
        return False


def gpu_details():
    """The CUDA driver's figures for the GPUs this process sees (common.gpu.cuda_devices), with nvidia-smi's driver."""
    devices = gpu.cuda_devices()
    driver = next((g["driver"] for g in gpu.query_nvidia_smi()["gpus"] if g.get("driver")), None) if devices else None
    return [dict(d, driver=driver) for d in devices]


def usable_cores():
    """The number of CPU cores this process may run on (its affinity where the OS tells, else the CPU count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def facts(framework, framework_version, device, gpus=(), cuda=None, cudnn=None, threads=None, extra=None,
          computed_precision="fp32", gpu_unused=None):
    """Return a dict of environment facts for a result record; GPU, CUDA and cuDNN as the framework reports them.

    computed_precision: what the run computed in ("fp32", "tf32" where TF32 was allowed on the GPU, "bf16" or "fp16"),
    where the record's own `precision` is what was asked for; gpu_unused: why a GPU that is there was
    not used (choose_device's note). On a GPU run, gpu_details adds the driver's figures (compute capability,
    multiprocessors, clock) for the peak estimate of a GPU the peak table lacks.
    """
    gpus = list(gpus)
    on_gpu = gpu.device_kind(device) == "gpu"
    record = {
        "os": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "framework": framework,
        "framework_version": str(framework_version),
        "device": device,
        "gpus": gpus,
        "gpu_count": len(gpus),
        "cuda": None if cuda is None else str(cuda),
        "cudnn": None if cudnn is None else str(cudnn),
        "threads": threads,
        "cpu_mhz": flops.cpu_mhz(),  # with cpu_simd, for the CPU's peak estimate (common/flops.py)
        "cpu_simd": flops.cpu_simd(),
        "cpu_family": flops.cpu_family(),
        "kernel_variables": kernel_variables(),
        "thread_variables": {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ},
        "computed_precision": computed_precision,
        "gpu_unused": gpu_unused,
        "gpu_details": gpu_details() if on_gpu else [],
        "build": os.environ.get(BUILD_VARIABLE),  # e.g. "venv gpu envs/pytorch.txt", "adopted /usr/bin/python3"
        "lock": os.environ.get(LOCK_VARIABLE),  # e.g. "envs/pytorch.lock@1a2b3c4d5e6f"; None: not built from a lock
    }
    if extra:
        record.update(extra)
    return record


def gpu_used(environment):
    """The name of the GPU an environment-facts dict says the run computed on, or None for a CPU run."""
    if gpu.device_kind(environment.get("device")) != "gpu":
        return None
    details = environment.get("gpu_details") or [{}]
    return (environment.get("gpus") or [None])[0] or details[0].get("name") or "GPU"


def hardware_label(environment):
    """One short line naming the hardware of an environment-facts dict: the GPU when one was used, else the CPU."""
    if gpu_used(environment):
        return "{} x{}".format(environment["gpus"][0], environment.get("gpu_count", 1))
    return "{} ({} cores)".format(environment.get("cpu", "CPU"), environment.get("cpu_count", "?"))
