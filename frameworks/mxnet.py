"""MXNet: the device (context), the precision policy and the record's facts, for every MXNet notebook."""

import os

import mxnet as mx

from common import environment, gpu, results, variants
from frameworks.probe import check_gpu

NAME = "MXNet"
# what choose_device and set_variant decided, for the record: the precision asked for and the one computed in
chosen = {"note": None, "requested": "auto", "precision": "fp32", "compile": "default"}


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
    return mx.gpu(0) if kind == "gpu" else mx.cpu()


def set_variant(ctx, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py); returns the precision computed in ("fp32", "tf32", "bf16" or "fp16").

    MXNet 1.9 has no TF32 switch of its own: on a GPU that has TF32, cuDNN 8 uses it for float32
    convolutions unless NVIDIA_TF32_OVERRIDE=0, which this sets for precision="fp32".
    """
    on_gpu = ctx.device_type == "gpu"
    tf32 = on_gpu and environment.tf32_allowed(next((d["compute_capability"] for d in gpu.cuda_devices()), None))
    float32 = variants.float32_mode(NAME, precision, tf32, "this GPU" if on_gpu else "the CPU")
    if on_gpu and float32 == "fp32":
        os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
    elif on_gpu and os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
        float32 = "fp32"  # set by whoever started this process: cuDNN keeps to float32
    return _chose(precision, float32, compile_mode)


def _chose(precision, float32, compile_mode):
    """Note the variant for the record; bf16 and fp16 are applied by the notebook, the framework's own way."""
    variants.check(precision, compile_mode)
    if precision in variants.MIXED:  # until the notebooks apply it: never run float32 under a mixed label
        variants.refuse(NAME, "precision", precision, "not written in these notebooks yet")
    chosen.update(requested=precision, precision=precision if precision in variants.MIXED else float32,
                  compile=compile_mode)
    return chosen["precision"]

def start_record(task, profile, params, ctx):
    """A new result record with the device and the environment facts as MXNet reports them."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["requested"],
                                compile_mode=chosen["compile"])
    record["device"] = str(ctx)
    on_gpu = ctx.device_type == "gpu"
    record["environment"] = environment.facts(
        NAME, mx.__version__, record["device"], gpus=gpu_names() if on_gpu else [],
        cuda="built with CUDA" if on_gpu and _built_with("CUDA") else None,
        cudnn="built with cuDNN" if on_gpu and _built_with("CUDNN") else None,
        threads=environment.usable_cores(), precision=chosen["precision"], gpu_unused=chosen["note"])
    return record


def probe():
    """For the runner after a build: MXNet's version, its GPUs, and a matrix product on the first one."""
    def matrix_product():
        x = mx.nd.ones((64, 64), ctx=mx.gpu(0))
        return mx.nd.dot(x, x).sum().asscalar()

    return check_gpu(NAME, mx.__version__, gpu_names(), why_no_gpu, matrix_product)
