"""Turn a run's result records into the comparison table (Markdown, CSV, JSON) and a plot, one panel per task."""

import csv
import json
from pathlib import Path

from common import environment, flops, results, tasks
from runner import catalog
from runner.execution import RECORD_SUFFIX

CSV_COLUMNS = (
    "framework", "variant", "task", "profile", "status", "error", "data", "weights", "model", "device", "hardware",
    "framework_version", "threads", "compile_s", "train_s", "first_epoch_s", "epoch_s_median", "accuracy",
    "s_per_1000_images", "s_per_1000_images_min", "s_per_1000_images_max", "images_per_s", "warmup_s",
    "duration_s", "notebook", "gflop_per_s", "peak_gflop_per_s", "utilisation", "num_classes", "test_samples",
    "same_as_pytorch", "accuracy_flag", "precision", "gpu_unused", "build", "peak_estimated",
)


def catalog_rank(framework, variant):
    """A framework variant's place in the catalog, for table order; ones the catalog does not know come last."""
    rows = [(f.label, v.name) for f in catalog.FRAMEWORKS for v in f.variants]
    return rows.index((framework, variant)) if (framework, variant) in rows else len(rows)


def load_records(run_dir):
    """Read every result record in a run folder, in table order (task, then framework)."""
    records = [results.read_result(str(p)) for p in sorted(Path(run_dir).glob("*" + RECORD_SUFFIX))]
    task_order = list(tasks.TASKS)

    def key(record):
        rank = catalog_rank(record["framework"], record.get("variant"))
        return task_order.index(record["task"]), rank, record["framework"], record.get("variant") or ""

    return sorted(records, key=key)


FULL_TRAIN_SAMPLES = {"cnn": 50000, "rnn": 25000}  # the whole training splits


def throughput(record):
    """(achieved GFLOP/s, peak GFLOP/s of the device) of a finished record, each None where unknown."""
    return achieved_gflops(record), device_peak(record.get("environment") or {})[0]


def achieved_gflops(record):
    """A finished record's achieved GFLOP/s, None where unknown.

    Training: the analytic FLOPs of a step (common/flops.py) times the samples of an epoch, over the median
    epoch. Inference: a forward pass's FLOPs per image over the median time per image.
    """
    params, metrics, timings = record.get("params") or {}, record.get("metrics") or {}, record.get("timings") or {}
    try:
        if record["task"] == "inference" and metrics.get("s_per_1000_images"):
            version = "1" if str(record.get("model") or "").startswith("ResNet-50 v1,") else "1.5"
            achieved = flops.resnet50_forward_flops(params["image_size"], version) * 1000 / metrics["s_per_1000_images"]
        elif record["task"] in FULL_TRAIN_SAMPLES and (timings.get("epoch_s") or {}).get("median"):
            samples = params.get("train_samples") or FULL_TRAIN_SAMPLES[record["task"]]
            samples = samples // params["batch_size"] * params["batch_size"]
            achieved = flops.training_flops(record["task"], params) * samples / timings["epoch_s"]["median"]
        else:
            return None
    except KeyError:  # a record without the hyperparameters the count needs
        return None
    return achieved / 1e9


def device_peak(env):
    """(fp32 peak GFLOP/s of the device a record ran on, estimated?): the GPU's row in common/flops.py, else an
    estimate from the multiprocessors and clock its driver reported; for a CPU run, the CPU estimate."""
    gpu = environment.gpu_used(env)
    if not gpu:
        cores = env.get("threads") or env.get("cpu_count")
        return flops.cpu_peak_gflops(cores, env.get("cpu_mhz"), env.get("cpu_simd")), False
    peaks = flops.gpu_peak_tflops(gpu)
    if peaks:
        return peaks["fp32"] * 1000, False
    details = (env.get("gpu_details") or [{}])[0]
    estimate = flops.gpu_peak_estimate(details.get("compute_capability"), details.get("multiprocessors"),
                                       details.get("max_clock_mhz"))
    return (None, False) if estimate is None else (estimate * 1000, True)


