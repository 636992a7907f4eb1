"""One JSON record per notebook run: what ran, on what, with which data, and what it measured.

Schema (version 1); every key is present in every record, None where it does not apply:

    schema_version  1
    framework       "PyTorch", "TensorFlow", "Keras", ...
    variant         None, or e.g. the Keras backend ("jax")
    task            "cnn", "inference" or "rnn"
    profile         "full", "quick" or "smoke"
    status          "ok", "failed", "timeout", "unavailable", "unsupported" (the framework or device has no
                    such variant: common.variants.Unsupported) or "interrupted" (Ctrl-C, written by the runner)
    error           None, or the first line of what went wrong
    data            {"source": "real" | "synthetic", "description": ...} (inference: fake images)
    weights         inference: "imagenet" or "random"; None for the trained tasks
    model           inference: the ResNet-50 variant and its source, e.g. "ResNet-50 v1.5, torchvision";
                    None for the trained tasks (added within version 1: older records lack it)
    precision       the precision asked for (common/variants.py): "auto" (the default run), "fp32", "tf32",
                    "bf16" or "fp16"; environment.computed_precision says what was computed in (named
                    environment.precision before; added within version 1: older records lack it and are "auto")
    compile         the compile mode asked for: "default" or "on" (added within version 1, like precision)
    settings        what decides the run's speed, its ledger (SETTINGS): {setting: value}, set by the framework's
                    module (speed_settings); None in older records (added within version 1)
    sweep           in a sweep (run_all.py --sweep), {hyperparameter: value} of this run, set by the runner;
                    None otherwise (added within version 1)
    kernel_env      with run_all.py --kernel-env, {variable: value} set in this run's kernel's environment by the
                    runner (XLA_FLAGS, say); None otherwise (added within version 1)
    device          what the framework computed on, e.g. "cpu", "cuda:0"
    environment     common.environment.facts(...)
    params          the hyperparameters used (common.hyperparams.for_task)
    timings         common.timing.training_timings(...) or inference_timings(...), with the peak resident
                    memory of the timed blocks, peak_rss_bytes and peak_rss_scope (common/memory.py; added
                    within version 1: older records lack them)
    metrics         the headline figures: train_s and accuracy (cnn, rnn);
                    s_per_1000_images and images_per_s, medians (inference)
    notebook        the executed notebook's file name, set by the runner
    started_at      ISO-8601 UTC time the notebook started
    duration_s      seconds from start to the record being written
"""

import datetime
import json
import os
import time
from collections import OrderedDict

from common import tasks, timing, variants

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "timeout", "unavailable", "unsupported", "interrupted")
FIELDS = (
    "schema_version", "framework", "variant", "task", "profile", "status", "error", "data", "weights", "device",
    "environment", "params", "timings", "metrics", "notebook", "started_at", "duration_s",
)
OPTIONAL_FIELDS = ("model", "precision", "compile", "settings", "sweep",  # present in new records, accepted
                   "kernel_env")  # missing in older ones


# A record's ledger: the settings that decide a row's speed, one vocabulary for every framework, so that a reader
# sees why two rows differ; a value is None where the setting does not apply (no layout for token inputs, no
# autotuning on a CPU)
SETTINGS = OrderedDict([
    ("layout", "the images' memory layout the framework computes in: NCHW or NHWC"),
    ("compiler", "what runs the model: eager, a graph, or a compiler with its options"),
    ("kernels", "the library that runs the convolutions and matrix products on this device"),
    ("autotune", "whether the library times its algorithms per shape and keeps the fastest (cuDNN's benchmark mode)"),
    ("threads", "the CPU threads the framework computes with"),
    ("precision", "what it computes in, and by which policy (autocast, a dtype policy, a global float type)"),
])


def speed_settings(task, **values):
    """A record's ledger (SETTINGS, in its order) from a framework module's values; ValueError for a name SETTINGS
    lacks; the layout only where the task's inputs are images."""
    unknown = sorted(set(values) - set(SETTINGS))
    if unknown:
        raise ValueError("speed settings: unknown {}; known: {}".format(", ".join(unknown), ", ".join(SETTINGS)))
    if tasks.get(task).inputs != "images":
        values["layout"] = None
    return OrderedDict((name, values.get(name)) for name in SETTINGS)


