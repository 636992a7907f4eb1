"""A run's plots: results.png (one bar chart per task of its headline figure), sweep.png in a sweep (throughput
against the swept value), versions.png where a run held a framework at several releases (the headline by release),
and scaling.png: the predicted data-parallel scaling of docs/, with a GPU sweep of devices' measured efficiency beside
it in a run folder."""

from common import tasks
from runner import catalog
from runner.report import table


def plot_sweep(records, path):
    """Save a PNG with one panel per swept task: throughput against the swept value, one line per framework
    variant, a cross where a run did not finish; False (nothing written) for a run without a sweep."""
    rows = [table.row(r) for r in records if r.get("sweep")]
    swept = [t for t in tasks.TASKS if any(r["task"] == t for r in rows)]
    if not swept:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(swept), figsize=(7.0 * len(swept), 3.8), squeeze=False)
    for axis, task in zip(axes[0], swept):
        task_rows = [r for r in rows if r["task"] == task]
        numeric = all(isinstance(r["sweep_value"], (int, float)) for r in task_rows)
        for line in dict.fromkeys(table.base_label(r) for r in task_rows):
            points = sorted((r for r in task_rows if table.base_label(r) == line), key=lambda r: r["sweep_value"])
            done = [r for r in points if r["samples_per_s"] is not None]
            drawn = axis.plot([r["sweep_value"] for r in done], [r["samples_per_s"] for r in done], marker="o",
                              label=line)
            failed = [r for r in points if r["samples_per_s"] is None]
            if failed and done:  # where the line stops: the value that did not run, on the axis
                axis.plot([r["sweep_value"] for r in failed], [0] * len(failed), "x", color=drawn[0].get_color())
        if numeric and min(r["sweep_value"] for r in task_rows) > 0:
            axis.set_xscale("log", base=2)
        if numeric:  # the swept values themselves on the axis, as numbers
            values = sorted({r["sweep_value"] for r in task_rows})
            axis.set_xticks(values)
            axis.set_xticklabels([str(value) for value in values])
        axis.set_title(tasks.TASKS[task].title, fontsize=9)
        axis.set_xlabel(task_rows[0]["sweep_key"], fontsize=8)
        axis.set_ylabel("images/s" if not tasks.TASKS[task].trains else "training samples/s", fontsize=8)
        axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
        axis.grid(alpha=0.3)
    figure.suptitle("DL Rosetta Stone: throughput against {} (x: did not run)".format(rows[0]["sweep_key"]), fontsize=10)
    figure.tight_layout()
    figure.savefig(str(path), dpi=120)
    plt.close(figure)
    return True


def plot_versions(records, path):
    """Save a PNG with one panel per release table (table.version_tables): each release's headline, oldest first, with
    its interval over rounds where the run had several; False (nothing written) for a run without releases."""
    shown = table.version_tables(records)
    if not shown:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(shown), figsize=(4.5 * len(shown), 3.6), squeeze=False)
    for axis, release_table in zip(axes[0], shown):
        done = [row.source for row in release_table.rows if row.source["status"] == "ok"]
        names = [table.release_of(r)[1] for r in done]
        medians = [r["headline_median"] if r["headline_n"] else r[release_table.task.headline[0]] for r in done]
        below = [m - r["headline_low"] if r["headline_n"] and r["headline_low"] is not None else 0
                 for m, r in zip(medians, done)]
        above = [r["headline_high"] - m if r["headline_n"] and r["headline_high"] is not None else 0
                 for m, r in zip(medians, done)]
        axis.bar(range(len(done)), medians, yerr=[below, above], capsize=4, color="#4c72b0")
        axis.set_xticks(range(len(done)))
        axis.set_xticklabels(names, fontsize=8)
        axis.set_title(release_table.title, fontsize=9)
        axis.set_ylabel(release_table.task.headline[1] + " (lower is better)", fontsize=8)
        axis.grid(alpha=0.3, axis="y")
    figure.tight_layout()
    figure.savefig(str(path), dpi=120)
    plt.close(figure)
    return True


