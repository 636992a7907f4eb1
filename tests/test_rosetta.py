"""The Rosetta view: every section of every notebook side by side, and the committed pages kept current."""

import json
import re

import pytest

from common import tasks
from runner import catalog, rosetta


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_page_shows_every_framework_and_section(task):
    page = rosetta.page(task)
    labels = [label for label, _ in rosetta.notebooks_for(task)]
    assert labels == [f.label for f in catalog.FRAMEWORKS]
    for column, label in enumerate(labels):
        assert 'value="fw-{}" checked> {}'.format(column, label) in page
    for tag in tasks.TASKS[task].sections:
        assert page.count('data-section="{}"'.format(tag)) == len(labels), tag
    assert "<script>" in page and 'class="highlight"' in page


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_every_section_found_in_the_notebooks_has_its_own_title(task):
    """The row titles come from the tags the notebooks carry, so a tag without a title cannot pass unnamed."""
    tags = set()
    for _, path in rosetta.notebooks_for(task):
        tags |= set(rosetta.sections_of(path))
    page = rosetta.page(task)
    for tag in tags:
        assert '<td class="section">{}</td>'.format(rosetta.SECTION_TITLES[tag]) in page, tag
    assert page.count('<td class="section">Introduction</td>') == 1  # the title cells only


def test_a_missing_section_is_an_error(tmp_path, monkeypatch):
    notebook = json.loads((catalog.NOTEBOOKS / "PyTorch_CNN.ipynb").read_text())
    notebook["cells"] = [c for c in notebook["cells"] if "evaluation" not in c["metadata"].get("tags", [])]
    (tmp_path / "PyTorch_CNN.ipynb").write_text(json.dumps(notebook))
    monkeypatch.setattr(catalog, "NOTEBOOKS", tmp_path)
    with pytest.raises(rosetta.RosettaError, match=r"PyTorch \(PyTorch_CNN.ipynb\) lacks evaluation"):
        rosetta.page("cnn")


def test_committed_pages_are_current(tmp_path):
    written = rosetta.write_pages(tmp_path)
    for path in written:
        committed = rosetta.DOCS_DIR / path.name
        assert committed.exists() and committed.read_text() == path.read_text(), (
            "{} is stale: run `python3 run_all.py rosetta` and commit docs/rosetta".format(committed))


def test_pages_are_deterministic():
    assert rosetta.page("rnn") == rosetta.page("rnn")
    assert not re.search(r"20\d\d-\d\d-\d\d", rosetta.page("rnn"))