def row(record):
    """Flatten a record into the CSV/JSON table row."""
    metrics = record.get("metrics") or {}
    timings = record.get("timings") or {}
    env = record.get("environment") or {}
    per_1000 = timings.get("s_per_1000_images") or {}
    finished = record["status"] == "ok"
    gflops = achieved_gflops(record) if finished else None
    peak, estimated = device_peak(env) if finished else (None, False)
    return {
        "precision": env.get("precision"),
        "gpu_unused": env.get("gpu_unused"),
        "build": env.get("build"),
        "peak_estimated": estimated if peak else None,
        "framework": record["framework"],
        "variant": record.get("variant"),
        "task": record["task"],
        "profile": record["profile"],
        "status": record["status"],
        "error": record.get("error"),
        "data": (record.get("data") or {}).get("source"),
        "weights": record.get("weights"),
        "model": record.get("model"),
        "device": record.get("device"),
        "hardware": environment.hardware_label(env) if env else None,
        "framework_version": env.get("framework_version"),
        "threads": env.get("threads"),
        "compile_s": timings.get("compile_s"),
        "train_s": metrics.get("train_s"),
        "first_epoch_s": timings.get("first_epoch_s"),
        "epoch_s_median": (timings.get("epoch_s") or {}).get("median"),
        "accuracy": metrics.get("accuracy"),
        "s_per_1000_images": metrics.get("s_per_1000_images"),
        "s_per_1000_images_min": per_1000.get("min"),
        "s_per_1000_images_max": per_1000.get("max"),
        "images_per_s": metrics.get("images_per_s"),
        "warmup_s": timings.get("warmup_s"),
        "duration_s": record.get("duration_s"),
        "notebook": record.get("notebook"),
        "gflop_per_s": gflops,
        "peak_gflop_per_s": peak,
        "utilisation": gflops / peak if gflops is not None and peak else None,
        "num_classes": (record.get("params") or {}).get("num_classes"),
        "test_samples": (record.get("params") or {}).get("test_samples"),
    }


TIMING_NOTE = ("Training time is the sum of the timed epochs, the device synchronised before each clock stop. "
               "Compile: seconds spent tracing and compiling the training step before the first epoch, where the "
               "framework does that ahead; '-' where it runs eagerly or compiles inside its first epoch (Keras), "
               "which is then slower than the median epoch.")


def label(r):
    """A row's framework name with its variant, e.g. 'Keras (jax)'."""
    return r["framework"] + (" ({})".format(r["variant"]) if r["variant"] else "")


def number(value, digits=1):
    """A figure for a table cell ('' for None)."""
    return "" if value is None else "{:.{}f}".format(value, digits)


def status_text(r):
    """'ok', or the status with the first line of the error ('|' made safe for Markdown tables).

    An error that starts with its status ('unavailable on this GPU: ...') is shown as it is."""
    if r["status"] == "ok":
        return "ok"
    error = (r["error"] or "").replace("|", "/")
    return error if error.startswith(r["status"]) else "{}: {}".format(r["status"], error)


def device_text(r):
    """The Device cell: the framework's device name, its float32 precision on a GPU ('cuda:0 tf32'), and
    'GPU not used' for a CPU run on a machine whose GPU the framework could not use (the notes say why)."""
    text = r["device"] or ""
    if r["precision"] and r["precision"] != "fp32":
        text += " " + r["precision"]
    if r["gpu_unused"]:
        text += " (GPU not used)"
    return text


def version_text(r):
    """The Version cell: the framework's version, marked where it ran on an adopted interpreter."""
    adopted = (r["build"] or "").startswith("adopted")
    return (r["framework_version"] or "") + (" (adopted)" if adopted else "")


def row_notes(rows):
    """Lines naming what a row's cells cannot hold: why a GPU went unused, which interpreter was adopted."""
    notes = []
    for r in rows:
        if r["gpu_unused"]:
            notes.append("{}: {}.".format(label(r), r["gpu_unused"]))
        if (r["build"] or "").startswith("adopted"):
            notes.append("{}: ran on an {} interpreter, with the versions it has.".format(label(r), r["build"]))
    return notes


FULL_TEST_SAMPLES = {"cnn": 10000, "rnn": 25000}  # the whole test splits, when a profile uses them all
ACCURACY_NOTE = ("Accuracy flags: 'not above chance' where a run does not beat chance by a clear margin (5 points, "
                 "or 3 standard errors of a chance-level score on its test samples if more); with the full profile "
                 "on real data, 'N points from median' where it lies more than 2 points from its task's median.")


