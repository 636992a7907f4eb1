"""The Rosetta view: per task, one HTML page laying the same section of the frameworks' notebooks side by side, and
the concept index, one page laying each concept (common/concepts) of every framework side by side.

Built from the stored notebooks in notebooks/ without executing anything, for reading the way people read
Hyperpolyglot's sheets and split diffs.

A task page (docs/rosetta/<task>.html) has a row per section and a column per chosen framework (any number of them,
PyTorch and TensorFlow by default), the section names and the column heads kept in view, long lines wrapped. Sections
are found by cell tag; every tag a notebook carries is titled by common/tasks/task.py SECTION_TITLES (a tag it does
not name is an error), and a notebook that lacks one of its task's sections is an error, so the page never shows a gap
silently. Within a section, the code cells tagged with one concept (`concept:<name>`) are one row, titled by the
concept and anchored `<section>--<concept>`; a markdown cell that leads into a concept's cell (not the section's
first) joins that row. The other cells are aligned by their position within their section (the first markdown cell
of "training" beside the first markdown cell of "training", and so on), so a notebook not yet cut by concept still
reads. Where a framework has no cell of a row's concept in the section, its column says where the cell is, or why
it has none (common/concepts LACKS), or that no cell is tagged yet. Each code cell carries the source of the
frameworks/<module>.py helpers it calls (runner/report/concept_cells.py), so that the framework's own calls are in
view beside the call. Each distinct column text is stored once with the frameworks that share it, so a cell that is
the same in every notebook (the parameters, the result record) is written, and shown, once. The task's introduction,
docs/tasks/<task>.md where there is one, opens the page.

The concept index (docs/rosetta/index.html) has a row per concept and a column per framework: each cell holds the
framework's code of that concept in each task that has it (with the helpers' source), linked to the notebook and to
the task page's row, or the reason the framework has none, or a note that its notebook has no cell tagged yet.

The pages' scripts (templates/rosetta.js, templates/index.js) build the chosen view; the task pages also search every
framework's code and, in differences mode, diff each column against the first. Pages are self-contained (inline CSS
and script, Pygments colours, no fetches) and deterministic, so the committed copies in docs/rosetta/ can be checked.
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

from common import concepts, tasks
from runner import catalog
from runner.report import concept_cells

DOCS_DIR = catalog.REPO / "docs" / "rosetta"
TASK_DOCS = catalog.REPO / "docs" / "tasks"  # <task>.md: the task's introduction, written once for every framework
TEMPLATES = Path(__file__).resolve().parent / "templates"
PAGE_FRAMEWORKS = ("pytorch", "tensorflow")  # the columns a task page shows at first
INDEX_FRAMEWORKS = ("pytorch", "tensorflow", "keras", "jax")  # the columns the concept index shows at first
INDEX_TASKS = ("cnn",)  # the tasks the concept index shows at first
ABSOLUTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|/|#)", re.IGNORECASE)  # a link that is not relative to a file


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


def short_title(task):
    """The task's name before its title's colon: "CNN", "Inference", ..."""
    return tasks.TASKS[task].title.split(":")[0]


def anchor(section, concept):
    """The id of a concept's row in a section of a task page: training--loss."""
    return "{}--{}".format(section, concept)


def sections_of(path):
    """The notebook's cells grouped by section tag: {tag: {"markdown": [...], "code": [...]}}; the untagged title too."""
    grouped = {}
    for cell in concept_cells.cells_of(path):
        grouped.setdefault(cell.section, {"markdown": [], "code": []})[cell.kind].append(cell.source)
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
    for cell in concept_cells.cells_of(path):
        if cell.kind != "code":
            continue
        try:
            tree = ast.parse(cell.source)
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


