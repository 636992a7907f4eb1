"""The Rosetta view: per task, one HTML page laying the same section of the frameworks' notebooks side by side.

Built from the stored notebooks in notebooks/ without executing anything, for reading the way people
read Hyperpolyglot's sheets and split diffs: a row per section, a column per chosen framework (two
by default, PyTorch and one picked), the section names and the column heads kept in view, long lines
wrapped. Sections are found by cell tag; every tag a notebook carries is titled by
common/tasks/task.py SECTION_TITLES (a tag it does not name is an error), and a notebook that lacks one of
its task's sections is an error, so the page never shows a gap silently.

Cells are aligned by position within their section (the first markdown cell of "training" beside
the first markdown cell of "training", and so on). Each distinct cell text is stored once with the
frameworks that share it, so a cell that is the same in every notebook (the parameters, the result
record) is written, and shown, once. The page's script (templates/rosetta.js) builds the chosen view
and, in differences mode, a line diff between the chosen frameworks. Pages are self-contained (inline
CSS and script, Pygments colours, no fetches) and deterministic, so the committed copies in
docs/rosetta/ can be checked.
"""

import ast
import html
import json
import os
import re
from pathlib import Path

import mistune
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from common import tasks
from runner import catalog

DOCS_DIR = catalog.REPO / "docs" / "rosetta"
TEMPLATES = Path(__file__).resolve().parent / "templates"


def framework_modules():
    """Top-level modules of the frameworks (their registry entries' `modules`): the names a notebook binds by
    importing them (torch, nn, jnp, mx, gluon, F, C, ...) are the ones the differences mode may compare as one."""
    return {module for framework in catalog.FRAMEWORKS for module in framework.modules}


class RosettaError(ValueError):
    """A notebook lacks a section that the other notebooks of its task have, or carries a tag without a title."""


def notebooks_for(task):
    """(framework label, notebook path) for every framework with a notebook of `task`, in catalog order."""
    return [(framework.label, path) for framework, path in _frameworks_for(task)]


def _frameworks_for(task):
    found = []
    for framework in catalog.FRAMEWORKS:
        path = catalog.notebook_path(framework, task)
        if path.exists():
            found.append((framework, path))
    return found


def cells_of(path):
    """The notebook's cells as (section tag, "markdown" or "code", source), in order; untagged cells before
    the first tagged one are the "title" section, a later untagged cell belongs to the section before it."""
    cells, tag = [], "title"
    for cell in json.loads(Path(path).read_text())["cells"]:
        tag = (cell["metadata"].get("tags") or [tag])[0]
        kind = "markdown" if cell["cell_type"] == "markdown" else "code"
        cells.append((tag, kind, "".join(cell["source"])))
    return cells


def sections_of(path):
    """The notebook's cells grouped by section tag: {tag: {"markdown": [...], "code": [...]}}; the untagged title too."""
    grouped = {}
    for tag, kind, source in cells_of(path):
        grouped.setdefault(tag, {"markdown": [], "code": []})[kind].append(source)
    return grouped


def check_sections(task, notebooks):
    """Raise RosettaError naming every notebook of `task` that lacks one of the task's sections, or that carries
    a tag common/tasks/task.py SECTION_TITLES does not name."""
    problems = []
    for label, path in notebooks:
        found = sections_of(path)
        absent = [tag for tag in tasks.TASKS[task].sections if tag not in found]
        if absent:
            problems.append("{} ({}) lacks {}".format(label, path.name, ", ".join(absent)))
        for tag in found:
            try:
                tasks.section_title(tag)
            except ValueError as error:
                problems.append("{} ({}): {}".format(label, path.name, error))
    if problems:
        raise RosettaError("; ".join(problems))


def section_order(task, grouped):
    """The page's sections: the title, the task's sections, then any other tag the notebooks carry, in order."""
    order = ["title"] + list(tasks.TASKS[task].sections)
    for sections in grouped:
        order += [tag for tag in sections if tag not in order]
    return order


def aliases_of(path, framework_key):
    """The names a notebook binds by importing its framework (`import torch.nn as nn` binds nn), and the
    framework's own key (`from frameworks.pytorch import ...`): the differences mode can count them as one name."""
    names = {framework_key}
    for _, kind, source in cells_of(path):
        if kind != "code":
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:  # a cell with IPython magics: its imports are not read
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in framework_modules():
                        names.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in framework_modules():
                names.update(alias.asname or alias.name for alias in node.names if alias.name != "*")
    return sorted(names)


def code_html(source, formatter):
    """Highlighted code, one <span class="l"> per line (Pygments closes its spans at each line's end)."""
    lines = highlight(source, PythonLexer(), formatter).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return '<pre class="highlight">{}</pre>'.format("".join('<span class="l">{}</span>'.format(line) for line in lines))


