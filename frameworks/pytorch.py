"""PyTorch: the device, the precision policy, mixed precision and torch.compile, and the record's facts, for every
PyTorch notebook (and Keras on torch)."""

import os

import torch

from common import environment, memory, results, tasks, timing, variants
from frameworks.probe import check_gpu

NAME = "PyTorch"
# what choose_device and set_variant decided, for the record: the precision and compile mode asked for, and the
# precision computed in
chosen = {"note": None, "precision": "auto", "computed_precision": "fp32", "compile_mode": "default"}
# mixed precision: the dtype torch.autocast computes in
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# torch.compile's options for inference, PyTorch's own recipe for CPU inference: `freezing` takes the weights as
# constants, folds batch norm into the convolutions and pre-packs the weights for oneDNN; `max_autotune` times Inductor's
# GEMM and convolution templates against the libraries' kernels and keeps the fastest. Measured on the CI CPU (ResNet-50,
# batch 32, 2 threads; docs/measurements.md#fast-paths): 31.4 s per 1000 images, 36.8 compiled without them, 48.5 eager
INFERENCE_COMPILE_OPTIONS = {"freezing": True, "max_autotune": True}


def gpu_names():
    """The GPUs PyTorch sees."""
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def why_no_gpu():
    """PyTorch's own first line on why it sees no GPU: a CPU build, no driver, a driver too old for its CUDA."""
    if torch.version.cuda is None:
        return "PyTorch {} is a CPU build".format(torch.__version__)
    try:
        torch.cuda.init()
    except Exception as error:  # noqa: BLE001 - PyTorch's own message is the reason
        return "PyTorch {} (CUDA {}): {}".format(torch.__version__, torch.version.cuda, results.first_line(str(error)))
    return "PyTorch {} sees no GPU".format(torch.__version__)


def choose_device(device):
    """The torch.device for the notebook's `device` parameter; device="cuda" without a usable GPU raises DeviceError."""
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    dev = torch.device("cuda" if kind == "gpu" else "cpu")
    if dev.type == "cuda":  # the GPU's peak allocation over the timed blocks, beside the resident peak (common/memory.py)
        memory.set_device_counter(lambda: torch.cuda.max_memory_allocated(dev), "torch.cuda.max_memory_allocated",
                                  reset=lambda: torch.cuda.reset_peak_memory_stats(dev))
    return dev


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py): the float32 policy, TF32 for matrix products and convolutions where
    the GPU has it and precision allows; returns the precision computed in ("fp32", "tf32", "bf16" or "fp16")."""
    tf32 = dev.type == "cuda" and environment.tf32_allowed("{}.{}".format(*torch.cuda.get_device_capability(dev)))
    float32 = variants.float32_mode(NAME, precision, tf32, "this GPU" if dev.type == "cuda" else "the CPU")
    # the API that every reader of the setting understands: PyTorch 2.9's per-backend `fp32_precision` makes the
    # global getter raise, and Inductor 2.11's autotuning (max_autotune, the compiled inference) reads that getter:
    # "mix of the legacy and new APIs", measured on an H100 (docs/measurements.md). "high" is TF32 for matrix products
    torch.set_float32_matmul_precision("high" if float32 == "tf32" else "highest")
    torch.backends.cudnn.allow_tf32 = float32 == "tf32"
    compiler = os.environ.get("CXX", "g++")  # the C++ compiler Inductor calls
    if compile_mode == "on" and dev.type == "cpu" and not _on_path(compiler):
        variants.refuse(NAME, "compile_mode", compile_mode, "torch.compile (Inductor) builds C++ kernels for the CPU "
                                                            "and finds no C++ compiler ({} is not on PATH)".format(compiler))
    # the notebooks apply the variant through autocast, grad_scaler and compiled
    return variants.note_choice(chosen, precision, float32, compile_mode)


def _on_path(program):
    """Whether `program` (a name or a path) is an executable file, looked up in PATH's folders."""
    return any(os.access(os.path.join(folder, program), os.X_OK) for folder in os.environ.get("PATH", "").split(os.pathsep))


def autocast(dev):
    """The context for forward and loss: torch.autocast in bfloat16 (bf16) or float16 (fp16), which runs matrix
    products and convolutions in it while the weights stay float32 and the loss is computed in float32; with any other
    precision a disabled autocast, so the code runs in float32 as written."""
    dtype = AUTOCAST_DTYPES.get(chosen["computed_precision"])
    return torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None)


def grad_scaler(dev):
    """torch.amp.GradScaler for fp16: the loss is scaled up before backward so that small float16 gradients do not
    flush to zero, the gradients are unscaled before the update, a step whose gradients hold inf or NaN is skipped and
    the scale adapts. With any other precision it is disabled: scale(loss) is the loss, step(optimizer) is
    optimizer.step(), update() does nothing."""
    return torch.amp.GradScaler(dev.type, enabled=chosen["computed_precision"] == "fp16")