class Renderer(object):
    """Highlighted code, rendered markdown and the links of a page written to `directory`. A subclass may point the
    links elsewhere (runner/report/site.py: the notebooks rendered with their outputs) and add a `home` link."""

    home = None  # (text, href) of a link the navigation shows before the pages' own: none here

    def __init__(self, directory):
        self.directory = Path(directory).resolve()
        self.formatter = HtmlFormatter(nowrap=True)
        self.markdown = mistune.create_markdown(escape=True)
        # the token classes the colours style (whitespace's colour shows nothing): the others' spans are left out
        self.styled = set(re.findall(r"\.highlight \.(\w+) \{", self.formatter.get_style_defs(".highlight"))) - {"w"}

    def relative(self, target):
        """The path of `target` (a file) as a link from the page's folder; a page of docs/rosetta/ is the page of that
        name beside this one, wherever the pages are written."""
        target = Path(os.path.normpath(str(Path(target).resolve())))
        if DOCS_DIR.resolve() in target.parents:
            target = self.directory / target.relative_to(DOCS_DIR.resolve())
        return Path(os.path.relpath(str(target), str(self.directory))).as_posix()

    def notebook_href(self, path):
        return self.relative(path)

    def prose(self, text, folder):
        """Markdown as HTML, its relative links (written from `folder`) pointing from the page's folder."""
        def rewrite(match):
            target = html.unescape(match.group(2))
            if ABSOLUTE.match(target):
                return match.group(0)
            path, _, fragment = target.partition("#")
            link = self.relative(Path(folder) / path) + ("#" + fragment if fragment else "")
            return '{}="{}"'.format(match.group(1), html.escape(link))

        return re.sub(r'\b(href|src)="([^"]*)"', rewrite, self.markdown(text))

    def code(self, source, kind="src"):
        """Highlighted code, one <span class="l"> per line (Pygments closes its spans at each line's end)."""
        plain = re.sub(r'<span class="(\w+)">([^<]*)</span>', lambda match: match.group(0) if match.group(1) in
                       self.styled else match.group(2), highlight(source, PythonLexer(), self.formatter))
        lines = plain.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return '<pre class="highlight {}">{}</pre>'.format(
            kind, "".join('<span class="l">{}</span>'.format(line) for line in lines))

    def helper(self, module, name, text, apis=()):
        """A helper's source, folded under its file and name (and the framework calls it makes that a concept names)."""
        uses = [api for api in apis if api in text]
        note = ' <span class="uses">{}</span>'.format(html.escape(", ".join(uses))) if uses else ""
        return ('<details class="helper"><summary>frameworks/{}.py: {}{}</summary>{}</details>'.format(
            html.escape(module), html.escape(name), note, self.code(text, "helper-src")))

    def code_cells(self, path, framework, task, cells):
        """The code of `cells` (of the notebook at `path`), each followed by the helpers it calls (each helper once)."""
        parts, shown = [], set()
        for cell in cells:
            parts.append(self.code(cell.source))
            apis = [api for name in cell.concepts for api in concepts.apis(framework, name, task)]
            for module, name, text in concept_cells.helper_sources(path, [cell.source]):
                if (module, name) not in shown:
                    shown.add((module, name))
                    parts.append(self.helper(module, name, text, apis))
        return "".join(parts)


def introduction(task, renderer):
    """The task's introduction (docs/tasks/<task>.md) as HTML, or "" where there is none."""
    path = TASK_DOCS / (task + ".md")
    if not path.exists():
        return ""
    return '<div class="intro prose">{}</div>'.format(renderer.prose(path.read_text(), TASK_DOCS))


def _row_keys(cells):
    """{key: [cells]} of one section of one notebook, in order: a code cell tagged with concepts is in its first
    concept's row, ("concept", name); so is a markdown cell (not the section's first) just before such a cell; any
    other cell is in ("markdown", k) or ("code", k), the k-th of its kind not in a concept's row."""
    keyed, counts = {}, {}
    for index, cell in enumerate(cells):
        following = cells[index + 1] if index + 1 < len(cells) else None
        if cell.kind == "code" and cell.concepts:
            key = ("concept", cell.concepts[0])
        elif cell.kind == "markdown" and index > 0 and following and following.kind == "code" and following.concepts:
            key = ("concept", following.concepts[0])
        else:
            key = (cell.kind, counts.get(cell.kind, 0))
            counts[cell.kind] = key[1] + 1
        keyed.setdefault(key, []).append(cell)
    return keyed


def merged_order(sequences):
    """One order of the keys of several sequences: the first sequence's order, then each key new to the order put
    just after the last of the keys before it in its own sequence (so the k-th cell by position stays before the
    k+1-th)."""
    order = []
    for sequence in sequences:
        at = -1
        for key in sequence:
            if key in order:
                at = max(at, order.index(key))
            else:
                order.insert(at + 1, key)
                at += 1
    return order


def concept_title(name):
    return concepts.CONCEPTS[name].title if name in concepts.CONCEPTS else name


