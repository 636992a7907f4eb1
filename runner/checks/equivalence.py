"""Same weights, same function: run each framework's notebook from one canonical weight file
(common/weights.py) and compare what it computes with PyTorch's notebook, in float32.

- CNN: one SGD-momentum step on the same 64 images with dropout off. Compared: every weight array after
  the step, the step itself (weights after minus before, which the unchanged bulk of each weight would
  otherwise hide), and the logits of the first test batch.
- RNN: the logits at the shared weights (a run with learning rate 0), then one Adam step: weights after
  it, and the logits.
- Inference: ResNet-50's features of the first batch at the shared (v1.5) weights, and the weights
  coming back unchanged; the notebooks whose zoo model is v1 are reported as a different model.

Where a framework's step differs in one array for a known reason, its variant's `step_differences` in the
registry (runner/catalog.py) names it and the rest must agree. Where a framework cannot compute the reference
function, its `not_equivalent` there says why; what
still holds is checked instead (the weights it can represent go in and come out unchanged), and that
the outputs do differ, so that the claim stays true.
"""

import json

import numpy as np

from common import hyperparams, tasks, weights
from runner import catalog, run_folder
from runner.run import execution

# The tasks with an equivalence case (common/tasks.py: overrides of the smoke profile for the check).
TASKS = run_folder.EQUIVALENCE_TASKS
REFERENCE = run_folder.EQUIVALENCE_REFERENCE
# ResNet-50's features, relative to the largest of them: 53 convolutions summed in different orders.
FEATURES_TOLERANCE = 1e-4
WEIGHTS_TOLERANCE = {"cnn": {"rtol": 1e-4, "atol": 1e-5},
                     # an Adam step is +-lr except where a gradient is near eps; there float32 noise in the
                     # gradient moves it by a few percent of lr (1e-3)
                     "rnn": {"rtol": 1e-4, "atol": 2e-5}}
LOGITS_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
# A step's largest difference, relative to the largest step of that array (CNN). A float32 weight near
# 0.1 is resolved to about 1e-8 and an SGD step is about 1e-5, so a step is only known to about 1e-3 of
# itself; a wrong gradient scale or momentum formulation is off by 10% or more.
STEP_TOLERANCE = 1e-2
# The arrays a framework that cannot hold the reference's biases still takes in and gives back unchanged.
REPRESENTABLE = ("embedding", "gru/kernel_input", "gru/kernel_recurrent", "fc/kernel", "fc/bias")


class ExchangeError(RuntimeError):
    """A notebook run for the equivalence check failed; the message is its first error line."""


def forward_overrides(task):
    """The overrides of a run that only computes at the shared weights: inference as it is, RNN at learning rate 0."""
    return tasks.TASKS[task].equivalence if task == "inference" else dict(tasks.TASKS[task].equivalence, lr=0.0)


def params_for(task, overrides):
    """The smoke profile's hyperparameters of `task` with the check's overrides."""
    return hyperparams.for_task(task, "smoke", overrides)


def run_exchange(task, job, folder, init, overrides, tag):
    """Run `job`'s notebook on the CPU from the canonical weights `init`, in folder/tag; return (record, exported)."""
    run_dir = folder / tag
    run_dir.mkdir(parents=True, exist_ok=True)
    exported = run_dir / (job.stem + ".npz")
    parameters = {"data_source": "synthetic", "device": "cpu", "threads": 2, "seed": 0, "overrides": overrides,
                  "init_weights": str(init), "export_weights": str(exported)}
    record = execution.run_job(job, run_dir, "smoke", parameters, timeout=600, show_output=False)
    if record["status"] != "ok":
        raise ExchangeError("{} {}: {}".format(job.stem, record["status"], record["error"]))
    return record, weights.load_weights(str(exported), task, params_for(task, overrides))


def runs_of(job):
    """The check's runs of a job, as {tag: overrides}: 'forward' (at the shared weights) and/or 'step'."""
    task = job.task
    if task not in TASKS or (task == "inference" and job.framework.not_equivalent.get(task)):
        return {}
    runs = {}
    if task in ("inference", "rnn"):
        runs["forward"] = forward_overrides(task)
    if task != "inference":
        runs["step"] = tasks.TASKS[task].equivalence
    return runs


def reference(task, folder, run=run_exchange):
    """The shared starting weights of `task` in `folder`, and what PyTorch's notebook exported from them.

    `run` (run_exchange's signature) runs the notebooks, for this entry's later comparisons too."""
    folder.mkdir(parents=True, exist_ok=True)
    params = params_for(task, tasks.TASKS[task].equivalence)
    init = weights.save_weights(str(folder / "init.npz"), task, params, weights.reference_weights(task, params, seed=0))
    pytorch = catalog.select([REFERENCE], [task])[0]
    entry = {"task": task, "folder": folder, "init": init, "start": weights.load_weights(init, task, params),
             "run": run}
    for tag, overrides in runs_of(pytorch).items():
        entry[tag] = run(task, pytorch, folder, init, overrides, tag)[1]
    return entry


def _max_abs(a, b):
    return float(np.abs(a - b).max())