def compiled(model, inference=False):
    """torch.compile(model) with compile_mode="on" (compiled at its first call), else the model itself; for inference
    with INFERENCE_COMPILE_OPTIONS (the model is then called under torch.inference_mode, and its weights must not change
    after that first call). Dynamo's RNN support is switched on there (allow_rnn, experimental): without it Dynamo
    cannot trace nn.GRU and torch.compile would run a GRU model's whole forward eagerly."""
    if chosen["compile_mode"] != "on":
        return model
    torch._dynamo.config.allow_rnn = True
    return torch.compile(model, options=dict(INFERENCE_COMPILE_OPTIONS) if inference else None)


def compile_warm_up(forward_backward, optimizer, x, y, sync=None):
    """The compile time with compile_mode="on", where torch.compile compiles at the first call: forward_backward on
    one batch (x, y), timed with the device synchronised, its gradients then dropped without an update so that
    training starts from the same weights. None in eager mode, where nothing is compiled ahead of the first step."""
    if chosen["compile_mode"] != "on":
        return None
    with timing.Timer(sync) as timer:
        forward_backward(x, y)
    optimizer.zero_grad(set_to_none=True)
    return timer.elapsed


def compiler_setting(inference):
    """What runs the model, for the ledger: 'eager', or torch.compile with the options compiled() gives it."""
    if chosen["compile_mode"] != "on":
        return "eager"
    options = sorted(INFERENCE_COMPILE_OPTIONS) if inference else []
    return "torch.compile (Inductor)" + (": " + ", ".join(options) if options else "")


def speed_settings(task, dev):
    """The record's ledger (common/results.py SETTINGS) for a PyTorch notebook of `task` on `dev` (and Keras' on
    torch, which names its own layout and compiler): channels-last images, cuDNN's autotuning as the notebook set it."""
    on_gpu = dev.type == "cuda"
    if on_gpu:
        kernels = "cuDNN {}, cuBLAS".format(torch.backends.cudnn.version())
    else:
        kernels = "oneDNN (convolutions), {} (matrix products)".format(
            "MKL" if torch.backends.mkl.is_available() else "OpenBLAS")
    if not torch.backends.mkldnn.enabled and not on_gpu:
        kernels = "ATen's own convolutions (oneDNN off), " + kernels.split(", ", 1)[1]
    optimises = tasks.get(task).optimises
    policy = "torch.autocast" + (" and GradScaler" if chosen["computed_precision"] == "fp16" and optimises else "")
    return results.speed_settings(task, layout="NHWC (channels_last memory format)", compiler=compiler_setting(
        not optimises), kernels=kernels, autotune=torch.backends.cudnn.benchmark if on_gpu else None,
        threads=torch.get_num_threads(), precision=variants.precision_setting(chosen["computed_precision"], policy))


def load_canonical(model, arrays):
    """Load canonical weights into a torchvision ResNet-50: the canonical names and layouts are torchvision's own (its
    batch norms' step counters, num_batches_tracked, are not weights)."""
    state = {name: torch.from_numpy(value) for name, value in arrays.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all(name.endswith("num_batches_tracked") for name in missing), (missing, unexpected)


def canonical_weights(model):
    """A torchvision ResNet-50's weights in the canonical layouts (its own), as NumPy arrays."""
    return {name: value.cpu().numpy() for name, value in model.state_dict().items()
            if not name.endswith("num_batches_tracked")}


def gpu_facts(on_gpu):
    """(GPU names, CUDA version, cuDNN version) as PyTorch reports them; empty on a CPU run."""
    if not on_gpu:
        return [], None, None
    return gpu_names(), torch.version.cuda, torch.backends.cudnn.version()


def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts as PyTorch reports them."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["precision"],
                                compile_mode=chosen["compile_mode"])
    record["device"] = str(dev)
    gpus, cuda, cudnn = gpu_facts(dev.type == "cuda")
    record["environment"] = environment.facts(NAME, torch.__version__, str(dev), gpus=gpus, cuda=cuda, cudnn=cudnn,
                                              threads=torch.get_num_threads(), computed_precision=chosen["computed_precision"],
                                              gpu_unused=chosen["note"])
    record["settings"] = speed_settings(task, dev)
    return record


def probe():
    """For the runner after a build: PyTorch's version, its GPUs, and a matrix product on the first one."""
    def matrix_product():
        x = torch.ones(64, 64, device="cuda")
        return (x @ x).sum().item()

    return check_gpu(NAME, torch.__version__, gpu_names(), why_no_gpu, matrix_product, cuda=torch.version.cuda)
