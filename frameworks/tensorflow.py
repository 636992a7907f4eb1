"""TensorFlow: the device, the precision policy and the record's facts, for every TensorFlow notebook (and Keras on it);
mixed precision and compiling ahead for the TensorFlow notebooks (Keras applies its own)."""

import os
import platform

import tensorflow as tf

from common import environment, gpu, memory, results, variants
from frameworks.probe import check_gpu

NAME = "TensorFlow"
CHANNELS_FIRST_ON_GPU = ("cnn",)  # the notebooks that compute channels-first (NCHW, cuDNN's layout) on a GPU
# what choose_device and set_variant decided, for the record: the precision and compile mode asked for, and the
# precision computed in
chosen = {"note": None, "precision": "auto", "computed_precision": "fp32", "compile_mode": "default"}


def _gpu_devices():
    return tf.config.list_physical_devices("GPU")


def gpu_names():
    """The GPUs TensorFlow sees."""
    return [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in _gpu_devices()]


def why_no_gpu():
    """Why TensorFlow sees no GPU, as far as it tells: a CPU build, or the CUDA it was built for."""
    build = tf.sysconfig.get_build_info()
    if not build.get("is_cuda_build"):
        return "TensorFlow {} is a CPU build".format(tf.__version__)
    return "TensorFlow {} (built for CUDA {}, cuDNN {}) sees no GPU; its start-up log says why".format(
        tf.__version__, build.get("cuda_version"), build.get("cudnn_version"))


def choose_device(device):
    """"/GPU:0" or "/CPU:0" for the notebook's `device` parameter; device="cuda" without a usable GPU raises DeviceError."""
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    if kind == "gpu":  # the peak of TensorFlow's GPU allocator over each timed block (common/memory.py)
        memory.set_device_counter(lambda: tf.config.experimental.get_memory_info("GPU:0")["peak"],
                                  "tf.config.experimental.get_memory_info peak",
                                  reset=lambda: tf.config.experimental.reset_memory_stats("GPU:0"))
    return "/GPU:0" if kind == "gpu" else "/CPU:0"


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py): the float32 policy, TF32 for matrix products and convolutions where
    the GPU has it and precision allows; returns the precision computed in ("fp32", "tf32", "bf16" or "fp16")."""
    tf32 = False
    if gpu.device_kind(dev) == "gpu":
        capability = tf.config.experimental.get_device_details(_gpu_devices()[0]).get("compute_capability")
        tf32 = environment.tf32_allowed("{}.{}".format(*capability) if capability else None)
    float32 = variants.float32_mode(NAME, precision, tf32, "this GPU" if gpu.device_kind(dev) == "gpu" else "the CPU")
    tf.config.experimental.enable_tensor_float_32_execution(float32 == "tf32")
    return variants.note_choice(chosen, precision, float32, compile_mode)



def compute_dtype(precision):
    """The dtype a TensorFlow notebook's layers compute in for the precision set_variant returned: bfloat16 (bf16),
    float16 (fp16) or float32. Mixed precision: the variables stay float32 and are cast as they are read; the
    last layer, the logits and the loss stay float32."""
    return {"bf16": tf.bfloat16, "fp16": tf.float16}.get(precision, tf.float32)


def keras_policy(precision):
    """The same for the Keras layers inside TensorFlow notebooks (the GRU, ResNet-50): Keras' mixed-precision policy,
    "mixed_bfloat16", "mixed_float16" or "float32"."""
    return {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}.get(precision, "float32")


class LossScale(tf.Module):
    """Dynamic loss scaling for fp16 training with an optimizer written out, by the rule of Keras'
    LossScaleOptimizer: the loss is multiplied by the scale before the gradients are taken, so that small float16
    gradients do not flush to zero, and the gradients divided by it again; a step whose gradients are not all
    finite is skipped and the scale halved; after `growth_steps` finite steps in a row it doubles.
    For every other precision it does nothing: scale_loss() returns the loss, apply() is the optimizer's."""

    def __init__(self, precision, initial_scale=2.0 ** 15, growth_steps=2000):
        super().__init__()
        self.on = precision == "fp16"
        self.scale = tf.Variable(initial_scale if self.on else 1.0, trainable=False)
        self.finite_steps = tf.Variable(0, trainable=False)
        self.growth_steps = growth_steps

    def scale_loss(self, loss):
        """The loss to take the gradients of (inside the GradientTape)."""
        return loss * tf.cast(self.scale, loss.dtype) if self.on else loss

    def unscale(self, grads):
        """The gradients of the scaled loss divided by the scale again (fp16); for other precisions, the gradients."""
        return [tf.convert_to_tensor(g) / self.scale for g in grads] if self.on else grads

    def update_if_finite(self, grads, update, strategy=None):
        """Run update() (the optimizer's step on unscaled `grads`) if every gradient is finite, and double the scale
        after `growth_steps` such steps in a row; if one is not, skip it and halve the scale (fp16). For other
        precisions, update(). With a tf.distribute `strategy` (called in cross-replica context, `grads` one copy per
        replica) each replica checks its own copy and all must be finite, as in Keras' LossScaleOptimizer."""
        if not self.on:
            return update()

        def finite(grads):
            return tf.cast(tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads]), tf.float32)

        if strategy is None:
            all_finite = tf.equal(finite(grads), 1.0)
        else:
            replicas_finite = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(finite, args=(grads,)), None)
            all_finite = tf.equal(replicas_finite, strategy.num_replicas_in_sync)

        def step():
            update()
            grow = self.finite_steps + 1 >= self.growth_steps
            self.scale.assign(tf.where(grow, self.scale * 2.0, self.scale))
            self.finite_steps.assign(tf.where(grow, 0, self.finite_steps + 1))

        def skip():  # a gradient overflowed: no update, a smaller scale
            self.scale.assign(self.scale / 2.0)
            self.finite_steps.assign(0)

        tf.cond(all_finite, step, skip)

    def apply(self, optimizer, grads, variables):
        """optimizer.apply(grads, variables), with the gradients unscaled and the step skipped if one is not finite."""
        grads = self.unscale(grads)
        self.update_if_finite(grads, lambda: optimizer.apply(grads, variables))


