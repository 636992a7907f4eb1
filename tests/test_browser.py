"""The generated pages in a real browser: Debian's headless Chromium, driven by Playwright.

`python3 run_all.py test` installs Chromium where it can (root with apt-get); Playwright never
downloads a browser of its own here. Screenshots (the report, and each Rosetta page's default view and
differences mode) stay in pytest's temporary folder, whose path the tests print; pytest keeps the last runs'.
"""

import time

import pytest

from common import tasks
from runner import catalog
from runner.report import rosetta_pages, table
from runner.run.browser import find_browser

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    chromium = find_browser()
    if chromium is None:
        pytest.fail("no Chromium: `python3 run_all.py test` installs Debian's chromium when run as root; "
                    "elsewhere install it or set ROSETTA_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        yield instance
        instance.close()


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


# What a reader must be able to count on at 1440 x 900, checked in the page's own terms (see runner/report/rosetta_pages.py).
TOO_WIDE = """() => Array.from(document.querySelectorAll("main .view pre, main .view td.code, main .view .cell"))
  .filter(e => e.offsetParent !== null)
  .filter(e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right >
                                                   e.closest(".view").getBoundingClientRect().right + 1)
  .map(e => e.closest("section").id + ": " + e.textContent.slice(0, 60))"""
PAGE_SCROLLS = "() => document.documentElement.scrollWidth > document.documentElement.clientWidth"


def box(page, selector):
    return page.locator(selector).first.bounding_box()


EVERY_FRAMEWORK = [task for task in tasks.TASKS if not any(task in f.lacks for f in catalog.FRAMEWORKS)]
SOME_FRAMEWORKS = [task for task in tasks.TASKS if task not in EVERY_FRAMEWORK]


@pytest.mark.parametrize("task", SOME_FRAMEWORKS)
def test_a_page_of_a_task_some_frameworks_lack_shows_those_that_have_it(browser, task, tmp_path):
    from test_rosetta import notebook_tags

    (path,) = [p for p in rosetta_pages.write_pages(tmp_path) if p.stem == task]
    page, errors = open_page(browser, path, 1440, 900)
    having = [f.key for f in catalog.FRAMEWORKS if task not in f.lacks]
    shown = page.locator(".colhead[data-fw]:visible")
    assert shown.evaluate_all("heads => heads.map(h => h.dataset.fw)") == having[:2]  # the first two that have it
    assert page.locator("#pick-1 option").evaluate_all("options => options.map(o => o.value)") == having
    assert page.evaluate(PAGE_SCROLLS) is False and page.evaluate(TOO_WIDE) == []
    for tag in notebook_tags(task):
        assert page.locator("section#{} > h2".format(tag)).inner_text() == tasks.SECTION_TITLES[tag], tag
    screenshot(page, tmp_path, "rosetta-{}-default.png".format(task), full_page=False)
    assert errors == []


@pytest.mark.parametrize("task", EVERY_FRAMEWORK)
def test_rosetta_page_reads_at_1440_and_compares_frameworks(browser, task, tmp_path):
    from test_rosetta import notebook_tags

    (path,) = [p for p in rosetta_pages.write_pages(tmp_path) if p.stem == task]
    page, errors = open_page(browser, path, 1440, 900)
    shown = page.locator(".colhead[data-fw]:visible")
    assert shown.evaluate_all("heads => heads.map(h => h.dataset.fw)") == ["pytorch", "tensorflow"]  # the default pair
    assert page.evaluate(PAGE_SCROLLS) is False
    assert page.evaluate(TOO_WIDE) == []
    for tag in notebook_tags(task):  # every section of the notebooks, titled by common/tasks/task.py
        assert page.locator("section#{} > h2".format(tag)).inner_text() == tasks.SECTION_TITLES[tag], tag
    shared = page.locator("section#parameters .view > .cell")  # the cell PyTorch and TensorFlow share: once, across
    assert shared.count() == 1 and shared.locator(".badge").inner_text() == "same in both"
    assert shared.bounding_box()["width"] > 1000
    screenshot(page, tmp_path, "rosetta-{}-default.png".format(task), full_page=False)

    # scrolled into a long section, the header (with the column heads) and the section's name stay in view
    tallest = page.evaluate("""() => {
        const section = Array.from(document.querySelectorAll("main section")).sort((a, b) => b.offsetHeight - a.offsetHeight)[0];
        window.scrollTo(0, section.offsetTop - document.querySelector("header").offsetHeight + 250);
        return section.id; }""")
    header, title, section = box(page, "header"), box(page, "section#{} > h2".format(tallest)), box(page, "#" + tallest)
    assert header["y"] == 0 and page.locator(".colhead[data-fw='pytorch']").is_visible()
    below_header = header["y"] + header["height"]
    assert section["y"] < below_header - 200 and below_header - 1 <= title["y"] < 900 - title["height"], tallest

    # the right-hand column follows its picker, and the choice goes into the link to the view
    page.select_option("#pick-1", "jax")
    assert shown.evaluate_all("heads => heads.map(h => h.dataset.fw)") == ["pytorch", "jax"]
    assert "import jax" in page.locator("section#imports .sec-body").inner_text()
    assert "tensorflow" not in page.locator("section#imports .sec-body").inner_text()
    assert page.locator("#permalink").get_attribute("href").startswith("?left=pytorch&right=jax")

    # differences: PyTorch and JAX build their models differently, and share the parameters cell
    page.check("#diff")
    page.evaluate("window.scrollTo(0, 0)")
    assert page.locator("section#model table.split td.code.chg").count() > 0
    assert page.locator("section#model table.split td.code.add, section#model table.split td.code.del").count() > 0
    assert page.locator("section#model .sec-note").inner_text().endswith("lines")
    same = page.locator("section#parameters details.same")
    assert same.locator("summary").inner_text().startswith("identical in PyTorch and JAX")
    assert not same.locator("pre").is_visible()
    assert page.evaluate(PAGE_SCROLLS) is False and page.evaluate(TOO_WIDE) == []
    screenshot(page, tmp_path, "rosetta-{}-differences.png".format(task), full_page=False)
    same.locator("summary").click()
    assert same.locator("pre").is_visible()

    # three columns, and a narrower screen: still no scroll bar
    page.select_option("#pick-2", "cntk")
    page.set_viewport_size({"width": 1024, "height": 768})
    assert page.locator("section#model .cellrow[data-kind=code] .view > .cell").count() == 3
    assert page.evaluate(PAGE_SCROLLS) is False and page.evaluate(TOO_WIDE) == []
    assert errors == []
    print("Rosetta screenshots of {} are in {}".format(task, tmp_path))
