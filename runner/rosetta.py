"""The Rosetta view: per task, one HTML page laying the same section of every framework's notebook side by side.

Built from the stored notebooks in notebooks/ without executing anything. Sections are found by
cell tag (catalog.TASK_SECTIONS); a notebook that lacks one is an error, so the page never shows a
gap silently. Pages are self-contained (inline CSS, Pygments colours, a few lines of JavaScript for
the framework picker) and deterministic, so the committed copies in docs/rosetta/ can be checked.
"""

import html
import json
from pathlib import Path

import mistune
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from common import tasks
from runner import catalog

DOCS_DIR = catalog.REPO / "docs" / "rosetta"
SECTION_TITLES = tasks.SECTION_TITLES


class RosettaError(ValueError):
    """A notebook lacks a section that the other notebooks of its task have."""


def notebooks_for(task):
    """(framework label, notebook path) for every framework with a notebook of `task`, in catalog order."""
    found = []
    for framework in catalog.FRAMEWORKS:
        path = catalog.notebook_path(framework, task)
        if path.exists():
            found.append((framework.label, path))
    return found


def sections_of(path):
    """The notebook's cells grouped by section tag: {tag: {"markdown": [...], "code": [...]}}; the untagged title too."""
    cells = json.loads(Path(path).read_text())["cells"]
    grouped = {}
    for cell in cells:
        tags = cell["metadata"].get("tags") or ["title"]
        entry = grouped.setdefault(tags[0], {"markdown": [], "code": []})
        entry["markdown" if cell["cell_type"] == "markdown" else "code"].append("".join(cell["source"]))
    return grouped


def check_sections(task, notebooks):
    """Raise RosettaError naming every notebook of `task` that lacks one of the task's sections."""
    missing = []
    for label, path in notebooks:
        absent = [tag for tag in tasks.TASKS[task].sections if tag not in sections_of(path)]
        if absent:
            missing.append("{} ({}) lacks {}".format(label, path.name, ", ".join(absent)))
    if missing:
        raise RosettaError("; ".join(missing))


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>DL Rosetta Stone: {title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 0; color: #222; }}
header {{ position: sticky; top: 0; background: #f6f6f2; border-bottom: 1px solid #ccc; padding: 8px 16px; z-index: 2; }}
header h1 {{ font-size: 18px; margin: 0 0 6px 0; }}
header label {{ margin-right: 14px; font-size: 14px; white-space: nowrap; }}
nav a {{ margin-right: 12px; font-size: 13px; }}
table {{ border-collapse: collapse; table-layout: fixed; }}
th, td {{ border: 1px solid #ddd; vertical-align: top; padding: 6px 8px; width: 560px; }}
th.section, td.section {{ width: 120px; background: #fafafa; font-weight: 600; font-size: 13px; }}
thead th {{ background: #eef2f7; position: sticky; top: 78px; z-index: 1; }}
.prose {{ font-size: 13px; line-height: 1.4; }}
.prose h1, .prose h2 {{ font-size: 14px; margin: 2px 0; }}
.highlight pre {{ font-size: 12px; line-height: 1.35; margin: 4px 0; white-space: pre; overflow-x: auto; }}
.hidden {{ display: none; }}
{pygments_css}
</style></head>
<body>
<header>
<h1>DL Rosetta Stone: {title}</h1>
<nav>{nav}</nav>
<div id="picker">Frameworks: {checkboxes}</div>
</header>
<table id="rosetta">
<thead><tr><th class="section">Section</th>{headings}</tr></thead>
<tbody>
{rows}
</tbody></table>
<script>
document.querySelectorAll("#picker input").forEach(function (box) {{
  box.addEventListener("change", function () {{
    document.querySelectorAll("." + box.value).forEach(function (cell) {{
      cell.classList.toggle("hidden", !box.checked);
    }});
  }});
}});
</script>
</body></html>
"""


def page(task):
    """The Rosetta page of `task` as an HTML string."""
    notebooks = notebooks_for(task)
    check_sections(task, notebooks)
    formatter = HtmlFormatter(cssclass="highlight")
    markdown = mistune.create_markdown(escape=True)
    columns = ["fw-{}".format(i) for i in range(len(notebooks))]
    checkboxes = " ".join(
        '<label><input type="checkbox" value="{}" checked> {}</label>'.format(column, html.escape(label))
        for column, (label, _) in zip(columns, notebooks))
    headings = "".join('<th class="{}" data-framework="{}">{}<br><small>{}</small></th>'.format(
        column, html.escape(label), html.escape(label), html.escape(path.name))
        for column, (label, path) in zip(columns, notebooks))
    grouped = [sections_of(path) for _, path in notebooks]
    rows = []
    for tag in ("title",) + tuple(tasks.TASKS[task].sections):
        cells = []
        for column, sections in zip(columns, grouped):
            section = sections.get(tag, {"markdown": [], "code": []})
            prose = "".join(markdown(text) for text in section["markdown"])
            code = "".join(highlight(source, PythonLexer(), formatter) for source in section["code"])
            cells.append('<td class="{}" data-section="{}"><div class="prose">{}</div>{}</td>'.format(
                column, tag, prose, code))
        rows.append('<tr><td class="section">{}</td>{}</tr>'.format(
            html.escape(SECTION_TITLES[tag]), "".join(cells)))
    nav = " ".join('<a href="{}.html">{}</a>'.format(t, html.escape(tasks.TASKS[t].title)) for t in tasks.TASKS)
    return _PAGE.format(title=html.escape(tasks.TASKS[task].title), pygments_css=formatter.get_style_defs(".highlight"),
                        nav=nav, checkboxes=checkboxes, headings=headings, rows="\n".join(rows))


def write_pages(directory=DOCS_DIR):
    """Write one Rosetta page per task into `directory`; return their paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for task in tasks.TASKS:
        path = directory / (task + ".html")
        path.write_text(page(task))
        written.append(path)
    return written
