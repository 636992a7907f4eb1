"""The site command: what the project produces, as a static site to read without running anything (GitHub Pages
publishes it: .github/workflows/pages.yml).

`python3 run_all.py site [RUN_FOLDER]` writes into site/, from one run folder (by default the reference run kept in
docs/reference/, runner/report/reference.py) and from the repository:

    index.html              the front page: what the project is, and a grid of frameworks and tasks whose cells link to
                            the notebook rendered with its outputs, to its row in the results and to its task page
    notebooks/<stem>.html   each executed notebook of the run with its outputs, headed by where and how it ran; the
                            .ipynb beside it, to download
    rosetta/                the concept index and the task pages (runner/report/rosetta_pages.py), whose links to a
                            notebook open it executed
    results/index.html      the run's tables with their intervals and verdicts, its plots and environments
                            (runner/report/html_pages.py); results.md, .csv, .json and the plots beside it
    readme.html, docs/      README.md and the Markdown of docs/ (docs/*.md, docs/tasks/*.md) rendered with mistune,
                            their links rewritten to the site's pages (a heading's anchor is GitHub's, so that links
                            to #anchors keep working)
    assets/                 the stylesheets: the notebooks' (nbconvert's JupyterLab style) once, and the site's own

Any other file of the repository that a page links to (the plots of docs/) is copied to the same path. Every link is
relative, so the site reads the same under a sub-path (GitHub Pages serves /<repository>/) and from the file system;
nothing is fetched when it is built or read; two builds from the same inputs write the same bytes (no time stamps,
every listing sorted).

The generator is the project's own pipeline, extended rather than replaced: nbconvert already renders a run's notebooks
for report.html, mistune already renders the notebooks' prose for the Rosetta pages, and both are pinned in the runner's
lock. A notebook-book generator (Jupyter Book on Sphinx and myst-nb) would bring a toolchain of its own into that lock,
execute or cache notebooks its own way, and could not show the Rosetta pages and the results table, which this pipeline
already writes, as more than foreign files.
"""

import html
import json
import os
import posixpath
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import mistune

from common import environment, results, tasks
from runner import catalog, run_folder
from runner.report import html_pages, reference, rosetta_pages, table

SITE_DIR = catalog.REPO / "site"
BUILD_COMMAND = "python3 run_all.py site"  # what .github/workflows/pages.yml runs and the docs give (tests/test_site.py)
TEMPLATES = Path(__file__).resolve().parent / "templates"
README = catalog.REPO / "README.md"
DOCS = catalog.REPO / "docs"
MARK = "assets/site.css"  # a folder holding this file is a site written here, which a new build may replace
RESULT_FILES = ("results.md", "results.csv", "results.json")  # the run's tables, offered beside its results page
ABSOLUTE = rosetta_pages.ABSOLUTE  # a link with a scheme, from the root or to an anchor of the same page


class SiteError(ValueError):
    """The site cannot be built: no run folder, an output folder that is not a site, a link that leads nowhere."""


def slug(heading_html):
    """GitHub's anchor of a heading (as rendered HTML): its text in lower case, punctuation but hyphens and underscores
    dropped, spaces made hyphens; the same rule as tests/test_docs.py's, which checks the docs' links with it."""
    text = html.unescape(re.sub(r"<[^>]+>", "", heading_html))
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


class DocRenderer(mistune.HTMLRenderer):
    """Markdown of the repository as a page of the site: headings carry GitHub's anchors (repeats numbered -1, -2, ...),
    and each link goes through `link`, which gives its address in the site, or None to leave the text unlinked."""

    def __init__(self, link):
        super().__init__(escape=True)
        self._link = link
        self._seen = {}

    def heading(self, text, level, **attrs):
        base = slug(text)
        count = self._seen.get(base, 0)
        self._seen[base] = count + 1
        anchor = base if count == 0 else "{}-{}".format(base, count)
        return '<h{0} id="{1}">{2}</h{0}>\n'.format(level, html.escape(anchor), text)

    def link(self, text, url, title=None):
        target = self._link(url)
        if target is None:  # somewhere the site has nothing of: the words stay, without a link
            return '<span class="unlinked">{}</span>'.format(text)
        return super().link(text, target, title)

    def image(self, text, url, title=None):
        return super().image(text, self._link(url) or url, title)


