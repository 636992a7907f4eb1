"""Negative controls of the same-weights check: the comparison (runner/checks/equivalence.py compare) fails on every
mistake a translation of the CNN or the RNN can make, and passes a correct run whose arithmetic runs another way.

What is compared comes from tests/numpy_models.py: the check's models in NumPy, trained from the check's shared
weights on its data with its hyperparameters (the CNN on fewer images), once as the reference and once per mistake;
no notebook runs.
"""

import numpy as np
import pytest
from numpy_models import CNN_MISTAKES, RESNET_MISTAKES, RNN_MISTAKES, infer_resnet50, train_cnn, train_rnn

from common import tasks, weights
from runner import catalog
from runner.checks import equivalence

TRAIN = {"cnn": train_cnn, "rnn": train_rnn, "inference": infer_resnet50}
# The CNN's controls take 16 of the check's 64 images, in one batch of 16: NumPy's convolutions are slow
SMALLER = {"cnn": {"train_samples": 16, "test_samples": 16, "batch_size": 16}, "rnn": {}, "inference": {}}


def a_job(task):
    """A job of `task` whose framework declares no difference from the reference: every check of compare() applies."""
    for job in catalog.select(["mxnet", "jax"], [task]):
        declared = job.framework.not_equivalent.get(task) or job.variant.step_differences.get(task)
        if not declared and (task != "inference" or job.framework.resnet50 == "v1.5"):
            return job
    raise AssertionError("no framework without declared differences for " + task)


class Reference:
    """The check's entry for `task` (equivalence.reference's shape) with the NumPy model as the reference framework;
    `compare(**how)` compares a run of the NumPy model trained `how` (a mistake, or a correct other order)."""

    def __init__(self, task):
        self.task = task
        self.start = weights.reference_weights(task, equivalence.params_for(task, tasks.TASKS[task].equivalence), seed=0)
        self.entry = {"task": task, "folder": None, "init": None, "start": self.start, "run": self.run}
        self.how, self.results = {}, {}
        for tag, overrides in equivalence.runs_of(a_job(task)).items():
            self.entry[tag] = self.run(task, None, None, None, overrides, tag)[1]

    def run(self, task, job, folder, init, overrides, tag):
        """equivalence.run_exchange's signature: (record, exported arrays) of a run with `overrides`."""
        params = equivalence.params_for(task, dict(overrides, **SMALLER[task]))
        return {"status": "ok"}, TRAIN[task](self.start, params, **self.how)

    def compare(self, **how):
        """compare()'s result for a run trained `how` (each computed once)."""
        key = tuple(sorted(how.items()))
        if key not in self.results:
            self.how = how
            try:
                self.results[key] = equivalence.compare(a_job(self.task), self.entry)
            finally:
                self.how = {}
        return self.results[key]


@pytest.fixture(scope="module")
def cnn():
    return Reference("cnn")


@pytest.fixture(scope="module")
def rnn():
    return Reference("rnn")


@pytest.fixture(scope="module")
def resnet():
    return Reference("inference")


def test_the_cnn_computed_in_another_order_passes(cnn):
    result = cnn.compare(reverse=True)
    assert result["failures"] == []
    assert 0 < result["weights_max_abs"] and 0 < result["logits_max_abs"]  # it was computed another way


@pytest.mark.parametrize("mistake", CNN_MISTAKES)
def test_every_mistake_in_the_cnn_fails_the_check(mistake, cnn):
    assert cnn.compare(mistake=mistake)["failures"]


def test_the_rnn_computed_in_another_order_or_with_keras_epsilon_passes(rnn):
    for how in ({"reverse": True}, {"epsilon_before_correction": True}):
        result = rnn.compare(**how)
        assert result["failures"] == [], how
        assert 0 < result["weights_max_abs"], how


@pytest.mark.parametrize("mistake", RNN_MISTAKES)
def test_every_mistake_in_the_rnn_fails_the_check(mistake, rnn):
    assert rnn.compare(mistake=mistake)["failures"]


def test_resnet_features_computed_in_float64_pass(resnet):
    result = resnet.compare(float64=True)
    assert result["failures"] == [] and 0 < result["features_max_relative"]


@pytest.mark.parametrize("mistake", RESNET_MISTAKES)
def test_every_mistake_in_resnet_fails_the_check(mistake, resnet):
    result = resnet.compare(mistake=mistake)
    assert result["failures"] and result["features_max_relative"] > 10 * equivalence.FEATURES_TOLERANCE


def test_the_steps_are_far_from_the_tolerance(cnn, rnn):
    """The controls are not near the edge: the smallest mistake moves the weights by many times the tolerance."""
    for reference, mistakes in ((cnn, ("momentum dropped", "missing bias")), (rnn, ("beta1 ignored", "betas swapped"))):
        for mistake in mistakes:
            result = reference.compare(mistake=mistake)
            assert result["weights_max_abs"] > 10 * equivalence.WEIGHTS_TOLERANCE[reference.task]["atol"], mistake
    assert np.isfinite(cnn.entry["step"][weights.LOGITS]).all()
