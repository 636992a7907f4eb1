"""A run's report files: results.md (the table model of runner/report/table.py as Markdown), results.csv and
results.json (the flat rows), the plots of runner/report/plots.py (results.png; sweep.png, scaling.png and
versions.png where they apply) and, through runner/report/html_pages.py, report.html."""

import csv
import json
from pathlib import Path

from runner import run_folder
from runner.report import html_pages, plots, table


def markdown(records, title="Results", checks=None):
    """The comparison table as Markdown: a header naming profile and hardware, the notes, then one table per task.

    Training time excludes compilation where a framework compiles ahead (Compile column); a framework
    that compiles inside its first epoch, or runs eagerly, shows "-" there, and the first epoch apart.
    `checks` ({(task, label): result} from runner.run_folder.load_checks) adds the checked tasks' columns: "Same as
    PyTorch", and the data-parallel step's verdict in the train and devices-sweep tables.
    """
    model = table.build(records, checks)
    lines = ["## " + title, "", "Profile: {}. Hardware: {}.".format(", ".join(model.profiles) or "-",
                                                                   "; ".join(model.hardware) or "-")]
    for note in model.notes:
        lines += ["", note]
    for task_table in model.tables:
        lines += ["", "### " + task_table.title, ""] + table.markdown_lines(task_table)
        if task_table.notes:
            lines += [""] + ["- " + note for note in task_table.notes]
    sweeps = table.sweep_tables(records, checks)
    if sweeps:
        lines += ["", "## Sweep", "", SWEEP_NOTE]
    for sweep_table in sweeps:
        lines += ["", "### " + sweep_table.title, ""] + table.markdown_lines(sweep_table)
    releases = table.version_tables(records, checks)
    if releases:
        lines += ["", "## Releases", "", table.VERSIONS_NOTE + " versions.png draws them."]
    for release_table in releases:
        lines += ["", "### " + release_table.title, ""] + table.markdown_lines(release_table)
    return "\n".join(lines) + "\n"


SWEEP_NOTE = ("Throughput at each value of the swept hyperparameter (sweep.png draws it): images per second (median "
              "of the passes) for inference, training samples per second over the median epoch for the trained "
              "tasks; a run that did not fit in memory says 'out of memory' and the sweep went on. Latency: the "
              "median and 99th percentile of single-batch times (each timed with the device synchronised). Efficiency "
              "(a sweep of devices, as --devices N runs): images/s on N devices over N times images/s on one, "
              "from the same run; on a CPU the devices share its cores, so it checks the program, not the speed-up.")


def write_report(run_dir):
    """Write results.md, .csv, .json, results.png and report.html (with notebooks as HTML); return the Markdown."""
    run_dir = Path(run_dir)
    records = table.load_records(run_dir)
    checks = run_folder.load_checks(run_dir)
    text = markdown(records, title="Results of {}".format(run_dir.name), checks=checks)
    (run_dir / "results.md").write_text(text)
    rows = table.flat_rows(records, checks)
    with open(str(run_dir / "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[field.name for field in table.FIELDS])
        writer.writeheader()
        writer.writerows(rows)
    (run_dir / "results.json").write_text(json.dumps({"rows": rows, "records": records}, indent=1) + "\n")
    plots.plot(records, run_dir / "results.png")
    plots.plot_sweep(records, run_dir / "sweep.png")
    plots.plot_versions(records, run_dir / "versions.png")
    measured = plots.measured_scaling(records)
    if measured:  # a GPU sweep of devices: its efficiency beside the prediction
        plots.plot_scaling(run_dir / "scaling.png", measured)
    html_pages.write_run_page(run_dir, records, checks)
    return text
