"""Same weights, same function: run each framework's notebook from one canonical weight file
(common/weights.py) and compare what it computes with PyTorch's notebook, in float32.

What is compared, each task says (its module's SameWeights, common/tasks/<key>.py):
- outputs at the shared weights (`forward`: a run at a learning rate of 0 for a task that trains), then the check's
  training steps (`steps`): every weight array after them, the steps themselves (weights after minus before, which
  the unchanged bulk of each weight would otherwise hide), and the logits after them;
- ResNet-50's features (outputs "resnet50 features"): the features of the first batch at the shared (v1.5) weights,
  and the weights coming back unchanged. A notebook whose zoo model is v1 (the registry's `resnet50`) starts from
  shared v1 weights (a bias on every convolution) and is compared with that v1 computed in PyTorch
  (runner/checks/resnet50_v1.py); its features must also differ from v1.5's on the same weights (the control), and
  its weights come back as its model holds them (weights.as_held: the biases it lacks folded into batch norm).

Where a framework's step differs in one array for a known reason, its variant's `step_differences` in the
registry (runner/catalog.py) names it and the rest must agree. Where a framework cannot compute the reference
function, its `not_equivalent` there says why; what
still holds is checked instead (the weights it can represent go in and come out unchanged), and that
the outputs do differ, so that the claim stays true.
"""

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from common import hyperparams, tasks, weights
from runner import catalog, run_folder
from runner.checks import resnet50_v1
from runner.run import execution

# The tasks with an equivalence case (common/tasks/: their SameWeights).
TASKS = run_folder.EQUIVALENCE_TASKS
REFERENCE = run_folder.EQUIVALENCE_REFERENCE
# ResNet-50's features, relative to the largest of them: 53 convolutions summed in different orders.
FEATURES_TOLERANCE = 1e-4
FEATURES = "resnet50 features"  # a SameWeights' outputs compared as ResNet-50's features
LOGITS_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
# A step's largest difference (the weights after the steps minus before), relative to the largest step of that array.
# A float32 weight near 0.1 is resolved to about 1e-8 and an SGD step is about 1e-5, so a step is only known to about
# 1e-3 of itself (measured: at most 1.3e-3 for the CNN, 1.2e-3 for the RNN); a wrong gradient scale, a dropped momentum
# or swapped betas are off by 10% or more (tests/test_check_controls.py).
STEP_TOLERANCE = 1e-2
# ... unless the difference is within a few float32 units (ulps) of the array's largest weight: a step that is itself
# only some hundred ulps is known to no better. The transformer's key biases have no gradient (softmax ignores what
# they add to all of a query's scores alike), so their step is AdamW's decay alone, 1.3e-6 on weights near 0.1, about
# 180 ulps; Optax's `p - lr * (wd * p + update)` and PyTorch's `p * (1 - lr * wd)` then round 3 ulps (1.7%) apart.
STEP_ULPS = 4
# Adam's epsilon in a check's one-step run (training_run)
FIRST_STEP_EPS = 1e-5
# The check's notebook runs at once, per task. Nothing in them is timed, and most of their time is single-threaded: a
# kernel's start, the framework's imports, the graph's compilation (Theano, CNTK) and small smoke-sized steps.
WORKERS = 2
# The tag of a v1 notebook's run: from the shared v1 weights, in their own folder
V1_RUN = "forward v1"


class ExchangeError(RuntimeError):
    """A notebook run for the equivalence check failed; the message is its first error line."""


class ExchangeUnsupported(ExchangeError):
    """The notebook does not run on this framework at all (a release lacking what it calls): nothing to compare."""


def same_weights(task):
    """What the check compares of `task`: its module's SameWeights."""
    return tasks.get(task).same_weights


def forward_overrides(task):
    """The overrides of a run that only computes at the shared weights (SameWeights.forward_overrides)."""
    return same_weights(task).forward_overrides()


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
    if record["status"] == "unsupported":
        raise ExchangeUnsupported(record["error"])
    if record["status"] != "ok":
        raise ExchangeError("{} {}: {}".format(job.stem, record["status"], record["error"]))
    return record, weights.load_weights(str(exported), task, params_for(task, overrides))


