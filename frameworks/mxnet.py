"""MXNet: the device (context), the precision policy, the variants (AMP, static hybridize) and the record's facts,
for every MXNet notebook; the parameter server's scheduler and servers for the train notebook on several machines."""

import os
import subprocess
import sys

import mxnet as mx
from mxnet.contrib import amp

from common import environment, gpu, results, variants
from frameworks.probe import check_gpu

NAME = "MXNet"
# what choose_device and set_variant decided, for the record: the precision and compile mode asked for, and the
# precision computed in
chosen = {"note": None, "precision": "auto", "computed_precision": "fp32", "compile_mode": "default"}
# task -> why a variant would not run what it names there; set_variant refuses it with this reason
NO_BF16 = {"rnn": "MXNet 1.9's AMP keeps the fused RNN operator and Embedding in float32 for bfloat16 (FP32_FUNCS in "
                  "mxnet/contrib/amp/lists/symbol_bf16.py): only the last dense layer would compute in bfloat16"}
COMPILED_AS_WRITTEN = {"inference": "the Inference notebook already hybridizes ResNet-50 with static_alloc and "
                                    "static_shape: its default row is the compiled one"}


def _built_with(feature):
    return mx.runtime.Features().is_enabled(feature)


def gpu_names():
    """The GPUs MXNet sees, named by the CUDA driver (MXNet itself only counts them)."""
    count = mx.context.num_gpus() if _built_with("CUDA") else 0
    names = [d["name"] for d in gpu.cuda_devices()]
    return [names[i] if i < len(names) else "gpu({})".format(i) for i in range(count)]


def why_no_gpu():
    """MXNet's own first line on why it has no GPU: a CPU build, or the error of its first GPU operation."""
    if not _built_with("CUDA"):
        return "MXNet {} is a CPU build".format(mx.__version__)
    try:
        mx.nd.ones((1,), ctx=mx.gpu(0)).asnumpy()
    except mx.base.MXNetError as error:
        return "MXNet {}: {}".format(mx.__version__, results.first_line(str(error)))
    return "MXNet {} sees no GPU".format(mx.__version__)


def choose_device(device):
    """mx.gpu(0) or mx.cpu() for the notebook's `device` parameter; "cuda" without a usable GPU raises DeviceError."""
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    # no GPU peak-memory counter to register (common/memory.py): MXNet 1.9 reports only free and total GPU memory
    # (mx.context.gpu_memory_info), not the most its pool has held
    return mx.gpu(0) if kind == "gpu" else mx.cpu()


def set_variant(ctx, precision="auto", compile_mode="default", task=None):
    """The run's variant (common/variants.py) for the notebook of `task`; returns the precision computed in ("fp32",
    "tf32", "bf16" or "fp16"), or raises Unsupported before anything is built.

    MXNet 1.9 has no TF32 switch of its own: on a GPU that has TF32, cuDNN 8 uses it for float32
    convolutions unless NVIDIA_TF32_OVERRIDE=0, which this sets for precision="fp32".
    bf16 (on the CPU, with oneDNN) and fp16 (on a GPU) are MXNet's AMP, initialised here because it must be before
    the model is built: it wraps MXNet's operators so that convolutions and dense layers compute in that type on
    float32 weights, and softmax and the loss in float32. compile_mode="on" is hybridize(static_alloc=True,
    static_shape=True), which the notebooks call.
    """
    on_gpu = ctx.device_type == "gpu"
    tf32 = on_gpu and environment.tf32_allowed(next((d["compute_capability"] for d in gpu.cuda_devices()), None))
    float32 = variants.float32_mode(NAME, precision, tf32, "this GPU" if on_gpu else "the CPU")
    variants.check(precision, compile_mode)
    if precision == "bf16" and on_gpu:
        variants.refuse(NAME, "precision", precision, "MXNet 1.9's bfloat16 is oneDNN's, for the CPU: its CUDA "
                                                      "operators have no bfloat16 kernels")
    if precision == "bf16" and not _built_with("MKLDNN"):
        variants.refuse(NAME, "precision", precision, "this MXNet build has no oneDNN (MKLDNN), which its bfloat16 needs")
    if precision == "bf16" and task in NO_BF16:
        variants.refuse(NAME, "precision", precision, NO_BF16[task])
    if precision == "fp16" and not on_gpu:
        variants.refuse(NAME, "precision", precision, "MXNet 1.9 has no float16 matrix product on the CPU (its own "
                                                      "error: 'FP16 gemm on cpu not implemented!'); its AMP float16 "
                                                      "is for GPUs")
    if compile_mode == "on" and task in COMPILED_AS_WRITTEN:
        variants.refuse(NAME, "compile_mode", compile_mode, COMPILED_AS_WRITTEN[task])
    if on_gpu and float32 == "fp32":
        os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
    elif on_gpu and os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
        float32 = "fp32"  # set by whoever started this process: cuDNN keeps to float32
    if precision in variants.MIXED:
        amp.init(target_dtype="bfloat16" if precision == "bf16" else "float16")
    return variants.note_choice(chosen, precision, float32, compile_mode)