def accuracy_flag(r, task_rows):
    """A warning about a trained row's accuracy, or None: no better than chance, or (full, real data) off the median."""
    if r["accuracy"] is None or r["task"] not in FULL_TEST_SAMPLES:
        return None
    chance = 1.0 / (r["num_classes"] or 2)
    samples = r["test_samples"] or FULL_TEST_SAMPLES[r["task"]]
    margin = max(0.05, 3 * (chance * (1 - chance) / samples) ** 0.5)
    if r["accuracy"] < chance + margin:
        return "not above chance"
    if r["profile"] == "full" and r["data"] == "real":
        peers = sorted(x["accuracy"] for x in task_rows
                       if x["accuracy"] is not None and x["profile"] == "full" and x["data"] == "real")
        middle = len(peers) // 2
        median = peers[middle] if len(peers) % 2 else (peers[middle - 1] + peers[middle]) / 2
        if abs(r["accuracy"] - median) > 0.02:
            return "{:.1f} points from median".format(100 * abs(r["accuracy"] - median))
    return None


def accuracy_text(r, task_rows):
    """The accuracy cell: the figure, and its flag in parentheses when there is one."""
    flag = accuracy_flag(r, task_rows)
    return number(r["accuracy"], 3) + (" ({})".format(flag) if flag else "")


FLOPS_NOTE = ("GFLOP/s: analytic FLOPs (common/flops.py: convolutions, dense layers and GRU products; a training "
              "step counted as three forward passes; ResNet-50 v1 or v1.5 as the row's model) over the median "
              "epoch, or per image for inference. Util.: that over the device's fp32 peak: the vendor's figure for "
              "a listed GPU (runs that use TF32 or fp16 tensor cores can pass 100%), for another GPU an estimate "
              "(marked *: multiprocessors x fp32 units x 2 x the clock its driver reports), or for a CPU an estimate, "
              "cores x clock x FLOPs per cycle of its vector unit, with the clock the system reports (a CPU that "
              "boosts above it can pass 100%).")


def utilisation_text(r):
    """The utilisation cell, e.g. '12%' ('12%*' against an estimated GPU peak), or '' when either is unknown."""
    if r["utilisation"] is None:
        return ""
    return "{:.0f}%{}".format(100 * r["utilisation"], "*" if r["peak_estimated"] else "")


PRECISION_NOTE = ("Precision: float32 everywhere. On GPUs with TF32 tensor cores (compute capability 8.0 and newer) "
                  "every framework is set to allow TF32 for float32 matrix products and convolutions, as TensorFlow and "
                  "JAX do by default (frameworks/<name>.py, set_precision); such rows say tf32 beside their device.")
HOST_TO_DEVICE_NOTE = ("Inference: every framework's timed loop starts from batches in host memory (NumPy) and "
                       "includes their copy to the device.")


EQUIVALENCE_NOTE = ("Same as PyTorch: from one shared weight file, does the notebook compute PyTorch's logits and "
                    "training step, or ResNet-50's features? (`runner/equivalence.py`, on the CPU with smoke-sized "
                    "data).")


def same_as_pytorch(r, checks):
    """The table cell saying whether a row computes PyTorch's function from shared weights."""
    from runner import equivalence

    if r["task"] not in equivalence.TASKS:
        return None
    if r["framework"] == "PyTorch":
        return "reference"
    result = checks.get((r["task"], label(r)))
    return equivalence.verdict(result).replace("|", "/") if result else "not checked"


