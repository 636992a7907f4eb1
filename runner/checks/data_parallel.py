"""Does data parallelism compute the single-device steps? Each framework's train notebook takes two SGD-momentum steps
on 2 devices (on the CPU: logical devices or worker processes sharing it) and two on 1 device with the whole batch,
from the same weights and images, and the weights they export are compared. Two steps, so that the velocity carries
over (a first step is the same with momentum or without), at lr 0.001: any difference in the first step, however
small, moves some ReLU and max-pool inputs across their kinks, where the second step's gradient jumps by a share of
itself, not of the rounding. At the profile's lr 0.1 that left JAX's float32 steps half a step from the float64
ones; at 0.001 a sixth, and the rule below holds.

Batch norm keeps per-device statistics in the data-parallel step of every framework but those in
SYNCHRONISED_BATCH_NORM, so the single-device run splits its batch in 2 micro-batches (gradients summed), which
reproduces them; for a framework whose batch norm takes the whole batch's statistics, the single-device run takes the
whole batch. A control run on one device, with the batch the other way (whole where the check splits it, split where
it does not), must differ, which shows that the comparison can fail. Every run has one CPU
thread (the devices or worker processes of the data-parallel run share it): this step (lr 0.1, batch norm over 8
small images) amplifies rounding so much that the same single-device step with two threads instead of one moves
PyTorch's first convolution by 1.5e-2 (MXNet's by 6.9e-3), which would hide what is checked. Where the two steps are
still computed apart (FLOAT64_REFERENCE), each is compared with the exact step, in float64.

A run's check (run_all.py --devices N with the train task) writes run_folder.DATA_PARALLEL_FILE beside the same-weights check's
file; tests/test_data_parallel.py runs the same check with its control.
"""

import json
import subprocess
from pathlib import Path

import numpy as np

from common import hyperparams, weights
from runner import catalog, run_folder
from runner.run import environments, execution

TASK = run_folder.DATA_PARALLEL_TASK
DEVICES = 2
CHECK_STEPS = {"warmup_steps": 0, "steps": 2, "repeats": 1, "min_timed_s": 0.0, "batch_size": 8, "lr": 0.001}
TOLERANCE = 1e-5
# Frameworks whose one-device and data-parallel steps are different programs, and why: their float32 rounding
# differs, and these steps amplify rounding (ReLU's and max pool's kinks, batch norm over few values), so TOLERANCE
# holds only for steps computed the same way to the last bit. These are held instead to the exact steps: the
# data-parallel steps must be as close to the float64 steps (runner/checks/float64_step.py, in the PyTorch environment)
# as the framework's own one-device steps, within REFERENCE_FACTOR of their distance; a wrong reduction or a lost
# velocity moves them by a large share of the step.
FLOAT64_REFERENCE = {"TensorFlow": "the all-reduce averages the replicas' gradients where one device sums its "
                                   "micro-batches' (6e-7 apart after one step)",
                     "JAX": "XLA compiles the one-device and the two-device step apart",
                     "Keras (jax)": "XLA compiles the one-device and the two-device step apart"}
REFERENCE_FACTOR = 2.0
REFERENCE_ENVIRONMENT = "pytorch"
FLOAT64_STEP = Path(__file__).resolve().with_name("float64_step.py")  # run as a script there
# Frameworks whose data-parallel step normalises over the whole step's batch (across devices), and why
SYNCHRONISED_BATCH_NORM = {"Keras (jax)": "keras.distribution runs one program over the whole batch"}


class StepError(RuntimeError):
    """A notebook run of the check did not finish; the message is its first error line, `status` its record's
    ('failed', 'unsupported' where the notebook refused, ...)."""

    def __init__(self, message, status="failed"):
        super().__init__(message)
        self.status = status


def params():
    """The smoke profile's train hyperparameters for the check's steps."""
    return hyperparams.for_task(TASK, "smoke", CHECK_STEPS)


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


def take_steps(job, folder, init, threads, overrides, together=None, **parameters):
    """Run the job's notebook for the check's steps from the weights file `init` in `folder` (created); return its record and
    the path of the weights it exported. StepError if it did not finish. `together`: an execution.Together of the
    machines this one runs with (its machine_rank names it)."""
    folder = folder.resolve()  # the notebook runs in another folder
    folder.mkdir(parents=True)
    exported = folder / "weights.npz"
    parameters.update({"data_source": "synthetic", "device": "cpu", "threads": threads, "seed": 0,
                       "overrides": dict(CHECK_STEPS, **overrides), "init_weights": str(Path(init).resolve()),
                       "export_weights": str(exported)})
    name = "machine {}".format(parameters.get("machine_rank", 0))
    record = execution.run_job(job, folder, "smoke", parameters, timeout=600, show_output=False, together=together,
                               name=name)
    if record["status"] != "ok":
        raise StepError("{} {}: {}".format(job.stem, record["status"], record["error"]), record["status"])
    return record, exported


def take_steps_on_machines(job, folder, init, threads, overrides, coordinator):
    """Run the job's notebook at once as the machines of one data-parallel run, machine k in folder/machine-k with
    overrides[k] and `coordinator`; return [(record, weights) or the StepError of each machine]. The first machine
    that does not finish stops the others at once (execution.Together): its error says it failed first, theirs that
    they were stopped because of it."""
    def machine(rank):
        return lambda together: take_steps(job, folder / "machine-{}".format(rank), init, threads,
                                           dict(overrides[rank], machines=len(overrides)), together=together,
                                           machine_rank=rank, coordinator=coordinator)

    return execution.run_together([machine(rank) for rank in range(len(overrides))])


def load(path):
    """The canonical weights a run exported."""
    return weights.load_weights(str(path), TASK, params())


