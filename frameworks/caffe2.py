"""Caffe2 (caffe2.python from the torch 1.10.2 wheel, its last working release): the device, the precision policy,
the record's facts, and the fix that makes its Adam count steps as PyTorch's does, for every Caffe2 notebook.
Python 3.9, in the caffe2 environment."""

import logging

import torch
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace

from common import environment, gpu, results, variants
from frameworks.probe import check_gpu

# Caffe2's C++ logging (glog): level 3 keeps its start-up notes out of the notebook (level 2 still prints that the
# wheel was built without AVX2); errors still raise in Python.
workspace.GlobalInit(["caffe2", "--caffe2_log_level=3"])
logging.getLogger("data_parallel_model").setLevel(logging.WARNING)  # its notes on every step of building the net

NAME = "Caffe2"
VERSION = torch.__version__.split("+")[0]  # Caffe2 has no version of its own: the torch wheel's
# what choose_device and set_variant decided, for the record: the precision and compile mode asked for, and the
# precision computed in
chosen = {"note": None, "precision": "auto", "computed_precision": "fp32", "compile_mode": "default"}


def gpu_names():
    """The GPUs Caffe2 sees, named by the CUDA driver."""
    count = workspace.NumCudaDevices() if workspace.has_cuda_support else 0  # the GPU module loaded, GPUs found
    names = [d["name"] for d in gpu.cuda_devices()]
    return [names[i] if i < len(names) else "cuda:{}".format(i) for i in range(count)]


def why_no_gpu():
    """Why Caffe2 sees no GPU: the wheel's CUDA 10.2 build finds none it can use."""
    return ("Caffe2 (torch {}, CUDA {}) sees no GPU it can use: its kernels are for compute capability 3.7 to "
            "7.0".format(torch.__version__, torch.version.cuda))