def markdown_html(text, link):
    """Markdown (GitHub's flavour: tables, strikethrough, bare addresses) as HTML, its links given by `link`."""
    return mistune.create_markdown(renderer=DocRenderer(link), plugins=["table", "strikethrough", "url"])(text)


def title_of(markdown, default):
    """The text of a Markdown page's first level-1 heading, without its backticks; `default` where it has none."""
    found = re.search(r"^# +(.+?) *$", markdown, flags=re.M)
    return found.group(1).replace("`", "") if found else default


def stored_notebook(stem):
    """(framework, task) of the stored notebook that an executed notebook's stem was run from (Keras_CNN-jax and
    JAX_CNN@0.8.1 are Keras's and JAX's CNN notebooks); None for a notebook of no registered framework."""
    prefix, _, suffix = re.split(r"[-@]", stem, maxsplit=1)[0].rpartition("_")
    task = next((key for key, spec in tasks.TASKS.items() if spec.notebook == suffix), None)
    framework = next((f for f in catalog.FRAMEWORKS if f.notebook_prefix == prefix), None)
    return (framework, task) if framework is not None and task is not None else None


def doc_files():
    """The Markdown pages of docs/ (docs/*.md, then those of its folders: docs/tasks/*.md), the reference run's tables
    left out (its results page shows them)."""
    found = [path for path in DOCS.rglob("*.md") if reference.REFERENCE_DIR not in path.parents]
    return sorted(found, key=lambda path: (len(path.relative_to(DOCS).parts), path.as_posix()))


def relative(target, page):
    """The link from the site's page `page` to `target`, both paths inside the site ('rosetta/cnn.html')."""
    path, sep, rest = target.partition("#")
    return posixpath.relpath(path, posixpath.dirname(page) or ".") + sep + rest


