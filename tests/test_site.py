"""The static site (runner/report/site.py), built from a small run folder made here without running anything: stored
notebooks given outputs, records written as a run writes them, kept as the reference run is (runner/report/reference.py).

Checked: what the reference keeps of a run; every page there and every link relative, nothing fetched; two builds the
same bytes; in Debian's Chromium, a crawler that follows every internal link from the front page of the site served
under a sub-path (as GitHub Pages serves /<repository>/) and finds none broken and no console error, every notebook
page with its outputs, and the front page, a notebook page, the concept index and the results page without sideways
scrolling at 1440 x 900 and 390 x 844, from the file system (screenshots in pytest's temporary folder); the Pages
workflow builds with the command the code and the docs give.
"""

import base64
import functools
import html
import json
import re
import sys
import threading
import time
from collections import deque
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import unquote, urldefrag, urlparse
from urllib.request import urlopen

import pytest
import yaml
from test_browser import PAGE_SCROLLS, broken_links, open_page, screenshot

from common import environment, results, tasks
from runner import catalog, cli, run_folder
from runner.report import reference, run_report, site

WORKFLOW = catalog.REPO / ".github" / "workflows" / "pages.yml"
PREFIX = "/dl-rosetta-stone/"  # the sub-path the site is served under, as GitHub Pages serves a project's site
# (framework key, variant, task, status) of the run's notebooks
RUNS = (("pytorch", None, "cnn", "ok"), ("jax", None, "cnn", "ok"), ("keras", "jax", "cnn", "ok"),
        ("tensorflow", None, "cnn", "failed"), ("pytorch", None, "rnn", "ok"))
PLOT = base64.b64encode((catalog.REPO / "docs" / "scaling.png").read_bytes()).decode("ascii")  # a real PNG output
PROGRESS = "".join("\r{}/10 [{}]".format(step, "=" * step) for step in range(1, 11)) + "\n"  # a bar redrawn in place


def executed_copy(stored, stem, status):
    """A stored notebook as papermill would leave it executed: every code cell with a count and its printed line, the
    last with a plot (or, for a failed run, the first with its error), one with a progress bar and a long log."""
    notebook = json.loads(stored.read_text())
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    for count, cell in enumerate(code, 1):
        cell["execution_count"] = count
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "cell {} of {}\n".format(count, stem)}]
    code[1]["outputs"].append({"output_type": "stream", "name": "stderr", "text": PROGRESS + "log line\n" * 2000})
    code[-1]["outputs"].append({"output_type": "display_data", "metadata": {}, "data": {
        "image/png": PLOT, "text/plain": "<Figure size 640x480 with 1 Axes>",
        "application/json": {"dump": list(range(20000))}}})
    if status != "ok":
        code[2]["outputs"] = [{"output_type": "error", "ename": "ValueError", "evalue": "planted failure",
                               "traceback": ["ValueError: planted failure"]}]
    return json.dumps(notebook, indent=1)


