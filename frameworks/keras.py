"""Keras 3: the device, the float32 policy and the record's facts, through the module of the backend it runs on;
mixed precision and the compiler the Keras way on every backend (the dtype policy, model.compile's jit_compile)."""

import importlib

import keras

from common import environment, gpu, results, variants

NAME = "Keras"
# Keras' backend name -> the module of this package that knows that framework
BACKEND_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "pytorch"}
# precision -> Keras' dtype policy: float32 variables, layers computing in bfloat16 or float16; under
# "mixed_float16", model.compile wraps the optimizer in a LossScaleOptimizer (its auto_scale_loss=True)
POLICIES = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
# what set_variant decided for model.compile: the compile mode, and what Keras compiles the steps with
run = {"compile": "default", "compiler": None}
# backend -> the tasks whose notebook computes channels-first there: torch's convolutions are NCHW ones, around which
# Keras transposes channels-last images and kernels at every call. Measured on the CI CPU (ResNet-50, batch 32, 2
# threads, Keras 3.15.1 on torch 2.14.1; docs/measurements.md#fast-paths): 54-78 s per 1000 images channels-first
# against 82-102 channels-last; the CNN was 17% slower channels-first, so it stays channels-last
CHANNELS_FIRST = {"torch": ("inference",)}
# (backend, task) -> why Keras' compiler (jit_compile) cannot compile that task's model there
NOT_COMPILED = {("torch", "inference"): "torch.compile of Keras' ResNet50 hits torch._dynamo's recompile limit at its "
                                        "layer calls: its convolutions run eagerly, between one-layer graphs"}


def backend_module():
    """The frameworks module of the backend Keras runs on (KERAS_BACKEND, read when keras was imported)."""
    return importlib.import_module("frameworks." + BACKEND_MODULES[keras.backend.backend()])


def choose_device(device):
    """The backend's device for the notebook's `device` parameter (Keras places its tensors there itself)."""
    return backend_module().choose_device(device)


def compiler(compile_mode, on_gpu):
    """What Keras runs the train, test and predict steps with for `compile_mode`, as model.compile's jit_compile
    decides it; compile_mode="on" raises Unsupported where Keras' default, jit_compile="auto", already compiles."""
    backend = keras.backend.backend()
    if backend == "jax" or (backend == "tensorflow" and on_gpu):
        if compile_mode == "on":
            variants.refuse(NAME, "compile_mode", compile_mode, "Keras on {} compiles by default, with XLA "
                            "(jit_compile='auto'): the default row is the compiled one".format(
                                "JAX" if backend == "jax" else "TensorFlow with a GPU"))
        return "XLA: jax.jit" if backend == "jax" else "XLA: tf.function(jit_compile=True)"
    if compile_mode == "on":
        return "XLA: tf.function(jit_compile=True)" if backend == "tensorflow" else "torch.compile (inductor)"
    return "tf.function graph, no XLA (on a CPU)" if backend == "tensorflow" else "eager"


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py); returns the precision computed in ("fp32", "tf32", "bf16" or "fp16").

    The backend's module sets the float32 policy (for the float32 parts of a bf16 or fp16 run, the default one, as
    common/variants.py has it), and refuses compile_mode="on" where its compiler cannot run; Keras' dtype policy,
    set here before the model is built, does bf16 and fp16; `jit_compile` gives model.compile compile_mode="on"."""
    variants.check(precision, compile_mode)
    run.update(compile=compile_mode, compiler=compiler(compile_mode, gpu.device_kind(str(dev)) == "gpu"))
    backend = backend_module()  # the float32 policy, and what the backend's compiler needs (Inductor: a C++ compiler)
    try:
        float32 = backend.set_variant(dev, "auto" if precision in POLICIES else precision, compile_mode)
    except variants.Unsupported as refusal:  # the row is Keras': "Keras on TensorFlow cannot run precision=tf32: ..."
        raise variants.Unsupported("{} on {}".format(NAME, refusal)) from None
    if precision in POLICIES:
        keras.mixed_precision.set_dtype_policy(POLICIES[precision])
    return variants.note_choice(backend.chosen, precision, float32, compile_mode)  # for the record: what ran


def jit_compile(task):
    """model.compile's `jit_compile` for the run: True for compile_mode="on", else Keras' default "auto"; raises
    Unsupported where Keras' compiler cannot compile the task's model."""
    if run["compile"] != "on":
        return "auto"
    why = NOT_COMPILED.get((keras.backend.backend(), task))
    if why:
        variants.refuse(NAME, "compile_mode", "on", why)
    return True


def set_image_data_format(task):
    """Set Keras' image_data_format for `task` on this backend (CHANNELS_FIRST), before the model is built, and return
    it: "channels_first" or "channels_last"."""
    layout = "channels_first" if task in CHANNELS_FIRST.get(keras.backend.backend(), ()) else "channels_last"
    keras.config.set_image_data_format(layout)
    return layout


def layout_setting():
    """The images' layout Keras computes in, for the ledger: its image_data_format, and what the backend does with it."""
    if keras.config.image_data_format() == "channels_first":
        return "NCHW (Keras' channels_first)"
    if keras.backend.backend() == "torch":
        return "NHWC (Keras' channels_last; the torch backend transposes to NCHW around every convolution)"
    return "NHWC (Keras' channels_last)"


def speed_settings(task, dev):
    """The record's ledger (common/results.py SETTINGS): the backend's kernels, autotuning and threads, with Keras'
    own layout, compiler and dtype policy."""
    settings = backend_module().speed_settings(task, dev)
    policy = "Keras' dtype policy {}".format(keras.config.dtype_policy().name)
    settings.update(layout=layout_setting(), compiler=run["compiler"],
                    precision=variants.precision_setting(backend_module().chosen["computed_precision"], policy))
    return results.speed_settings(task, **settings)


def start_record(task, profile, params, dev):
    """A new result record: Keras' version and dtype policy, what it compiles with, its backend's version, and the
    GPUs, CUDA and cuDNN the backend reports."""
    backend = backend_module()
    framework = importlib.import_module(keras.backend.backend())  # the backend's own package: tensorflow, jax, torch
    on_gpu = gpu.device_kind(str(dev)) == "gpu"
    record = results.new_record(NAME, task, profile, variant=keras.backend.backend(), params=params,
                                precision=backend.chosen["precision"], compile_mode=backend.chosen["compile_mode"])
    record["device"] = "gpu:0" if on_gpu else "cpu"
    gpus, cuda, cudnn = backend.gpu_facts(on_gpu)
    record["environment"] = environment.facts(
        NAME, keras.__version__, record["device"], gpus=gpus, cuda=cuda, cudnn=cudnn, threads=environment.usable_cores(),
        computed_precision=backend.chosen["computed_precision"], gpu_unused=backend.chosen["note"],
        extra={"backend": keras.backend.backend(), "backend_version": framework.__version__,
               "dtype_policy": keras.config.dtype_policy().name, "compiler": run["compiler"]})
    record["settings"] = speed_settings(task, dev)
    return record
