"""Chainer: the device, the precision policy and the record's facts, for every Chainer notebook."""

import chainer

from common import environment, results, variants
from frameworks.probe import check_gpu

NAME = "Chainer"
# what choose_device and set_variant decided, for the record: the precision asked for and the one computed in
chosen = {"note": None, "requested": "auto", "precision": "fp32", "compile": "default"}


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
    return dev


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py); returns the precision computed in: "fp32" (Chainer runs on the CPU
    here; CuPy's own CUPY_TF32 would be the TF32 switch), "bf16" or "fp16"."""
    float32 = variants.float32_mode(NAME, precision, False, "Chainer on the CPU")
    if compile_mode == "on":
        variants.refuse(NAME, "compile_mode", compile_mode, "Chainer runs define-by-run only; it has no compiler")
    return _chose(precision, float32, compile_mode)


def _chose(precision, float32, compile_mode):
    """Note the variant for the record; bf16 and fp16 are applied by the notebook, the framework's own way."""
    variants.check(precision, compile_mode)
    if precision in variants.MIXED:  # until the notebooks apply it: never run float32 under a mixed label
        variants.refuse(NAME, "precision", precision, "not written in these notebooks yet")
    chosen.update(requested=precision, precision=precision if precision in variants.MIXED else float32,
                  compile=compile_mode)
    return chosen["precision"]

def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts as Chainer (and CuPy, on a GPU) report them."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["requested"],
                                compile_mode=chosen["compile"])
    record["device"] = str(dev)
    gpus, cuda, cudnn = [], None, None
    if isinstance(dev, chainer.backend.GpuDevice):
        import cupy

        gpus, cuda, cudnn = gpu_names(), cupy.cuda.runtime.runtimeGetVersion(), cupy.cuda.cudnn.getVersion()
    record["environment"] = environment.facts(NAME, chainer.__version__, record["device"], gpus=gpus, cuda=cuda,
                                              cudnn=cudnn, threads=environment.usable_cores(),
                                              precision=chosen["precision"], gpu_unused=chosen["note"])
    return record


def probe():
    """For the runner after a build: Chainer's version and its GPUs (none without CuPy), and a matrix product."""
    def matrix_product():
        import cupy

        x = cupy.ones((64, 64), dtype=cupy.float32)
        return float((x @ x).sum())

    return check_gpu(NAME, chainer.__version__, gpu_names(), why_no_gpu, matrix_product)