def plot(records, path):
    """Save a PNG with one bar chart per task of the headline figure (lower is better), accuracy annotated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [table.row(r) for r in records]
    shown = [t for t in tasks.TASKS if any(r["task"] == t for r in rows)] or list(tasks.TASKS)
    figure, axes = plt.subplots(1, len(shown), figsize=(5 * len(shown), 3.2), squeeze=False)
    for axis, task in zip(axes[0], shown):
        key, axis_label = tasks.TASKS[task].headline
        task_rows = [r for r in rows if r["task"] == task]
        names = [table.label(r) for r in task_rows]
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


SCALING_PLOT = catalog.REPO / "docs" / "scaling.png"  # the prediction alone, redrawn by `run_all.py rosetta`


def scaling_lines():
    """The predicted-scaling table of common/scaling.py as Markdown lines (docs/train.md shows them): ResNet-50's
    float32 gradients all-reduced over each link, and the one-GPU step time that keeps 8 GPUs at 90% and 100%."""
    from common import scaling

    rows = scaling.prediction_table()
    gradient_mb = 4 * scaling.resnet50_parameters() / 1e6
    lines = ["| Link | GB/s each way | All-reduce of {:.1f} MB, 2 GPUs (ms) | 4 GPUs | 8 GPUs | 8 GPUs at 90%, no "
             "overlap: one-GPU step from (ms) | 8 GPUs at 100%, with overlap: from (ms) |".format(gradient_mb),
             "|---|---:|---:|---:|---:|---:|---:|"]
    for key, (label, bandwidth) in scaling.LINKS.items():
        link = {row["devices"]: row for row in rows if row["link"] == key}
        overlap_from = link[8]["allreduce_ms"] / scaling.BACKWARD_SHARE  # all-reduce no longer than the backward pass
        lines.append("| {} | {:g} | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {:.1f} |".format(
            label, bandwidth / 1e9, link[2]["allreduce_ms"], link[4]["allreduce_ms"], link[8]["allreduce_ms"],
            link[8]["step_ms_for_90"], overlap_from))
    return lines


def plot_scaling(path, measured=None):
    """Save a PNG of predicted scaling efficiency on 8 GPUs against the one-GPU step time, one line per link, without
    overlap (solid) and with it (dashed); `measured` ({label: (one-GPU step s, {devices: efficiency})}) adds points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from common import scaling

    gradient_bytes = 4 * scaling.resnet50_parameters()
    steps = [0.002 * 1.1 ** i for i in range(70)]  # 2 ms to about 1.6 s
    figure, axis = plt.subplots(figsize=(7.0, 3.8))
    for label, bandwidth in scaling.LINKS.values():
        solid = axis.plot([1e3 * t for t in steps], [scaling.efficiency(t, gradient_bytes, 8, bandwidth) for t in steps],
                          label=label)
        axis.plot([1e3 * t for t in steps], [scaling.efficiency(t, gradient_bytes, 8, bandwidth, True) for t in steps],
                  "--", color=solid[0].get_color(), label=label + ", overlapped")
    for label, (one_device, points) in (measured or {}).items():
        for devices, value in points.items():
            axis.plot([1e3 * one_device], [value], "o", label="{} on {} (measured)".format(label, devices))
    axis.set_xscale("log")
    axis.set_xlabel("one-GPU step time (ms), ResNet-50 float32 gradients ({:.0f} MB)".format(gradient_bytes / 1e6),
                    fontsize=8)
    axis.set_ylabel("efficiency on 8 GPUs", fontsize=8)
    axis.set_ylim(0, 1.05)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="lower right")
    figure.suptitle("Predicted data-parallel scaling (common/scaling.py: ring all-reduce at nominal link speed)",
                    fontsize=9)
    figure.tight_layout()
    figure.savefig(str(path), dpi=120)
    plt.close(figure)
    return path


def measured_scaling(records):
    """plot_scaling's measured points from a run's sweep of `devices` on GPUs (the train task, as --devices N runs it):
    {framework variant: (one-GPU step time in s, {N: efficiency})}, the step time of one GPU's `batch_size` images,
    the efficiency images/s on N over N times that on one, from the same run. {} where no sweep ran on GPUs: on a
    CPU the devices share its cores, and the prediction, which is for GPUs and their links, does not apply."""
    from common import gpu

    runs = {}
    for record in records:
        r = table.row(record)
        if tasks.get(r["task"]).data_parallel and r["sweep_key"] == "devices" and r["status"] == "ok" and \
                r["samples_per_s"] and gpu.device_kind(r["device"]) == "gpu":
            runs.setdefault(table.base_label(r), {})[r["sweep_value"]] = (r["samples_per_s"],
                                                                         record["params"]["batch_size"])
    points = {}
    for label, by_devices in runs.items():
        if 1 in by_devices and len(by_devices) > 1:
            one, batch = by_devices[1]
            points[label] = (batch / one, {n: per_s / (n * one) for n, (per_s, _) in by_devices.items() if n != 1})
    return points
