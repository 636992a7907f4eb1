"""The generated pages in a real browser: Debian's headless Chromium, driven by Playwright.

`python3 run_all.py test` installs Chromium where it can (root with apt-get); Playwright never
downloads a browser of its own here. Screenshots (the report, the concept index and each Rosetta page at 1440 x 900
and 390 x 844, and the differences mode) stay in pytest's temporary folder, whose path the tests print; pytest keeps
the last runs'.
"""

import html
import re
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from common import concepts, tasks
from runner import catalog
from runner.report import rosetta_pages, table


def open_page(browser, path, width=1600, height=1000):
    """Open a local page, collecting JavaScript errors and console errors."""
    page = browser.new_page(viewport={"width": width, "height": height})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, errors


def screenshot(page, folder, name, full_page=True):
    """Save a screenshot under the test's temporary folder and say where."""
    path = folder / name
    page.screenshot(path=str(path), full_page=full_page)
    assert path.stat().st_size > 10000
    print("screenshot:", path)


def test_results_report_shows_every_row(browser, tmp_path, monkeypatch):
    from conftest import FIXTURE_FRAMEWORKS, FIXTURES

    monkeypatch.setattr(catalog, "NOTEBOOKS", FIXTURES)
    monkeypatch.setattr(catalog, "FRAMEWORKS", FIXTURE_FRAMEWORKS)
    from runner import cli

    started = time.monotonic()
    assert cli.main(["-f", "ok,raises", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--results", str(tmp_path), "-q"]) == 1
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    page, errors = open_page(browser, run_dir / "report.html")
    for record in table.load_records(run_dir):
        row = page.locator("tr", has_text=table.label(table.row(record))).first
        assert row.is_visible(), record["framework"]
    assert page.get_by_text("failed: ValueError: planted failure").is_visible()
    screenshot(page, run_dir, "report.png")
    page.get_by_role("link", name="OK", exact=True).click()  # the name links to the notebook rendered as HTML
    page.wait_for_load_state("load")
    assert page.url.endswith("OK_CNN.html") and page.get_by_text("fixture ran with").first.is_visible()
    assert errors == []  # on the report and on the notebook page: no script errors, nothing fetched from outside
    print("browser check of the report: {:.1f} s".format(time.monotonic() - started))


# What a reader must be able to count on at 1440 x 900 and at 390 x 844, checked in the pages' own terms (see
# runner/report/rosetta_pages.py).
SIZES = [(1440, 900), (390, 844)]
TOO_WIDE = """() => Array.from(document.querySelectorAll(
    "main .view pre, main .view td.code, main .view .cell, main .cgrid pre, main .fwcell"))
  .filter(e => e.offsetParent !== null)
  .filter(e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right >
                                                   e.closest(".view, .cgrid").getBoundingClientRect().right + 1)
  .map(e => e.closest("section").id + ": " + e.textContent.slice(0, 60))"""
PAGE_SCROLLS = "() => document.documentElement.scrollWidth > document.documentElement.clientWidth"
# a concept's row shown on a task page: each cell in it holds code, or says where the code is, why there is none, or
# that none is tagged yet
EMPTY_CONCEPT_CELLS = """() => Array.from(document.querySelectorAll(".cellrow[data-concept]:not([hidden]) .view > .cell"))
  .filter(c => !c.querySelector("pre.src, .note, table.split")).map(c => c.closest(".cellrow").dataset.concept)"""
# a framework's cell of a concept shown on the index: code, a reason or the note that no cell is tagged yet
EMPTY_INDEX_CELLS = """() => Array.from(document.querySelectorAll(".fwcell")).filter(c => c.offsetParent !== null)
  .filter(c => !Array.from(c.querySelectorAll(".entry")).some(e => e.offsetParent !== null &&
                                                                   e.querySelector("pre.src, .note.reason, .note.untagged")))
  .map(c => c.closest("section").id + "/" + c.dataset.fw)"""
SHOWN_FRAMEWORKS = """() => Array.from(new Set(Array.from(document.querySelectorAll("main .view > .cell"))
  .flatMap(c => c.dataset.fws.split(" "))))"""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The task pages and the concept index, written once into a temporary folder: {task or "index": path}."""
    return {path.stem: path for path in rosetta_pages.write_pages(tmp_path_factory.mktemp("rosetta"))}


def box(page, selector):
    return page.locator(selector).first.bounding_box()


def broken_links(page):
    """The links of the page (its hrefs as the browser resolves them) whose file is missing, or whose anchor is not
    an id of that file."""
    ids, broken = {}, []
    for href in page.evaluate("() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"):
        url = urlparse(href)
        if url.scheme != "file":
            broken.append(href)
            continue
        path = Path(unquote(url.path))
        if not path.exists():
            broken.append(href)
        elif url.fragment and path.suffix == ".html":
            if path not in ids:
                ids[path] = {html.unescape(i) for i in re.findall(r' id="([^"]+)"', path.read_text())}
            if unquote(url.fragment) not in ids[path]:
                broken.append(href)
    return broken


@pytest.mark.parametrize("width, height", SIZES, ids=["1440x900", "390x844"])
def test_concept_index_reads_picks_and_links(browser, written, width, height, tmp_path):
    started = time.monotonic()
    page, errors = open_page(browser, written["index"], width, height)
    cells = ".crow#{} .fwcell:visible"

    def shown(concept="loss"):
        return page.locator(cells.format(concept)).evaluate_all(  # in the order shown
            "cells => cells.sort((a, b) => a.style.order - b.style.order).map(c => c.dataset.fw)")

    assert shown() == list(rosetta_pages.INDEX_FRAMEWORKS)
    assert page.locator(".crow:visible").count() == len(concepts.CONCEPTS)
    assert page.evaluate(PAGE_SCROLLS) is False and page.evaluate(TOO_WIDE) == []
    assert page.evaluate(EMPTY_INDEX_CELLS) == []
    # one task at first, CNN; a concept no picked task has is shown from its own first task
    assert page.locator("#tasks input:checked").evaluate_all("boxes => boxes.map(b => b.value)") == ["cnn"]
    assert page.locator(".crow#loss .entry-task:visible").evaluate_all("t => t.map(e => e.dataset.task)") == ["cnn"] * 4
    assert "shown from RNN" in page.locator(".crow#recurrent-layer .fallback").inner_text()
    assert page.locator(".crow#recurrent-layer .entry-task:visible").evaluate_all(
        "t => t.map(e => e.dataset.task)") == ["rnn"] * 4
    screenshot(page, tmp_path, "index-{}x{}.png".format(width, height), full_page=False)
    if width == 1440:
        assert broken_links(page) == []  # every link of the index, its hidden cells' too

    # picking frameworks and tasks changes what is shown, and goes into the link to the view
    page.uncheck("#frameworks input[value=tensorflow]")
    page.check("#frameworks input[value=mxnet]")
    assert shown() == ["pytorch", "keras", "jax", "mxnet"]
    page.check("#tasks input[value=rnn]")
    assert page.locator(".crow#recurrent-layer .fallback").inner_text() == ""
    assert set(page.locator(".crow#loss .entry-task:visible").evaluate_all("t => t.map(e => e.dataset.task)")) == {
        "cnn", "rnn"}
    assert page.locator("#permalink").get_attribute("href").startswith("?fw=pytorch,keras,jax,mxnet&task=cnn,rnn")
    page.click("#all-frameworks")
    assert shown("imports") == ["pytorch", "keras", "jax", "mxnet"] + [
        f.key for f in catalog.FRAMEWORKS if f.key not in ("pytorch", "keras", "jax", "mxnet")]
    assert page.evaluate(PAGE_SCROLLS) is False and page.evaluate(TOO_WIDE) == []
    assert page.evaluate(EMPTY_INDEX_CELLS) == []
    assert errors == []
    print("browser check of the index at {}x{}: {:.1f} s".format(width, height, time.monotonic() - started))


def only_in(framework, task):
    """A line of `framework`'s notebook of `task` that no other framework's notebook of the task has."""
    from test_rosetta import notebook_cells, notebook_files

    def code_lines(path):
        return {line.strip() for _, _, kind, source in notebook_cells(path) if kind == "code"
                for line in source.split("\n") if len(line.strip()) >= 16 and not line.strip().startswith("#")}

    others = set()
    for f, path in notebook_files(task):
        if f.key != framework.key:
            others |= code_lines(path)
    return sorted(code_lines(catalog.notebook_path(framework, task)) - others, key=len)[-1]


@pytest.mark.parametrize("width, height", SIZES, ids=["1440x900", "390x844"])
@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_task_page_reads_picks_and_searches_every_framework(browser, written, task, width, height, tmp_path):
    from test_rosetta import notebook_tags

    started = time.monotonic()
    page, errors = open_page(browser, written[task], width, height)
    having = [f for f in catalog.FRAMEWORKS if task not in f.lacks]
    assert page.locator("#frameworks input").evaluate_all("boxes => boxes.map(b => b.value)") == [f.key for f in having]
    assert page.evaluate(SHOWN_FRAMEWORKS) == ["pytorch", "tensorflow"]  # the default pair
    assert page.evaluate(PAGE_SCROLLS) is False and page.evaluate(TOO_WIDE) == []
    assert page.evaluate(EMPTY_CONCEPT_CELLS) == []
    for tag in notebook_tags(task):  # every section of the notebooks, titled by common/tasks/task.py
        assert page.locator("section#{} > h2".format(tag)).inner_text() == tasks.SECTION_TITLES[tag], tag
    screenshot(page, tmp_path, "rosetta-{}-{}x{}.png".format(task, width, height), full_page=False)

    # picking frameworks changes the columns, and the choice goes into the link to the view
    page.check("#frameworks input[value=jax]")
    page.uncheck("#frameworks input[value=tensorflow]")
    assert page.evaluate(SHOWN_FRAMEWORKS) == ["pytorch", "jax"]
    assert "import jax" in page.locator("section#imports .sec-body").inner_text()
    assert "import tensorflow" not in page.locator("section#imports .sec-body").inner_text()
    assert page.locator("#permalink").get_attribute("href").startswith("?fw=pytorch,jax")
    assert page.evaluate(EMPTY_CONCEPT_CELLS) == []

    # the search reaches a framework that is not shown; its hit shows the framework and the line
    hidden = having[-1]
    line = only_in(hidden, task)
    page.fill("#search", line)
    hit = page.locator("#hits .hit[data-fws~='{}']".format(hidden.key)).first
    assert hit.is_visible() and hit.inner_text().startswith(hidden.label)
    hit.click()
    assert page.locator("#frameworks input[value={}]".format(hidden.key)).is_checked()
    assert hidden.key in page.evaluate(SHOWN_FRAMEWORKS)
    found = page.locator(".l.found")
    assert found.count() == 1 and line in found.inner_text()
    where = found.bounding_box()
    assert where and 0 <= where["y"] < height, where
    assert page.evaluate(PAGE_SCROLLS) is False and page.evaluate(TOO_WIDE) == []
    assert errors == []
    print("browser check of {} at {}x{}: {:.1f} s".format(task, width, height, time.monotonic() - started))


def test_rosetta_page_keeps_its_heads_in_view_compares_and_shows_every_framework(browser, written, tmp_path):
    page, errors = open_page(browser, written["cnn"], 1440, 900)
    shared = page.locator("section#parameters .view > .cell")  # the cell PyTorch and TensorFlow share: once, across
    assert shared.count() == 1 and shared.locator(".badge").inner_text() == "same in both"
    assert shared.bounding_box()["width"] > 1000

    # scrolled into a long section, the header (with the column heads) and the section's name stay in view
    tallest = page.evaluate("""() => {
        const section = Array.from(document.querySelectorAll("main section")).sort((a, b) => b.offsetHeight - a.offsetHeight)[0];
        window.scrollTo(0, section.offsetTop - document.querySelector("header").offsetHeight + 250);
        return section.id; }""")
    header, title, section = box(page, "header"), box(page, "section#{} > h2".format(tallest)), box(page, "#" + tallest)
    assert header["y"] == 0 and page.locator(".colhead[data-fw='pytorch']").is_visible()
    below_header = header["y"] + header["height"]
    assert section["y"] < below_header - 200 and below_header - 1 <= title["y"] < 900 - title["height"], tallest

    # differences against the first column: PyTorch and JAX build their models differently, and share the parameters
    page.check("#frameworks input[value=jax]")
    page.uncheck("#frameworks input[value=tensorflow]")
    page.check("#diff")
    page.evaluate("window.scrollTo(0, 0)")
    assert page.locator("table.split td.code.chg").count() > 0
    assert page.locator("table.split td.code.add, table.split td.code.del").count() > 0
    same = page.locator("section#parameters details.same")
    assert same.locator("summary").inner_text().startswith("identical in PyTorch and JAX")
    assert not same.locator("pre").first.is_visible()
    assert page.evaluate(PAGE_SCROLLS) is False and page.evaluate(TOO_WIDE) == []
    screenshot(page, tmp_path, "rosetta-cnn-differences.png", full_page=False)
    same.locator("summary").click()
    assert same.locator("pre").first.is_visible()

    # every framework at once: more columns than fit are stacked, each cell labelled; still no scroll bar
    page.uncheck("#diff")
    for framework in catalog.FRAMEWORKS:
        page.check("#frameworks input[value={}]".format(framework.key))
    assert page.evaluate("() => document.body.classList.contains('wrapped')")
    assert page.locator("section#model .cellrow .view > .cell .fwlabel:visible").count() > 0
    assert set(page.evaluate(SHOWN_FRAMEWORKS)) == {f.key for f in catalog.FRAMEWORKS}
    assert page.evaluate(PAGE_SCROLLS) is False and page.evaluate(TOO_WIDE) == []
    assert page.evaluate(EMPTY_CONCEPT_CELLS) == []
    page.set_viewport_size({"width": 1024, "height": 768})
    assert page.evaluate(PAGE_SCROLLS) is False and page.evaluate(TOO_WIDE) == []
    assert errors == []
    print("Rosetta screenshots of cnn are in {}".format(tmp_path))
