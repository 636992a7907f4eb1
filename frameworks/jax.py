"""JAX: the device, the precision policy and the record's facts, for every JAX notebook (and Keras on JAX)."""

import jax

from common import environment, gpu, results
from frameworks.probe import check_gpu

NAME = "JAX"
chosen = {"note": None, "precision": "fp32"}  # what choose_device and set_precision decided, for the record


def _gpu_devices():
    try:
        return jax.devices("gpu")
    except RuntimeError:  # no GPU platform: why_no_gpu tells why
        return []


def gpu_names():
    """The GPUs JAX sees."""
    return [d.device_kind for d in _gpu_devices()]


def why_no_gpu():
    """JAX's own first line on why it has no GPU platform (a CPU-only jaxlib, a CUDA plugin that failed to start)."""
    try:
        jax.devices("gpu")
    except RuntimeError as error:
        return "JAX {}: {}".format(jax.__version__, results.first_line(str(error)))
    return "JAX {} sees no GPU".format(jax.__version__)


def choose_device(device):
    """The jax.Device arrays go to for the notebook's `device` parameter; "cuda" without a usable GPU raises DeviceError."""
    if device == "cpu":  # before JAX starts its backends: no attempt at a GPU platform, no warning about one
        jax.config.update("jax_platforms", "cpu")
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    return jax.devices("gpu" if kind == "gpu" else "cpu")[0]


def set_precision(dev):
    """The float32 policy: TF32 for matrix products and convolutions on a GPU that has it; returns "tf32" or "fp32"."""
    allowed = False
    if dev.platform == "gpu":
        capability = next((d["compute_capability"] for d in gpu.cuda_devices()), None)
        allowed = environment.tf32_allowed(capability)
        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if allowed else "float32")
    chosen["precision"] = "tf32" if allowed else "fp32"
    return chosen["precision"]


def cuda_version():
    """The CUDA version JAX's GPU platform reports, e.g. 'cuda 12080', or None."""
    try:
        from jax.extend import backend

        return results.first_line(backend.get_backend("gpu").platform_version)
    except (ImportError, RuntimeError, AttributeError):
        return None


def gpu_facts(on_gpu):
    """(GPU names, CUDA version, cuDNN version) as JAX reports them (it names no cuDNN); empty on a CPU run."""
    return (gpu_names(), cuda_version(), None) if on_gpu else ([], None, None)


def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts as JAX reports them (Flax and Optax too)."""
    import flax
    import optax

    record = results.new_record(NAME, task, profile, params=params)
    record["device"] = str(dev)
    gpus, cuda, cudnn = gpu_facts(dev.platform == "gpu")
    record["environment"] = environment.facts(
        NAME, jax.__version__, str(dev), gpus=gpus, cuda=cuda, cudnn=cudnn, threads=environment.usable_cores(),
        precision=chosen["precision"], gpu_unused=chosen["note"],
        extra={"flax": flax.__version__, "optax": optax.__version__})
    return record


def probe():
    """For the runner after a build: JAX's version, its GPUs, and a matrix product on the first one."""
    def matrix_product():
        x = jax.device_put(jax.numpy.ones((64, 64)), _gpu_devices()[0])
        return (x @ x).sum()

    return check_gpu(NAME, jax.__version__, gpu_names(), why_no_gpu, matrix_product, cuda=cuda_version())