def loss_scaling(trainer):
    """For fp16, AMP's dynamic loss scaling on the trainer (amp.init_trainer): the scale starts at 2**16, halves when
    the gradients overflow (that step is skipped) and doubles after 2000 good steps. bfloat16 has float32's range and
    needs none."""
    if chosen["computed_precision"] == "fp16":
        amp.init_trainer(trainer)


def scale_loss(loss, trainer):
    """A context manager for inside autograd.record: AMP's amp.scale_loss for fp16 (it gives the loss multiplied by
    the trainer's scale, which trainer.step divides back out of the gradients), otherwise one that gives the loss."""
    return amp.scale_loss(loss, trainer) if chosen["computed_precision"] == "fp16" else _Unscaled(loss)


class _Unscaled(object):
    """`with _Unscaled(loss) as loss:` the loss as it is."""

    def __init__(self, loss):
        self.loss = loss

    def __enter__(self):
        return self.loss

    def __exit__(self, *exception):
        return False


# A scheduler or server of MXNet's parameter server: importing mxnet with DMLC_ROLE set to either serves until the
# workers finish; the thread ends it if the process that started it goes away first (else it would wait for ever)
KVSTORE_NODE = """import os, threading, time
parent = os.getppid()
def watch():
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)
threading.Thread(target=watch, daemon=True).start()
import mxnet
"""


def start_kvstore_node(role):
    """Start a "scheduler" or "server" of the dist kvstore as a child process with this process's DMLC_ variables;
    it serves until the workers finish, or until this process ends."""
    return subprocess.Popen([sys.executable, "-c", KVSTORE_NODE], env=dict(os.environ, DMLC_ROLE=role))


def speed_settings(task, ctx):
    """The record's ledger (common/results.py SETTINGS) for an MXNet notebook of `task` on `ctx`: NCHW, the Gluon
    block hybridized (statically for compile_mode="on", and always in the Inference notebook), oneDNN's kernels on the
    CPU where the build has them, cuDNN's autotuning unless MXNET_CUDNN_AUTOTUNE_DEFAULT=0."""
    on_gpu = ctx.device_type == "gpu"
    static = chosen["compile_mode"] == "on" or task in COMPILED_AS_WRITTEN
    if on_gpu:
        kernels = "cuDNN, cuBLAS"
    else:
        kernels = "oneDNN (MKLDNN)" if _built_with("MKLDNN") else "MXNet's own, on {}".format(
            "OpenBLAS" if _built_with("BLAS_OPEN") else "its BLAS")
    policy = "AMP ({})".format("bfloat16, oneDNN" if chosen["computed_precision"] == "bf16" else "float16, loss scaling")
    return results.speed_settings(
        task, layout="NCHW", compiler="hybridize(static_alloc, static_shape)" if static else "hybridize()",
        kernels=kernels, autotune=os.environ.get("MXNET_CUDNN_AUTOTUNE_DEFAULT", "1") != "0" if on_gpu else None,
        threads=environment.usable_cores(), precision=variants.precision_setting(chosen["computed_precision"], policy))


def start_record(task, profile, params, ctx):
    """A new result record with the device and the environment facts as MXNet reports them."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["precision"],
                                compile_mode=chosen["compile_mode"])
    record["device"] = str(ctx)
    on_gpu = ctx.device_type == "gpu"
    record["environment"] = environment.facts(
        NAME, mx.__version__, record["device"], gpus=gpu_names() if on_gpu else [],
        cuda="built with CUDA" if on_gpu and _built_with("CUDA") else None,
        cudnn="built with cuDNN" if on_gpu and _built_with("CUDNN") else None,
        threads=environment.usable_cores(), computed_precision=chosen["computed_precision"], gpu_unused=chosen["note"])
    record["settings"] = speed_settings(task, ctx)
    return record


def probe():
    """For the runner after a build: MXNet's version, its GPUs, and a matrix product on the first one."""
    def matrix_product():
        x = mx.nd.ones((64, 64), ctx=mx.gpu(0))
        return mx.nd.dot(x, x).sum().asscalar()

    return check_gpu(NAME, mx.__version__, gpu_names(), why_no_gpu, matrix_product)
