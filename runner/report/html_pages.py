"""The HTML face of the results: a run's report page, and one table merged from runs on several machines.

Both pages are single self-contained files (inline CSS, bars drawn with CSS, no JavaScript needed) that render the
table model of runner/report/table.py. A run's page links each framework to its executed notebook, rendered to HTML
by nbconvert. The merged table's Markdown is written here too, beside its page. This module imports
runner/report/table.py, never runner/report/run_report.py (which imports this one).
"""

import base64
import html
from pathlib import Path

from common import results
from runner import run_folder
from runner.report import table

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0 16px 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; }
th { background: #eef2f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.bar { background: #4a7fb5; height: 12px; display: inline-block; vertical-align: middle; }
.bad { color: #a40000; } .note { color: #555; font-size: 13px; max-width: 1000px; }
"""
BAR_CLASS = "barcol"  # the class of the bar column's cells, which hold no text of the table model


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
        try:
            body, _ = exporter.from_filename(str(notebook))
        except ValueError:  # not a notebook (cut short by a full disk before the runner kept them whole): no page
            continue
        target = notebook.with_suffix(".html")
        target.write_text(body)
        rendered[notebook.name] = target.name
    return rendered


def _bar(value, largest):
    if value is None or not largest:
        return ""
    return '<span class="bar" style="width:{:.0f}px"></span>'.format(max(1.0, 160.0 * value / largest))


def _cell(column, text, source, links):
    """A cell's inner HTML: its text, linked to the notebook (framework) or marked as a failure (status)."""
    inner = _e(text)
    if source is None:
        return inner
    if column.key == "framework" and links.get(source["notebook"]):
        return '<a href="{}">{}</a>'.format(_e(links[source["notebook"]]), inner)
    if column.key == "status" and source["status"] != "ok":
        return '<span class="bad">{}</span>'.format(inner)
    return inner


def row_id(notebook):
    """The id of a row of a run's tables that shows the run of `notebook` (an executed notebook's file name):
    row-PyTorch_CNN, row-Keras_CNN-jax."""
    return "row-" + (notebook[:-len(".ipynb")] if notebook.endswith(".ipynb") else notebook)


def table_html(model, links=None, bars=True, row_ids=False):
    """One table of the model as HTML, with a bar beside each headline figure; framework names link to `links`
    ({notebook name: html name}); with `row_ids`, each row of a notebook's run has its row_id; the rows' notes
    follow it."""
    links = links or {}
    metric = model.task.headline[0]
    values = [r.source[metric] for r in model.rows if r.source and r.source[metric] is not None]
    largest = max(values or [0])
    head = []
    for column in model.columns:
        head.append("<th>{}</th>".format(_e(column.heading)))
        if bars and column.headline:
            head.append('<th class="{}"></th>'.format(BAR_CLASS))
    lines = ['<table class="results"><tr>' + "".join(head) + "</tr>"]
    for r in model.rows:
        cells = []
        for column, text in zip(model.columns, r.cells):
            cells.append('<td{}>{}</td>'.format(' class="num"' if column.numeric else "", _cell(column, text, r.source, links)))
            if bars and column.headline:
                value = r.source[metric] if r.source else None
                cells.append('<td class="{}">{}</td>'.format(BAR_CLASS, _bar(value, largest)))
        opening = "<tr>"
        if row_ids and r.source and r.source.get("notebook"):
            opening = '<tr id="{}">'.format(_e(row_id(r.source["notebook"])))
        lines.append(opening + "".join(cells) + "</tr>")
    lines.append("</table>")
    lines += ['<p class="note">{}</p>'.format(_e(note)) for note in model.notes]
    return "\n".join(lines)


def _environment_table(records):
    head = ["Framework", "Framework version", "Backend", "Python", "numpy", "Device", "GPUs", "CUDA", "cuDNN",
            "Computed in", "Threads", "CPU", "OS", "Built"]
    seen, lines = set(), ["<table><tr>" + "".join("<th>{}</th>".format(h) for h in head) + "</tr>"]
    for record in records:
        env = record.get("environment") or {}
        identity = (record["framework"], record.get("variant"))
        if not env or identity in seen:
            continue
        seen.add(identity)
        backend = env.get("backend") and "{} {}".format(env.get("backend"), env.get("backend_version"))
        cells = [table.label(record), env.get("framework_version"), backend, env.get("python"),
                 env.get("numpy"), env.get("device"), ", ".join(env.get("gpus") or []) or "none", env.get("cuda"),
                 env.get("cudnn"), table.computed_precision(env), env.get("threads"), env.get("cpu"), env.get("os"),
                 env.get("build")]
        lines.append("<tr>" + "".join("<td>{}</td>".format(_e(c)) for c in cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _settings_table(records):
    """Every row's ledger (common/results.py SETTINGS): what decides its speed, one column per setting."""
    names = list(results.SETTINGS)
    lines = ['<table class="settings"><tr><th>Row</th><th>Task</th>' + "".join(
        '<th title="{}">{}</th>'.format(_e(results.SETTINGS[name]), _e(name.capitalize())) for name in names) + "</tr>"]
    for record in records:
        settings = record.get("settings")
        if not settings:
            continue
        row = table.row(record)
        cells = [table.label(row), row["task"]] + [
            "-" if settings.get(name) is None else table.setting_text(settings[name]) for name in names]
        lines.append("<tr>" + "".join("<td>{}</td>".format(_e(c)) for c in cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def run_page(run_dir, records, links, checks=None):
    """The report page of one run folder as HTML; `checks` defaults to the run's equivalence checks."""
    return _page("DL Rosetta Stone: results of {}".format(Path(run_dir).name), run_body(run_dir, records, links, checks))


def run_body(run_dir, records, links, checks=None, row_ids=False):
    """The body of a run's report page (its tables, plots, ledger and environments) as HTML, for run_page and for
    the site's results page (runner/report/site.py, which asks for `row_ids` to link each notebook to its row)."""
    if checks is None:
        checks = run_folder.load_checks(run_dir)
    model = table.build(records, checks)
    body = ['<p class="note">Profile <b>{}</b> on {}.</p>'.format(_e(", ".join(model.profiles) or "-"),
                                                                 _e("; ".join(model.hardware) or "-"))]
    for task_table in model.tables:
        body += ["<h2>{}</h2>".format(_e(task_table.title)), table_html(task_table, links, row_ids=row_ids)]
    body += ['<p class="note">{}</p>'.format(_e(note)) for note in model.notes]
    sweeps = table.sweep_tables(records, checks)
    for sweep_table in sweeps:
        body += ["<h2>Sweep: {}</h2>".format(_e(sweep_table.title)), table_html(sweep_table, bars=False)]
    releases = table.version_tables(records, checks)
    for release_table in releases:
        body += ["<h2>Releases: {}</h2>".format(_e(release_table.title)), table_html(release_table, bars=False)]
    if releases:
        body.append('<p class="note">{}</p>'.format(_e(table.VERSIONS_NOTE)))
    plots = (("sweep.png", "throughput against the swept value", sweeps),
             ("scaling.png", "measured scaling efficiency beside the prediction", sweeps),
             ("versions.png", "each framework's headline by release", releases))
    for name, alt, shown in plots:
        plot = Path(run_dir) / name
        if shown and plot.exists():  # inline, so that the page stays one self-contained file
            body.append('<p><img alt="{}" src="data:image/png;base64,{}"></p>'.format(
                alt, base64.b64encode(plot.read_bytes()).decode("ascii")))
    if any(record.get("settings") for record in records):  # records from before the ledger have none
        body += ["<h2>What decides each row's speed</h2>", _settings_table(records),
                 '<p class="note">Each row\'s ledger, from its record: its image layout, what runs its model, the '
                 'library under it, autotuning, threads and precision policy; - where a setting does not apply.</p>']
    body += ["<h2>Environment</h2>", _environment_table(records),
             '<p class="note">Each framework name links to its executed notebook. Tables: results.md, results.csv, '
             'results.json; plot: results.png.</p>']
    return "\n".join(body)


def write_run_page(run_dir, records=None, checks=None):
    """Render the run's notebooks and write report.html into the run folder; return its path."""
    run_dir = Path(run_dir)
    records = table.load_records(run_dir) if records is None else records
    path = run_dir / "report.html"
    path.write_text(run_page(run_dir, records, render_notebooks(run_dir), checks))
    return path


def merged_markdown(run_dirs):
    """The merged table as Markdown: one column per machine and profile, one row per framework, per task."""
    tables = table.merged(run_dirs)
    lines = ["## Results from {} runs".format(len(run_dirs)), "", table.MERGED_NOTE]
    for line in table.lock_differences(run_dirs):
        lines += ["", line]
    for task_table in tables:
        lines += ["", "### " + task_table.title, ""] + table.markdown_lines(task_table)
    return "\n".join(lines) + "\n"


def merged_page(run_dirs):
    """The merged table as an HTML page."""
    body = ['<p class="note">{}</p>'.format(_e(line)) for line in [table.MERGED_NOTE] + table.lock_differences(run_dirs)]
    for task_table in table.merged(run_dirs):
        body += ["<h2>{}</h2>".format(_e(task_table.title)), table_html(task_table, bars=False)]
    return _page("DL Rosetta Stone: results from several machines", "\n".join(body))
