"""The generated pages in a real browser: Debian's headless Chromium, driven by Playwright.

`python3 run_all.py test` installs Chromium where it can (root with apt-get); Playwright never
downloads a browser of its own here. Screenshots go to results/browser-test/ for people to look at.
"""

import shutil
import time

import pytest

from common import tasks
from runner import catalog, environments, report, rosetta

SCREENSHOTS = catalog.REPO / "results" / "browser-test"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    chromium = environments.find_browser()
    if chromium is None:
        pytest.fail("no Chromium: `python3 run_all.py test` installs Debian's chromium when run as root; "
                    "elsewhere install it or set ROSETTA_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        yield instance
        instance.close()


def open_page(browser, path):
    """Open a local page, collecting JavaScript errors and console errors."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, errors


def screenshot(page, run_dir, name):
    path = run_dir / name
    page.screenshot(path=str(path), full_page=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(str(path), str(SCREENSHOTS / name))
    assert path.stat().st_size > 10000


def test_results_report_shows_every_row(browser, tmp_path, monkeypatch):
    from test_runner import FIXTURE_FRAMEWORKS, FIXTURES

    monkeypatch.setattr(catalog, "NOTEBOOKS", FIXTURES)
    monkeypatch.setattr(catalog, "FRAMEWORKS", FIXTURE_FRAMEWORKS)
    from runner import cli

    started = time.monotonic()
    assert cli.main(["-f", "ok,raises", "-t", "cnn", "-p", "smoke", "--results", str(tmp_path), "-q"]) == 1
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    page, errors = open_page(browser, run_dir / "report.html")
    for record in report.load_records(run_dir):
        row = page.locator("tr", has_text=report.label(report.row(record))).first
        assert row.is_visible(), record["framework"]
    assert page.get_by_text("failed: ValueError: planted failure").is_visible()
    screenshot(page, run_dir, "report.png")
    page.get_by_role("link", name="OK", exact=True).click()  # the name links to the notebook rendered as HTML
    page.wait_for_load_state("load")
    assert page.url.endswith("OK_CNN.html") and page.get_by_text("fixture ran with").first.is_visible()
    assert errors == []  # on the report and on the notebook page: no script errors, nothing fetched from outside
    print("browser check of the report: {:.1f} s".format(time.monotonic() - started))


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_rosetta_page_shows_every_framework_and_its_picker_works(browser, task, tmp_path):
    (path,) = [p for p in rosetta.write_pages(tmp_path) if p.stem == task]
    page, errors = open_page(browser, path)
    labels = [label for label, _ in rosetta.notebooks_for(task)]
    for label in labels:
        assert page.locator("thead th[data-framework='{}']".format(label)).is_visible(), label
    for tag in tasks.TASKS[task].sections:
        assert page.locator("td[data-section='{}']".format(tag)).first.is_visible(), tag
    last = labels[-1]
    page.uncheck("#picker input >> nth={}".format(len(labels) - 1))
    assert not page.locator("thead th[data-framework='{}']".format(last)).is_visible()
    assert page.locator("thead th[data-framework='{}']".format(labels[0])).is_visible()
    page.check("#picker input >> nth={}".format(len(labels) - 1))
    assert page.locator("thead th[data-framework='{}']".format(last)).is_visible()
    screenshot(page, tmp_path, "rosetta-{}.png".format(task))
    assert errors == []