def choose_device(device, seed=0):
    """A DeviceOption for the notebook's `device` parameter: GPU 0 where Caffe2 can use one, else the CPU
    (device="cuda" without a usable GPU raises DeviceError). Its random_seed seeds every initialiser and dropout
    mask of the operators built under it."""
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    # no GPU peak-memory counter to register (common/memory.py): Caffe2's allocator keeps no peak
    return core.DeviceOption(caffe2_pb2.CUDA if kind == "gpu" else caffe2_pb2.CPU, 0, random_seed=seed)


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py); returns the precision computed in ("fp32": CUDA 10.2 predates TF32),
    or raises Unsupported before anything is built."""
    on_gpu = dev.device_type == caffe2_pb2.CUDA
    float32 = variants.float32_mode(NAME, precision, False, "Caffe2 (built for CUDA 10.2)")
    variants.check(precision, compile_mode)
    if precision == "bf16":
        variants.refuse(NAME, "precision", precision, "Caffe2 has no bfloat16 operators")
    if precision == "fp16" and not on_gpu:
        variants.refuse(NAME, "precision", precision, "Caffe2's float16 operators (FloatToHalf, float16 convolutions "
                                                      "and FC) are CUDA ones")
    if precision == "fp16":
        variants.refuse(NAME, "precision", precision, "not written: Caffe2 trains in float16 through hand-placed "
                                                      "casts and float32 master weights, with no loss scaling of its "
                                                      "own, and no GPU it runs on has been lent to check it")
    variants.refuse_compiling(NAME, compile_mode)
    return variants.note_choice(chosen, precision, float32, compile_mode)


def count_steps_from_one(model):
    """Make Caffe2's Adam (optimizer.build_adam) count its first step as step 1, as PyTorch's and the paper's do.

    build_adam puts the step counter's increment (AtomicIter) before the update in the training net, so the first
    update already reads 2 and its bias correction is that of a second step: a first step of about 0.74 lr where
    Adam takes lr. Moved to the end of the net, the counter reads t at step t. (At learning rate 0 build_adam adds
    no update and no counter: nothing to move.)"""
    ops = model.net.Proto().op
    counters = [i for i, op in enumerate(ops) if op.type == "AtomicIter"]
    assert len(counters) <= 1, "one optimizer's counter expected, found {}".format(len(counters))
    for counter in counters:
        ops.append(ops.pop(counter))


# The model zoo ResNet-50's blob names: batch norm fields, and its bottleneck blocks numbered through the stages
BN_FIELDS = {"weight": "s", "bias": "b", "running_mean": "rm", "running_var": "riv"}
RESNET50_BLOCKS = ["layer{}.{}".format(stage, block) for stage, blocks in enumerate((3, 4, 6, 3), 1)
                   for block in range(blocks)]


def inference_device(dev):
    """The device the Inference notebook computes on: IDEEP, Caffe2's device of oneDNN operators, in place of the CPU
    where this build has it (measured on the CI CPU, ResNet-50 at batch 32 with 2 threads: 31 s per 1000 images against
    59 on the CPU device, features within 1.9e-6 of the largest; docs/measurements.md#fast-paths); a GPU as it is."""
    if dev.device_type == caffe2_pb2.CPU and workspace.C.use_mkldnn:
        return core.DeviceOption(caffe2_pb2.IDEEP, 0, random_seed=dev.random_seed)
    return dev


def zoo_blob(name, shape, num_classes=None):
    """The model zoo ResNet-50's blob of a canonical (torchvision) weight name, e.g. layer2.0.conv2.weight ->
    comp_3_conv_2_w; the classifier's (fc.weight, fc.bias) is last_out_L<num_classes>_w or _b."""
    module, field = name.rsplit(".", 1)
    if module == "fc":
        return "last_out_L{}_{}".format(num_classes, field[0])
    if module in ("conv1", "bn1"):
        prefix = "conv1" if module == "conv1" else "conv1_spatbn_relu"
    else:
        stage, block, part = module.split(".", 2)  # e.g. layer2, 0, and conv2, bn2, downsample.0 or downsample.1
        block = RESNET50_BLOCKS.index(stage + "." + block)
        prefix = {"downsample.0": "shortcut_projection_{}", "downsample.1": "shortcut_projection_{}_spatbn"}.get(
            part, ("comp_{}_conv_" if part.startswith("conv") else "comp_{}_spatbn_") + part[-1]).format(block)
    return prefix + ("_w" if len(shape) == 4 else "_" + BN_FIELDS[field])


def speed_settings(task, dev):
    """The record's ledger (common/results.py SETTINGS) for a Caffe2 notebook of `task` on `dev`: NCHW, a static net
    of operators on the CPU device, or IDEEP (Caffe2's oneDNN device) where the notebook took it, cuDNN on a GPU."""
    on_gpu = dev.device_type == caffe2_pb2.CUDA
    blas = workspace.C.get_build_options().get("BLAS_INFO")
    if on_gpu:
        kernels = "cuDNN, cuBLAS"
    elif dev.device_type == caffe2_pb2.IDEEP:
        kernels = "oneDNN (Caffe2's IDEEP device)"
    else:
        kernels = "Caffe2's CPU operators (Eigen, {} for matrix products)".format(blas)
    return results.speed_settings(
        task, layout="NCHW", compiler="a static net of operators", autotune=False if on_gpu else None, kernels=kernels,
        threads=environment.usable_cores(), precision=chosen["computed_precision"])


def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts: the torch wheel's version, its BLAS and
    oneDNN, its CUDA and cuDNN on a GPU."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["precision"],
                                compile_mode=chosen["compile_mode"])
    on_gpu = dev.device_type == caffe2_pb2.CUDA
    record["device"] = "cuda:{}".format(dev.device_id) if on_gpu else "cpu"
    build = workspace.C.get_build_options()
    record["environment"] = environment.facts(
        NAME, VERSION, record["device"], gpus=gpu_names() if on_gpu else [],
        cuda=torch.version.cuda if on_gpu else None,
        cudnn=str(torch.backends.cudnn.version()) if on_gpu else None,
        threads=environment.usable_cores(), computed_precision=chosen["computed_precision"], gpu_unused=chosen["note"],
        extra={"torch": torch.__version__, "blas": build.get("BLAS_INFO"), "mkldnn": build.get("USE_MKLDNN")})
    record["settings"] = speed_settings(task, dev)
    return record


def probe():
    """For the runner after a build: Caffe2's version, its GPUs, and a matrix product on the first one."""
    def matrix_product():
        gpu0 = core.DeviceOption(caffe2_pb2.CUDA, 0)
        workspace.FeedBlob("probe_x", torch.ones(64, 64).numpy(), device_option=gpu0)
        workspace.RunOperatorOnce(core.CreateOperator("MatMul", ["probe_x", "probe_x"], ["probe_y"], device_option=gpu0))
        return workspace.FetchBlob("probe_y").sum()

    return check_gpu(NAME, VERSION, gpu_names(), why_no_gpu, matrix_product)
