"""What every task is: the Task class that each task module (common/tasks/<key>.py) makes one of, and how its
same-weights check is described (SameWeights). Standard library only at import time: notebooks import it on Python
3.6, and the command line before NumPy."""

from collections import OrderedDict

# Every section a notebook can have, by cell tag, with the title the Rosetta pages give it. The cell
# before the first tagged one (the notebook's title and introduction) is the "title" section.
SECTION_TITLES = OrderedDict([
    ("title", "Introduction"),
    ("parameters", "Parameters"),
    ("imports", "Imports"),
    ("setup", "Setup"),
    ("data", "Data"),
    ("model", "Model"),
    ("weights", "Shared weights"),
    ("training", "Training step and loop"),
    ("evaluation", "Evaluation"),
    ("inference", "Timed inference"),
    ("results", "Result record"),
])
# Parameters every notebook of every task has, in this order, in its first code cell.
PARAMETERS = ("profile", "overrides", "data_source", "device", "precision", "compile_mode", "threads", "seed",
              "result_path")
# The sections of a task that trains a model and evaluates it
TRAINING_SECTIONS = ("parameters", "imports", "setup", "data", "model", "weights", "training", "evaluation", "results")


class SameWeights(object):
    """How the same-weights check (runner/checks/equivalence.py) holds a task's notebooks to PyTorch's: which runs,
    which arrays and outputs, which tolerances."""

    def __init__(self, overrides, outputs="logits", forward=True, steps=True, weights_tolerance=None,
                 representable=None, checks_not_equivalent=True, forward_changes=None):
        self.overrides = dict(overrides)  # of the smoke profile, for every run of the check
        # what the notebook exports beside its weights: "logits", or "resnet50 features" (compared relative to the
        # largest, a zoo's ResNet-50 v1 against PyTorch's v1 reference)
        self.outputs = outputs
        self.forward = forward  # the outputs at the shared weights compared, before any step
        self.steps = steps  # the training steps compared: weights, each array's step, and the logits after them
        self.weights_tolerance = weights_tolerance  # np.allclose's rtol and atol for the weights after the steps
        # the arrays a framework that cannot compute the reference function still takes in and gives back unchanged
        # (None: every one)
        self.representable = None if representable is None else tuple(representable)
        self.checks_not_equivalent = checks_not_equivalent  # False: a framework declared not equivalent is not run
        # what a run at the shared weights changes of the overrides (a learning rate of 0 and one epoch for a task that
        # trains: its exported logits are those of the shared weights)
        self.forward_changes = dict(forward_changes or {})

    def forward_overrides(self):
        """The overrides of the check's run that computes at the shared weights."""
        return dict(self.overrides, **self.forward_changes)


class Task(object):
    """One workload: its names, its notebooks' sections, its hyperparameters and profiles, its canonical weights, its
    FLOP count and headline figure, and its same-weights check. A task module makes one (a subclass where it computes
    something of its own)."""

    def __init__(self, key, notebook, title, sections, headline, metrics, digits, hyperparameters, profiles,
                 dataset=None, train_split=None, test_split=None, parameters=(), same_weights=None, inputs="images",
                 compile_modes=("default",), rules=None, optimises=True, data_parallel=False):
        unknown = [tag for tag in sections if tag not in SECTION_TITLES]
        if unknown:
            raise ValueError("task {}: sections without a title in SECTION_TITLES: {}".format(key, ", ".join(unknown)))
        self.key = key  # the command-line name, e.g. "cnn"
        self.notebook = notebook  # the notebooks' name suffix: <Framework>_<notebook>.ipynb
        self.title = title
        self.sections = tuple(sections)  # cell tags, in notebook order; every notebook of the task has all of them
        self.headline = headline  # (metric, label): the figure the task is ranked by, lower is better
        self.metrics = tuple(metrics)  # the metrics an "ok" record must have
        self.digits = digits  # decimals of the headline figure in tables
        self.hyperparameters = hyperparameters  # the reference numbers (profile "full"); None: the whole split
        self.profiles = profiles  # {profile: what it changes of them} (common/hyperparams.py PROFILES)
        self.rules = dict(rules or {})  # {name: common.hyperparams.Rule} of the hyperparameters only this task has
        self.dataset = dataset  # the name of its download in common/datasets.py (REMOTE_FILES); None: generated
        self.train_split = train_split  # samples in the whole training split (None: nothing is trained to accuracy)
        self.test_split = test_split  # samples in the whole test split
        self.parameters = tuple(parameters)  # notebook parameters after PARAMETERS, the same in every framework
        self.inputs = inputs  # "images" or "tokens": what a batch holds (an image layout matters for images only)
        # the compile modes (common/variants.py) a run gives the task's notebooks where --compile, --precision and
        # --sweep are not given: each is a row of its table
        self.compile_modes = tuple(compile_modes)
        self.same_weights = same_weights  # SameWeights, or None: not checked against PyTorch
        self.optimises = optimises  # its notebooks take optimiser steps (fp16 needs a loss scale there)
        # its rows are data-parallel training, judged by the data-parallel check (runner/checks/data_parallel.py)
        # instead, and a job takes the `devices` its overrides ask for
        self.data_parallel = data_parallel

    @property
    def trains(self):
        """True for a task that trains a model to an accuracy (and so reports it)."""
        return self.train_split is not None

    def check_values(self, params):
        """Raise ValueError, in one line, where values of `params` that are each allowed do not go together."""

    def weight_shapes(self, params):
        """{name: shape} of the task's canonical weights for its hyperparameters `params`."""
        raise NotImplementedError("task {} has no canonical weights".format(self.key))

    def optional_weight_shapes(self):
        """{name: shape} of the arrays a canonical file of the task may hold besides weight_shapes()."""
        return {}

    def reference_weights(self, params, seed=0):
        """Deterministic canonical weights from `seed` (common/weight_layouts.py fan_in_weights: PyTorch's layers' rule)."""
        from common import weight_layouts  # NumPy: not at the command line's start

        return weight_layouts.fan_in_weights(self.weight_shapes(params), seed)

    def training_flops(self, params):
        """FLOPs of one sample's training step, or None for a task that does not train."""
        return None

    def epoch_samples(self, params):
        """The samples a training epoch steps through: its training split or subset, in whole batches."""
        samples = params.get("train_samples") or self.train_split
        return samples // params["batch_size"] * params["batch_size"]

    def achieved_flops(self, record):
        """A finished record's achieved FLOP/s, None where unknown: a training step's FLOPs times the samples of an
        epoch, over the median epoch."""
        params, timings = record.get("params") or {}, record.get("timings") or {}
        median = (timings.get("epoch_s") or {}).get("median")
        flops = self.training_flops(params) if median else None
        return flops * self.epoch_samples(params) / median if flops else None

    def devices(self, overrides):
        """The devices one job of the task takes, with its hyperparameter `overrides`: one, or for data-parallel
        training the `devices` they ask for."""
        return int((overrides or {}).get("devices", 1)) if self.data_parallel else 1

    def __repr__(self):
        return "Task({!r})".format(self.key)