def record_of(framework, variant, task, status, stem, train_s):
    """A record as the notebook (or the runner, for a failure) writes it."""
    if status != "ok":
        return results.failure_record(framework.label, task, "smoke", status, "ValueError: planted failure",
                                      variant=variant, notebook=stem + ".ipynb", duration_s=3.0)
    record = results.new_record(framework.label, task, "smoke", variant=variant)
    record.update(device="cpu", notebook=stem + ".ipynb",
                  data={"source": "synthetic", "description": "synthetic stand-in, seed 0"},
                  environment=environment.facts(framework.label, "1.0", "cpu", threads=2))
    record.update(timings={"compile_s": None}, metrics={"train_s": train_s, "accuracy": 0.5})
    return record


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished run of two rounds: executed notebooks, records (each round's), run.json, the tables and plots."""
    folder = tmp_path_factory.mktemp("run") / "20261129-120000-smoke"
    (folder / "round-2").mkdir(parents=True)
    for number, (key, variant, task, status) in enumerate(RUNS):
        framework = next(f for f in catalog.FRAMEWORKS if f.key == key)
        stored = catalog.notebook_path(framework, task)
        stem = stored.stem + ("-" + variant if variant else "")
        (folder / (stem + ".ipynb")).write_text(executed_copy(stored, stem, status))
        for round_folder, train_s in ((folder, 2.0 + number), (folder / "round-2", 2.5 + number)):
            record = record_of(framework, variant, task, status, stem, train_s)
            results.write_result(str(run_folder.record_path(round_folder, stem)), record, status)
    (folder / "Caffe_CNN.ipynb").write_text('{"cells": [')  # cut short by a full disk: no page, not kept
    run_folder.write_run_file(folder, {"profile": "smoke", "repeat": 2, "data": "synthetic"})
    run_report.write_report(folder)
    return folder


@pytest.fixture(scope="module")
def kept(run_dir, tmp_path_factory):
    """The run kept as a reference run is, into a folder of its own: (folder, files, bytes)."""
    folder = tmp_path_factory.mktemp("reference") / "reference"
    files, size = reference.keep(run_dir, folder)
    return folder, files, size


@pytest.fixture(scope="module")
def built(kept, tmp_path_factory):
    """The site built from the kept run: (site folder, paths written, seconds)."""
    out = tmp_path_factory.mktemp("site") / "site"
    started = time.monotonic()
    written = site.build(kept[0], out)
    seconds = time.monotonic() - started
    size = sum((out / path).stat().st_size for path in written)
    print("site: {} files, {} pages, {:.2f} MB, built in {:.1f} s".format(
        len(written), sum(path.endswith(".html") for path in written), size / 1e6, seconds))
    return out, written, seconds


def stems():
    """The executed notebooks' stems of the run."""
    return ["{}{}".format(catalog.notebook_path(next(f for f in catalog.FRAMEWORKS if f.key == key), task).stem,
                          "-" + variant if variant else "") for key, variant, task, _ in RUNS]


def test_the_reference_keeps_records_tables_plots_and_small_outputs(run_dir, kept):
    folder, files, size = kept
    names = {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}
    for stem in stems():
        assert {stem + ".ipynb", stem + ".result.json", "round-2/{}.result.json".format(stem)} <= names
    assert {"run.json", "results.md", "results.csv", "results.json", "results.png", "kept.json"} <= names
    assert not any(name.endswith(".html") or name.startswith("kernel-logs") for name in names)
    assert "Caffe_CNN.ipynb" not in names
    assert (files, size) == (len(names), sum((folder / name).stat().st_size for name in names))
    assert size < (sum(path.stat().st_size for path in run_dir.rglob("*") if path.is_file()))
    kept_file = json.loads((folder / "kept.json").read_text())
    assert kept_file["run"] == run_dir.name and "commit" in kept_file  # None where git cannot say
    outputs = [output for cell in json.loads((folder / "PyTorch_CNN.ipynb").read_text())["cells"]
               if cell["cell_type"] == "code" for output in cell["outputs"]]
    logs = [output["text"] for output in outputs if output.get("name") == "stderr"]
    assert logs[0].startswith("10/10 [==========]\nlog line\n") and "characters left out" in logs[0]
    assert len(logs[0]) < reference.TEXT_LIMIT + 200
    (plot,) = [output for output in outputs if output["output_type"] == "display_data"]
    assert plot["data"]["image/png"] == PLOT and "application/json" not in plot["data"]
    assert "left out of the reference copy: application/json" in plot["data"]["text/plain"]


def test_the_site_has_every_page_and_links_each_notebook_to_its_run(kept, built):
    out, written, _ = built
    for stem in stems():
        assert {"notebooks/{}.html".format(stem), "notebooks/{}.ipynb".format(stem)} <= set(written)
    pages = {"index.html", "readme.html", "results/index.html", "rosetta/index.html", "assets/site.css",
             "assets/notebook.css", "docs/commands.html", "docs/tasks/cnn.html", "docs/scaling.png"}
    assert pages | {"rosetta/{}.html".format(task) for task in tasks.TASKS} <= set(written)
    front = (out / "index.html").read_text()
    assert '<a href="notebooks/Keras_CNN-jax.html">jax</a>' in front  # a variant's run, named by its variant
    assert 'href="results/index.html#row-PyTorch_CNN"' in front
    assert '<span class="status failed">failed</span>' in front
    assert 'id="mxnet-cnn"' in front and 'id="keras2-train" title="' in front  # not run here; lacked, with why
    assert not (out / "notebooks" / "Caffe_CNN.html").exists()
    rosetta = (out / "rosetta" / "cnn.html").read_text()
    assert '"href": "../notebooks/PyTorch_CNN.html"' in rosetta  # a task page's column head opens the run
    assert '"href": "../index.html#mxnet-cnn"' in rosetta  # or, where the run lacks it, the grid's cell saying so
    assert 'href="../index.html">DL Rosetta Stone</a>' in rosetta
    notebook = (out / "notebooks" / "PyTorch_CNN.html").read_text()
    commit = json.loads((kept[0] / "kept.json").read_text())["commit"]
    for fact in ("stand-in: synthetic stand-in, seed 0", "PyTorch 1.0", "CPU (cpu)", "smoke",
                 "{} (the checkout's when the run was kept)".format(commit) if commit else "not recorded"):
        assert fact in html.unescape(notebook), fact
    assert 'href="../docs/tasks/cnn.html"' in notebook  # the notebook's own link to its task's page
    assert '<a download="" href="PyTorch_CNN.ipynb">' in notebook
    readme = (out / "readme.html").read_text()
    assert 'href="rosetta/index.html"' in readme and 'href="docs/commands.html#rosetta"' in readme
    assert 'id="the-rosetta-pages"' in readme  # GitHub's anchors, which the docs' links use


def attributes(markup, name):
    """Every value of attribute `name` in an HTML text."""
    return [html.unescape(value) for value in re.findall(r'\b{}="([^"]*)"'.format(name), markup)]


def test_every_link_is_relative_and_nothing_is_fetched(built):
    out, written, _ = built
    problems = []
    for path in written:
        if path.endswith(".html"):
            markup = (out / path).read_text()
            for url in attributes(markup, "href") + attributes(markup, "src"):
                if url.startswith(("/", "file:")) or ("://" in url and not url.startswith("https://")):
                    problems.append("{}: {}".format(path, url))
            for url in attributes(markup, "src") + re.findall(r'<link[^>]*href="([^"]*)"', markup):
                if re.match(r"[a-z]+:", url) and not url.startswith("data:"):
                    problems.append("{} fetches {}".format(path, url))
        elif path.endswith(".css"):
            text = (out / path).read_text()
            if "@import" in text or re.search(r"url\(\s*['\"]?(?!data:)", text):
                problems.append("{} fetches something".format(path))
    assert problems == []


def test_two_builds_write_the_same_bytes(kept, built, tmp_path):
    out, written, seconds = built
    again = site.build(kept[0], tmp_path / "again")
    assert again == written
    assert [path for path in written if (out / path).read_bytes() != (tmp_path / "again" / path).read_bytes()] == []
    with pytest.raises(site.SiteError, match="not a site"):  # a folder of other files is never replaced
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "notes.txt").write_text("mine")
        site.build(kept[0], tmp_path / "mine")
    print("two builds: {:.1f} s each".format(seconds))


