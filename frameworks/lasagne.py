"""Lasagne 0.1 on Theano 1.0: what every Lasagne notebook repeats. Importing this module first makes Lasagne
importable (its pooling layers look for a Theano module that Theano 1.0 renamed); the device, the precision policy and
the record's facts are Theano's (frameworks/theano.py), and `correlate` is the convolution the other frameworks
compute. Python 3.9, in the theano environment."""

import sys
import types

import theano
import theano.tensor as T
from theano.tensor.signal import pool

from common import variants
from frameworks import theano as backend


def _max_pool_2d(input, ds, ignore_border=None, st=None, padding=(0, 0), mode="max"):
    return pool.pool_2d(input, ws=ds, ignore_border=ignore_border, stride=st, pad=padding, mode=mode)


# Lasagne 0.1 (2015, its last release) pools through theano.tensor.signal.downsample.max_pool_2d; Theano 0.9 renamed
# the module to theano.tensor.signal.pool and the arguments ds, st, padding to ws, stride, pad. A stand-in module
# under the old name passes them on, so that `import lasagne` works unchanged.
downsample = types.ModuleType("theano.tensor.signal.downsample", "Lasagne 0.1's name for theano.tensor.signal.pool.")
downsample.max_pool_2d = _max_pool_2d
sys.modules.setdefault(downsample.__name__, downsample)
theano.tensor.signal.downsample = sys.modules[downsample.__name__]

import lasagne  # noqa: E402 - after the stand-in module it needs

NAME = "Lasagne"


def correlate(input, filters, subsample=(1, 1), border_mode="valid", image_shape=None, filter_shape=None):
    """Theano's conv2d without its filter flip, for Conv2DLayer's `convolution` argument: Theano's default conv2d is a
    true convolution (it flips every kernel), where the other frameworks, and the canonical weights, correlate."""
    return T.nnet.conv2d(input, filters, input_shape=image_shape, filter_shape=filter_shape, border_mode=border_mode,
                         subsample=subsample, filter_flip=False)


def choose_device(device):
    """Theano's device for the notebook's `device` parameter: "cpu" (device="cuda" raises DeviceError with the
    reason: frameworks/theano.py)."""
    return backend.choose_device(device)


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py); returns the precision computed in ("fp32"), or raises Unsupported with
    Theano's reason before anything is built: Lasagne adds no precision or compiler of its own."""
    with variants.refused_as(NAME):  # the row is Lasagne's: "Lasagne on Theano cannot run ..."
        return backend.set_variant(dev, precision, compile_mode)


def start_record(task, profile, params, dev):
    """A new result record: Theano's (device, threads, floatX, BLAS), then Lasagne's name and version with Theano's
    beside them."""
    record = backend.start_record(task, profile, params, dev)
    record["framework"] = NAME
    record["environment"].update(framework=NAME, framework_version=lasagne.__version__, backend="theano",
                                 backend_version=theano.__version__)
    return record
