"""The concepts of the Rosetta stone: what a reader looks up across frameworks (the loss, the optimizer step, mixed
precision, ...), each a row of the concept index (docs/rosetta/index.html). Every notebook cuts its code so that each
concept of its task is its own cell (or cells), tagged `concept:<name>` beside its section tag. A framework's own facts
about the concepts live in this package's module of that framework (common/concepts/<framework key>.py):
APIS, the calls of the framework a reader of a concept must see, and LACKS, the concepts it has no cell for, with
the reason. Standard library only: notebooks import `common` on Python 3.6.
"""

import importlib
import pkgutil
from collections import OrderedDict

__all__ = ["CONCEPTS", "Concept", "TAG_PREFIX", "apis", "concept_tags", "get", "lacks", "of_task"]

TAG_PREFIX = "concept:"  # a code cell's tag `concept:<name>` names the concept it holds
TRAINS = ("cnn", "rnn", "transformer", "train")  # the tasks that take optimiser steps
EVALUATES = ("cnn", "inference", "rnn", "transformer")  # the tasks that compute outputs in inference mode
EVERY = ("cnn", "inference", "rnn", "transformer", "train")


class Concept(object):
    """One concept: its tag name, its title, one line on what it is, and the tasks whose notebooks have it."""

    def __init__(self, name, title, what, tasks):
        self.name, self.title, self.what, self.tasks = name, title, what, tuple(tasks)

    @property
    def tag(self):
        """The cell tag that marks the concept's cells."""
        return TAG_PREFIX + self.name

    def __repr__(self):
        return "Concept({!r})".format(self.name)


CONCEPTS = OrderedDict((concept.name, concept) for concept in [
    Concept("imports", "Imports", "The framework's modules, imported after the thread count and the GPUs are set.",
            EVERY),
    Concept("device", "Device choice", "Where the arrays live and the work runs: the GPU when there is one.", EVERY),
    Concept("seeding", "Seeding", "The framework's random state, seeded for initialisation, dropout and shuffling.",
            EVERY),
    Concept("float32-policy", "Float32 and TF32", "How float32 matrix products and convolutions are computed by "
                                                  "default: full float32, or TF32 on GPUs that have it.", EVERY),
    Concept("data-layout", "Data layout", "How a batch is handed to the framework: the array type, the axis order of "
                                          "images (NCHW or NHWC), the dtype of token ids, the device.", EVERY),
    Concept("model", "Model definition", "The network itself, written in the framework's own way of building models.",
            EVERY),
    Concept("initialisation", "Initialisation", "Where the starting weights come from: the framework's initialisers, "
                                                "or a model zoo's pretrained weights.", EVERY),
    Concept("weight-layout", "Weight layout", "The weights as the framework stores them, read from and written to one "
                                              "canonical layout that every framework shares.", EVERY),
    Concept("loss", "Loss", "Softmax cross-entropy on the logits.", TRAINS),
    Concept("optimizer", "Optimizer", "The update rule and its hyperparameters (SGD with momentum, AdamW).", TRAINS),
    Concept("training-step", "Training step", "One step: forward, loss, gradients, update.", TRAINS),
    Concept("training-loop", "Training loop", "The epochs or timed passes that call the step.", TRAINS),
    Concept("mixed-precision", "Mixed precision", "bfloat16 or float16 compute with float32 weights: autocast or a "
                                                  "dtype policy, and loss scaling for float16.", EVERY),
    Concept("compilation", "Compilation", "The framework's compiler or graph mode: jit, graphs, hybridize, "
                                          "torch.compile.", EVERY),
    Concept("prediction", "Evaluation mode and prediction", "Outputs with dropout off and no gradients kept.",
            EVALUATES),
    Concept("sync", "Synchronising for timing", "Waiting for the device's queued work, so that a clock measures it.",
            EVERY),
    Concept("timed-inference", "Timed inference", "Batches through the model, warm-up apart, each pass timed.",
            ("inference",)),
    Concept("recurrent-layer", "Recurrent layer", "The GRU over the embedded words.", ("rnn",)),
    Concept("attention", "Attention and its padding mask", "Multi-head self-attention that attends to the words and "
                                                           "not to the padding.", ("transformer",)),
    Concept("data-parallel", "Data-parallel set-up", "The workers, one per device, and how they start and meet.",
            ("train",)),
    Concept("all-reduce", "Gradient all-reduce", "How each worker's gradients are averaged over all workers before "
                                                 "the update.", ("train",)),
])


def get(name):
    """The concept named `name`; ValueError naming the known concepts if there is none."""
    if name not in CONCEPTS:
        raise ValueError("unknown concept {!r}; known concepts: {}".format(name, ", ".join(CONCEPTS)))
    return CONCEPTS[name]


def of_task(task):
    """The concepts a notebook of `task` has, in the registry's order."""
    return [concept for concept in CONCEPTS.values() if task in concept.tasks]


def concept_tags(tags):
    """The concept names among a cell's tags, in order."""
    return [tag[len(TAG_PREFIX):] for tag in tags or () if tag.startswith(TAG_PREFIX)]


def _framework_module(framework):
    """This package's module of `framework` (a catalog key), or None where it has none."""
    names = {name for _, name, is_package in pkgutil.iter_modules(__path__) if not is_package}
    return importlib.import_module(__name__ + "." + framework) if framework in names else None


def _facts(framework, name):
    module = _framework_module(framework)
    return getattr(module, name, {}) if module is not None else {}


def _for_task(facts, concept, task):
    """A fact stated for the concept in every task of the framework, or for (concept, task); the task's first."""
    return facts.get((concept, task), facts.get(concept))


def apis(framework, concept, task):
    """The calls of `framework` that a reader of `concept` in its `task` notebook must see (as code), a tuple."""
    found = _for_task(_facts(framework, "APIS"), concept, task)
    return tuple(found or ())


def lacks(framework, concept, task):
    """Why `framework`'s notebook of `task` has no cell of `concept`, or None where it has one."""
    return _for_task(_facts(framework, "LACKS"), concept, task)
