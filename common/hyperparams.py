"""Hyperparameters of the workloads under the run profiles (full, quick, smoke): the rules their values keep to, and
for_task, which a task's numbers come from.

Notebooks receive a profile name (and optional overrides) as papermill parameters and call `for_task` to get the
numbers they train with; the numbers themselves are their task's (common/tasks/<key>.py), and nothing else in the
project repeats them.
"""

import copy
import math

# The profiles, by what each is for (help texts and reports). A task's module (common/tasks/<key>.py) holds its
# reference numbers (`full`, the original Rosetta-stone benchmark's) and what each other profile changes of them,
# only how much data is used, never the model or the optimiser; sample counts of None mean "the whole split".
PROFILE_NOTES = {
    "full": "the benchmark as defined (10/3 epochs, whole datasets, 40 batches x 5 repeats)",
    "quick": "under a minute per notebook on a 2-core CPU: 3 epochs of small subsets, inference on one batch for 3 s",
    "smoke": "seconds per notebook: a handful of batches, for tests",
}
PROFILES = tuple(PROFILE_NOTES)


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
# The type and range of the hyperparameters several tasks share; a task's own are in its module (Task.rules). Checked
# by for_task (so by the runner before anything starts, and by a notebook run by hand). Learning rates may be 0: the
# same-weights check computes at the shared weights.
RULES = {
    "epochs": _count(), "batch_size": _count(), "repeats": _count(), "num_classes": _count(2),
    "maxlen": _count(), "vocab_size": _count(3, why="0 pads, 1 starts a review, 2 stands for unknown words"),
    "train_samples": _count(optional=True), "test_samples": _count(optional=True),
    "image_size": _count(96, why="ResNet-50's last stage must still fit a 3x3 kernel in every framework"),
    "lr": Rule("number", 0.0), "eps": Rule("number", 0.0, why="added to a denominator"),
    "min_timed_s": Rule("number", 0.0, why="seconds of timed passes at the least (common.timing.enough_passes)"),
    "momentum": _PROBABILITY, "beta1": _PROBABILITY, "beta2": _PROBABILITY,
}


def rules_of(task):
    """{name: Rule} of every hyperparameter of `task` (a common.tasks.Task): the shared RULES and the task's own."""
    return dict(RULES, **task.rules)


def check_values(task, params):
    """Raise ValueError, in one line naming the parameter, its value and what is allowed, for the first value of
    `params` (the hyperparameters of `task`, a common.tasks.Task) that its rule refuses, for values that do not go
    together in the task, or for sample counts smaller than one batch."""
    rules = rules_of(task)
    for key, value in params.items():
        rule = rules.get(key)
        if rule is not None and not rule.accepts(value):
            raise ValueError("hyperparameter {}={!r} for task {}: must be {}".format(key, value, task.key, rule.allowed()))
    task.check_values(params)
    for key in ("train_samples", "test_samples"):
        if params.get(key) is not None and params[key] < params["batch_size"]:
            raise ValueError("hyperparameter {}={!r} for task {}: must be at least batch_size={} (whole batches "
                             "only)".format(key, params[key], task.key, params["batch_size"]))


def check_profile(profile):
    """Raise ValueError with the known profiles if `profile` is not one of them."""
    if profile not in PROFILES:
        raise ValueError("unknown profile {!r}; known profiles: {}".format(profile, ", ".join(PROFILES)))


def for_task(task, profile="full", overrides=None):
    """Return the hyperparameters of `task` under `profile`, with `overrides` (a dict) applied last.

    Raises ValueError (one line) for an unknown task, profile or hyperparameter, or a value its rules refuse."""
    from common import tasks  # the task modules import this one

    spec = tasks.get(task)
    check_profile(profile)
    params = copy.deepcopy(spec.hyperparameters)
    params.update(spec.profiles.get(profile, {}))
    for key, value in (overrides or {}).items():
        if key not in params:
            raise ValueError(
                "unknown hyperparameter {!r} for task {!r}; known: {}".format(key, task, ", ".join(sorted(params)))
            )
        params[key] = value
    check_values(spec, params)
    return params