class TaskNotebooks(object):
    """The notebooks of a task read by section and concept: every framework's cells, where each concept's cells are."""

    def __init__(self, task):
        self.task = task
        self.found = _frameworks_for(task)
        check_sections(task, [(framework.label, path) for framework, path in self.found])
        self.cells = {framework.key: concept_cells.cells_of(path) for framework, path in self.found}
        self.paths = {framework.key: path for framework, path in self.found}
        self.sections = section_order(task, [sections_of(path) for _, path in self.found])
        # (section, concept) of every concept tag of a code cell, and per framework where its concept rows are
        self.places = {}  # framework -> concept -> [(section, first concept of the cell)]
        self.anchors = []  # every (section, concept) pair a row of the page is anchored at, in order
        for key, cells in self.cells.items():
            for cell in cells:
                if cell.kind == "code":
                    for name in cell.concepts:
                        place = (cell.section, cell.concepts[0])
                        if place not in self.places.setdefault(key, {}).setdefault(name, []):
                            self.places[key][name].append(place)
        for section in self.sections:
            for key in self.cells:
                for cell in self.cells[key]:
                    if cell.section == section and cell.kind == "code":
                        for name in cell.concepts:
                            if (section, name) not in self.anchors:
                                self.anchors.append((section, name))

    def section_cells(self, key, section):
        return [cell for cell in self.cells[key] if cell.section == section]

    def first_anchor(self, concept):
        """The first row of the page anchored at `concept`, as "<section>--<concept>", or None."""
        found = [section for section, name in self.anchors if name == concept]
        return anchor(found[0], concept) if found else None


def _note(kind, text):
    return '<p class="note {}">{}</p>'.format(kind, text)


def _column_of(notebooks, renderer, key, section, row_key, cells):
    """(HTML, code lines, whether it holds cells) of one framework's column in one row."""
    kind, name = row_key
    task, path = notebooks.task, notebooks.paths[key]
    if cells:
        prose = "".join('<div class="prose">{}</div>'.format(renderer.prose(cell.source, catalog.NOTEBOOKS))
                        for cell in cells if cell.kind == "markdown")
        code_cells = [cell for cell in cells if cell.kind == "code"]
        lines = sum(len(cell.source.strip("\n").split("\n")) for cell in code_cells)
        return prose + renderer.code_cells(path, key, task, code_cells), lines, True
    if kind != "concept":
        return _note("absent", "no {} cell here".format(kind)), 0, False
    places = notebooks.places.get(key, {}).get(name, [])
    if places:
        links = []
        for place_section, primary in places:
            where = html.escape(tasks.section_title(place_section))
            if primary != name:
                where = "the cell of {}, in {}".format(html.escape(concept_title(primary)), where)
            links.append('<a href="#{}">{}</a>'.format(anchor(place_section, primary), where))
        return _note("elsewhere", "In " + "; ".join(links)), 0, False
    reason = concepts.lacks(key, name, task)
    if reason:
        return _note("reason", "No cell of its own: " + html.escape(reason)), 0, False
    return _note("untagged", "No cell tagged <code>{}</code> yet.".format(html.escape(concepts.TAG_PREFIX + name))), 0, False


def _rows_of(notebooks, renderer, section):
    """The rows of one section, as HTML: concept rows titled and anchored, variants stored once per distinct text."""
    keyed = {key: _row_keys(notebooks.section_cells(key, section)) for key in notebooks.cells}
    order = merged_order([list(rows) for rows in keyed.values()])
    primaries = {name for kind, name in order if kind == "concept"}
    anchored = set()
    rows = []
    for row_key in order:
        kind, name = row_key
        variants = {}  # HTML -> (framework keys, code lines, holds cells)
        for key in notebooks.cells:
            body, lines, held = _column_of(notebooks, renderer, key, section, row_key, keyed[key].get(row_key, []))
            variants.setdefault(body, ([], lines, held))[0].append(key)
        stored = "".join('<div class="variant{}" data-fws="{}" data-lines="{}">{}</div>'.format(
            "" if held else " none", " ".join(keys), lines, body) for body, (keys, lines, held) in variants.items())
        head = ""
        if kind == "concept":
            names = [name] + [extra for key in notebooks.cells for cell in keyed[key].get(row_key, [])
                              for extra in cell.concepts[1:]]
            names = [n for i, n in enumerate(names) if n not in names[:i] and (n == name or n not in primaries)]
            ids = "".join('<span class="anchor" id="{}"></span>'.format(anchor(section, n))
                          for n in names if n not in anchored)
            anchored.update(names)
            titles = " \u00b7 ".join(html.escape(concept_title(n)) for n in names)
            what = concepts.CONCEPTS[name].what if name in concepts.CONCEPTS else ""
            head = ('<h3 class="concept">{ids}<a class="self" href="#{id}">{titles}</a> <span class="what">{what}'
                    '</span> <a class="to-index" href="index.html?task={task}#{name}" title="this concept in every '
                    'framework">all frameworks</a></h3>').format(ids=ids, id=anchor(section, name), titles=titles,
                                                                 what=html.escape(what), task=notebooks.task, name=name)
        rows.append('<div class="cellrow" data-kind="{}"{}>{}{}<div class="view"></div></div>'.format(
            "markdown" if kind == "markdown" else "code",
            ' data-concept="{}"'.format(name) if kind == "concept" else "", head, stored))
    return rows


