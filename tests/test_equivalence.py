"""Same weights, same function: every framework's CNN and RNN notebook starts from one canonical weight file
(common/weights.py), and what it computes is compared with PyTorch's notebook, in float32.

- CNN: one SGD-momentum step on the same 64 images with dropout off. Compared: every weight array after the
  step, the step itself (weights after minus before, which the unchanged bulk of each weight would
  otherwise hide), and the logits of the first test batch.
- RNN: the logits at the shared weights (a run with learning rate 0), then one Adam step (beta2 0, see
  CASES): weights after it, and the logits.
Where a framework's step differs in one array for a known reason, STEP_DIFFERENCES names it; the rest
must agree. Where a framework cannot compute the reference function, NOT_EQUIVALENT says why; the test then checks
what still holds (the weights it can represent go in and come out unchanged) and that the outputs do
differ, so the claim stays true. The measured errors go to results/equivalence/<task>.json.
"""

import json

import numpy as np
import pytest

from common import hyperparams, weights
from runner import catalog, environments, execution

CASES = {
    # dropout off: it draws different masks in every framework
    "cnn": {"train_samples": 64, "test_samples": 64, "epochs": 1, "conv_dropout": 0.0, "dense_dropout": 0.0},
    # beta2 0: Adam's first step is then the same whether epsilon is added before the bias correction
    # (Keras, MXNet, Chainer, CNTK) or after it (PyTorch, the TensorFlow notebook, Optax)
    "rnn": {"train_samples": 64, "test_samples": 64, "epochs": 1, "beta2": 0.0},
}
WEIGHTS_TOLERANCE = {"cnn": {"rtol": 1e-4, "atol": 1e-5},
                     # an Adam step is +-lr except where a gradient is near eps; there float32 noise in the
                     # gradient moves it by a few percent of lr (1e-3)
                     "rnn": {"rtol": 1e-4, "atol": 2e-5}}
LOGITS_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
# A step's largest difference, relative to the largest step of that array. A float32 weight near 0.1 is
# resolved to about 1e-8 and an SGD step is about 1e-5, so a step is only known to about 1e-3 of itself;
# a wrong gradient scale or momentum formulation is off by 10% or more.
STEP_TOLERANCE = 1e-2
NOT_EQUIVALENT = {
    ("rnn", "jax"): "Flax's GRUCell has no recurrent bias: the new gate's one (inside the reset product) is lost "
                    "and the reset and update gates get one bias where the reference has two",
    ("rnn", "cntk"): "CNTK's GRU applies the reset gate before the recurrent product and has no recurrent biases",
}
# Arrays that one step changes differently although the function is the same, and why.
STEP_DIFFERENCES = {
    "Keras_RNN-tensorflow": {"embedding": "Keras' Adam on the TensorFlow backend squares the embedding's sparse "
                                          "gradient once per occurrence of a token, before repeated tokens are summed"},
}
JOBS = [(task, job) for task in CASES for job in catalog.select(tasks=[task]) if job.framework.key != "pytorch"]


def params_for(task, overrides):
    return hyperparams.for_task(task, "smoke", overrides)


def run(task, job, folder, init, overrides, tag):
    """Run `job`'s notebook from the canonical weights `init`; return what it exported."""
    if not environments.is_ready(job.environment):
        if environments.find_python(job.environment.python) is None:
            pytest.skip("environment {} needs Python {}, which this machine lacks".format(
                job.environment.name, job.environment.python))
        pytest.fail("environment {} is not built: run `python3 run_all.py setup`".format(job.environment.name))
    run_dir = folder / tag
    run_dir.mkdir(exist_ok=True)
    exported = run_dir / (job.stem + ".npz")
    parameters = {"data_source": "synthetic", "device": "cpu", "threads": 2, "seed": 0, "overrides": overrides,
                  "init_weights": str(init), "export_weights": str(exported)}
    record = execution.run_job(job, run_dir, "smoke", parameters, timeout=600, show_output=False)
    assert record["status"] == "ok", record["error"]
    return weights.load_weights(str(exported), task, params_for(task, overrides))


def report_path(task):
    return catalog.REPO / "results" / "equivalence" / (task + ".json")


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """Per task, lazily: the shared starting weights and PyTorch's exports (after a step; RNN also at lr 0)."""
    cache = {}

    def reference(task):
        if task not in cache:
            folder = tmp_path_factory.mktemp("equivalence-" + task)
            params = params_for(task, CASES[task])
            init = weights.save_weights(str(folder / "init.npz"), task, params,
                                        weights.reference_weights(task, params, seed=0))
            pytorch = catalog.select(["pytorch"], [task])[0]
            entry = {"folder": folder, "init": init, "start": weights.load_weights(init, task, params),
                     "step": run(task, pytorch, folder, init, CASES[task], "step")}
            if task == "rnn":
                entry["forward"] = run(task, pytorch, folder, init, dict(CASES[task], lr=0.0), "forward")
            report_path(task).parent.mkdir(parents=True, exist_ok=True)
            report_path(task).write_text(json.dumps({
                "task": task, "reference": "PyTorch", "overrides": CASES[task],
                "tolerances": {"weights": WEIGHTS_TOLERANCE[task], "logits": LOGITS_TOLERANCE, "step_relative": STEP_TOLERANCE},
                "results": []}, indent=1))
            cache[task] = entry
        return cache[task]

    return reference