def single_device_run(label, control=False):
    """The overrides of the one-device run that the data-parallel step of framework `label` must equal: the whole
    batch, in DEVICES micro-batches unless its batch norm is synchronised; with `control`, the other way."""
    whole = dict(devices=1, batch_size=DEVICES * params()["batch_size"])
    split = dict(whole, micro_batches=DEVICES)
    return split if (label in SYNCHRONISED_BATCH_NORM) == control else whole


def trained_names(arrays):
    """The names of the weights a step trains: all but batch norms' running statistics."""
    return [name for name in arrays if not name.endswith(("running_mean", "running_var"))]


def largest_difference(a, b, names):
    """The largest absolute difference between the arrays `names` of two weight sets."""
    return max(float(np.abs(a[name] - b[name]).max()) for name in names)


def exact_weights(init, folder, **overrides):
    """The float64 steps (runner/checks/float64_step.py, run in the PyTorch environment) from the weights file `init` with the
    one-device run's train `overrides` (its whole batch and micro-batches), saved in `folder`; returns the weights.
    StepError ('unavailable') where the PyTorch environment is not built."""
    env = catalog.ENVIRONMENTS[REFERENCE_ENVIRONMENT]
    if not environments.is_ready(env):
        raise StepError("the float64 reference step needs the PyTorch environment (python3 run_all.py setup pytorch)",
                        "unavailable")
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "float64.npz"
    command = [str(environments.interpreter(env)), str(FLOAT64_STEP), str(init),
               str(out), json.dumps(hyperparams.for_task(TASK, "smoke", dict(CHECK_STEPS, **overrides)))]
    done = subprocess.run(command, capture_output=True, text=True, cwd=str(catalog.REPO), timeout=600,
                          env=environments.script_environment(env))
    if done.returncode != 0:
        raise StepError("float64 reference step failed: " + (done.stderr.strip().splitlines() or ["no output"])[-1])
    return load(out)


def check_job(job, folder, control=False):
    """Take the check's steps on DEVICES devices and on one device with the whole batch, in DEVICES micro-batches unless
    the framework synchronises batch norm (and, with `control`, on one device with the batch the other way) in
    `folder`; the result lists every failed check in 'failures'."""
    folder.mkdir(parents=True, exist_ok=True)
    init = start_weights(folder / "init.npz")
    runs = {"parallel": dict(devices=DEVICES), "single": single_device_run(job.label)}
    if control:
        runs["control"] = single_device_run(job.label, control=True)
    stepped = {tag: load(take_steps(job, folder / tag, init, 1, overrides)[1]) for tag, overrides in runs.items()}
    start = load(init)
    trained = trained_names(start)
    result = {"job": job.stem, "framework": job.label, "task": TASK, "devices": DEVICES,
              "moved": largest_difference(stepped["parallel"], start, trained),
              "max_abs": largest_difference(stepped["parallel"], stepped["single"], trained),
              "reference": FLOAT64_REFERENCE.get(job.label),
              "synchronised": SYNCHRONISED_BATCH_NORM.get(job.label), "failures": []}
    if result["moved"] <= 1e-3:
        result["failures"].append("the step moved no weight by more than {:.1e}".format(result["moved"]))
    if result["reference"]:  # each step's distance to the exact one; the data-parallel step's within the factor
        exact = exact_weights(init, folder / "float64", **runs["single"])
        result.update({"single_error": largest_difference(stepped["single"], exact, trained),
                       "parallel_error": largest_difference(stepped["parallel"], exact, trained)})
        result["allowed"] = REFERENCE_FACTOR * result["single_error"]
        if result["parallel_error"] >= result["allowed"]:
            result["failures"].append("{} devices are {:.1e} from the float64 step, one device {:.1e}".format(
                DEVICES, result["parallel_error"], result["single_error"]))
    else:
        result["allowed"] = TOLERANCE
        if result["max_abs"] >= TOLERANCE:
            result["failures"].append("{} devices differ from one by up to {:.1e} (allowed {:.1e})".format(
                DEVICES, result["max_abs"], TOLERANCE))
    if control:
        result["control_max_abs"] = largest_difference(stepped["control"], stepped["single"], trained)
        if result["control_max_abs"] <= 0.2 * result["moved"]:
            result["failures"].append("batch norm's statistics made no difference: the check cannot fail")
        if result["reference"]:  # the other statistics are far from the exact step too: the factor can fail
            result["control_error"] = largest_difference(stepped["control"], exact, trained)
            if result["control_error"] < result["allowed"]:
                result["failures"].append("the control is as close to the float64 step: the check cannot fail")
    return result


def check(jobs, folder, say=print):
    """Check the data-parallel step of each train job (once per row label: each Keras backend is a row); write
    folder/DATA_PARALLEL_FILE (runner/run_folder.py); return the results."""
    results, seen = [], set()
    for job in jobs:
        if job.task != TASK or job.label in seen:
            continue
        seen.add(job.label)
        say("[data parallel] {}: {} steps on {} devices and on one ...".format(job.label, CHECK_STEPS["steps"], DEVICES))
        try:
            result = check_job(job, folder / job.stem)
        except StepError as error:
            result = {"job": job.stem, "framework": job.label, "task": TASK, "error": str(error),
                      "status": error.status}
        say("[data parallel] {}: {}".format(job.label, run_folder.data_parallel_verdict(result)))
        results.append(result)
    folder.mkdir(parents=True, exist_ok=True)
    document = {"devices": DEVICES, "overrides": CHECK_STEPS, "tolerance": TOLERANCE, "reference_factor": REFERENCE_FACTOR,
                "float64_reference": sorted(FLOAT64_REFERENCE), "results": results}
    (folder / run_folder.DATA_PARALLEL_FILE).write_text(json.dumps(document, indent=1) + "\n")
    return results
