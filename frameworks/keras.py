"""Keras 3: the device, the precision policy and the record's facts, through the module of the backend it runs on."""

import importlib

import keras

from common import environment, gpu, results

NAME = "Keras"
# Keras' backend name -> the module of this package that knows that framework
BACKEND_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "pytorch"}


def backend_module():
    """The frameworks module of the backend Keras runs on (KERAS_BACKEND, read when keras was imported)."""
    return importlib.import_module("frameworks." + BACKEND_MODULES[keras.backend.backend()])


def choose_device(device):
    """The backend's device for the notebook's `device` parameter (Keras places its tensors there itself)."""
    return backend_module().choose_device(device)


def set_variant(dev, precision="auto", compile_mode="default"):
    """The run's variant (common/variants.py), set in the backend framework; returns the precision computed in."""
    return backend_module().set_variant(dev, precision, compile_mode)


def start_record(task, profile, params, dev):
    """A new result record: Keras' version, its backend's version, and the GPUs, CUDA and cuDNN the backend reports."""
    backend = backend_module()
    framework = importlib.import_module(keras.backend.backend())  # the backend's own package: tensorflow, jax, torch
    on_gpu = gpu.device_kind(str(dev)) == "gpu"
    record = results.new_record(NAME, task, profile, variant=keras.backend.backend(), params=params,
                                precision=backend.chosen["requested"], compile_mode=backend.chosen["compile"])
    record["device"] = "gpu:0" if on_gpu else "cpu"
    gpus, cuda, cudnn = backend.gpu_facts(on_gpu)
    record["environment"] = environment.facts(
        NAME, keras.__version__, record["device"], gpus=gpus, cuda=cuda, cudnn=cudnn, threads=environment.usable_cores(),
        precision=backend.chosen["precision"], gpu_unused=backend.chosen["note"],
        extra={"backend": keras.backend.backend(), "backend_version": framework.__version__})
    return record
