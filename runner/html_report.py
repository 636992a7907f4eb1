"""The HTML face of the results: a run's report page, and one table merged from runs on several machines.

Both pages are single self-contained files (inline CSS, bars drawn with CSS, no JavaScript needed).
A run's page links each framework to its executed notebook, rendered to HTML by nbconvert.
"""

import html
from pathlib import Path

from common import tasks
from runner import report

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0 16px 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; }
th { background: #eef2f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.bar { background: #4a7fb5; height: 12px; display: inline-block; vertical-align: middle; }
.bad { color: #a40000; } .note { color: #555; font-size: 13px; max-width: 1000px; }
"""


def _e(value):
    return html.escape("" if value is None else str(value))


def _page(title, body):
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title><style>{1}</style>"
            "</head><body>\n<h1>{0}</h1>\n{2}\n</body></html>\n").format(_e(title), _STYLE, body)


def render_notebooks(run_dir):
    """Render every executed notebook of a run folder to HTML beside it; return {notebook name: html name}."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_file=str(Path(__file__).parent / "templates" / "offline.html.j2"))
    rendered = {}
    for notebook in sorted(Path(run_dir).glob("*.ipynb")):
        body, _ = exporter.from_filename(str(notebook))
        target = notebook.with_suffix(".html")
        target.write_text(body)
        rendered[notebook.name] = target.name
    return rendered


def _bar(value, largest):
    if value is None or not largest:
        return ""
    return '<span class="bar" style="width:{:.0f}px"></span>'.format(max(1.0, 160.0 * value / largest))


def _task_table(task, rows, links, checks=None):
    key, _ = tasks.TASKS[task].headline
    largest = max([r[key] for r in rows if r[key] is not None] or [0])
    if task == "inference":
        head = ["Framework", "Version", "Device", "Model", "Weights", "s / 1000 images", "", "min - max", "images/s",
                "GFLOP/s", "Util.", "Status"] + (["Same as PyTorch"] if checks else [])
    else:
        head = ["Framework", "Version", "Device", "Data", "Training (s)", "", "First epoch (s)", "Epoch (s, median)",
                "Compile (s)", "GFLOP/s", "Util.", "Accuracy", "Status"] + (["Same as PyTorch"] if checks else [])
    lines = ["<table><tr>" + "".join("<th>{}</th>".format(_e(h)) for h in head) + "</tr>"]
    for r in rows:
        name = _e(report.label(r))
        if links.get(r["notebook"]):
            name = '<a href="{}">{}</a>'.format(_e(links[r["notebook"]]), name)
        status = '<span class="{}">{}</span>'.format("" if r["status"] == "ok" else "bad", _e(report.status_text(r)))
        cells = [name, _e(report.version_text(r)), _e(report.device_text(r))]
        if task == "inference":
            spread = "" if r["s_per_1000_images_min"] is None else "{} - {}".format(
                report.number(r["s_per_1000_images_min"], 2), report.number(r["s_per_1000_images_max"], 2))
            cells += [_e(r["model"]), _e(r["weights"]), report.number(r[key], 2), _bar(r[key], largest), spread,
                      report.number(r["images_per_s"]), report.number(r["gflop_per_s"]), report.utilisation_text(r),
                      status]
            if checks:
                cells.append(_e(report.same_as_pytorch(r, checks)))
        else:
            cells += [_e(r["data"]), report.number(r[key]), _bar(r[key], largest), report.number(r["first_epoch_s"]),
                      report.number(r["epoch_s_median"]),
                      (report.number(r["compile_s"], 2) or "-") if r["status"] == "ok" else "",
                      report.number(r["gflop_per_s"]), report.utilisation_text(r), _e(report.accuracy_text(r, rows)),
                      status]
            if checks:
                cells.append(_e(report.same_as_pytorch(r, checks)))
        numeric = {4, 6, 7, 8, 9, 10, 11} if task != "inference" else {5, 7, 8, 9, 10}
        lines.append("<tr>" + "".join('<td class="num">{}</td>'.format(c) if i in numeric else "<td>{}</td>".format(c)
                                      for i, c in enumerate(cells)) + "</tr>")
    lines.append("</table>")
    lines += ['<p class="note">{}</p>'.format(_e(note)) for note in report.row_notes(rows)]
    return "\n".join(lines)


def _environment_table(records):
    head = ["Framework", "Framework version", "Backend", "Python", "numpy", "Device", "GPUs", "CUDA", "cuDNN",
            "Precision", "Threads", "CPU", "OS", "Built"]
    seen, lines = set(), ["<table><tr>" + "".join("<th>{}</th>".format(h) for h in head) + "</tr>"]
    for record in records:
        env = record.get("environment") or {}
        identity = (record["framework"], record.get("variant"))
        if not env or identity in seen:
            continue
        seen.add(identity)
        backend = env.get("backend") and "{} {}".format(env.get("backend"), env.get("backend_version"))
        cells = [report.label(report.row(record)), env.get("framework_version"), backend, env.get("python"),
                 env.get("numpy"), env.get("device"), ", ".join(env.get("gpus") or []) or "none", env.get("cuda"),
                 env.get("cudnn"), env.get("precision"), env.get("threads"), env.get("cpu"), env.get("os"),
                 env.get("build")]
        lines.append("<tr>" + "".join("<td>{}</td>".format(_e(c)) for c in cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def run_page(run_dir, records, links):
    """The report page of one run folder as HTML."""
    from runner import equivalence

    checks = equivalence.load(Path(run_dir))
    rows = [report.row(r) for r in records]
    profiles = ", ".join(sorted({r["profile"] for r in rows})) or "-"
    hardware = "; ".join(sorted({r["hardware"] for r in rows if r["hardware"]})) or "-"
    body = ['<p class="note">Profile <b>{}</b> on {}. {}</p>'.format(_e(profiles), _e(hardware), _e(report.TIMING_NOTE))]
    for task, heading in ((k, t.title) for k, t in tasks.TASKS.items()):
        task_rows = [r for r in rows if r["task"] == task]
        if task_rows:
            body += ["<h2>{}</h2>".format(_e(heading)), _task_table(task, task_rows, links, checks)]
    body.append('<p class="note">{}</p>'.format(_e(report.ACCURACY_NOTE)))
    body.append('<p class="note">{}</p>'.format(_e(report.FLOPS_NOTE)))
    body.append('<p class="note">{} {}</p>'.format(_e(report.PRECISION_NOTE), _e(report.HOST_TO_DEVICE_NOTE)))
    if checks:
        body.append('<p class="note">{}</p>'.format(_e(report.EQUIVALENCE_NOTE)))
    body += ["<h2>Environment</h2>", _environment_table(records),
             '<p class="note">Each framework name links to its executed notebook. Tables: results.md, results.csv, '
             'results.json; plot: results.png.</p>']
    return _page("DL Rosetta Stone: results of {}".format(Path(run_dir).name), "\n".join(body))


def write_run_page(run_dir):
    """Render the run's notebooks and write report.html into the run folder; return its path."""
    run_dir = Path(run_dir)
    records = report.load_records(run_dir)
    path = run_dir / "report.html"
    path.write_text(run_page(run_dir, records, render_notebooks(run_dir)))
    return path


def machine_column(run_dir, records):
    """The heading of a run's column in the merged table: its hardware, device kind and profile."""
    rows = [report.row(r) for r in records]
    hardware = sorted({r["hardware"] for r in rows if r["hardware"]}) or ["unknown hardware"]
    profiles = sorted({r["profile"] for r in rows}) or ["?"]
    return "{} | {}".format(" + ".join(hardware), "/".join(profiles)), Path(run_dir).name


def merged(run_dirs):
    """Rows of the merged table: {task: {(framework label): {column: cell text}}} plus the column headings."""
    columns, table, ranks = [], {task: {} for task in tasks.TASKS}, {}
    for run_dir in run_dirs:
        records = report.load_records(run_dir)
        heading, name = machine_column(run_dir, records)
        column = "{} ({})".format(heading, name)
        columns.append(column)
        for r in (report.row(record) for record in records):
            key, _ = tasks.TASKS[r["task"]].headline
            if r["status"] != "ok":
                cell = report.status_text(r)
            else:
                cell = report.number(r[key], 2 if r["task"] == "inference" else 1)
                if r["accuracy"] is not None:
                    cell += " (acc {})".format(report.number(r["accuracy"], 3))
                if r["data"] == "synthetic" and r["task"] != "inference":
                    cell += " [synthetic data]"
                if r["weights"] == "random":
                    cell += " [random weights]"
            table[r["task"]].setdefault(report.label(r), {})[column] = cell
            ranks[report.label(r)] = report.catalog_rank(r["framework"], r["variant"])
    for task, rows in table.items():  # catalog order, frameworks it does not know last
        table[task] = dict(sorted(rows.items(), key=lambda item: ranks[item[0]]))
    return columns, table


def merged_markdown(run_dirs):
    """The merged table as Markdown: one column per machine and profile, one row per framework, per task."""
    columns, table = merged(run_dirs)
    lines = ["## Results from {} runs".format(len(columns)), "",
             "Each column is one results folder: its hardware and profile. Cells: the task's headline figure "
             "(training time in s, or s per 1000 images) with accuracy; data or weights that were not the real ones are "
             "flagged in the cell, so runs that differ are shown, not mixed silently."]
    for task, heading in ((k, t.title) for k, t in tasks.TASKS.items()):
        if not table[task]:
            continue
        lines += ["", "### " + heading, "", "| Framework | " + " | ".join(c.replace("|", "/") for c in columns) + " |",
                  "|---|" + "---|" * len(columns)]
        for framework, cells in table[task].items():
            lines.append("| {} | {} |".format(framework, " | ".join(cells.get(c, "not run").replace("|", "/")
                                                                     for c in columns)))
    return "\n".join(lines) + "\n"


def merged_page(run_dirs):
    """The merged table as an HTML page."""
    columns, table = merged(run_dirs)
    body = ['<p class="note">One column per results folder (hardware | profile). Cells: headline figure with '
            'accuracy; synthetic data and random weights are flagged.</p>']
    for task, heading in ((k, t.title) for k, t in tasks.TASKS.items()):
        if not table[task]:
            continue
        body.append("<h2>{}</h2><table><tr><th>Framework</th>{}</tr>".format(
            _e(heading), "".join("<th>{}</th>".format(_e(c)) for c in columns)))
        for framework, cells in table[task].items():
            body.append("<tr><td>{}</td>{}</tr>".format(_e(framework), "".join(
                "<td>{}</td>".format(_e(cells.get(c, "not run"))) for c in columns)))
        body.append("</table>")
    return _page("DL Rosetta Stone: results from several machines", "\n".join(body))
