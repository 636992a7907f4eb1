"""Negative controls of the same-weights check: the comparison (runner/checks/equivalence.py compare) fails on every
mistake a translation of the CNN, the RNN or the transformer can make, and passes a correct run whose arithmetic runs another way.

What is compared comes from tests/numpy_models.py: the check's models in NumPy, trained from the check's shared
weights on its data with its hyperparameters (the CNN on fewer images), once as the reference and once per mistake;
no notebook runs.
"""

import threading
import time

import numpy as np
import pytest
from numpy_models import (
    CNN_MISTAKES,
    RESNET_MISTAKES,
    RNN_MISTAKES,
    TRANSFORMER_MISTAKES,
    infer_resnet50,
    train_cnn,
    train_rnn,
    train_transformer,
)

from common import tasks, weights
from runner import catalog
from runner.checks import equivalence

TRAIN = {"cnn": train_cnn, "rnn": train_rnn, "inference": infer_resnet50, "transformer": train_transformer}
# The CNN's and the transformer's controls take 16 of the check's 64 samples, in one batch of 16: NumPy's convolutions
# and attention are slow
SMALLER = {"cnn": {"train_samples": 16, "test_samples": 16, "batch_size": 16}, "rnn": {}, "inference": {},
           "transformer": {"train_samples": 16, "test_samples": 16, "batch_size": 16}}


def a_job(task):
    """A job of `task` whose framework declares no difference from the reference: every check of compare() applies."""
    for job in catalog.select(["mxnet", "jax", "pytorch"], [task]):
        declared = job.not_equivalent or job.variant.step_differences.get(task)
        if not declared and (task != "inference" or job.framework.resnet50 == "v1.5"):
            return job
    raise AssertionError("no framework without declared differences for " + task)


class Reference:
    """The check's entry for `task` (equivalence.reference's shape) with the NumPy model as the reference framework;
    `compare(**how)` compares a run of the NumPy model trained `how` (a mistake, or a correct other order)."""

    def __init__(self, task):
        self.task = task
        overrides = tasks.get(task).same_weights.overrides
        self.start = weights.reference_weights(task, equivalence.params_for(task, overrides), seed=0)
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
def transformer():
    return Reference("transformer")


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


def test_the_transformer_computed_in_another_order_passes(transformer):
    result = transformer.compare(reverse=True)
    assert result["failures"] == []
    assert 0 < result["weights_max_abs"] and 0 < result["logits_max_abs"]


@pytest.mark.parametrize("mistake", TRANSFORMER_MISTAKES)
def test_every_mistake_in_the_transformer_fails_the_check(mistake, transformer):
    assert transformer.compare(mistake=mistake)["failures"]


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
            assert result["weights_max_abs"] > 10 * tasks.get(reference.task).same_weights.weights_tolerance["atol"], mistake
    assert np.isfinite(cnn.entry["step"][weights.LOGITS]).all()


@pytest.mark.parametrize("ulps, passes", [(3, True), (6, False)])
def test_a_step_of_a_few_hundred_ulps_may_differ_by_a_few_of_them(ulps, passes):
    """The key biases' step is AdamW's decay alone, about 180 float32 ulps of their weights: two correct ways of
    rounding it differ by 1.7% of it, 3 ulps, which passes; a difference of more than STEP_ULPS fails."""
    weight = np.float32(0.1)
    ulp = np.spacing(weight)
    start = {"bias": np.full(3, weight), "kernel": np.full(3, weight)}
    expected = {"bias": start["bias"] - 180 * ulp, "kernel": start["kernel"] - 1e-3, weights.LOGITS: np.zeros((2, 2))}
    got = dict(expected, bias=expected["bias"] - ulps * ulp)
    entry = {"task": "cnn", "folder": None, "init": None, "start": start, "step": expected,
             "run": lambda *args: ({"status": "ok"}, got)}
    result = equivalence.compare(a_job("cnn"), entry)
    assert result["arrays"]["bias"]["step_relative"] > equivalence.STEP_TOLERANCE
    assert (result["failures"] == []) is passes, result["failures"]


def test_the_check_runs_two_jobs_at_once_each_reference_run_once_and_keeps_the_jobs_order(tmp_path):
    jobs = [job for job in catalog.select(task_keys=["rnn"]) if job.framework.key != equivalence.REFERENCE]
    start = weights.reference_weights("rnn", equivalence.params_for("rnn", tasks.TASKS["rnn"].same_weights.overrides), seed=0)
    lock, running, calls, exported = threading.Lock(), [], [], {}

    def run(task, job, folder, init, overrides, tag):
        with lock:
            running.append(job.stem)
            calls.append((job.stem, tag, len(running)))
            if tag not in exported:
                exported[tag] = train_rnn(start, equivalence.params_for(task, overrides))
        time.sleep(0.05)
        with lock:
            running.remove(job.stem)
        return {"status": "ok"}, exported[tag]

    out = equivalence.check(jobs, tmp_path, say=lambda line: None, workers=2, run=run)
    assert [result["job"] for result in out["rnn"]["results"]] == [job.stem for job in jobs]
    assert max(at_once for _, _, at_once in calls) == 2
    reference = [tag for stem, tag, _ in calls if stem == "PyTorch_RNN"]
    assert sorted(reference) == sorted(set(reference)) and "first step" in reference  # Keras-TF's, asked for once
