"""Does data parallelism compute the single-device step? Each framework's train notebook takes one SGD step on 2
devices (on the CPU: logical devices or worker processes sharing it) and one on 1 device with the whole batch, from
the same weights and images, and the weights they export are compared.

Batch norm keeps per-device statistics in the data-parallel step of every framework but those in
SYNCHRONISED_BATCH_NORM, so the single-device run splits its batch in 2 micro-batches (gradients summed), which
reproduces them; for a framework whose batch norm takes the whole batch's statistics, the single-device run takes the
whole batch. A control run on one device, with the batch the other way (whole where the check splits it, split where
it does not), must differ, which shows that the comparison can fail. Every run has one CPU
thread (the devices or worker processes of the data-parallel run share it): this step (lr 0.1, batch norm over 8
small images) amplifies rounding so much that the same single-device step with two threads instead of one moves
PyTorch's first convolution by 1.5e-2 (MXNet's by 6.9e-3), which would hide what is checked.

A run's check (run_all.py --devices N with the train task) writes DATA_PARALLEL_FILE beside the same-weights check's
file; tests/test_data_parallel.py runs the same check with its control.
"""

import json
from pathlib import Path

import numpy as np

from common import hyperparams, weights
from runner import execution

TASK = "train"
DEVICES = 2
ONE_STEP = {"warmup_steps": 0, "steps": 1, "repeats": 1, "batch_size": 8}
TOLERANCE = 1e-5
# Frameworks whose single-device and data-parallel steps are two differently compiled programs: their float32
# rounding differs, and this step amplifies rounding (PyTorch's own step with two threads instead of one moves its
# weights by 1.5e-2), so they are held to a share of the largest weight change instead of TOLERANCE
STEP_SHARE = {"JAX": (0.05, "XLA compiles the one-device, the two-device and the two-process step apart: 2e-2 of "
                             "the step measured"),
              "Keras (jax)": (0.05, "XLA compiles the one-device and the two-device step apart: 1.5e-2 of the step "
                                    "measured")}
# Frameworks whose data-parallel step normalises over the whole step's batch (across devices), and why
SYNCHRONISED_BATCH_NORM = {"Keras (jax)": "keras.distribution runs one program over the whole batch"}
DATA_PARALLEL_FILE = "data_parallel.json"  # in a run folder's equivalence/ folder


class StepError(RuntimeError):
    """A notebook run of the check did not finish; the message is its first error line, `status` its record's
    ('failed', 'unsupported' where the notebook refused, ...)."""

    def __init__(self, message, status="failed"):
        super().__init__(message)
        self.status = status


def params():
    """The smoke profile's train hyperparameters for one step of the check."""
    return hyperparams.for_task(TASK, "smoke", ONE_STEP)


def start_weights(path):
    """Canonical weights from seed 0 whose batch norms start as a new model's, weight 1 and bias 0 (a step that does
    not blow up), saved to `path`; returns the path."""
    start = weights.reference_weights(TASK, params(), seed=0)
    for name in start:
        if name.endswith(".weight") and start[name].ndim == 1:
            start[name][...] = 1.0
        elif name.endswith(".bias") and not name.startswith("fc."):
            start[name][...] = 0.0
    return weights.save_weights(str(path), TASK, params(), start)


def one_step(job, folder, init, threads, overrides, **parameters):
    """Run the job's notebook for one step from the weights file `init` in `folder` (created); return its record and
    the path of the weights it exported. StepError if it did not finish."""
    folder = folder.resolve()  # the notebook runs in another folder
    folder.mkdir(parents=True)
    exported = folder / "weights.npz"
    parameters.update({"data_source": "synthetic", "device": "cpu", "threads": threads, "seed": 0,
                       "overrides": dict(ONE_STEP, **overrides), "init_weights": str(Path(init).resolve()),
                       "export_weights": str(exported)})
    record = execution.run_job(job, folder, "smoke", parameters, timeout=600, show_output=False)
    if record["status"] != "ok":
        raise StepError("{} {}: {}".format(job.stem, record["status"], record["error"]), record["status"])
    return record, exported


def load(path):
    """The canonical weights a run exported."""
    return weights.load_weights(str(path), TASK, params())


def largest_difference(a, b, names):
    """The largest absolute difference between the arrays `names` of two weight sets."""
    return max(float(np.abs(a[name] - b[name]).max()) for name in names)