def _cell_rows(tag, columns):
    """The cell rows of one section: [(kind, [(source, [framework keys])])], cells aligned by their position."""
    keys = []
    for _, cells in columns:
        counts = {}
        for cell_tag, kind, _ in cells:
            if cell_tag == tag:
                key = (kind, counts.get(kind, 0))
                counts[kind] = key[1] + 1
                if key not in keys:
                    keys.append(key)
    rows = []
    for kind, index in keys:
        variants = {}  # source -> framework keys, in column order; a framework without the cell has source None
        for key, cells in columns:
            sources = [source for cell_tag, cell_kind, source in cells if cell_tag == tag and cell_kind == kind]
            variants.setdefault(sources[index] if index < len(sources) else None, []).append(key)
        rows.append((kind, list(variants.items())))
    return rows


def page(task, source_base="../../notebooks"):
    """The Rosetta page of `task` as an HTML string; `source_base` is the notebooks' folder as the page links to it."""
    found = _frameworks_for(task)
    check_sections(task, [(framework.label, path) for framework, path in found])
    formatter = HtmlFormatter(nowrap=True)
    markdown = mistune.create_markdown(escape=True)
    columns = [(framework.key, cells_of(path)) for framework, path in found]
    frameworks = [{"key": framework.key, "label": framework.label, "notebook": path.name,
                   "href": "{}/{}".format(source_base.rstrip("/"), path.name), "aliases": aliases_of(path, framework.key)}
                  for framework, path in found]
    sections = []
    for tag in section_order(task, [sections_of(path) for _, path in found]):
        title = html.escape(tasks.section_title(tag))
        rows = []
        for kind, variants in _cell_rows(tag, columns):
            stored = []
            for source, keys in variants:
                if source is None:
                    body, lines = '<p class="absent">no {} cell here</p>'.format(kind), 0
                elif kind == "code":
                    body, lines = code_html(source, formatter), len(source.rstrip("\n").split("\n"))
                else:
                    body, lines = '<div class="prose">{}</div>'.format(markdown(source)), 0
                stored.append('<div class="variant{}" data-fws="{}" data-lines="{}">{}</div>'.format(
                    " none" if source is None else "", " ".join(keys), lines, body))
            rows.append('<div class="cellrow" data-kind="{}">{}<div class="view"></div></div>'.format(
                kind, "".join(stored)))
        sections.append('<section class="sec" id="{tag}" data-section="{tag}"><h2 class="sec-title">'
                        '<a href="#{tag}">{title}</a><span class="sec-note"></span></h2>'
                        '<div class="sec-body">{rows}</div></section>'.format(tag=tag, title=title, rows="".join(rows)))
    heads = "".join('<div class="colhead" data-fw="{key}" hidden><a class="source" href="{href}" title="the notebook '
                    '{notebook}">{label}</a> <small>{notebook}</small></div>'.format(
                        key=f["key"], label=html.escape(f["label"]), href=html.escape(f["href"]),
                        notebook=html.escape(f["notebook"])) for f in frameworks)
    options = "".join('<option value="{}">{}</option>'.format(f["key"], html.escape(f["label"])) for f in frameworks)
    nav = " ".join('<a href="{}.html"{}>{}</a>'.format(
        key, ' aria-current="page"' if key == task else "", html.escape(tasks.TASKS[key].title)) for key in tasks.TASKS)
    data = json.dumps({"frameworks": frameworks}, sort_keys=True).replace("</", "<\\/")
    replacements = {
        "TITLE": html.escape(tasks.TASKS[task].title), "NAV": nav, "OPTIONS": options, "HEADS": heads,
        "SECTIONS": "\n".join(sections), "DATA": data, "COUNT": str(len(frameworks)),
        "CSS": (TEMPLATES / "rosetta.css").read_text() + formatter.get_style_defs(".highlight"),
        "SCRIPT": (TEMPLATES / "rosetta.js").read_text(),
    }
    # one pass over the template: the text put in is not scanned again
    return re.sub(r"@@([A-Z]+)@@", lambda match: replacements[match.group(1)], (TEMPLATES / "rosetta.html").read_text())


def write_pages(directory=DOCS_DIR, source_base=None):
    """Write one Rosetta page per task into `directory`; return their paths. The pages link to each notebook's
    source under `source_base`, by default the path of notebooks/ relative to `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if source_base is None:
        source_base = Path(os.path.relpath(catalog.NOTEBOOKS, directory.resolve())).as_posix()
    written = []
    for task in tasks.TASKS:
        path = directory / (task + ".html")
        path.write_text(page(task, source_base))
        written.append(path)
    return written