def read_json(path):
    """A JSON file's contents, {} where it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


class Site(object):
    """One build of the site: the run folder read once, where each page of the repository goes, and the pages."""

    def __init__(self, run_dir, out):
        self.run_dir, self.out = Path(run_dir), Path(out)
        self.records, self.problems = table.read_records(self.run_dir)  # a stand-in row for each unreadable record
        self.checks = run_folder.load_checks(self.run_dir)
        self.run_file = read_json(self.run_dir / run_folder.RUN_FILE)
        self.kept = reference.read_kept(self.run_dir)
        self.name = self.kept.get("run") or self.run_dir.name
        self.by_notebook = {record["notebook"]: record for record in self.records if record.get("notebook")}
        self.executed = {}  # stem -> executed notebook, those that read as notebooks (filled by find_notebooks)
        self.row_ids = set()  # the ids of the results page's rows (filled by write_results)
        self.copies = {}  # site path -> file of the repository a page links to, copied as it is
        self.docs = [README] + doc_files()
        self.written = []

    # -- where things are ---------------------------------------------------------------------------------------------

    def doc_page(self, path):
        """The site's page of a Markdown file of the repository: readme.html, docs/commands.html, ..."""
        return "readme.html" if path == README else path.relative_to(catalog.REPO).with_suffix(".html").as_posix()

    def notebook_page(self, name):
        """The page of a stored notebook (notebooks/<name>) in the site: its run in this run folder (the plain one, else
        the first of its variants' runs), else its cell of the front page's grid, which says that it did not run."""
        stem = Path(name).stem
        runs = sorted(s for s in self.executed if s == stem or re.match(re.escape(stem) + r"[-@]", s))
        if runs:
            return "notebooks/{}.html".format(stem if stem in self.executed else runs[0])
        found = stored_notebook(stem)
        return "index.html#{}-{}".format(found[0].key, found[1]) if found else "index.html#notebooks"

    def location(self, target):
        """Where a file of the repository (an absolute, normalised path) is in the site, or None where the site has
        nothing of it: its page (README, docs, the Rosetta pages, an executed notebook), else a copy at its own path."""
        try:
            path = Path(target).relative_to(catalog.REPO).as_posix()
        except ValueError:
            return None
        if Path(target) in self.docs:
            return self.doc_page(Path(target))
        rosetta = re.fullmatch(r"docs/rosetta/(\w+)\.html", path)
        if rosetta and (rosetta.group(1) == "index" or rosetta.group(1) in tasks.TASKS):
            return "rosetta/{}.html".format(rosetta.group(1))
        if Path(target).parent == catalog.NOTEBOOKS and path.endswith(".ipynb"):
            return self.notebook_page(Path(target).name)
        if Path(target).is_file():
            self.copies[path] = Path(target)
            return path
        return None

    def link(self, url, folder, page):
        """A link as written in a file of the repository's folder `folder`, as a link from the site's page `page`: to
        the site's page or copy of its target; None where the site has nothing of it. Links with a scheme, from the
        root or to an anchor of the same page stay as they are."""
        if ABSOLUTE.match(url):
            return url
        path, _, fragment = url.partition("#")
        target = Path(os.path.normpath(str(Path(folder) / unquote(path)))) if path else None
        where = self.location(target) if target else page
        if where is None:
            return None
        if fragment and "#" not in where:
            where += "#" + fragment
        return relative(where, page)

    def rewrite_links(self, markup, folder, page):
        """`markup` (HTML) with each relative href and src, written in the repository's folder `folder`, pointing into
        the site from `page`."""
        def rewrite(match):
            url = html.unescape(match.group(2))
            if ABSOLUTE.match(url) or url.startswith("data:"):
                return match.group(0)
            link = self.link(url, folder, page)
            if link is None:
                raise SiteError("{} links to {}, which is not in the repository".format(page, url))
            return '{}="{}"'.format(match.group(1), html.escape(link))

        return re.sub(r'\b(href|src)="([^"]*)"', rewrite, markup)

    # -- the pages ----------------------------------------------------------------------------------------------------

    def write(self, page, text):
        """Write one file of the site (text, or bytes as they are)."""
        path = self.out / page
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        self.written.append(page)

    def nav(self, page, current=None):
        """The site's navigation bar, its links written from `page`."""
        items = [("index.html", "DL Rosetta Stone", "home"), ("index.html#notebooks", "Notebooks", None),
                 ("results/index.html", "Results", None), ("rosetta/index.html", "Concepts", None)]
        items += [("rosetta/{}.html".format(task), rosetta_pages.short_title(task), None) for task in tasks.TASKS]
        items += [("readme.html", "README", None), ("index.html#docs", "Docs", None)]
        links = []
        for target, text, kind in items:
            attributes = ' class="home"' if kind else ""
            attributes += ' aria-current="page"' if target == current else ""
            links.append('<a href="{}"{}>{}</a>'.format(html.escape(relative(target, page)), attributes, html.escape(text)))
        return '<nav class="site" aria-label="site">{}</nav>'.format(" ".join(links))

    def layout(self, page, title, body, current=None, wide=False):
        """A page of the site: its title, the site's stylesheet and navigation, then `body` (`wide`: as wide as the
        window allows, for tables of many columns)."""
        return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
                '<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{title}</title>\n'
                '<link rel="stylesheet" href="{css}">\n</head><body class="site">\n{nav}\n<main class="page{wide}">\n'
                '{body}\n</main>\n</body></html>\n').format(
                    title=html.escape(title), css=html.escape(relative(MARK, page)), nav=self.nav(page, current),
                    wide=" wide" if wide else "", body=body)

    def commit(self, record=None):
        """The commit the run's code was at: the record's or the run file's, else the checkout's when the run was kept
        (runner/report/reference.py), said so; 'not recorded' where none says."""
        for source in (record or {}, self.run_file):
            if source.get("commit"):
                return str(source["commit"])
        if self.kept.get("commit"):
            return "{} (the checkout's when the run was kept)".format(self.kept["commit"])
        return "not recorded"

    def find_notebooks(self):
        """The executed notebooks of the run folder that read as notebooks (one cut short by a full disk, before the
        runner kept them whole, gets no page)."""
        import nbformat

        for notebook in sorted(self.run_dir.glob("*.ipynb")):
            try:
                nbformat.read(str(notebook), as_version=4)
            except (OSError, ValueError):  # nbformat's NotJSONError is a ValueError
                continue
            self.executed[notebook.stem] = notebook

    def render_notebooks(self):
        """Render every executed notebook of the run folder into notebooks/, with the .ipynb beside it."""
        from nbconvert import HTMLExporter

        exporter = HTMLExporter(template_file=str(TEMPLATES / "site_notebook.html.j2"))
        for notebook in self.executed.values():
            page = "notebooks/{}.html".format(notebook.stem)
            record = self.by_notebook.get(notebook.name)
            resources = {"site_root": "../", "site_nav": self.nav(page), "site_head": self.notebook_head(notebook, record)}
            body, _ = exporter.from_filename(str(notebook), resources=resources)
            head, main, rest = body.partition("<main>")
            self.write(page, head + main + self.rewrite_links(rest, catalog.NOTEBOOKS, page))
            self.write("notebooks/" + notebook.name, notebook.read_bytes())
        loader = exporter.environment.loader  # the lab template's stylesheets, once for every notebook page
        styles = [loader.get_source(exporter.environment, name)[0] for name in ("static/index.css", "static/theme-light.css")]
        self.write("assets/notebook.css", "\n".join(styles + [(TEMPLATES / "site_notebook.css").read_text()]))

    def notebook_head(self, notebook, record):
        """The head of an executed notebook's page: what it is, links to download it, to its row in the results and
        to its task page, and where and how it ran (from its record, the run file and the reference's kept.json)."""
        found = stored_notebook(notebook.stem)
        title = results.row_label(record) if record else notebook.stem
        if found:
            title += " \u00b7 " + tasks.TASKS[found[1]].title
        links = ['<a href="{0}" download>Download {0}</a>'.format(html.escape(notebook.name))]
        row = html_pages.row_id(notebook.name)
        links.append('<a href="../results/index.html{}">{}</a>'.format(
            "#" + html.escape(row) if row in self.row_ids else "", "Its row in the results" if row in self.row_ids
            else "The results"))
        if found:
            links.append('<a href="../rosetta/{}">Side by side with other frameworks</a>'.format(
                html.escape(rosetta_pages.task_link(found[1], found[0].key))))
        facts = self.facts(record) if record else [("Record", "none: the run wrote no record for this notebook")]
        rows = "".join("<dt>{}</dt><dd>{}</dd>".format(html.escape(what), html.escape(text)) for what, text in facts)
        return ('<header class="ran"><h1>{}</h1><p class="links">{}</p><dl>{}</dl></header>').format(
            html.escape(title), " ".join(links), rows)

    def facts(self, record):
        """[(what, text)] of where and how a record's notebook ran: status, machine, device, framework version,
        profile, data, weights, commit and run."""
        env = record.get("environment") or {}
        status = record["status"] + (": " + record["error"] if record.get("error") else "")
        machine = "{}, {} cores".format(env.get("cpu") or "CPU", env.get("cpu_count") or "?")
        if (record.get("placement") or {}).get("host"):  # a notebook run as a Ray task: the node it ran on
            machine = "{}: {}".format(record["placement"]["host"], machine)
        if env.get("os"):
            machine += "; " + env["os"]
        gpu = environment.gpu_used(env) if env else None
        device = "GPU: {} ({})".format(gpu, record.get("device")) if gpu else "CPU ({})".format(record.get("device") or "-")
        if env.get("computed_precision"):
            device += ", computed in " + table.computed_precision(env)
        if env.get("threads"):
            device += ", {} threads".format(env["threads"])
        version = "{} {}".format(env.get("framework") or record["framework"], env.get("framework_version") or "?")
        if env.get("backend"):
            version += " on {} {}".format(env["backend"], env.get("backend_version") or "")
        version += "; Python {}, numpy {}".format(env.get("python") or "?", env.get("numpy") or "?")
        profile = [record.get("profile") or "-"]
        if record.get("precision") not in (None, "auto"):
            profile.append("precision " + record["precision"])
        if record.get("compile") == "on":
            profile.append("compiled")
        data = record.get("data") or {}
        source = {"synthetic": "stand-in", "real": "real"}.get(data.get("source"), data.get("source") or "-")
        weights = {"imagenet": "real: ImageNet weights", "random": "stand-in: random weights"}.get(
            record.get("weights"), record.get("weights") or "none: the notebook trains its model from a random start")
        ran = self.name
        if record.get("started_at"):
            ran += ", started {}".format(record["started_at"])
        if record.get("duration_s") is not None:
            ran += ", {:.1f} s".format(record["duration_s"])
        return [("Status", status), ("Machine", machine), ("Computed on", device), ("Framework", version),
                ("Profile", ", ".join(profile)),
                ("Data", "{}: {}".format(source, data.get("description") or "-")), ("Weights", weights),
                ("Commit", self.commit(record)), ("Run", ran)]

    def write_results(self):
        """The results page: the run's tables (intervals and verdicts where it has them), plots and environments, by
        runner/report/html_pages.py, each row's notebook linked; the run's tables and plots beside it."""
        page = "results/index.html"
        links = {stem + ".ipynb": "../notebooks/{}.html".format(stem) for stem in self.executed}
        body = html_pages.run_body(self.run_dir, self.records, links, self.checks, row_ids=True)
        self.row_ids = set(re.findall(r'<tr id="([^"]+)"', body))
        files = [name for name in RESULT_FILES if (self.run_dir / name).is_file()]
        plots = sorted(path.name for path in self.run_dir.glob("*.png"))
        for name in files + plots:
            self.write("results/" + name, (self.run_dir / name).read_bytes())
        head = ['<h1>Results of {}</h1>'.format(html.escape(self.name)), '<p class="lead">{}</p>'.format(
            html.escape(self.run_summary()))]
        head += ['<p class="bad">{}</p>'.format(html.escape(problem)) for problem in self.problems]
        tail = []
        if "results.png" in plots:
            tail += ["<h2>Plot</h2>", '<p><img src="results.png" alt="the headline figure of each row, by task"></p>']
        if files or plots:
            tail += ["<h2>Files</h2>", "<p>" + " \u00b7 ".join('<a href="{0}">{0}</a>'.format(html.escape(name))
                                                             for name in files + plots) + "</p>"]
        self.write(page, self.layout(page, "Results of " + self.name, "\n".join(head + [body] + tail), page, wide=True))

    def run_summary(self):
        """One sentence on the run: its notebooks, profile, rounds, data and commit."""
        model = table.build(self.records, self.checks)
        sources = sorted({(record.get("data") or {}).get("source") for record in self.records} - {None})
        words = {"synthetic": "stand-in data", "real": "real data"}
        rounds = self.run_file.get("repeat") or 1
        return "{} rows from {} executed notebooks, profile {}{}, {}, on {}; commit {}.".format(
            len(self.records), len(self.executed), ", ".join(model.profiles) or "-",
            ", {} interleaved rounds".format(rounds) if rounds > 1 else "",
            " and ".join(words.get(source, source) for source in sources) or "no data recorded",
            "; ".join(model.hardware) or "-", self.commit())

    def write_rosetta(self):
        """The concept index and the task pages, their links to notebooks opening them executed."""
        renderer = SiteRenderer(self.out / "rosetta", self)
        for path in rosetta_pages.write_pages(self.out / "rosetta", renderer):
            self.written.append(path.relative_to(self.out).as_posix())

    def write_docs(self):
        """README.md and the Markdown pages of docs/ as pages, their links rewritten into the site."""
        for path in self.docs:
            page = self.doc_page(path)
            text = path.read_text(encoding="utf-8")
            body = markdown_html(text, lambda url, folder=path.parent, page=page: self.link(url, folder, page))
            self.write(page, self.layout(page, title_of(text, path.stem), body, page))

    def write_front(self):
        """The front page: what the project is, where to read on, and the grid of every framework's notebooks."""
        page = "index.html"
        readme = README.read_text(encoding="utf-8")
        intro = re.split(r"^## ", readme, maxsplit=1, flags=re.M)[0]
        intro = re.sub(r"^# .*$", "", intro, count=1, flags=re.M)
        body = ["<h1>DL Rosetta Stone</h1>", markdown_html(intro, lambda url: self.link(url, catalog.REPO, page)),
                '<ul class="cards">']
        cards = [("results/index.html", "The results", "the run's table: figures, intervals, verdicts, plots"),
                 ("rosetta/index.html", "The concept index", "each concept (the loss, the step, ...) in every framework")]
        cards += [("rosetta/{}.html".format(task), "{} side by side".format(rosetta_pages.short_title(task)),
                   tasks.TASKS[task].title) for task in tasks.TASKS]
        cards.append(("readme.html", "The README", "the tasks, the frameworks, the commands"))
        body += ['<li><a href="{}">{}</a><span>{}</span></li>'.format(html.escape(target), html.escape(text),
                                                                       html.escape(what)) for target, text, what in cards]
        body += ["</ul>", '<h2 id="notebooks">The notebooks, executed</h2>', '<p>{} Each notebook opens with its '
                 'outputs, where it ran and a link to download it; "result" is its row in the results, "side by side" '
                 'its task page beside PyTorch.</p>'.format(html.escape(self.run_summary())), self.grid(),
                 '<h2 id="docs">Docs</h2>', '<ul class="cards">']
        for path in self.docs:
            text = path.read_text(encoding="utf-8")
            where = path.relative_to(catalog.REPO).as_posix()
            body.append('<li><a href="{}">{}</a><span>{}</span></li>'.format(
                html.escape(self.doc_page(path)), html.escape(title_of(text, path.stem)), html.escape(where)))
        body.append("</ul>")
        self.write(page, self.layout(page, "DL Rosetta Stone", "\n".join(body), page))

    def grid(self):
        """The grid of the front page: a row per framework (the absent ones too), a column per task; each cell the
        framework's runs of the task in this run folder (notebook, status, result) and its task page, or why it has
        none."""
        by_cell = {}
        for record in table.order_records(self.records):
            stem = Path(record.get("notebook") or "").stem
            found = stored_notebook(stem) if stem else None
            if found is None:
                framework = next((f for f in catalog.FRAMEWORKS if f.label == record["framework"]), None)
                found = (framework, record["task"]) if framework else None
            if found:
                by_cell.setdefault((found[0].key, found[1]), []).append((record, stem))
        head = "".join("<th>{}</th>".format(html.escape(rosetta_pages.short_title(task))) for task in tasks.TASKS)
        rows = []
        for framework in catalog.FRAMEWORKS:
            cells = []
            for task in tasks.TASKS:
                cell_id = "{}-{}".format(framework.key, task)
                if task in framework.lacks:
                    cells.append('<td class="no" id="{}" title="{}">no: {}</td>'.format(
                        cell_id, html.escape(framework.lacks[task]), html.escape(framework.lacks[task].split(":")[0])))
                    continue
                runs = [self.grid_entry(framework, record, stem) for record, stem in by_cell.get((framework.key, task), [])]
                listed = "<ul>{}</ul>".format("".join(runs)) if runs else '<p class="note">not in this run</p>'
                pair = '<a class="pair" href="rosetta/{}">side by side</a>'.format(
                    html.escape(rosetta_pages.task_link(task, framework.key)))
                cells.append('<td id="{}">{}{}</td>'.format(cell_id, listed, pair))
            rows.append('<tr><th scope="row">{}</th>{}</tr>'.format(html.escape(framework.label), "".join(cells)))
        for absent in catalog.ABSENT:
            rows.append('<tr><th scope="row">{}</th>{}</tr>'.format(html.escape(absent.label), "".join(
                '<td class="no" title="{}">absent</td>'.format(html.escape(absent.reason)) for _ in tasks.TASKS)))
        return '<table class="grid"><thead><tr><th>Framework</th>{}</tr></thead><tbody>{}</tbody></table>'.format(
            head, "".join(rows))

    def grid_entry(self, framework, record, stem):
        """One run in a cell of the grid: its notebook (named by what sets it apart from the framework's own row: its
        variant, release, precision), status and result."""
        apart = " ".join(filter(None, [record.get("release"), record.get("variant")]))  # 'tensorflow · compiled'
        name = results.label(apart, None, record.get("precision"), record.get("compile"), record.get("sweep"),
                             record.get("kernel_env")).strip(" \u00b7") or "notebook"
        if stem in self.executed:
            shown = '<a href="notebooks/{}.html">{}</a>'.format(html.escape(stem), html.escape(name))
        else:
            shown = html.escape(name)
        status = '<span class="status {0}">{0}</span>'.format(html.escape(record["status"]))
        row = html_pages.row_id(stem) if stem else None
        result = ' <a href="results/index.html#{}">result</a>'.format(html.escape(row)) if row in self.row_ids else ""
        return "<li>{} {}{}</li>".format(shown, status, result)

    def copy_linked_files(self):
        """Copy the repository's files that pages link to (and have no page of their own) to their own paths."""
        for path, source in sorted(self.copies.items()):
            if (self.out / path).exists():
                raise SiteError("{} is linked from the docs, but the site writes a page of that name".format(path))
            self.write(path, source.read_bytes())

    def build(self):
        """Write the whole site; return the paths written, inside the site."""
        self.write(MARK, (TEMPLATES / "site.css").read_text())
        self.find_notebooks()
        self.write_results()
        self.render_notebooks()
        self.write_rosetta()
        self.write_docs()
        self.write_front()
        self.copy_linked_files()
        return sorted(self.written)