def compare(job, entry):
    """Run `job` from the reference's weights and compare; the result lists every failed check in 'failures'."""
    task = entry["task"]
    reason = job.framework.not_equivalent.get(task)
    differences = job.variant.step_differences.get(task, {})
    result = {"job": job.stem, "framework": job.label, "task": task, "equivalent": reason is None, "reason": reason,
              "step_differences": differences, "failures": []}
    failures = result["failures"]
    logits_bound = LOGITS_TOLERANCE["atol"]
    if task == "inference":
        if reason:  # a different architecture: nothing to run
            return result
        forward = entry["run"](task, job, entry["folder"], entry["init"], forward_overrides(task), "forward")[1]
        expected = entry["forward"][weights.LOGITS]
        result["features_max_relative"] = _max_abs(forward[weights.LOGITS], expected) / float(np.abs(expected).max())
        if result["features_max_relative"] > FEATURES_TOLERANCE:
            failures.append("features differ by up to {:.1e} of the largest".format(result["features_max_relative"]))
        changed = [name for name in entry["start"] if not np.array_equal(forward[name], entry["start"][name])]
        if changed:
            failures.append("weights did not come back unchanged: {}".format(", ".join(changed[:3])))
        return result
    if task == "rnn":
        forward = entry["run"](task, job, entry["folder"], entry["init"], forward_overrides(task), "forward")[1]
        result["forward_logits_max_abs"] = _max_abs(forward[weights.LOGITS], entry["forward"][weights.LOGITS])
        if reason:
            for name in REPRESENTABLE:
                if not np.array_equal(forward[name], entry["start"][name]):
                    failures.append("{} did not come back unchanged".format(name))
            if result["forward_logits_max_abs"] <= logits_bound * 100:
                failures.append("the logits agree now: is it still not equivalent?")
            return result
        if not np.allclose(forward[weights.LOGITS], entry["forward"][weights.LOGITS], **LOGITS_TOLERANCE):
            failures.append("logits at the shared weights differ by up to {:.2e}".format(result["forward_logits_max_abs"]))
    got = entry["run"](task, job, entry["folder"], entry["init"], tasks.TASKS[task].equivalence, "step")[1]
    arrays = {}
    for name, start in entry["start"].items():
        expected = entry["step"][name]
        largest = float(np.abs(expected - start).max())
        arrays[name] = {"max_abs": _max_abs(got[name], expected),
                        "step_relative": _max_abs(got[name] - start, expected - start) / largest if largest else 0.0}
        if name in differences:
            if arrays[name]["max_abs"] <= WEIGHTS_TOLERANCE[task]["atol"] * 10:
                failures.append("{} agrees now: is the step difference gone?".format(name))
            continue
        if not np.allclose(got[name], expected, **WEIGHTS_TOLERANCE[task]):
            failures.append("{} differs after the step by up to {:.2e}".format(name, arrays[name]["max_abs"]))
        if task == "cnn" and arrays[name]["step_relative"] > STEP_TOLERANCE:
            failures.append("{}'s step differs by {:.1%} of the step".format(name, arrays[name]["step_relative"]))
    result.update(logits_max_abs=_max_abs(got[weights.LOGITS], entry["step"][weights.LOGITS]),
                  weights_max_abs=max(a["max_abs"] for a in arrays.values()),
                  step_max_relative=max(a["step_relative"] for a in arrays.values()), arrays=arrays)
    if not differences and not np.allclose(got[weights.LOGITS], entry["step"][weights.LOGITS], **LOGITS_TOLERANCE):
        failures.append("logits after the step differ by up to {:.2e}".format(result["logits_max_abs"]))
    return result


def document(task, results):
    """The JSON document of a task's check: what was compared, with which tolerances, and the results."""
    return {"task": task, "reference": "PyTorch", "overrides": tasks.TASKS[task].equivalence,
            "tolerances": {"weights": WEIGHTS_TOLERANCE.get(task), "logits": LOGITS_TOLERANCE, "step_relative": STEP_TOLERANCE,
                   "features_relative": FEATURES_TOLERANCE},
            "results": results}


def check(jobs, folder, say=print):
    """Compare every job with PyTorch's from shared weights; write folder/EQUIVALENCE_FILE (runner/run_folder.py);
    return it."""
    out = {}
    folder.mkdir(parents=True, exist_ok=True)
    for task in TASKS:
        task_jobs = [job for job in jobs if job.task == task and job.framework.key != REFERENCE]
        if not task_jobs:
            continue
        say("[equivalence] {}: PyTorch from the shared weights ...".format(task))
        results = []
        try:
            entry = reference(task, folder / task)
        except ExchangeError as error:
            results = [{"job": job.stem, "framework": job.label, "task": task, "error": "reference: " + str(error)}
                       for job in task_jobs]
            out[task] = document(task, results)
            continue
        for job in task_jobs:
            try:
                result = compare(job, entry)
            except ExchangeError as error:
                result = {"job": job.stem, "framework": job.label, "task": task, "error": str(error)}
            say("[equivalence] {}: {}".format(job.stem, run_folder.equivalence_verdict(result)))
            results.append(result)
        out[task] = document(task, results)
    (folder / run_folder.EQUIVALENCE_FILE).write_text(json.dumps(out, indent=1) + "\n")
    return out
