"""Hyperparameters of the three workloads and the run profiles (full, quick, smoke), in one place.

Notebooks receive a profile name (and optional overrides) as papermill parameters and call
`for_task` to get the numbers they train with; nothing else in the project repeats them.
"""

import copy

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
}

# Profiles only name what they change relative to FULL.
PROFILES = {
    "full": {},
    "quick": {
        "cnn": {"epochs": 1, "train_samples": 10000, "test_samples": 1024},
        "inference": {"batches": 2, "repeats": 3},
        "rnn": {"epochs": 1, "train_samples": 10000, "test_samples": 1024},
    },
    "smoke": {
        "cnn": {"epochs": 1, "train_samples": 256, "test_samples": 128},
        # 96: the smallest size at which ResNet-50's last stage (1/32 of it) still fits a 3x3 kernel,
        # which CNTK requires; frameworks that pad past the input's edge would accept 64.
        "inference": {"batch_size": 2, "batches": 2, "repeats": 2, "image_size": 96},
        "rnn": {"epochs": 1, "train_samples": 256, "test_samples": 128},
    },
}

# What each profile is for, for help texts and reports.
PROFILE_NOTES = {
    "full": "the benchmark as defined (10/3 epochs, whole datasets, 40 batches x 5 repeats)",
    "quick": "a few minutes per notebook on a 2-core CPU: subsets, one epoch",
    "smoke": "seconds per notebook: a handful of batches, for tests",
}


def check_task(task):
    """Raise ValueError with the known tasks if `task` is not one of them."""
    tasks.get(task)


def check_profile(profile):
    """Raise ValueError with the known profiles if `profile` is not one of them."""
    if profile not in PROFILES:
        raise ValueError("unknown profile {!r}; known profiles: {}".format(profile, ", ".join(PROFILES)))


def for_task(task, profile="full", overrides=None):
    """Return the hyperparameters of `task` under `profile`, with `overrides` (a dict) applied last."""
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
    return params