def new_record(framework, task, profile, variant=None, params=None, precision="auto", compile_mode="default"):
    """Start a record for a notebook run: identity, variant, parameters and start time; the rest is filled in as it
    runs."""
    record = dict.fromkeys(FIELDS + OPTIONAL_FIELDS)
    record.update(
        schema_version=SCHEMA_VERSION,
        framework=framework,
        variant=variant or None,
        task=task,
        profile=profile,
        status="running",
        params=dict(params or {}),
        precision=precision,
        compile=compile_mode,
        metrics={},
        started_at=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    record["_started"] = time.time()
    return record


def failure_record(framework, task, profile, status, error, variant=None, notebook=None, duration_s=None, params=None,
                   precision="auto", compile_mode="default"):
    """Return a complete record for a run that produced none itself (it failed, timed out or could not start)."""
    record = new_record(framework, task, profile, variant=variant, params=params, precision=precision,
                        compile_mode=compile_mode)
    record.pop("_started")
    record.update(status=status, error=first_line(error), notebook=notebook, duration_s=duration_s)
    check_record(record)
    return record


def label(framework, variant=None, precision="auto", compile_mode="default", sweep=None, kernel_env=None):
    """A row's name: the framework's label with its variant, precision and compile mode where they are not the
    default, a sweep's value and the variables set in its kernel's environment, e.g. 'Keras (jax)', 'PyTorch · bf16 ·
    compiled', 'JAX · batch_size=8', 'JAX · XLA_FLAGS=--xla_cpu_use_onednn=true'."""
    words = [variants.label(precision or "auto", compile_mode or "default")]
    words += ["{}={}".format(key, value) for key, value in sorted((sweep or {}).items())]
    words += ["{}={}".format(name, value) for name, value in sorted((kernel_env or {}).items())]
    return framework + (" ({})".format(variant) if variant else "") + "".join(" · " + w for w in words if w)


def row_label(record):
    """The row's name of a record (older records, without precision and compile, are default runs)."""
    return label(record["framework"], record.get("variant"), record.get("precision"), record.get("compile"),
                 record.get("sweep"), record.get("kernel_env"))


def first_line(text):
    """The first non-empty line of a message, for tables (None stays None)."""
    if text is None:
        return None
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return str(text).strip()


def check_record(record):
    """Raise ValueError if a record lacks a schema field, has an unknown status, or an ok record lacks its metrics."""
    missing = [key for key in FIELDS if key not in record]
    if missing:
        raise ValueError("result record lacks fields: {}".format(", ".join(missing)))
    if record["schema_version"] != SCHEMA_VERSION:
        raise ValueError("result record has schema version {}, expected {}".format(record["schema_version"], SCHEMA_VERSION))
    if record["status"] not in STATUSES:
        raise ValueError("result record has unknown status {!r}".format(record["status"]))
    if record["status"] == "ok":
        absent = [m for m in tasks.get(record["task"]).metrics if (record.get("metrics") or {}).get(m) is None]
        if absent:
            raise ValueError("an ok {} record needs metrics: {}".format(record["task"], ", ".join(absent)))


def _to_json(value):
    """json.dump fallback for numpy scalars and arrays (numpy is not imported here)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError("cannot store {!r} in a result record".format(type(value).__name__))


def write_result(path, record, status="ok"):
    """Finish `record` (status, duration), check it, and write it as JSON to `path` atomically; '' writes nothing."""
    record = dict(record)
    started = record.pop("_started", None)
    record["status"] = status
    if started is not None:
        record["duration_s"] = round(time.time() - started, 3)
    check_record(record)
    if path:
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            os.makedirs(directory)
        partial = "{}.part-{}".format(path, os.getpid())
        try:
            with open(partial, "w") as f:
                json.dump(record, f, indent=2, sort_keys=True, default=_to_json)
                f.write("\n")
            os.replace(partial, path)
        except OSError:  # no room, say: no half-written file stays beside the records
            if os.path.exists(partial):
                os.remove(partial)
            raise
    return record


def write_training_result(path, record, epoch_seconds, accuracy, compile_s=None, say=print):
    """Finish a trained task's record (cnn, rnn): its epoch timings (timing.training_timings) and headline figures
    (training time, test accuracy); write it to `path` (write_result), say its summary line, and return it."""
    record = dict(record, timings=timing.training_timings(epoch_seconds, compile_s=compile_s))
    record["metrics"] = {"train_s": record["timings"]["train_s"], "accuracy": accuracy}
    return _written(path, record, say)


def write_throughput_result(path, record, timings, say=print):
    """Finish a record timed in passes (inference's timing.time_inference, the train task's
    timing.training_throughput): those timings and the headline figures, s per 1000 images and images/s (medians);
    write it to `path` (write_result), say its summary line, and return it."""
    record = dict(record, timings=timings)
    record["metrics"] = {"s_per_1000_images": timings["s_per_1000_images"]["median"],
                         "images_per_s": timings["images_per_s"]["median"]}
    return _written(path, record, say)


def _written(path, record, say):
    record = write_result(path, record)
    say(summary_line(record))
    return record


def read_result(path):
    """Read and check a result record written by write_result."""
    with open(path) as f:
        record = json.load(f)
    check_record(record)
    return record


def summary_line(record):
    """One human line for the end of a notebook: framework, task, headline figure and accuracy."""
    key, headline = tasks.get(record["task"]).headline
    metrics = record.get("metrics") or {}
    parts = ["{} {}".format(row_label(record), record["task"])]
    if metrics.get(key) is not None:
        parts.append("{}: {:.3f}".format(headline, metrics[key]))
    if metrics.get("accuracy") is not None:
        parts.append("accuracy: {:.4f}".format(metrics["accuracy"]))
    parts.append("on {} with {} data".format(record.get("device"), (record.get("data") or {}).get("source", "?")))
    return ", ".join(parts)
