"""JAX: the device, the precision policy and the record's facts, for every JAX notebook (and Keras on JAX);
the dtype Flax layers compute in and the fp16 loss scaling of the JAX notebooks; ResNet-50's bottleneck block."""

import os

import jax

from common import environment, gpu, memory, results, variants
from frameworks.probe import check_gpu

NAME = "JAX"
# what choose_device and set_variant decided, for the record: the precision and compile mode asked for, and the
# precision computed in
chosen = {"note": None, "precision": "auto", "computed_precision": "fp32", "compile_mode": "default"}


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


# XLA's CPU flags the JAX notebooks (and Keras on JAX) run with where XLA_FLAGS is not set (set, even empty, it is
# taken as given: `XLA_FLAGS= python3 run_all.py ...` runs XLA's own defaults), each with the first jaxlib known to
# accept it (XLA stops the process at a flag or value it does not know, so an older jaxlib runs without it). From
# jaxlib 0.9.1 on, XLA's CPU backend sends every convolution to YNNPACK, which made the CNN 1.6 times and ResNet-50
# inference 1.5 times as slow on this project's CPU; leaving convolutions out of YNNPACK's fusions brings back 0.9.0's
# speed (docs/results.md#jaxs-cpu-slowdown-where-it-is-and-what-brings-the-speed-back). jaxlib 0.8.1 refuses the
# value; 0.9.0.1 is the oldest seen to take it.
CPU_XLA_FLAGS = (("--xla_cpu_experimental_ynn_fusion_type=-individual_convolution", (0, 9, 0, 1)),)


def jaxlib_version():
    """The installed jaxlib's release as a tuple of numbers ((0, 10, 2)); () where it cannot be read."""
    from importlib import metadata

    try:
        text = metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return ()
    return tuple(int(part) for part in text.split("+")[0].split(".") if part.isdigit())


def set_cpu_flags():
    """Set XLA_FLAGS to the CPU_XLA_FLAGS this jaxlib accepts, where XLA_FLAGS is not set; XLA reads it once, when its
    first backend starts, so this runs before that. Returns the flags set."""
    from jax._src import xla_bridge

    if "XLA_FLAGS" in os.environ or getattr(xla_bridge, "backends_are_initialized", lambda: False)():
        return []  # the user's flags, as given; or too late for this process: XLA has read its flags
    version = jaxlib_version()
    added = [flag for flag, first in CPU_XLA_FLAGS if version >= first]
    if added:
        os.environ["XLA_FLAGS"] = " ".join(added)
    return added