def test_the_command_line_and_the_missing_reference(tmp_path, monkeypatch, capsys):
    with pytest.raises(cli.UsageError, match="site --keep needs"):
        cli.parse(["site", "--keep"])
    with pytest.raises(cli.UsageError, match="no such run folder"):
        cli.parse(["site", str(tmp_path / "missing")])
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path / "docs" / "reference")
    from runner.report import commands

    assert commands.site(out=tmp_path / "site") == 1
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and reference.KEEP_COMMAND in error, error


class UnderPrefix(SimpleHTTPRequestHandler):
    """Serves the site only under PREFIX, as GitHub Pages serves a project's site: a link that climbs out of it is a
    404, as it would be there."""

    def translate_path(self, path):
        if not path.startswith(PREFIX):
            return str(Path(self.directory) / "..." / "outside")
        return super().translate_path("/" + path[len(PREFIX):])

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    """The test's HTTP server: a browser closing a connection before the answer is sent is no error to print."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="module")
def served(built):
    """The site served over HTTP on 127.0.0.1 under PREFIX, in a thread; its base address."""
    server = Server(("127.0.0.1", 0), functools.partial(UnderPrefix, directory=str(built[0])))
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:{}{}".format(server.server_address[1], PREFIX)
    server.shutdown()
    thread.join(timeout=10)
    server.server_close()


class Targets(object):
    """What the server answers for each address, and the ids of each HTML page, each asked once."""

    def __init__(self):
        self.status, self.ids = {}, {}

    def answer(self, url):
        if url not in self.status:
            try:
                with urlopen(url, timeout=10) as response:
                    self.status[url] = response.status
                    if url.endswith((".html", "/")):
                        text = response.read().decode("utf-8")
                        self.ids[url] = {html.unescape(i) for i in re.findall(r'\bid="([^"]+)"', text)}
            except HTTPError as error:
                self.status[url] = error.code
        return self.status[url]


def crawl(browser, served):
    """Follow every internal link from the front page at `served` in Chromium: (pages seen, notebook pages, broken
    links, console errors, addresses outside the site that a page asked for). A notebook page must show its facts box
    and its outputs."""
    targets = Targets()
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors, outside = [], []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)

    def only_the_site(route):
        if route.request.url.startswith(served):
            route.continue_()
        else:  # nothing may be fetched from elsewhere
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_site)
    queue, seen, broken, notebooks = deque([served]), {served}, [], []
    while queue:
        url = queue.popleft()
        page.goto(url)
        page.wait_for_load_state("load")
        if "/notebooks/" in url:
            assert page.locator("header.ran dl").is_visible(), url
            assert page.locator(".jp-OutputArea-output").count() > 0, url  # the notebook shows its outputs
            assert page.locator(".jp-OutputArea-output").first.is_visible(), url
            notebooks.append(url)
        found = page.evaluate("""() => Array.from(document.querySelectorAll("a[href], [src], link[href]"))
                                   .map(e => e.href || e.src)""")
        for link in found:
            address, fragment = urldefrag(link)
            address = address.split("?")[0]
            if link.startswith("data:") or (link.startswith("https://") and "127.0.0.1" not in link):
                continue  # an image inside the page, or a link out to another site (not followed)
            if not address.startswith(served):
                broken.append("{} -> {} (outside the site)".format(url, link))
                continue
            if targets.answer(address) != 200:
                broken.append("{} -> {} ({})".format(url, link, targets.status[address]))
            elif fragment and not {fragment, unquote(fragment)} & targets.ids.get(address, {fragment}):  # as browsers match
                broken.append("{} -> {} (no such id)".format(url, link))
            elif address.endswith((".html", "/")) and address not in seen:
                seen.add(address)
                queue.append(address)
    page.close()
    return seen, notebooks, broken, errors, outside


def test_a_crawler_from_the_front_page_under_a_sub_path_finds_no_broken_link(browser, served, built):
    started = time.monotonic()
    seen, notebooks, broken, errors, outside = crawl(browser, served)
    assert broken == [] and errors == [] and outside == []
    expected = {"notebooks/{}.html".format(stem) for stem in stems()}
    assert {urlparse(url).path[len(PREFIX):] for url in notebooks} == expected
    assert {"{}{}".format(served, path) for path in ("results/index.html", "rosetta/index.html", "readme.html",
                                                     "docs/commands.html")} <= seen
    print("crawled {} pages from {} in {:.1f} s".format(len(seen), served, time.monotonic() - started))


@pytest.fixture(scope="module")
def reference_served(tmp_path_factory):
    """The site of the committed reference run (docs/reference/), built as the Pages workflow builds it and served
    under PREFIX; its base address and the executed notebooks' stems the reference holds."""
    if not (reference.REFERENCE_DIR / reference.KEPT_FILE).is_file():
        pytest.fail("no reference run in {}: `{}` keeps one".format(reference.REFERENCE_DIR, reference.KEEP_COMMAND))
    out = tmp_path_factory.mktemp("reference-site") / "site"
    site.build(reference.REFERENCE_DIR, out)
    server = Server(("127.0.0.1", 0), functools.partial(UnderPrefix, directory=str(out)))
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:{}{}".format(server.server_address[1], PREFIX), sorted(
        path.stem for path in reference.REFERENCE_DIR.glob("*.ipynb"))
    server.shutdown()
    thread.join(timeout=10)
    server.server_close()