def _framework_picker(frameworks, name):
    return "".join('<label class="pick"><input type="checkbox" name="{}" value="{}"> {}</label>'.format(
        name, f["key"], html.escape(f["label"])) for f in frameworks)


def _nav(current, home=None):
    links = ['<a href="{}">{}</a>'.format(html.escape(home[1]), html.escape(home[0]))] if home else []
    links += ['<a href="index.html"{}>Concepts</a>'.format(' aria-current="page"' if current == "index" else "")]
    links += ['<a href="{}.html"{}>{}</a>'.format(key, ' aria-current="page"' if key == current else "",
                                                  html.escape(short_title(key))) for key in tasks.TASKS]
    return " ".join(links)


def _fill(template, replacements):
    # one pass over the template: the text put in is not scanned again
    return re.sub(r"@@([A-Z]+)@@", lambda match: replacements[match.group(1)], (TEMPLATES / template).read_text())


def _data(value):
    return json.dumps(value, sort_keys=True).replace("</", "<\\/")


def page(task, directory=DOCS_DIR, renderer=None):
    """The Rosetta page of `task` as an HTML string, its links written from `directory` (where it is written) by
    `renderer` (a Renderer of that folder, by default the plain one)."""
    return _page(task, renderer or Renderer(directory))


def _page(task, renderer):
    notebooks = TaskNotebooks(task)
    frameworks = [{"key": framework.key, "label": framework.label, "notebook": path.name,
                   "href": renderer.notebook_href(path), "aliases": aliases_of(path, framework.key)}
                  for framework, path in notebooks.found]
    sections = []
    for tag in notebooks.sections:
        title = html.escape(tasks.section_title(tag))
        rows = _rows_of(notebooks, renderer, tag)
        intro = introduction(task, renderer) if tag == "title" else ""
        sections.append('<section class="sec" id="{tag}" data-section="{tag}"><h2 class="sec-title">'
                        '<a href="#{tag}">{title}</a><span class="sec-note"></span></h2>'
                        '<div class="sec-body">{intro}{rows}</div></section>'.format(
                            tag=tag, title=title, intro=intro, rows="".join(rows)))
    heads = "".join('<div class="colhead" data-fw="{key}" hidden><a class="source" href="{href}" title="the notebook '
                    '{notebook}">{label}</a> <small>{notebook}</small></div>'.format(
                        key=f["key"], label=html.escape(f["label"]), href=html.escape(f["href"]),
                        notebook=html.escape(f["notebook"])) for f in frameworks)
    defaults = [key for key in PAGE_FRAMEWORKS if key in {f["key"] for f in frameworks}]
    defaults = defaults if len(defaults) > 1 else [f["key"] for f in frameworks[:2]]
    data = {"frameworks": frameworks, "defaults": defaults,
            "sections": {tag: tasks.section_title(tag) for tag in notebooks.sections}}
    return _fill("rosetta.html", {
        "TITLE": html.escape(tasks.TASKS[task].title), "NAV": _nav(task, renderer.home),
        "PICKS": _framework_picker(frameworks, "fw"), "HEADS": heads,
        "SECTIONS": "\n".join(sections), "DATA": _data(data), "COUNT": str(len(frameworks)),
        "CSS": (TEMPLATES / "rosetta.css").read_text() + renderer.formatter.get_style_defs(".highlight"),
        "SCRIPT": (TEMPLATES / "rosetta.js").read_text(),
    })


def task_link(task, framework, anchor_id=None):
    """The link from the index to a task page showing `framework` (beside PyTorch), at a row."""
    shown = list(PAGE_FRAMEWORKS) if framework in PAGE_FRAMEWORKS else [PAGE_FRAMEWORKS[0], framework]
    return "{}.html?fw={}{}".format(task, ",".join(shown), "#" + anchor_id if anchor_id else "")


