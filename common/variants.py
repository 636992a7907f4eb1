"""The variants of a notebook run that GPU users compare: numeric precision and compiled mode.

Every notebook has the parameters `precision` and `compile_mode`; its framework's module
(frameworks/<name>.py) applies them the framework's own way, or raises Unsupported with the reason
where the framework or the device has no such mode, so that a row never runs something else under
the variant's name. Standard library only: notebooks import this on Python 3.6.
"""

import contextlib
from collections import OrderedDict

# precision -> what it means; "auto" is the project's float32 policy (common/environment.py)
PRECISIONS = OrderedDict([
    ("auto", "float32, with TF32 tensor cores where the GPU has them (fp32 elsewhere)"),
    ("fp32", "strict float32: TF32 off everywhere"),
    ("tf32", "float32 with TF32 tensor cores for matrix products and convolutions (GPUs of compute capability 8.0+)"),
    ("bf16", "mixed precision: bfloat16 compute, float32 weights and loss"),
    ("fp16", "mixed precision: float16 compute with loss scaling, float32 weights and loss"),
])
# compile_mode -> what it means
COMPILE_MODES = OrderedDict([
    ("default", "what the notebook does as written (eager, or the framework's usual graph)"),
    ("on", "the framework's compiler: torch.compile, XLA (jit_compile=True), MXNet's static hybridize"),
])
DEFAULT = ("auto", "default")
MIXED = ("bf16", "fp16")
# Frameworks that run every step as written, compiled or not, whatever they are asked: compile_mode="on" has nothing
# to add, and each refuses it with this reason (refuse_compiling). The runner decides such a row from here without
# starting a kernel (compile_refusal).
COMPILED_AS_WRITTEN = OrderedDict([
    ("JAX", "JAX always compiles its steps with jax.jit: the default row is the compiled one"),
    ("Chainer", "Chainer runs define-by-run only; it has no compiler"),
    ("CNTK", "CNTK always builds a static graph and has no further compiler: the default row is the compiled one"),
    ("Theano", "Theano compiles every function to C already: the default row is the compiled one"),
    ("Caffe", "Caffe runs a net's layers one by one as the prototxt lists them, with no compiler: the default row is "
              "the only one"),
    ("Caffe2", "Caffe2 runs every net as a static graph of operators, with no further compiler: the default row is "
               "the compiled one"),
])


class Unsupported(RuntimeError):
    """A variant that this framework or device cannot run; the message says which and why, in one line."""


def check(precision, compile_mode):
    """Raise ValueError, in one line, for a precision or compile mode that is not one of the known ones."""
    if precision not in PRECISIONS:
        raise ValueError("precision={!r}: use one of {}".format(precision, ", ".join(PRECISIONS)))
    if compile_mode not in COMPILE_MODES:
        raise ValueError("compile_mode={!r}: use one of {}".format(compile_mode, ", ".join(COMPILE_MODES)))


def refuse(framework, option, value, why):
    """Raise Unsupported: '<framework> cannot run <option>=<value>: <why>'."""
    raise Unsupported("{} cannot run {}={}: {}".format(framework, option, value, why))


def refuse_compiling(framework, compile_mode):
    """Raise Unsupported for compile_mode="on" where `framework` runs every step as written (COMPILED_AS_WRITTEN)."""
    if compile_mode == "on" and framework in COMPILED_AS_WRITTEN:
        refuse(framework, "compile_mode", compile_mode, COMPILED_AS_WRITTEN[framework])


def compile_refusal(framework, runs_on=None):
    """The words a notebook of `framework` (running on framework `runs_on`, as Keras 2 and Lasagne do) refuses
    compile_mode="on" with at the default precision, known without running it; None where it may compile."""
    for name, prefix in ((framework, ""), (runs_on, "{} on ".format(framework))):
        if name in COMPILED_AS_WRITTEN:
            return "{}{} cannot run compile_mode=on: {}".format(prefix, name, COMPILED_AS_WRITTEN[name])
    return None


@contextlib.contextmanager
def refused_as(framework):
    """Inside it, a backend's Unsupported becomes `framework`'s: '<framework> on <backend> cannot run ...' (Keras 2
    and Lasagne, whose rows refuse what the framework they run on refuses)."""
    try:
        yield
    except Unsupported as refusal:
        raise Unsupported("{} on {}".format(framework, refusal)) from None


def float32_mode(framework, precision, tf32_available, device_name):
    """The float32 mode for `precision` on a device: "tf32" or "fp32".

    Only "fp32" keeps TF32 off; "auto", and the float32 parts of bf16 and fp16 runs, take TF32 where the device has
    it; "tf32" asked of a device without TF32 raises Unsupported."""
    check(precision, "default")
    if precision == "tf32" and not tf32_available:
        refuse(framework, "precision", precision, "{} has no TF32 (GPUs of compute capability 8.0 and newer "
                                                  "do)".format(device_name))
    return "tf32" if precision != "fp32" and tf32_available else "fp32"


def note_choice(chosen, precision, float32, compile_mode):
    """Note a run's variant in a framework module's `chosen` dict, for its record: the precision and compile mode asked
    for (`precision`, `compile_mode`) and the precision computed in (`computed_precision`: `precision` itself for bf16
    and fp16, else the float32 mode); returns the precision computed in."""
    check(precision, compile_mode)
    chosen.update(precision=precision, computed_precision=precision if precision in MIXED else float32,
                  compile_mode=compile_mode)
    return chosen["computed_precision"]


def precision_setting(computed, policy):
    """A ledger's precision (common/results.py SETTINGS): what a run computes in, with the framework's mixed-precision
    policy for bf16 and fp16, e.g. 'bf16 (torch.autocast)'; float32 and TF32 as they are."""
    return "{} ({})".format(computed, policy) if computed in MIXED else computed


def label(precision="auto", compile_mode="default"):
    """A variant's words for a row label, e.g. 'bf16 · compiled'; '' for the default run."""
    parts = [] if precision == "auto" else [precision]
    if compile_mode == "on":
        parts.append("compiled")
    return " · ".join(parts)


def suffix(precision="auto", compile_mode="default"):
    """A variant's part of file names, e.g. '-bf16-compiled'; '' for the default run."""
    words = label(precision, compile_mode)
    return "-" + words.replace(" · ", "-") if words else ""
