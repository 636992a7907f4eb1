"""Hyperparameters of the workloads and the run profiles (full, quick, smoke), in one place.

Notebooks receive a profile name (and optional overrides) as papermill parameters and call
`for_task` to get the numbers they train with; nothing else in the project repeats them.
"""

import copy
import math

from common import tasks

# The reference definition (the original Rosetta-stone benchmark's numbers).
# `train_samples` / `test_samples` of None mean "the whole split".
FULL = {
    "cnn": {
        "epochs": 10,
        "batch_size": 64,
        "lr": 0.01,
        "momentum": 0.9,
        "num_classes": 10,
        "conv_dropout": 0.25,  # after each pooling
        "dense_dropout": 0.5,  # after the first dense layer
        "train_samples": None,
        "test_samples": None,
    },
    "inference": {
        "batch_size": 32,
        "batches": 40,
        "repeats": 5,
        "warmup_batches": 1,
        "image_size": 224,
        "features": 2048,
        "weights": "auto",
    },
    "rnn": {
        "epochs": 3,
        "batch_size": 64,
        "lr": 0.001,
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": 1e-8,
        "vocab_size": 30000,
        "maxlen": 150,
        "embedding_dim": 125,
        "hidden_units": 100,
        "num_classes": 2,
        "train_samples": None,
        "test_samples": None,
    },
    # A pre-norm encoder (layer norm before attention and before the feed-forward block, and once after the last
    # layer): it trains from the first step without a learning-rate warm-up, which the post-norm original needs
    "transformer": {
        "epochs": 3,
        "batch_size": 64,
        "lr": 5e-4,
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": 1e-8,
        "weight_decay": 0.01,  # AdamW's decoupled decay, of every weight (biases, norms and embeddings too)
        "vocab_size": 30000,
        "maxlen": 150,  # tokens per review, and so the positions the position embedding has
        "model_dim": 128,
        "heads": 4,
        "layers": 4,
        "feedforward_units": 512,  # with exact (erf) GELU between its two dense layers
        "dropout": 0.1,  # on the embeddings' sum and on each block's output before its residual sum
        "norm_epsilon": 1e-5,
        "num_classes": 2,
        "train_samples": None,
        "test_samples": None,
    },
    "train": {
        "devices": 1,  # data-parallel workers per machine: GPUs, or on the CPU processes (or devices) sharing its cores
        "machines": 1,  # machines taking part, each with `devices` workers (the notebook runs on each: README)
        "batch_size": 64,  # per device: N devices step on N x batch_size images
        "micro_batches": 1,  # each device's batch in this many parts, gradients summed (see common/scaling.py)
        "image_size": 224,
        "num_classes": 1000,
        "lr": 0.1,
        "momentum": 0.9,
        "warmup_steps": 5,  # untimed, reported apart (compilation, autotuning, the engine's first buckets)
        "steps": 20,  # timed steps a pass
        "repeats": 5,  # timed passes, reported as median and spread
    },
}

# Profiles only name what they change relative to FULL.
PROFILES = {
    "full": {},
    # Three epochs, so that the first (warm-up, autotune, compilation inside the step) is reported apart and the
    # other two give a median and a spread; as few steps as still take every framework's own initialisation
    # clearly above chance (PyTorch's CNN takes off after 60 to 70 SGD steps on the stand-in, its GRU within 50 Adam steps).
    "quick": {
        "cnn": {"epochs": 3, "train_samples": 1536, "test_samples": 512},
        "inference": {"batches": 1, "repeats": 3},
        "rnn": {"epochs": 3, "train_samples": 1024, "test_samples": 512},
        # Half the RNN's reviews, for the main command's time: a transformer step costs 14 times a GRU's. PyTorch's
        # leaves chance within 24 steps (0.88 on 512 reviews, 0.48 on 256); three rows need more (docs/results.md)
        "transformer": {"epochs": 3, "train_samples": 512, "test_samples": 256},
        "train": {"batch_size": 8, "warmup_steps": 1, "steps": 2, "repeats": 3},
    },
    "smoke": {
        "cnn": {"epochs": 1, "train_samples": 256, "test_samples": 128},
        # 96: the smallest size at which ResNet-50's last stage (1/32 of it) still fits a 3x3 kernel,
        # which CNTK requires; frameworks that pad past the input's edge would accept 64.
        "inference": {"batch_size": 2, "batches": 2, "repeats": 2, "image_size": 96},
        "rnn": {"epochs": 1, "train_samples": 256, "test_samples": 128},
        "transformer": {"epochs": 1, "train_samples": 256, "test_samples": 128},
        "train": {"batch_size": 2, "image_size": 96, "num_classes": 10, "warmup_steps": 1, "steps": 1, "repeats": 2},
    },
}

# What each profile is for, for help texts and reports.
PROFILE_NOTES = {
    "full": "the benchmark as defined (10/3 epochs, whole datasets, 40 batches x 5 repeats)",
    "quick": "under a minute per notebook on a 2-core CPU: 3 epochs of small subsets, 3 passes of one batch",
    "smoke": "seconds per notebook: a handful of batches, for tests",
}