def record_result(task, job, result):
    report = json.loads(report_path(task).read_text())
    report["results"] = [r for r in report["results"] if r["job"] != job.stem] + [dict(result, job=job.stem,
                                                                                      framework=job.label)]
    report_path(task).write_text(json.dumps(report, indent=1))


def step_errors(start, expected, got):
    errors = {}
    for name in start:
        step_expected, step_got = expected[name] - start[name], got[name] - start[name]
        largest = np.abs(step_expected).max()
        errors[name] = {"max_abs": float(np.abs(got[name] - expected[name]).max()),
                        "step_relative": float(np.abs(step_got - step_expected).max() / largest) if largest else 0.0}
    return errors


@pytest.mark.parametrize("task", list(CASES))
def test_pytorch_took_a_real_step(task, references):
    entry = references(task)
    moved = [name for name in entry["start"] if not np.array_equal(entry["start"][name], entry["step"][name])]
    assert set(moved) == set(entry["start"]), moved
    logits = entry["step"][weights.LOGITS]
    assert np.isfinite(logits).all() and logits.shape == (64, 2 if task == "rnn" else 10)
    if task == "rnn":  # learning rate 0: the weights come back as they went in
        for name in entry["start"]:
            np.testing.assert_array_equal(entry["forward"][name], entry["start"][name], err_msg=name)


@pytest.mark.parametrize("task,job", JOBS, ids=lambda value: value if isinstance(value, str) else value.stem)
def test_shared_weights_give_pytorchs_results(task, job, references):
    entry = references(task)
    reason = NOT_EQUIVALENT.get((task, job.framework.key))
    differences = STEP_DIFFERENCES.get(job.stem, {})
    result = {"equivalent": reason is None, "reason": reason, "step_differences": differences}
    if task == "rnn":
        forward = run(task, job, entry["folder"], entry["init"], dict(CASES[task], lr=0.0), "forward")
        result["forward_logits_max_abs"] = float(np.abs(forward[weights.LOGITS] - entry["forward"][weights.LOGITS]).max())
        if reason:
            for name in ("embedding", "gru/kernel_input", "gru/kernel_recurrent", "fc/kernel", "fc/bias"):
                np.testing.assert_array_equal(forward[name], entry["start"][name], err_msg=name)
            record_result(task, job, result)
            assert result["forward_logits_max_abs"] > LOGITS_TOLERANCE["atol"] * 100, "equivalent now? update NOT_EQUIVALENT"
            return
    got = run(task, job, entry["folder"], entry["init"], CASES[task], "step")
    errors = step_errors(entry["start"], entry["step"], got)
    result.update(logits_max_abs=float(np.abs(got[weights.LOGITS] - entry["step"][weights.LOGITS]).max()),
                  weights_max_abs=max(e["max_abs"] for e in errors.values()),
                  step_max_relative=max(e["step_relative"] for e in errors.values()), arrays=errors)
    record_result(task, job, result)
    if task == "rnn":
        np.testing.assert_allclose(forward[weights.LOGITS], entry["forward"][weights.LOGITS],
                                   err_msg="logits at the shared weights", **LOGITS_TOLERANCE)
    for name in entry["start"]:
        if name in differences:  # the known difference is there, and only there
            assert errors[name]["max_abs"] > WEIGHTS_TOLERANCE[task]["atol"] * 10, "no difference in {} now?".format(name)
            continue
        np.testing.assert_allclose(got[name], entry["step"][name], err_msg=name, **WEIGHTS_TOLERANCE[task])
        if task == "cnn":
            assert errors[name]["step_relative"] <= STEP_TOLERANCE, (name, errors[name])
    if not differences:
        np.testing.assert_allclose(got[weights.LOGITS], entry["step"][weights.LOGITS], err_msg="logits after the step",
                                   **LOGITS_TOLERANCE)


def test_flax_gru_is_the_reference_once_the_bias_it_lacks_is_zero(references, tmp_path):
    """JAX's RNN differs only by the recurrent bias of the new gate: with it zero, the logits agree."""
    entry = references("rnn")
    overrides = dict(CASES["rnn"], lr=0.0)
    params = params_for("rnn", overrides)
    start = {name: value.copy() for name, value in entry["start"].items() if name != weights.LOGITS}
    start["gru/bias_recurrent"][2 * params["hidden_units"]:] = 0.0
    init = weights.save_weights(str(tmp_path / "init.npz"), "rnn", params, start)
    expected = run("rnn", catalog.select(["pytorch"], ["rnn"])[0], tmp_path, init, overrides, "pytorch")
    got = run("rnn", catalog.select(["jax"], ["rnn"])[0], tmp_path, init, overrides, "jax")
    np.testing.assert_allclose(got[weights.LOGITS], expected[weights.LOGITS], **LOGITS_TOLERANCE)