def training_run(job):
    """(tag, overrides) of the training run of `job` that the check compares: the check's steps ('step'), or its first
    step alone ('first step') where the job's variant declares a step difference, which the later steps spread to every
    array. A first step is well conditioned at any epsilon (no earlier moment outweighs the gradient), so it takes
    FIRST_STEP_EPS, at which the second moment, where Keras' sparse-gradient difference lies, still decides the step:
    under the transformer's eps 1e-3 it would not show."""
    overrides = same_weights(job.task).overrides
    if job.variant.step_differences.get(job.task):
        return "first step", dict(overrides, epochs=1, eps=min(overrides.get("eps", FIRST_STEP_EPS), FIRST_STEP_EPS))
    return "step", overrides


def runs_of(job):
    """The check's runs of a job, as {tag: overrides}: 'forward' (at the shared weights) and/or its training run."""
    spec = tasks.get(job.task).same_weights
    if spec is None or (job.not_equivalent and not spec.checks_not_equivalent):
        return {}
    runs = {}
    if spec.outputs == FEATURES and job.framework.resnet50 != "v1.5":
        runs[V1_RUN] = spec.forward_overrides()
    elif spec.forward:
        runs["forward"] = spec.forward_overrides()
    if spec.steps:
        tag, overrides = training_run(job)
        runs[tag] = overrides
    return runs


def v1_reference(entry):
    """The entry's ResNet-50 v1 reference, made when first asked for: {'folder', 'init', 'start', 'features'}, the
    shared v1 weights (weights.resnet50_v1_weights) and the features every variant of resnet50_v1.VARIANTS computes
    from them in PyTorch. ExchangeError where the reference cannot run."""
    with _lock(entry):
        if "v1" not in entry:
            folder = entry["folder"] / "v1"
            folder.mkdir(parents=True, exist_ok=True)
            task = entry["task"]
            params = params_for(task, forward_overrides(task))
            init = weights.save_weights(str(folder / "init.npz"), task, params, weights.resnet50_v1_weights(params))
            try:
                features = resnet50_v1.features(init, folder, params)
            except resnet50_v1.ReferenceFailed as error:
                raise ExchangeError(str(error)) from error
            entry["v1"] = {"folder": folder, "init": init, "start": weights.load_weights(init, task, params),
                           "features": features}
        return entry["v1"]


def _lock(entry):
    """The entry's lock, which its lazily made references take (check() compares several jobs at once)."""
    return entry.setdefault("lock", threading.RLock())  # one atomic dict operation


def exchanged(job, entry, tag, overrides):
    """(record, exported arrays) of `job`'s run `tag` with `overrides` from the entry's shared weights (the v1 ones for
    V1_RUN), through the entry's `run`."""
    folder, init = entry["folder"], entry["init"]
    if tag == V1_RUN:
        folder, init = v1_reference(entry)["folder"], v1_reference(entry)["init"]
    return entry["run"](entry["task"], job, folder, init, overrides, tag)


def reference_run(entry, tag, overrides):
    """What PyTorch's notebook exported from the entry's shared weights in its run `tag` with `overrides`, run when first
    asked for (once, however many comparisons ask at once)."""
    with _lock(entry):
        if tag not in entry:
            pytorch = catalog.select([REFERENCE], [entry["task"]])[0]
            entry[tag] = entry["run"](entry["task"], pytorch, entry["folder"], entry["init"], overrides, tag)[1]
        return entry[tag]