def choose_device(device):
    """The jax.Device arrays go to for the notebook's `device` parameter; "cuda" without a usable GPU raises DeviceError.
    XLA's CPU flags (CPU_XLA_FLAGS) are set first, while XLA has yet to read them."""
    set_cpu_flags()
    if device == "cpu":  # before JAX starts its backends: no attempt at a GPU platform, no warning about one
        jax.config.update("jax_platforms", "cpu")
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    dev = jax.devices("gpu" if kind == "gpu" else "cpu")[0]
    if kind == "gpu":  # XLA's allocator keeps a peak since the process started; JAX cannot reset it
        memory.set_device_counter(lambda: (dev.memory_stats() or {}).get("peak_bytes_in_use"),
                                  "jax Device.memory_stats()['peak_bytes_in_use']")
    return dev


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py): the float32 policy, TF32 for matrix products and convolutions where
    the GPU has it and precision allows; returns the precision computed in ("fp32", "tf32", "bf16" or "fp16").

    bf16 and fp16 are the notebooks' own: Flax layers computing in `compute_dtype()` on float32 weights, logits and
    loss in float32, and for fp16 training `loss_scaling` and `scaled_value_and_grad`."""
    tf32 = dev.platform == "gpu" and environment.tf32_allowed(
        next((d["compute_capability"] for d in gpu.cuda_devices()), None))
    float32 = variants.float32_mode(NAME, precision, tf32, "this GPU" if dev.platform == "gpu" else "the CPU")
    if dev.platform == "gpu":
        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if float32 == "tf32" else "float32")
    variants.refuse_compiling(NAME, compile_mode)
    return variants.note_choice(chosen, precision, float32, compile_mode)



def compute_dtype():
    """The dtype the notebooks' Flax layers compute in (their `dtype`): jnp.bfloat16 or jnp.float16 for bf16 and fp16,
    None otherwise (Flax then computes in its weights' float32). Weights stay float32 (Flax's param_dtype)."""
    return {"bf16": jax.numpy.bfloat16, "fp16": jax.numpy.float16}.get(chosen["computed_precision"])


def loss_scaling(tx):
    """(optimiser, loss scale) for training: for fp16, Optax's apply_if_finite around `tx`, so that a step whose
    gradients overflowed is skipped (however many in a row, as PyTorch's GradScaler does), and Flax's DynamicScale
    (scale 2**16, halved on overflow, doubled after 2000 finite steps); otherwise (tx, None)."""
    if chosen["computed_precision"] != "fp16":
        return tx, None
    import optax
    from flax.training.dynamic_scale import DynamicScale

    return optax.apply_if_finite(tx, max_consecutive_errors=2 ** 31 - 1), DynamicScale()


def scaled_value_and_grad(loss_fn, model, scale, axis_name=None):
    """(loss, float32 gradients of the model's nnx.Param, updated scale): loss_fn(model) differentiated with the loss
    multiplied by Flax's DynamicScale and the gradients divided back, inside nnx.jit. DynamicScale differentiates a
    function of arrays, so the model goes in split (parameters, the rest) and its other state (dropout's random
    counters) comes back into `model` afterwards. With `axis_name` (inside shard_map) the gradients are averaged over
    that mesh axis before the overflow check, so that every device keeps the same scale."""
    from flax import nnx

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss_of(params, rest):
        copy = nnx.merge(graphdef, params, rest, copy=True)
        return loss_fn(copy), nnx.state(copy, nnx.Not(nnx.Param))

    scale, _, (loss, rest), grads = scale.value_and_grad(loss_of, has_aux=True, axis_name=axis_name)(params, rest)
    nnx.update(model, rest)
    return loss, grads, scale


def resnet50_bottleneck():
    """ResNet-50 v1.5's bottleneck block as a Flax NNX module class, Bottleneck(channels_in, width, stride, dtype, rngs),
    for the JAX inference and train notebooks, which assemble their ResNet-50 from it: 1x1 -> 3x3 (carries the stride)
    -> 1x1 convolutions without biases, each with batch norm (epsilon 1e-5), plus the shortcut, a projection (1x1
    convolution and batch norm) where the stride or the width changes. Returned by a function, so that only those
    notebooks import Flax (Keras on JAX imports this module too)."""
    from flax import nnx

    class Bottleneck(nnx.Module):
        """1x1 -> 3x3 (carries the stride) -> 1x1 convolutions with batch norm, plus the shortcut."""

        def __init__(self, channels_in, width, stride, dtype, rngs):
            channels_out = 4 * width
            self.conv1 = nnx.Conv(channels_in, width, (1, 1), use_bias=False, dtype=dtype, rngs=rngs)
            self.bn1 = nnx.BatchNorm(width, epsilon=1e-5, dtype=dtype, rngs=rngs)
            self.conv2 = nnx.Conv(width, width, (3, 3), strides=stride, padding=((1, 1), (1, 1)), use_bias=False,
                                  dtype=dtype, rngs=rngs)
            self.bn2 = nnx.BatchNorm(width, epsilon=1e-5, dtype=dtype, rngs=rngs)
            self.conv3 = nnx.Conv(width, channels_out, (1, 1), use_bias=False, dtype=dtype, rngs=rngs)
            self.bn3 = nnx.BatchNorm(channels_out, epsilon=1e-5, dtype=dtype, rngs=rngs)
            needs_projection = stride != 1 or channels_in != channels_out
            self.shortcut = nnx.Sequential(
                nnx.Conv(channels_in, channels_out, (1, 1), strides=stride, use_bias=False, dtype=dtype, rngs=rngs),
                nnx.BatchNorm(channels_out, epsilon=1e-5, dtype=dtype, rngs=rngs),
            ) if needs_projection else None

        def __call__(self, x):
            y = nnx.relu(self.bn1(self.conv1(x)))
            y = nnx.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return nnx.relu(y + (x if self.shortcut is None else self.shortcut(x)))

    return Bottleneck


def cuda_version():
    """The CUDA version JAX's GPU platform reports, e.g. 'cuda 12080', or None."""
    try:
        from jax.extend import backend

        return results.first_line(backend.get_backend("gpu").platform_version)
    except (ImportError, RuntimeError, AttributeError):
        return None


def speed_settings(task, dev):
    """The record's ledger (common/results.py SETTINGS) for a JAX notebook of `task` on `dev` (Keras on JAX names its
    own layout and policy): NHWC (Flax's), every step through jax.jit, XLA's autotuning on a GPU unless XLA_FLAGS
    sets --xla_gpu_autotune_level=0, and on a CPU the XLA_FLAGS it runs with (CPU_XLA_FLAGS, or what the user set)."""
    on_gpu = dev.platform == "gpu"
    flags = os.environ.get("XLA_FLAGS", "")
    kernels = "XLA: cuDNN convolutions, cuBLAS matrix products" if on_gpu else "XLA's CPU backend, XLA_FLAGS {}".format(
        flags or "empty (XLA's defaults)")
    autotune = "xla_gpu_autotune_level=0" not in flags if on_gpu else None
    return results.speed_settings(task, layout="NHWC", compiler="XLA: jax.jit", kernels=kernels, autotune=autotune,
                                  threads=environment.usable_cores(), precision=variants.precision_setting(
                                      chosen["computed_precision"], "Flax layers' dtype, float32 weights"))


def gpu_facts(on_gpu):
    """(GPU names, CUDA version, cuDNN version) as JAX reports them (it names no cuDNN); empty on a CPU run."""
    return (gpu_names(), cuda_version(), None) if on_gpu else ([], None, None)


def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts as JAX reports them (Flax and Optax too)."""
    import flax
    import optax

    record = results.new_record(NAME, task, profile, params=params, precision=chosen["precision"],
                                compile_mode=chosen["compile_mode"])
    record["device"] = str(dev)
    gpus, cuda, cudnn = gpu_facts(dev.platform == "gpu")
    record["environment"] = environment.facts(
        NAME, jax.__version__, str(dev), gpus=gpus, cuda=cuda, cudnn=cudnn, threads=environment.usable_cores(),
        computed_precision=chosen["computed_precision"], gpu_unused=chosen["note"],
        extra={"flax": flax.__version__, "optax": optax.__version__})
    record["settings"] = speed_settings(task, dev)
    return record


def probe():
    """For the runner after a build: JAX's version, its GPUs, and a matrix product on the first one."""
    def matrix_product():
        x = jax.device_put(jax.numpy.ones((64, 64)), _gpu_devices()[0])
        return (x @ x).sum()

    return check_gpu(NAME, jax.__version__, gpu_names(), why_no_gpu, matrix_product, cuda=cuda_version())
