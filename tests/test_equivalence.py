"""Same weights, same function: every notebook the check covers against PyTorch's (runner/checks/equivalence.py says
what is compared and with which tolerances). The runs are the session's (tests/notebook_runs.py), which the
smoke tests check too; the measured errors go to equivalence.json in the session's temporary folder.
"""

import json

import numpy as np
import pytest
from conftest import require_environment
from test_check_controls import TRAIN, a_job

from common import weights
from runner import catalog, run_folder
from runner.checks import equivalence

JOBS = [job for task in equivalence.TASKS for job in catalog.select(task_keys=[task])
        if job.framework.key != equivalence.REFERENCE]


@pytest.fixture(scope="module")
def references(notebook_runs):
    """Per task, made once when first asked for: the shared weights and PyTorch's exports."""
    yield notebook_runs.reference
    measured = {task: equivalence.document(task, results) for task, results in RESULTS.items()}
    path = notebook_runs.folder / run_folder.EQUIVALENCE_FILE
    path.write_text(json.dumps(measured, indent=1) + "\n")
    print("equivalence results: {}".format(path))


RESULTS = {task: [] for task in equivalence.TASKS}


@pytest.mark.parametrize("task", equivalence.TASKS)
def test_pytorch_takes_a_real_step_and_learning_rate_0_changes_nothing(task, references):
    entry = references(task)
    if task == "inference":  # nothing trains: the weights come back as they went in, with finite features
        for name in entry["start"]:
            np.testing.assert_array_equal(entry["forward"][name], entry["start"][name], err_msg=name)
        features = entry["forward"][weights.LOGITS]
        assert features.shape == (2, 2048) and np.isfinite(features).all() and np.abs(features).max() > 0
        return
    moved = {name for name in entry["start"] if not np.array_equal(entry["start"][name], entry["step"][name])}
    assert moved == set(entry["start"])
    logits = entry["step"][weights.LOGITS]
    assert np.isfinite(logits).all() and logits.shape == (64, 10 if task == "cnn" else 2)
    if task in ("rnn", "transformer"):
        for name in entry["start"]:
            np.testing.assert_array_equal(entry["forward"][name], entry["start"][name], err_msg=name)


@pytest.mark.parametrize("job", JOBS, ids=lambda job: job.stem)
def test_shared_weights_give_pytorchs_results(job, references):
    require_environment(job.environment)
    result = equivalence.compare(job, references(job.task))
    RESULTS[job.task].append(result)
    assert result["failures"] == []
    assert run_folder.equivalence_verdict(result).startswith(("yes", "no: ", "same function"))


@pytest.mark.parametrize("task", equivalence.TASKS)
def test_the_numpy_models_of_the_negative_controls_compute_pytorchs_results(task, references):
    """tests/numpy_models.py, in which tests/test_check_controls.py makes its mistakes, computes what PyTorch's notebook
    does: the check passes it, so the controls make their mistakes in the function the notebooks compute."""
    entry = references(task)

    def numpy_model(task, job, folder, init, overrides, tag):
        return {"status": "ok"}, TRAIN[task](entry["start"], equivalence.params_for(task, overrides))

    result = equivalence.compare(a_job(task), dict(entry, run=numpy_model))
    assert result["failures"] == []


def test_the_verdicts_read_as_the_table_shows_them():
    base = {"failures": [], "equivalent": True, "reason": None, "step_differences": {}, "logits_max_abs": 2e-8}
    assert run_folder.equivalence_verdict(base) == "yes (logits within 2.0e-08)"
    assert run_folder.equivalence_verdict(dict(base, equivalent=False, reason="GRU differs")) == "no: GRU differs"
    assert run_folder.equivalence_verdict(dict(base, step_differences={"embedding": "sparse Adam"})) == (
        "same function; one step differs in embedding: sparse Adam")
    assert run_folder.equivalence_verdict(dict(base, failures=["fc/bias differs"])) == "check failed: fc/bias differs"
    assert run_folder.equivalence_verdict(dict(base, model="ResNet-50 v1", features_max_relative=7.6e-7)) == (
        "yes, as ResNet-50 v1 (features within 7.6e-07 of the largest)")
    assert run_folder.equivalence_verdict({"error": "JAX_RNN failed: boom"}) == "check failed: JAX_RNN failed: boom"


@pytest.mark.parametrize("framework", ["jax", "lasagne"])
def test_a_gru_without_the_new_gate_s_recurrent_bias_is_the_reference_once_it_is_zero(framework, references, tmp_path):
    """Flax's GRUCell and Lasagne's GRULayer differ from the reference only by the recurrent bias of the new gate (inside
    the reset product), which they have no place for: with it zero, the logits agree."""
    job = catalog.select([framework], ["rnn"])[0]
    require_environment(job.environment)
    overrides = equivalence.forward_overrides("rnn")
    params = equivalence.params_for("rnn", overrides)
    start = {name: value.copy() for name, value in references("rnn")["start"].items()}
    start["gru/bias_recurrent"][2 * params["hidden_units"]:] = 0.0
    init = weights.save_weights(str(tmp_path / "init.npz"), "rnn", params, start)
    _, expected = equivalence.run_exchange("rnn", catalog.select(["pytorch"], ["rnn"])[0], tmp_path, init, overrides, "a")
    _, got = equivalence.run_exchange("rnn", job, tmp_path, init, overrides, "b")
    np.testing.assert_allclose(got[weights.LOGITS], expected[weights.LOGITS], **equivalence.LOGITS_TOLERANCE)