def _entry(renderer, framework, task, concept, notebooks):
    """(HTML of the body, [(link text, href)]) of one framework's cell of `concept` in `task` on the index."""
    if task in framework.lacks:
        return _note("reason", "No {} notebook: {}".format(
            html.escape(short_title(task)), html.escape(framework.lacks[task]))), []
    path = catalog.notebook_path(framework, task)
    if framework.key not in notebooks.cells:
        return _note("untagged", "No {} notebook yet.".format(html.escape(short_title(task)))), []
    cells = [cell for cell in notebooks.cells[framework.key] if cell.kind == "code" and concept.name in cell.concepts]
    notebook_link = (path.name, renderer.notebook_href(path))
    if cells:
        at = anchor(cells[0].section, concept.name)
        body = renderer.code_cells(path, framework.key, task, cells)
        return body, [notebook_link, ("{} page".format(short_title(task)), task_link(task, framework.key, at))]
    page_link = ("{} page".format(short_title(task)), task_link(task, framework.key, notebooks.first_anchor(concept.name)))
    reason = concepts.lacks(framework.key, concept.name, task)
    if reason:
        return _note("reason", "No cell of its own: " + html.escape(reason)), [notebook_link, page_link]
    return _note("untagged", "No cell tagged <code>{}</code> in {} yet.".format(
        html.escape(concept.tag), html.escape(path.name))), [notebook_link, page_link]


def index_page(directory=DOCS_DIR, renderer=None):
    """The concept index as an HTML string, its links written from `directory` (where it is written) by `renderer`
    (a Renderer of that folder, by default the plain one)."""
    return _index_page(renderer or Renderer(directory))


def _index_page(renderer):
    notebooks = {task: TaskNotebooks(task) for task in tasks.TASKS}
    frameworks = [{"key": f.key, "label": f.label} for f in catalog.FRAMEWORKS]
    rows = []
    for concept in concepts.CONCEPTS.values():
        cells = []
        for framework in catalog.FRAMEWORKS:
            entries = {}  # body -> [(task, links)]
            for task in concept.tasks:
                body, links = _entry(renderer, framework, task, concept, notebooks[task])
                entries.setdefault(body, []).append((task, links))
            shown = []
            for body, found in entries.items():
                heads = "".join('<span class="entry-task" data-task="{task}">{title}{links}</span>'.format(
                    task=task, title=html.escape(short_title(task)), links="".join(
                        ' <a href="{}">{}</a>'.format(html.escape(href), html.escape(text)) for text, href in links))
                    for task, links in found)
                shown.append('<div class="entry" data-tasks="{}"><div class="entry-head">{}</div>{}</div>'.format(
                    " ".join(task for task, _ in found), heads, body))
            cells.append('<div class="fwcell" data-fw="{key}"><div class="fwlabel">{label}</div>{entries}</div>'.format(
                key=framework.key, label=html.escape(framework.label), entries="".join(shown)))
        having = ", ".join('<a href="{}.html">{}</a>'.format(task, html.escape(short_title(task))) for task in concept.tasks)
        rows.append('<section class="crow" id="{name}" data-tasks="{tasks}"><div class="chead"><h2><a href="#{name}">'
                    '{title}</a></h2><p class="what">{what}</p><p class="in">In {having}.</p><p class="fallback">'
                    '</p></div><div class="cgrid">{cells}</div></section>'.format(
                        name=concept.name, tasks=" ".join(concept.tasks), title=html.escape(concept.title),
                        what=html.escape(concept.what), having=having, cells="".join(cells)))
    heads = "".join('<div class="colhead" data-fw="{}" hidden>{}</div>'.format(f["key"], html.escape(f["label"]))
                    for f in frameworks)
    task_picks = "".join('<label class="pick"><input type="checkbox" name="task" value="{}"> {}</label>'.format(
        task, html.escape(short_title(task))) for task in tasks.TASKS)
    data = {"frameworks": frameworks, "defaults": list(INDEX_FRAMEWORKS), "defaultTasks": list(INDEX_TASKS),
            "tasks": {task: short_title(task) for task in tasks.TASKS}}
    return _fill("index.html", {
        "NAV": _nav("index", renderer.home), "PICKS": _framework_picker(frameworks, "fw"), "TASKS": task_picks, "HEADS": heads,
        "ROWS": "\n".join(rows), "DATA": _data(data), "COUNT": str(len(concepts.CONCEPTS)),
        "CSS": (TEMPLATES / "rosetta.css").read_text() + renderer.formatter.get_style_defs(".highlight"),
        "SCRIPT": (TEMPLATES / "index.js").read_text(),
    })


def write_pages(directory=DOCS_DIR, renderer=None):
    """Write one Rosetta page per task into `directory`, then the concept index (index.html); return their paths.
    The pages link to each notebook's source by its path relative to `directory`, or where `renderer` (a Renderer of
    `directory`) points them."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for task in tasks.TASKS:
        path = directory / (task + ".html")
        path.write_text(page(task, directory, renderer))
        written.append(path)
    path = directory / "index.html"
    path.write_text(index_page(directory, renderer))
    written.append(path)
    return written