class SiteRenderer(rosetta_pages.Renderer):
    """The Rosetta pages' renderer for the site: their links point at the site's pages (a notebook at its run, a doc
    at its page), and their navigation starts at the site's front page."""

    home = ("DL Rosetta Stone", "../index.html")

    def __init__(self, directory, site):
        super().__init__(directory)
        self.site = site

    def relative(self, target):
        """The link from a Rosetta page of the site to a file of the repository, through the site's map."""
        page = "rosetta/index.html"
        link = self.site.link(os.path.basename(str(target)), os.path.dirname(str(target)), page)
        if link is None:
            raise SiteError("a Rosetta page links to {}, which is not in the repository".format(target))
        return link


def prepare(out):
    """Make `out` an empty folder for the site: a site written before is replaced; another folder with files in it is
    refused (SiteError)."""
    out = Path(out)
    if out.exists():
        if not out.is_dir() or (any(out.iterdir()) and not (out / MARK).is_file()):
            raise SiteError("{} is not a site written by `{}`: give an empty or new folder with --out".format(
                out, BUILD_COMMAND))
        shutil.rmtree(str(out))
    out.mkdir(parents=True)


def build(run_dir=None, out=SITE_DIR):
    """Write the site into `out` from `run_dir` (default: the reference run, docs/reference/); return the paths
    written. SiteError where there is no such run folder."""
    run_dir = Path(run_dir) if run_dir is not None else reference.REFERENCE_DIR
    if not run_dir.is_dir():
        if run_dir == reference.REFERENCE_DIR:
            raise SiteError("no reference run in {}: keep one from a finished run with `{}`".format(
                reference.REFERENCE_DIR, reference.KEEP_COMMAND))
        raise SiteError("no such run folder: {}".format(run_dir))
    prepare(out)
    return Site(run_dir, out).build()
