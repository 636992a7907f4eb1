"""Keras 2.3: the device, the precision policy and the record's facts, through the module of the backend it runs on
(CNTK or Theano; Keras 2.3 was the last release with backends other than TensorFlow). Python 3.6 and up."""

import importlib

import keras

from common import results, variants

NAME = "Keras 2"
# Keras' backend name -> the module of this package that knows that framework
BACKEND_MODULES = {"cntk": "cntk", "theano": "theano"}
# the image layout each backend computes in natively: channels first (N, C, H, W) for CNTK and Theano, as the seed
# benchmark found, so that Keras does not transpose every convolution's input and output
IMAGE_DATA_FORMATS = {"cntk": "channels_first", "theano": "channels_first"}


def backend_module():
    """The frameworks module of the backend Keras runs on (KERAS_BACKEND, read when keras was imported)."""
    return importlib.import_module("frameworks." + BACKEND_MODULES[keras.backend.backend()])


def choose_device(device):
    """The backend's device for the notebook's `device` parameter, made its default: Keras 2 computes there."""
    return backend_module().choose_device(device)


def image_data_format():
    """Set and return the backend's native image layout (IMAGE_DATA_FORMATS): "channels_first" on CNTK and Theano."""
    layout = IMAGE_DATA_FORMATS[keras.backend.backend()]
    keras.backend.set_image_data_format(layout)
    return layout


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py); returns the precision computed in, or raises Unsupported before anything
    is built: Keras 2.3 has no mixed precision, and its backends compile every graph already (compile_mode="on" is
    refused by the backend's module with its reason)."""
    variants.check(precision, compile_mode)
    if precision in variants.MIXED:
        variants.refuse(NAME, "precision", precision, "Keras 2.3 has no mixed precision: its floatx is one type for "
                                                      "weights and computation, without float32 master weights or "
                                                      "loss scaling (Keras 2.4 and later run on TensorFlow only)")
    with variants.refused_as(NAME):  # the row is Keras 2's: "Keras 2 on CNTK cannot run ..."
        return backend_module().set_variant(dev, precision, compile_mode)


def start_record(task, profile, params, dev):
    """A new result record: the backend's (device, GPUs, threads, precision), then Keras' name, version and image
    layout, with the backend's version beside them."""
    backend = keras.backend.backend()
    record = backend_module().start_record(task, profile, params, dev)
    record.update(framework=NAME, variant=backend)
    record["environment"].update(framework=NAME, framework_version=keras.__version__, backend=backend,
                                 backend_version=importlib.import_module(backend).__version__,
                                 image_data_format=keras.backend.image_data_format())
    layout = "NCHW" if keras.backend.image_data_format() == "channels_first" else "NHWC"
    record["settings"] = results.speed_settings(task, **dict(record["settings"], layout="{} (Keras' {})".format(
        layout, keras.backend.image_data_format())))
    return record
