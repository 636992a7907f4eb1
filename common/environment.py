"""Facts about the machine and software a result was measured on.

The framework-specific facts (its version, the GPU it sees, CUDA and cuDNN versions) are passed in
by the notebook, which asks the framework itself; this module adds what Python can see on its own.
"""

import os
import platform

import numpy as np

from common import flops

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                    "TF_NUM_INTEROP_THREADS")


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
    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    return usable_cores()


def usable_cores():
    """The number of CPU cores this process may run on (its affinity where the OS tells, else the CPU count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def facts(framework, framework_version, device, gpus=(), cuda=None, cudnn=None, threads=None, extra=None):
    """Return a dict of environment facts for a result record; GPU, CUDA and cuDNN as the framework reports them."""
    gpus = list(gpus)
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
        "thread_variables": {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ},
    }
    if extra:
        record.update(extra)
    return record


def gpu_used(environment):
    """The name of the GPU an environment-facts dict says the run computed on, or None for a CPU run."""
    if str(environment.get("device", "")).startswith(("cuda", "gpu")) and environment.get("gpus"):
        return environment["gpus"][0]
    return None


def hardware_label(environment):
    """One short line naming the hardware of an environment-facts dict: the GPU when one was used, else the CPU."""
    if gpu_used(environment):
        return "{} x{}".format(environment["gpus"][0], environment.get("gpu_count", 1))
    return "{} ({} cores)".format(environment.get("cpu", "CPU"), environment.get("cpu_count", "?"))
