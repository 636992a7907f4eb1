"""Same weights, same function: every framework's CNN notebook starts from one canonical weight file,
takes one SGD-momentum step on the same batch with dropout off, and must agree with PyTorch's.

Compared, in float32: every weight array after the step, the step itself (weights after minus before,
which a tiny learning rate would otherwise hide under the unchanged weights), and the logits of the
first test batch. The measured errors go to results/equivalence/cnn.json.
"""

import json

import numpy as np
import pytest

from common import hyperparams, weights
from runner import catalog, environments, execution

# One batch of 64 training images (one step), 64 test images, dropout off (it draws different masks per framework).
OVERRIDES = {"train_samples": 64, "test_samples": 64, "epochs": 1, "conv_dropout": 0.0, "dense_dropout": 0.0}
PARAMS = hyperparams.for_task("cnn", "smoke", OVERRIDES)
WEIGHTS_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
LOGITS_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
# Largest difference of a step, relative to the largest step of that array. A float32 weight near 0.1
# is resolved to about 1e-8 and a step is about 1e-5, so a step is only known to about 1e-3 of itself;
# a wrong gradient scale or momentum formulation is off by 10% or more.
STEP_TOLERANCE = 1e-2
REPORT = catalog.REPO / "results" / "equivalence" / "cnn.json"
JOBS = [job for job in catalog.select(tasks=["cnn"]) if job.framework.key != "pytorch"]


def run(job, folder, init):
    """Run `job`'s notebook from the canonical weights `init`; return what it exported."""
    if not environments.is_ready(job.environment):
        if environments.find_python(job.environment.python) is None:
            pytest.skip("environment {} needs Python {}, which this machine lacks".format(
                job.environment.name, job.environment.python))
        pytest.fail("environment {} is not built: run `python3 run_all.py setup`".format(job.environment.name))
    exported = folder / (job.stem + ".npz")
    parameters = {"data_source": "synthetic", "device": "cpu", "threads": 2, "seed": 0, "overrides": OVERRIDES,
                  "init_weights": str(init), "export_weights": str(exported)}
    record = execution.run_job(job, folder, "smoke", parameters, timeout=600, show_output=False)
    assert record["status"] == "ok", record["error"]
    return weights.load_weights(str(exported), "cnn", PARAMS)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The canonical starting weights, and what PyTorch's notebook exported after its step."""
    folder = tmp_path_factory.mktemp("equivalence")
    init = weights.save_weights(str(folder / "init.npz"), "cnn", PARAMS, weights.reference_weights("cnn", PARAMS, seed=0))
    start = weights.load_weights(init, "cnn", PARAMS)
    after = run(catalog.select(["pytorch"], ["cnn"])[0], folder, init)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps({"task": "cnn", "reference": "PyTorch", "overrides": OVERRIDES,
                                  "tolerances": {"weights": WEIGHTS_TOLERANCE, "logits": LOGITS_TOLERANCE,
                                                 "step_relative": STEP_TOLERANCE},
                                  "results": []}, indent=1))
    return folder, init, start, after


def test_pytorch_took_a_real_step(reference):
    _, _, start, after = reference
    for name in start:
        assert not np.array_equal(start[name], after[name]), name
    assert np.isfinite(after[weights.LOGITS]).all() and after[weights.LOGITS].shape == (64, PARAMS["num_classes"])


@pytest.mark.parametrize("job", JOBS, ids=lambda job: job.stem)
def test_one_training_step_matches_pytorch(job, reference):
    folder, init, start, expected = reference
    got = run(job, folder, init)
    errors = {}
    for name in start:
        step_expected, step_got = expected[name] - start[name], got[name] - start[name]
        errors[name] = {
            "max_abs": float(np.abs(got[name] - expected[name]).max()),
            "step_relative": float(np.abs(step_got - step_expected).max() / np.abs(step_expected).max()),
        }
    logits_error = float(np.abs(got[weights.LOGITS] - expected[weights.LOGITS]).max())
    report = json.loads(REPORT.read_text())
    report["results"] = [r for r in report["results"] if r["job"] != job.stem] + [{
        "job": job.stem, "framework": job.label, "logits_max_abs": logits_error,
        "weights_max_abs": max(e["max_abs"] for e in errors.values()),
        "step_max_relative": max(e["step_relative"] for e in errors.values()), "arrays": errors}]
    REPORT.write_text(json.dumps(report, indent=1))
    for name in start:
        np.testing.assert_allclose(got[name], expected[name], err_msg=name, **WEIGHTS_TOLERANCE)
        assert errors[name]["step_relative"] <= STEP_TOLERANCE, (name, errors[name])
    np.testing.assert_allclose(got[weights.LOGITS], expected[weights.LOGITS], err_msg="logits", **LOGITS_TOLERANCE)