def reference(task, folder, run=run_exchange):
    """The shared starting weights of `task` in `folder`, and what PyTorch's notebook exported from them.

    `run` (run_exchange's signature) runs the notebooks, for this entry's later comparisons too."""
    folder.mkdir(parents=True, exist_ok=True)
    params = params_for(task, same_weights(task).overrides)
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
    spec = same_weights(task)
    reason = job.not_equivalent
    differences = job.variant.step_differences.get(task, {})
    result = {"job": job.stem, "framework": job.label, "task": task, "equivalent": reason is None, "reason": reason,
              "step_differences": differences, "failures": []}
    failures = result["failures"]
    logits_bound = LOGITS_TOLERANCE["atol"]
    if spec.outputs == FEATURES:
        return compare_features(job, entry, result)
    if spec.forward:
        forward = exchanged(job, entry, "forward", spec.forward_overrides())[1]
        result["forward_logits_max_abs"] = _max_abs(forward[weights.LOGITS], entry["forward"][weights.LOGITS])
        if reason:
            for name in spec.representable or entry["start"]:
                if not np.array_equal(forward[name], entry["start"][name]):
                    failures.append("{} did not come back unchanged".format(name))
            if result["forward_logits_max_abs"] > logits_bound * 100:
                return result
            # a difference too small to show at the shared weights (GELU's tanh approximation: 1e-5 in the logits)
            # must show after the steps
            differing = []
            _compare_steps(job, entry, result, differing, differences)
            if not differing:
                failures.append("the logits and the steps agree now: is it still not equivalent?")
            return result
        if not np.allclose(forward[weights.LOGITS], entry["forward"][weights.LOGITS], **LOGITS_TOLERANCE):
            failures.append("logits at the shared weights differ by up to {:.2e}".format(result["forward_logits_max_abs"]))
    _compare_steps(job, entry, result, failures, differences)
    return result


def _compare_steps(job, entry, result, failures, differences):
    """compare()'s training part: `job`'s weights and logits after the check's steps against PyTorch's, each array's
    step within STEP_TOLERANCE (or STEP_ULPS); figures into `result`, what fails into `failures`."""
    tolerance = same_weights(entry["task"]).weights_tolerance
    tag, overrides = training_run(job)
    reference_step = reference_run(entry, tag, overrides)
    got = exchanged(job, entry, tag, overrides)[1]
    arrays = {}
    for name, start in entry["start"].items():
        expected = reference_step[name]
        largest = float(np.abs(expected - start).max())
        step_difference = _max_abs(got[name] - start, expected - start)
        floor = STEP_ULPS * float(np.spacing(np.float32(np.abs(expected).max())))
        arrays[name] = {"max_abs": _max_abs(got[name], expected),
                        "step_relative": step_difference / largest if largest else 0.0,
                        "step_ulps": step_difference / floor * STEP_ULPS if floor else 0.0}
        if name in differences:
            if arrays[name]["max_abs"] <= tolerance["atol"] * 10:
                failures.append("{} agrees now: is the step difference gone?".format(name))
            continue
        if not np.allclose(got[name], expected, **tolerance):
            failures.append("{} differs after the step by up to {:.2e}".format(name, arrays[name]["max_abs"]))
        if arrays[name]["step_relative"] > STEP_TOLERANCE and step_difference > floor:
            failures.append("{}'s step differs by {:.1%} of the step ({:.1f} ulps of its largest weight)".format(
                name, arrays[name]["step_relative"], arrays[name]["step_ulps"]))
    result.update(steps=overrides["epochs"], logits_max_abs=_max_abs(got[weights.LOGITS], reference_step[weights.LOGITS]),
                  weights_max_abs=max(a["max_abs"] for a in arrays.values()),
                  step_max_relative=max(a["step_relative"] for a in arrays.values()), arrays=arrays)
    if not differences and not np.allclose(got[weights.LOGITS], reference_step[weights.LOGITS], **LOGITS_TOLERANCE):
        failures.append("logits after the step differ by up to {:.2e}".format(result["logits_max_abs"]))


def _relative(features, expected):
    return _max_abs(features, expected) / float(np.abs(expected).max())


def compare_features(job, entry, result):
    """compare() for inference: the features and the weights that come back; for a zoo's v1 model, against the v1
    reference, with the v1.5 function as the control that must differ."""
    failures, model, overrides = result["failures"], job.framework.resnet50, forward_overrides(entry["task"])
    if model == "v1.5":
        forward = exchanged(job, entry, "forward", overrides)[1]
        expected, held = entry["forward"][weights.LOGITS], entry["start"]
    else:
        v1 = v1_reference(entry)
        forward = exchanged(job, entry, V1_RUN, overrides)[1]
        expected, held = v1["features"][model], weights.as_held(v1["start"], set(forward) - {weights.LOGITS})
        controls = {other: _relative(forward[weights.LOGITS], features) for other, features in v1["features"].items()
                    if other != model}  # every other function, v1.5 among them, must be far away
        result.update(model=resnet50_v1.VARIANT_NAMES[model], biases=len(set(forward) - set(entry["start"]) - {weights.LOGITS}),
                      controls=controls)
        for other, distance in controls.items():
            if distance <= 100 * FEATURES_TOLERANCE:
                failures.append("the features are {}'s too ({:.1e} of the largest): the check cannot tell them apart".format(
                    resnet50_v1.VARIANT_NAMES[other], distance))
    result["features_max_relative"] = _relative(forward[weights.LOGITS], expected)
    if result["features_max_relative"] > FEATURES_TOLERANCE:
        failures.append("features differ by up to {:.1e} of the largest".format(result["features_max_relative"]))
    returned = set(forward) - {weights.LOGITS}
    if returned != set(held):
        failures.append("it gave back other arrays: {}".format(", ".join(sorted(returned ^ set(held))[:3])))
    changed = [name for name in sorted(returned & set(held)) if not np.array_equal(forward[name], held[name])]
    if changed:
        failures.append("weights did not come back unchanged: {}".format(", ".join(changed[:3])))
    return result