def markdown(records, title="Results", checks=None):
    """The comparison table as Markdown: a header naming profile and hardware, then one table per task.

    Training time excludes compilation where a framework compiles ahead (Compile column); a framework
    that compiles inside its first epoch, or runs eagerly, shows "-" there, and the first epoch apart.
    `checks` ({(task, label): result} from runner.equivalence.load) adds the "Same as PyTorch" column.
    """
    checks = checks or {}
    rows = [row(r) for r in records]
    lines = ["## " + title, ""]
    profiles = sorted({r["profile"] for r in rows})
    hardware = sorted({r["hardware"] for r in rows if r["hardware"]})
    lines.append("Profile: {}. Hardware: {}.".format(", ".join(profiles) or "-", "; ".join(hardware) or "-"))
    lines += ["", TIMING_NOTE, "", ACCURACY_NOTE, "", FLOPS_NOTE, "", PRECISION_NOTE, "", HOST_TO_DEVICE_NOTE]
    if checks:
        lines += ["", EQUIVALENCE_NOTE]
    for task, heading in ((k, t.title) for k, t in tasks.TASKS.items()):
        task_rows = [r for r in rows if r["task"] == task]
        if not task_rows:
            continue
        lines += ["", "### " + heading, ""]
        if task == "inference":
            lines += ["| Framework | Version | Device | Model | Weights | s / 1000 images (median) | min - max | images/s "
                      "| GFLOP/s | Util. | Status |" + (" Same as PyTorch |" if checks else ""),
                      "|---|---|---|---|---|---:|---:|---:|---:|---:|---|" + ("---|" if checks else "")]
            for r in task_rows:
                spread = "" if r["s_per_1000_images_min"] is None else "{} - {}".format(
                    number(r["s_per_1000_images_min"], 2), number(r["s_per_1000_images_max"], 2))
                lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                    label(r), version_text(r), device_text(r), r["model"] or "", r["weights"] or "",
                    number(r["s_per_1000_images"], 2), spread, number(r["images_per_s"]), number(r["gflop_per_s"]),
                    utilisation_text(r), status_text(r)) + (" {} |".format(same_as_pytorch(r, checks)) if checks else ""))
        else:
            extra = " Same as PyTorch |" if checks else ""
            lines += ["| Framework | Version | Device | Data | Training (s) | First epoch (s) | Epoch (s, median) "
                      "| Compile (s) | GFLOP/s | Util. | Accuracy | Status |" + extra,
                      "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|" + ("---|" if checks else "")]
            for r in task_rows:
                lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                    label(r), version_text(r), device_text(r), r["data"] or "",
                    number(r["train_s"]), number(r["first_epoch_s"]), number(r["epoch_s_median"]),
                    (number(r["compile_s"], 2) or "-") if r["status"] == "ok" else "", number(r["gflop_per_s"]),
                    utilisation_text(r), accuracy_text(r, task_rows), status_text(r))
                    + (" {} |".format(same_as_pytorch(r, checks)) if checks else ""))
        notes = row_notes(task_rows)
        if notes:
            lines += [""] + ["- " + note for note in notes]
    return "\n".join(lines) + "\n"


def plot(records, path):
    """Save a PNG with one bar chart per task of the headline figure (lower is better), accuracy annotated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [row(r) for r in records]
    shown = [t for t in tasks.TASKS if any(r["task"] == t for r in rows)] or list(tasks.TASKS)
    figure, axes = plt.subplots(1, len(shown), figsize=(5 * len(shown), 3.2), squeeze=False)
    for axis, task in zip(axes[0], shown):
        key, axis_label = tasks.TASKS[task].headline
        task_rows = [r for r in rows if r["task"] == task]
        names = [label(r) for r in task_rows]
        values = [r[key] if r[key] is not None else 0.0 for r in task_rows]
        bars = axis.barh(names, values, color=["tab:blue" if r["status"] == "ok" else "tab:red" for r in task_rows])
        for bar, r in zip(bars, task_rows):
            note = r["status"] if r["status"] != "ok" else (
                "acc {:.3f}".format(r["accuracy"]) if r["accuracy"] is not None else "{:.1f} img/s".format(r["images_per_s"]))
            axis.annotate(" " + note, (bar.get_width(), bar.get_y() + bar.get_height() / 2), va="center", fontsize=8)
        axis.set_title(tasks.TASKS[task].title, fontsize=9)
        axis.set_xlabel(axis_label + ", lower is better", fontsize=8)
        axis.invert_yaxis()
        axis.margins(x=0.35)
    profiles = ", ".join(sorted({r["profile"] for r in rows})) or "-"
    figure.suptitle("DL Rosetta Stone, profile {}".format(profiles), fontsize=10)
    figure.tight_layout()
    figure.savefig(str(path), dpi=120)
    plt.close(figure)


def write_report(run_dir):
    """Write results.md, .csv, .json, results.png and report.html (with notebooks as HTML); return the Markdown."""
    run_dir = Path(run_dir)
    from runner import equivalence

    records = load_records(run_dir)
    checks = equivalence.load(run_dir)
    text = markdown(records, title="Results of {}".format(run_dir.name), checks=checks)
    (run_dir / "results.md").write_text(text)
    rows = [row(r) for r in records]
    for r in rows:
        r["same_as_pytorch"] = same_as_pytorch(r, checks) if checks else None
        r["accuracy_flag"] = accuracy_flag(r, [x for x in rows if x["task"] == r["task"]])
    with open(str(run_dir / "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (run_dir / "results.json").write_text(json.dumps({"rows": rows, "records": records}, indent=1) + "\n")
    plot(records, run_dir / "results.png")
    from runner import html_report

    html_report.write_run_page(run_dir)
    return text