def allowed_difference(label, moved):
    """TOLERANCE, or for a framework in STEP_SHARE its share of the step (`moved`: the weights' largest change)."""
    share, _ = STEP_SHARE.get(label, (None, None))
    return share * moved if share else TOLERANCE


def check_job(job, folder, control=False):
    """Run one step on DEVICES devices and one on one device with the whole batch, in DEVICES micro-batches unless
    the framework synchronises batch norm (and, with `control`, on one device with the batch the other way) in
    `folder`; the result lists every failed check in 'failures'."""
    folder.mkdir(parents=True, exist_ok=True)
    init = start_weights(folder / "init.npz")
    whole = dict(devices=1, batch_size=DEVICES * params()["batch_size"])
    split = dict(whole, micro_batches=DEVICES)
    synchronised = job.label in SYNCHRONISED_BATCH_NORM
    runs = {"parallel": dict(devices=DEVICES), "single": whole if synchronised else split}
    if control:
        runs["control"] = split if synchronised else whole
    stepped = {tag: load(one_step(job, folder / tag, init, 1, overrides)[1]) for tag, overrides in runs.items()}
    start = load(init)
    trained = [name for name in start if not name.endswith(("running_mean", "running_var"))]
    result = {"job": job.stem, "framework": job.label, "task": TASK, "devices": DEVICES,
              "moved": largest_difference(stepped["parallel"], start, trained),
              "max_abs": largest_difference(stepped["parallel"], stepped["single"], trained),
              "share": STEP_SHARE.get(job.label, (None, None))[1],
              "synchronised": SYNCHRONISED_BATCH_NORM.get(job.label), "failures": []}
    result["allowed"] = allowed_difference(job.label, result["moved"])
    if result["moved"] <= 1e-3:
        result["failures"].append("the step moved no weight by more than {:.1e}".format(result["moved"]))
    if result["max_abs"] >= result["allowed"]:
        result["failures"].append("{} devices differ from one by up to {:.1e} (allowed {:.1e})".format(
            DEVICES, result["max_abs"], result["allowed"]))
    if control:
        result["control_max_abs"] = largest_difference(stepped["control"], stepped["single"], trained)
        if result["control_max_abs"] <= 0.2 * result["moved"]:
            result["failures"].append("batch norm's statistics made no difference: the check cannot fail")
    return result


def verdict(result):
    """One short table cell: 'yes (...)', 'within 5% of the step (...)', 'not checked: ...' where the notebook
    refuses several devices, or 'check failed: ...'."""
    if result.get("status") == "unsupported":
        return "not checked: " + result["error"].split(": ", 1)[-1]
    if result.get("error"):
        return "check failed: " + result["error"]
    if result["failures"]:
        return "check failed: " + "; ".join(result["failures"])
    within = "{:.1e} of a {:.2g} step".format(result["max_abs"], result["moved"])
    if result.get("synchronised"):
        within += "; batch norm over the whole batch"
    if result.get("share"):
        return "within {:.0%} of the step ({}; {})".format(result["allowed"] / result["moved"], within,
                                                          result["share"])
    return "yes ({})".format(within)


def check(jobs, folder, say=print):
    """Check the data-parallel step of each train job (once per row label: each Keras backend is a row); write
    folder/DATA_PARALLEL_FILE; return the results."""
    results, seen = [], set()
    for job in jobs:
        if job.task != TASK or job.label in seen:
            continue
        seen.add(job.label)
        say("[data parallel] {}: one step on {} devices and on one ...".format(job.label, DEVICES))
        try:
            result = check_job(job, folder / job.stem)
        except StepError as error:
            result = {"job": job.stem, "framework": job.label, "task": TASK, "error": str(error),
                      "status": error.status}
        say("[data parallel] {}: {}".format(job.label, verdict(result)))
        results.append(result)
    folder.mkdir(parents=True, exist_ok=True)
    document = {"devices": DEVICES, "overrides": ONE_STEP, "tolerance": TOLERANCE,
                "step_share": {label: share for label, (share, _) in STEP_SHARE.items()}, "results": results}
    (folder / DATA_PARALLEL_FILE).write_text(json.dumps(document, indent=1) + "\n")
    return results


def load_checks(folder):
    """The check's results in `folder` (a run's equivalence folder) as {(TASK, framework label): result}."""
    path = folder / DATA_PARALLEL_FILE
    if not path.exists():
        return {}
    return {(TASK, result["framework"]): result for result in json.loads(path.read_text())["results"]}