class Rule(object):
    """What values a hyperparameter may take: an integer or a number within bounds, or one of some choices."""

    def __init__(self, kind, low=None, high=None, below_high=False, choices=None, optional=False, why=None):
        self.kind = kind  # "integer", "number" or "choice"
        self.low, self.high, self.below_high = low, high, below_high  # low <= value <= high (< high if below_high)
        self.choices = choices
        self.optional = optional  # None allowed (for sample counts: the whole split)
        self.why = why

    def allowed(self):
        """What the rule allows, in words, e.g. 'an integer >= 1'."""
        if self.kind == "choice":
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        else:
            bounds = []
            if self.low is not None:
                bounds.append(">= {}".format(self.low))
            if self.high is not None:
                bounds.append("{} {}".format("<" if self.below_high else "<=", self.high))
            text = ("an integer" if self.kind == "integer" else "a number") + (" " + " and ".join(bounds) if bounds else "")
        if self.optional:
            text += ", or None for all"
        return text + (" ({})".format(self.why) if self.why else "")

    def accepts(self, value):
        """True when `value` is one this rule allows."""
        if value is None:
            return self.optional
        if self.kind == "choice":
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, int if self.kind == "integer" else (int, float)):
            return False
        if not math.isfinite(value) or (self.low is not None and value < self.low):
            return False
        return self.high is None or (value < self.high if self.below_high else value <= self.high)


def _count(low=1, **options):
    return Rule("integer", low=low, **options)


_PROBABILITY = Rule("number", 0.0, 1.0, below_high=True)
# Every hyperparameter's type and range, checked by for_task (so by the runner before anything starts, and
# by a notebook run by hand). Learning rates may be 0: the equivalence check computes at the shared weights.
RULES = {
    "epochs": _count(), "batch_size": _count(), "batches": _count(), "repeats": _count(),
    "warmup_batches": _count(0), "num_classes": _count(2), "hidden_units": _count(), "embedding_dim": _count(),
    "maxlen": _count(), "vocab_size": _count(3, why="0 pads, 1 starts a review, 2 stands for unknown words"),
    "train_samples": _count(optional=True), "test_samples": _count(optional=True),
    "image_size": _count(96, why="ResNet-50's last stage must still fit a 3x3 kernel in every framework"),
    "features": Rule("choice", choices=(2048,), why="ResNet-50's global average pool"),
    "weights": Rule("choice", choices=("auto", "imagenet", "random")),
    "lr": Rule("number", 0.0), "eps": Rule("number", 0.0, why="added to a denominator"),
    "momentum": _PROBABILITY, "beta1": _PROBABILITY, "beta2": _PROBABILITY,
    "conv_dropout": _PROBABILITY, "dense_dropout": _PROBABILITY,
    "model_dim": _count(), "heads": _count(), "layers": _count(), "feedforward_units": _count(),
    "dropout": _PROBABILITY, "weight_decay": Rule("number", 0.0), "norm_epsilon": Rule("number", 0.0, why="added to a variance"),
    "devices": _count(), "machines": _count(), "micro_batches": _count(), "warmup_steps": _count(0), "steps": _count(),
}


def check_values(task, params):
    """Raise ValueError, in one line naming the parameter, its value and what is allowed, for the first value of
    `params` (a task's hyperparameters) that its rule refuses, or for sample counts smaller than one batch."""
    for key, value in params.items():
        rule = RULES.get(key)
        if rule is not None and not rule.accepts(value):
            raise ValueError("hyperparameter {}={!r} for task {}: must be {}".format(key, value, task, rule.allowed()))
    if params.get("batch_size", 0) % params.get("micro_batches", 1):
        raise ValueError("hyperparameter micro_batches={!r} for task {}: must divide batch_size={}".format(
            params["micro_batches"], task, params["batch_size"]))
    if params.get("model_dim", 0) % params.get("heads", 1):
        raise ValueError("hyperparameter heads={!r} for task {}: must divide model_dim={}".format(
            params["heads"], task, params["model_dim"]))
    for key in ("train_samples", "test_samples"):
        if params.get(key) is not None and params[key] < params["batch_size"]:
            raise ValueError("hyperparameter {}={!r} for task {}: must be at least batch_size={} (whole batches "
                             "only)".format(key, params[key], task, params["batch_size"]))


def check_task(task):
    """Raise ValueError with the known tasks if `task` is not one of them."""
    tasks.get(task)


def check_profile(profile):
    """Raise ValueError with the known profiles if `profile` is not one of them."""
    if profile not in PROFILES:
        raise ValueError("unknown profile {!r}; known profiles: {}".format(profile, ", ".join(PROFILES)))


def for_task(task, profile="full", overrides=None):
    """Return the hyperparameters of `task` under `profile`, with `overrides` (a dict) applied last.

    Raises ValueError (one line) for an unknown task, profile or hyperparameter, or a value RULES refuses."""
    check_task(task)
    check_profile(profile)
    params = copy.deepcopy(FULL[task])
    params.update(PROFILES[profile].get(task, {}))
    for key, value in (overrides or {}).items():
        if key not in params:
            raise ValueError(
                "unknown hyperparameter {!r} for task {!r}; known: {}".format(key, task, ", ".join(sorted(params)))
            )
        params[key] = value
    check_values(task, params)
    return params
