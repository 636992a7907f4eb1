"""Theano: the device, the precision policy and the record's facts, for the notebooks that run on it (Keras 2 with
KERAS_BACKEND=theano). Theano 1.0.5 on Python 3.8, CPU only: its GPU back end is gone from current CUDA."""

import theano
import theano.tensor.blas
from theano.gof.utils import MethodNotDefined

from common import environment, results, variants
from frameworks.probe import check_gpu

NAME = "Theano"
# what choose_device and set_variant decided, for the record: the precision and compile mode asked for, and the
# precision computed in
chosen = {"note": None, "precision": "auto", "computed_precision": "fp32", "compile_mode": "default"}


def _batched_dot_in_numpy(self, *args, **kwargs):
    raise MethodNotDefined("BatchedDot's C code needs a BLAS library: without one, NumPy's np.dot per matrix (perform)")


# Theano 1.0.5 without a BLAS library (blas.ldflags empty, as here) compiles its NumPy-based stand-ins for sgemm_ and
# dgemm_ into each BLAS op's module with another signature than the extern "C" one that BatchedDot's C code takes the
# address of, so a graph with T.batched_dot (Lasagne's attention, Keras 2's K.batch_dot) fails to load ("undefined
# symbol: dgemm_"). Such an op then runs its Python implementation, an np.dot per matrix; no other op is affected.
if not theano.config.blas.ldflags:
    theano.tensor.blas.BatchedDot.c_code = _batched_dot_in_numpy


def gpu_names():
    """The GPUs Theano can use here: none (why_no_gpu says why)."""
    return []


def why_no_gpu():
    """Why Theano computes on the CPU only here."""
    return ("Theano {} computes on GPUs only through its libgpuarray back end, which was last released in 2018 for "
            "CUDA 9 and is not in this environment".format(theano.__version__))


def choose_device(device):
    """"cpu", Theano's device here; device="cuda" raises DeviceError with why_no_gpu's reason. Theano reads its device
    from THEANO_FLAGS when it is imported, and its compiled functions run there."""
    kind, chosen["note"] = environment.choose_device(device, NAME, gpu_names(), why_no_gpu)
    # no GPU peak-memory counter to register (common/memory.py): the CPU's resident peak is every run's
    return theano.config.device


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py); returns the precision computed in ("fp32", with floatX float32), or
    raises Unsupported before anything is built: no bfloat16 type, float16 only in the GPU back end, and every
    theano.function compiled to C already."""
    float32 = variants.float32_mode(NAME, precision, False, "Theano on the CPU")
    variants.check(precision, compile_mode)
    if precision == "bf16":
        variants.refuse(NAME, "precision", precision, "Theano has no bfloat16 type")
    if precision == "fp16":
        variants.refuse(NAME, "precision", precision, "Theano computes float16 only in its GPU back end "
                                                      "(libgpuarray), which this environment lacks")
    variants.refuse_compiling(NAME, compile_mode)
    return variants.note_choice(chosen, precision, float32, compile_mode)


def speed_settings(task, dev):
    """The record's ledger (common/results.py SETTINGS) for a Theano notebook of `task` (and Keras 2's and Lasagne's on
    Theano): NCHW, every function compiled to C, convolutions as matrix products (CorrMM) on its BLAS."""
    return results.speed_settings(
        task, layout="NCHW", compiler="theano.function, compiled to C",
        kernels="CorrMM convolutions on {}".format(theano.config.blas.ldflags or "NumPy's BLAS, through its C API"),
        threads=environment.usable_cores(), precision="{} (floatX {})".format(chosen["computed_precision"],
                                                                           theano.config.floatX))


def start_record(task, profile, params, dev):
    """A new result record with the device and the environment facts as Theano reports them: floatX, the BLAS it
    links to, where it keeps its compiled modules."""
    record = results.new_record(NAME, task, profile, params=params, precision=chosen["precision"],
                                compile_mode=chosen["compile_mode"])
    record["device"] = "cpu"
    record["environment"] = environment.facts(
        NAME, theano.__version__, record["device"], threads=environment.usable_cores(),
        computed_precision=chosen["computed_precision"], gpu_unused=chosen["note"],
        extra={"floatX": theano.config.floatX, "blas": theano.config.blas.ldflags or "NumPy's, through its C API",
               "compiledir": theano.config.compiledir})
    record["settings"] = speed_settings(task, dev)
    return record


def probe():
    """For the runner after a build: Theano's version; no GPU (why_no_gpu)."""
    return check_gpu(NAME, theano.__version__, gpu_names(), why_no_gpu, None)
