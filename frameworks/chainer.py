"""Chainer: the device, the precision policy, fp16 (mixed16) and the record's facts, for every Chainer notebook."""

import chainer

from common import environment, results, variants
from frameworks.probe import check_gpu

NAME = "Chainer"
# what choose_device and set_variant decided, for the record: the precision and compile mode asked for, and the
# precision computed in
chosen = {"note": None, "precision": "auto", "computed_precision": "fp32", "compile_mode": "default"}


def gpu_names():
    """The GPUs Chainer can use: through CuPy, where this environment has it."""
    if not chainer.backends.cuda.available:
        return []
    import cupy

    runtime = cupy.cuda.runtime
    return [runtime.getDeviceProperties(i)["name"].decode() for i in range(runtime.getDeviceCount())]


def why_no_gpu():
    """Why Chainer has no GPU here: it computes on the GPU through CuPy, which this environment lacks."""
    if not chainer.backends.cuda.available:
        return "Chainer {} has no CuPy in this environment (CPU only)".format(chainer.__version__)
    return "Chainer {} sees no GPU".format(chainer.__version__)


def choose_device(device):
    """chainer.get_device("@cupy:0") or ("@numpy"), made current; device="cuda" without a GPU raises DeviceError."""
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    dev = chainer.get_device("@cupy:0" if kind == "gpu" else "@numpy")
    dev.use()
    # no GPU peak-memory counter to register (common/memory.py): CuPy's memory pool reports what it holds now
    # (used_bytes, total_bytes), not the most it has held
    return dev


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py); returns the precision computed in: "fp32" (Chainer runs on the CPU
    here; CuPy's own CUPY_TF32 would be the TF32 switch) or "fp16", or raises Unsupported before anything is built.

    fp16 is Chainer's mixed16 mode, set here because links read it when they are built: they hold float16 copies of
    their weights (batch norm keeps float32) and compute in float16, chainer.get_dtype() is float16 for the inputs,
    and the notebooks' optimizers update float32 master copies with dynamic loss scaling (`loss_scaling`)."""
    float32 = variants.float32_mode(NAME, precision, False, "Chainer on the CPU")
    variants.check(precision, compile_mode)
    if precision == "bf16":
        variants.refuse(NAME, "precision", precision, "NumPy and CuPy have no bfloat16 type, so neither has Chainer "
                                                      "(chainer.config.dtype takes float16, float32, float64 or "
                                                      "mixed16)")
    variants.refuse_compiling(NAME, compile_mode)
    if precision == "fp16":
        chainer.global_config.dtype = chainer.mixed16
    return variants.note_choice(chosen, precision, float32, compile_mode)



def loss_scaling(optimizer):
    """For fp16, after optimizer.setup: updates on float32 master copies of the float16 weights (use_fp32_update) and
    Chainer's dynamic loss scaling (loss_scaling(): from 1 the scale doubles each step up to 65504 until gradients
    first overflow; then each overflow halves it and skips that update, and it doubles again over 1000 steps)."""
    if chosen["computed_precision"] == "fp16":
        optimizer.use_fp32_update()
        optimizer.loss_scaling()


def loss_scale(optimizer):
    """The scale for loss.backward(loss_scale=...): the optimizer's dynamic loss scale for fp16, None otherwise.
    Chainer keeps it in optimizer._loss_scale, which optimizer.update(lossfun) passes to backward the same way."""
    return optimizer._loss_scale

def speed_settings(task, dev):
    """The record's ledger (common/results.py SETTINGS) for a Chainer notebook of `task` on `dev`: NCHW, define-by-run,
    NumPy and its BLAS on the CPU (iDeep, Chainer's oneDNN, is not installed), cuDNN through CuPy on a GPU."""
    on_gpu = isinstance(dev, chainer.backend.GpuDevice)
    return results.speed_settings(
        task, layout="NCHW", compiler="define-by-run (eager)",
        kernels="cuDNN and cuBLAS through CuPy" if on_gpu else "NumPy and its BLAS (im2col convolutions)",
        autotune=chainer.config.autotune if on_gpu else None, threads=environment.usable_cores(),
        precision=variants.precision_setting(chosen["computed_precision"], "mixed16: float16 links, float32 updates"))


def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts as Chainer (and CuPy, on a GPU) report them."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["precision"],
                                compile_mode=chosen["compile_mode"])
    record["device"] = str(dev)
    gpus, cuda, cudnn = [], None, None
    if isinstance(dev, chainer.backend.GpuDevice):
        import cupy

        gpus, cuda, cudnn = gpu_names(), cupy.cuda.runtime.runtimeGetVersion(), cupy.cuda.cudnn.getVersion()
    record["environment"] = environment.facts(NAME, chainer.__version__, record["device"], gpus=gpus, cuda=cuda,
                                              cudnn=cudnn, threads=environment.usable_cores(),
                                              computed_precision=chosen["computed_precision"], gpu_unused=chosen["note"])
    record["settings"] = speed_settings(task, dev)
    return record


def probe():
    """For the runner after a build: Chainer's version and its GPUs (none without CuPy), and a matrix product."""
    def matrix_product():
        import cupy

        x = cupy.ones((64, 64), dtype=cupy.float32)
        return float((x @ x).sum())

    return check_gpu(NAME, chainer.__version__, gpu_names(), why_no_gpu, matrix_product)