def test_the_reference_run_s_site_has_every_executed_notebook_with_outputs_and_no_broken_link(browser,
                                                                                                reference_served):
    """The site a clean clone builds (`python3 run_all.py site`): real executed notebooks of every framework."""
    served, kept_stems = reference_served
    seen, notebooks, broken, errors, outside = crawl(browser, served)
    assert broken == [] and errors == [] and outside == []
    assert len(kept_stems) >= 50  # every framework's notebooks of every task, and the compiled inference rows
    assert sorted(urlparse(url).path[len(PREFIX) + len("notebooks/"):-len(".html")] for url in notebooks) == kept_stems


SIZES = [(1440, 900), (390, 844)]


@pytest.mark.parametrize("width, height", SIZES, ids=["1440x900", "390x844"])
def test_the_main_pages_fit_the_window_from_the_file_system(browser, built, width, height, tmp_path):
    out = built[0]
    for name in ("index.html", "notebooks/PyTorch_CNN.html", "rosetta/index.html", "results/index.html"):
        page, errors = open_page(browser, out / name, width, height)
        assert page.evaluate(PAGE_SCROLLS) is False, name  # no sideways scrolling of the page itself
        if name == "index.html":
            assert broken_links(page) == []  # from the file system too
            assert page.locator("table.grid").is_visible()
        if name == "results/index.html":
            assert page.locator("tr#row-PyTorch_CNN").count() == 1
        screenshot(page, tmp_path, "{}-{}x{}.png".format(name.replace("/", "-"), width, height), full_page=False)
        assert errors == [], name
        page.close()


def test_the_pages_workflow_builds_with_the_command_the_code_and_docs_give():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "push" in triggers and "workflow_dispatch" in triggers
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert workflow["concurrency"]["group"]
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    commands = [line.strip() for step in steps for line in step.get("run", "").splitlines() if line.strip()]
    assert commands == [site.BUILD_COMMAND]  # the build, and nothing else, runs as the docs say
    uses = [step["uses"].split("@")[0] for step in steps if "uses" in step]
    assert {"actions/checkout", "actions/upload-pages-artifact", "actions/deploy-pages"} <= set(uses)
    (upload,) = [step for step in steps if step.get("uses", "").startswith("actions/upload-pages-artifact")]
    assert upload["with"]["path"] == site.SITE_DIR.name
    commands_md = (catalog.REPO / "docs" / "commands.md").read_text()
    section = commands_md.split("\n## site\n", 1)[1].split("\n## ", 1)[0]
    assert site.BUILD_COMMAND + " " in section and reference.KEEP_COMMAND in section
    assert site.BUILD_COMMAND in (catalog.REPO / "README.md").read_text()