def document(task, results):
    """The JSON document of a task's check: what was compared, with which tolerances, and the results."""
    spec = same_weights(task)
    return {"task": task, "reference": "PyTorch", "overrides": spec.overrides,
            "tolerances": {"weights": spec.weights_tolerance, "logits": LOGITS_TOLERANCE,
                           "step_relative": STEP_TOLERANCE, "step_ulps": STEP_ULPS,
                           "features_relative": FEATURES_TOLERANCE},
            "results": results}


def check(jobs, folder, say=print, workers=WORKERS, run=run_exchange, cache=None):
    """Compare every job with PyTorch's from shared weights, `workers` of them at once, each notebook run through `run`
    (run_exchange's signature); write folder/EQUIVALENCE_FILE (runner/run_folder.py); return it, its results in the
    jobs' order. With `cache` (verdict_cache.VerdictCache), a job whose verdict is kept for what it is now reuses
    it (dated), and a task whose jobs all have one runs nothing; new definite verdicts are kept."""
    out = {}
    folder.mkdir(parents=True, exist_ok=True)
    for task in TASKS:
        task_jobs = [job for job in jobs if job.task == task and job.framework.key != REFERENCE]
        if not task_jobs:
            continue
        kept = {job.stem: cache.lookup(job) for job in task_jobs} if cache else {}
        for job in task_jobs:
            if kept.get(job.stem):
                say("[equivalence] {}: {}".format(job.stem, run_folder.equivalence_verdict(kept[job.stem])))
        to_check = [job for job in task_jobs if not kept.get(job.stem)]
        results = {}
        if to_check:
            say("[equivalence] {}: PyTorch from the shared weights ...".format(task))
            try:
                entry = reference(task, folder / task, run=run)
            except ExchangeError as error:
                entry = None
                results = {job.stem: {"job": job.stem, "framework": job.label, "task": task,
                                      "error": "reference: " + str(error)} for job in to_check}

            def compared(job, entry=entry, task=task):
                try:
                    result = compare(job, entry)
                except ExchangeUnsupported as error:
                    result = {"job": job.stem, "framework": job.label, "task": task, "unsupported": str(error)}
                except ExchangeError as error:
                    result = {"job": job.stem, "framework": job.label, "task": task, "error": str(error)}
                say("[equivalence] {}: {}".format(job.stem, run_folder.equivalence_verdict(result)))
                if cache:
                    cache.keep(job, result)
                return result

            if entry is not None:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    results = dict(zip([job.stem for job in to_check], pool.map(compared, to_check)))
        out[task] = document(task, [kept.get(job.stem) or results[job.stem] for job in task_jobs])
    (folder / run_folder.EQUIVALENCE_FILE).write_text(json.dumps(out, indent=1) + "\n")
    return out


def write_interrupted(jobs, folder):
    """Where a signal stopped the check of `jobs`: folder/EQUIVALENCE_INTERRUPTED_FILE, each job's result saying so (the
    table's cell reads `check interrupted`), and no EQUIVALENCE_FILE, so that --resume runs the check again."""
    out = {}
    for job in jobs:
        out.setdefault(job.task, {"task": job.task, "results": []})["results"].append(
            {"job": job.stem, "framework": job.label, "task": job.task, "interrupted": True})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / run_folder.EQUIVALENCE_INTERRUPTED_FILE).write_text(json.dumps(out, indent=1) + "\n")
