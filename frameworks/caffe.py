"""Caffe (BVLC Caffe 1.0, Debian 11's CPU build): the device and its seed, the precision policy, the record's facts,
and the prototxt files Caffe reads its nets and solvers from, for every Caffe notebook. Python 3.9, in the caffe
environment (envs/caffe-debian.txt)."""

import atexit
import os
import shutil
import tempfile

import caffe

from common import checkout, environment, results, variants
from frameworks.probe import check_gpu

NAME = "Caffe"
VERSION = caffe.__version__
PACKAGES = os.path.join(checkout.install_folder(), "envs", "caffe-debian.txt")  # what its environment installed
# what choose_device and set_variant decided, for the record: the precision and compile mode asked for, and the
# precision computed in
chosen = {"note": None, "precision": "auto", "computed_precision": "fp32", "compile_mode": "default"}
_folder = []  # the temporary folder of this process's prototxt files, made on first use


def gpu_names():
    """The GPUs Caffe can use here: none (why_no_gpu says why)."""
    return []


def why_no_gpu():
    """Why Caffe computes on the CPU only here."""
    return "Caffe {} here is Debian 11's CPU build (python3-caffe-cpu): no CUDA build of Caffe 1.0 is packaged " \
           "anywhere this project can install from".format(VERSION)


def choose_device(device, seed=0):
    """"cpu", Caffe's device here (device="cuda" raises DeviceError with why_no_gpu's reason), with Caffe's random
    generator seeded: it draws the initial weights of every net built afterwards, and its dropout masks."""
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    # no GPU peak-memory counter to register (common/memory.py): the CPU's resident peak is every run's
    caffe.set_mode_cpu()
    caffe.set_random_seed(seed)
    return "cpu"


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py); returns the precision computed in ("fp32"), or raises Unsupported
    before anything is built: Caffe 1.0 computes in float32 (its Python nets) or float64, and has no compiler."""
    float32 = variants.float32_mode(NAME, precision, False, "Caffe on the CPU")
    variants.check(precision, compile_mode)
    if precision in ("bf16", "fp16"):
        variants.refuse(NAME, "precision", precision, "Caffe 1.0's layers exist in float32 and float64 only (float16 "
                                                      "came with NVIDIA's fork, NVCaffe)")
    variants.refuse_compiling(NAME, compile_mode)
    return variants.note_choice(chosen, precision, float32, compile_mode)


def prototxt_file(message, name):
    """Write a Caffe protocol buffer (a NetParameter from NetSpec.to_proto(), a SolverParameter) as text into file
    `name` of a temporary folder, removed when the process ends, and return its path: Caffe reads nets and solvers
    from such files only."""
    if not _folder:
        _folder.append(tempfile.mkdtemp(prefix="rosetta-caffe-"))
        atexit.register(shutil.rmtree, _folder[0], True)
    path = os.path.join(_folder[0], name)
    with open(path, "w") as f:
        f.write(str(message))
    return path


def prototxt_head(message, layers):
    """The text of the first `layers` layers of a NetParameter, and how many follow: a generated net shown in part."""
    head = message.__class__()
    head.CopyFrom(message)
    del head.layer[layers:]
    rest = len(message.layer) - len(head.layer)
    return str(head) + ("# ... and {} more layers\n".format(rest) if rest else "")


def feed(net, **arrays):
    """Copy NumPy arrays into a net's input blobs by name (`feed(net, images=x, labels=y)`), reshaping the net first
    where a batch's shape differs from the blob's (Caffe's layers take their shapes from their inputs when they
    run); ids and labels go in as float32, Caffe's only data type here."""
    reshaped = False
    for name, array in arrays.items():
        blob = net.blobs[name]
        if blob.data.shape != array.shape:
            blob.reshape(*array.shape)
            reshaped = True
    if reshaped:
        net.reshape()
    for name, array in arrays.items():
        net.blobs[name].data[...] = array


def debian_version(package):
    """The Debian version of `package` that the environment extracted, from envs/caffe-debian.txt."""
    with open(PACKAGES) as f:
        for line in f:
            name, _, version = line.split("#")[0].strip().partition("=")
            if name == package:
                return version
    return None


def loaded_blas():
    """The BLAS that Caffe's libblas.so.3 is in this process: its folder and the libraries loaded from there
    (Debian's threaded OpenBLAS in the caffe environment)."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "/" in line}
    folders = {os.path.dirname(path) for path in paths if os.path.basename(path) == "libblas.so.3"}
    return "; ".join("{}: {}".format(folder, ", ".join(sorted(os.path.basename(path) for path in paths
                                                               if os.path.dirname(path) == folder)))
                     for folder in sorted(folders)) or None


def speed_settings(task, dev):
    """The record's ledger (common/results.py SETTINGS) for a Caffe notebook of `task`: NCHW, the net's layers one by
    one, im2col convolutions on the BLAS this process loaded."""
    return results.speed_settings(task, layout="NCHW", compiler="none: the prototxt's layers one by one",
                                  kernels="im2col and {}".format(loaded_blas()), threads=environment.usable_cores(),
                                  precision=chosen["computed_precision"])


def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts: Caffe's Debian package and the BLAS it runs
    on."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["precision"],
                                compile_mode=chosen["compile_mode"])
    record["device"] = dev
    record["environment"] = environment.facts(
        NAME, VERSION, record["device"], threads=environment.usable_cores(), computed_precision=chosen["computed_precision"],
        gpu_unused=chosen["note"],
        extra={"package": "python3-caffe {} (Debian 11)".format(debian_version("python3-caffe")),
               "blas": loaded_blas()})
    record["settings"] = speed_settings(task, dev)
    return record


def probe():
    """For the runner after a build: Caffe's version; no GPU (why_no_gpu)."""
    return check_gpu(NAME, VERSION, gpu_names(), why_no_gpu, None)