def compile_ahead(step, specs, state):
    """Make a training step's graph before training, for the TensorSpecs of its arguments, so that the time it takes
    is reported apart. tf.function traces it; with compile_mode="on" XLA compiles a jit_compile function only at
    its first call, so it also runs once here, on zeros (the time includes that one step), and `state` (every
    variable the step changes) is then put back as it was: training starts from the same weights either way."""
    step.get_concrete_function(*specs)
    if chosen["compile_mode"] == "on":
        saved = [variable.numpy() for variable in state]
        step(*[tf.zeros(spec.shape, spec.dtype) for spec in specs])
        for variable, value in zip(state, saved):
            variable.assign(value)


def compiler_setting():
    """What runs a TensorFlow notebook's steps, for the ledger: XLA for compile_mode="on", else tf.function's graph."""
    return "XLA: tf.function(jit_compile=True)" if chosen["compile_mode"] == "on" else "tf.function graph, no XLA"


def speed_settings(task, dev):
    """The record's ledger (common/results.py SETTINGS) for a TensorFlow notebook of `task` on `dev` (Keras on
    TensorFlow names its own layout, compiler and policy): NHWC, oneDNN's kernels on an x86 CPU unless
    TF_ENABLE_ONEDNN_OPTS=0, cuDNN's autotuning unless TF_CUDNN_USE_AUTOTUNE=0."""
    on_gpu = gpu.device_kind(dev) == "gpu"
    if on_gpu:
        kernels = "cuDNN {}, cuBLAS".format(tf.sysconfig.get_build_info().get("cudnn_version"))
    elif platform.machine() in ("x86_64", "AMD64") and os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0":
        kernels = "oneDNN (TF_ENABLE_ONEDNN_OPTS, on by default)"
    else:
        kernels = "Eigen"
    policy = "layers compute in it on float32 variables" + (", loss scaling" if chosen["computed_precision"] == "fp16" else "")
    layout = "NCHW" if on_gpu and task in CHANNELS_FIRST_ON_GPU else "NHWC"
    return results.speed_settings(
        task, layout=layout, compiler=compiler_setting(), kernels=kernels,
        autotune=os.environ.get("TF_CUDNN_USE_AUTOTUNE", "1") != "0" if on_gpu else None,
        threads=environment.usable_cores(), precision=variants.precision_setting(chosen["computed_precision"], policy))


def gpu_facts(on_gpu):
    """(GPU names, CUDA version, cuDNN version) as TensorFlow's build reports them; empty on a CPU run."""
    if not on_gpu:
        return [], None, None
    build = tf.sysconfig.get_build_info()
    return gpu_names(), build.get("cuda_version"), build.get("cudnn_version")


def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts as TensorFlow reports them."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["precision"],
                                compile_mode=chosen["compile_mode"])
    record["device"] = dev
    gpus, cuda, cudnn = gpu_facts(gpu.device_kind(dev) == "gpu")
    record["environment"] = environment.facts(NAME, tf.__version__, dev, gpus=gpus, cuda=cuda, cudnn=cudnn,
                                              threads=environment.usable_cores(), computed_precision=chosen["computed_precision"],
                                              gpu_unused=chosen["note"])
    record["settings"] = speed_settings(task, dev)
    return record


def probe():
    """For the runner after a build: TensorFlow's version, its GPUs, and a matrix product on the first one."""
    def matrix_product():
        with tf.device("/GPU:0"):
            x = tf.ones((64, 64))
            return tf.reduce_sum(tf.matmul(x, x))

    return check_gpu(NAME, tf.__version__, gpu_names(), why_no_gpu, matrix_product,
                     cuda=tf.sysconfig.get_build_info().get("cuda_version"))
