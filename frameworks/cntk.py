"""CNTK: the device, the precision policy and the record's facts, for every CNTK notebook (Python 3.6); the MPI
launcher of the train notebook's workers."""

import os
import shutil
import sys

import cntk as C
import numpy as np

from common import environment, results, variants
from frameworks.probe import check_gpu

NAME = "CNTK"
# what choose_device and set_variant decided, for the record: the precision and compile mode asked for, and the
# precision computed in
chosen = {"note": None, "precision": "auto", "computed_precision": "fp32", "compile_mode": "default"}


def _gpu_devices():
    return [d for d in C.device.all_devices() if d.type() == C.device.DeviceKind.GPU]


def gpu_names():
    """The GPUs CNTK sees."""
    return [C.cntk_py.DeviceDescriptor.get_gpu_properties(d).name for d in _gpu_devices()]


def why_no_gpu():
    """Why CNTK sees no GPU: its CPU build, or a GPU build that found no GPU it supports."""
    return "CNTK {} sees no GPU (its GPU build, cntk-gpu, needs CUDA 10 and a GPU it has code for)".format(C.__version__)


def choose_device(device):
    """The CNTK device, made the process default; device="cuda" without a usable GPU raises DeviceError."""
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    dev = _gpu_devices()[0] if kind == "gpu" else C.device.cpu()
    C.device.try_set_default_device(dev)
    # no GPU peak-memory counter to register (common/memory.py): CNTK 2.7 exposes none
    return dev


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py); returns the precision computed in: "fp32" (CNTK 2.7's CUDA 10
    predates TF32, so float32 is float32 on every GPU), or raises Unsupported before anything is built: these
    notebooks have no bf16 or fp16 version (the reasons below) and CNTK no further compiler."""
    float32 = variants.float32_mode(NAME, precision, False, "CNTK 2.7 (built for CUDA 10)")
    variants.check(precision, compile_mode)
    if precision == "bf16":
        variants.refuse(NAME, "precision", precision, "CNTK 2.7 has no bfloat16 type (its data types are float32, "
                                                      "float64 and float16)")
    if precision == "fp16" and dev.type() != C.device.DeviceKind.GPU:
        variants.refuse(NAME, "precision", precision, "these notebooks' float16 needs a GPU in CNTK 2.7: on the CPU a "
                                                      "float16 convolution fails ('FP16 convolution is only supported via "
                                                      "cuDNN') and so does training a float16 graph ('Unsupported "
                                                      "data format')")
    if precision == "fp16":
        variants.refuse(NAME, "precision", precision, "not written: CNTK 2.7 has float16 tensors and C.cast on GPUs but "
                                                      "no automatic mixed precision and no loss scaling, and a "
                                                      "hand-cast float16 graph has had no GPU here to be checked on")
    variants.refuse_compiling(NAME, compile_mode)
    return variants.note_choice(chosen, precision, float32, compile_mode)



def mpi_launcher():
    """Open MPI 4's launcher, which starts the workers of CNTK's distributed learner (CNTK 2.7 links Open MPI 1.10's
    library names, served by Open MPI 4's libraries): {"mpiexec": path, "environment": variables it needs}. The one
    that `run_all.py setup cntk` extracted from Debian's openmpi-bin, relocated with OPAL_PREFIX, else the system's
    mpiexec; RuntimeError where there is neither."""
    quiet = {"OMPI_MCA_mca_base_component_show_load_errors": "0",  # components for absent fabrics (PSM, UCX, ...)
             "PMIX_MCA_pcompress_base_silence_warning": "1"}  # no compression of PMIx's messages (its zlib component)
    extracted = os.path.join(sys.prefix, "debian", "usr")
    if os.path.exists(os.path.join(extracted, "bin", "orterun")):
        return {"mpiexec": os.path.join(extracted, "bin", "orterun"),
                "environment": dict(quiet, OPAL_PREFIX=extracted)}  # Open MPI's files where they are
    if shutil.which("mpiexec"):
        return {"mpiexec": shutil.which("mpiexec"), "environment": quiet}
    raise RuntimeError("CNTK's workers need Open MPI 4's mpiexec: this system has Open MPI 4's libraries (so the "
                       "setup extracted none) but no launcher; install its openmpi-bin")


def speed_settings(task, dev):
    """The record's ledger (common/results.py SETTINGS) for a CNTK notebook of `task` on `dev`: NCHW, CNTK's static
    graph, its build's MKL and MKL-DNN on the CPU, cuDNN on a GPU (whose algorithms CNTK autotunes itself)."""
    on_gpu = dev.type() == C.device.DeviceKind.GPU
    return results.speed_settings(
        task, layout="NCHW", compiler="CNTK's static graph",
        kernels="cuDNN, cuBLAS" if on_gpu else "MKL and MKL-DNN (CNTK's build)",
        autotune=True if on_gpu else None, threads=C.cntk_py.get_max_num_cputhreads(), precision=chosen["computed_precision"])


def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts as CNTK reports them."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["precision"],
                                compile_mode=chosen["compile_mode"])
    on_gpu = dev.type() == C.device.DeviceKind.GPU
    record["device"] = "gpu:{}".format(dev.id()) if on_gpu else "cpu"
    record["environment"] = environment.facts(NAME, C.__version__, record["device"], gpus=gpu_names() if on_gpu else [],
                                              threads=C.cntk_py.get_max_num_cputhreads(),
                                              computed_precision=chosen["computed_precision"], gpu_unused=chosen["note"])
    record["settings"] = speed_settings(task, dev)
    return record


def probe():
    """For the runner after a build: CNTK's version, its GPUs, and a matrix product on the first one."""
    def matrix_product():
        x = C.constant(np.ones((64, 64), dtype=np.float32))
        return C.times(x, x).eval(device=_gpu_devices()[0]).sum()

    return check_gpu(NAME, C.__version__, gpu_names(), why_no_gpu, matrix_product)
