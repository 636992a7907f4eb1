"""The Rosetta pages: every framework and every section found in the notebooks, titled by common/tasks/task.py;
shared cells stored once; errors for a missing section or an untitled tag; the committed pages kept current.

The expected sections come from the notebooks' JSON, read here, not from the page generator's own reading.
"""

import collections
import html
import json
import os
import re
from pathlib import Path

import pytest

from common import tasks
from runner import catalog
from runner.report import rosetta_pages

SECTION = re.compile(r'<section class="sec" id="([^"]+)" data-section="\1"><h2 class="sec-title"><a href="#\1">([^<]*)</a>')
VARIANT = re.compile(r'<div class="variant( none)?" data-fws="([^"]*)" data-lines="\d+">')


def notebook_files(task):
    """(framework, path) of every notebook of `task` in notebooks/."""
    found = [(f, catalog.notebook_path(f, task)) for f in catalog.FRAMEWORKS]
    return [(f, path) for f, path in found if path.exists()]


def notebook_cells(path):
    """(tag, cell type, source) of every cell, read from the notebook's JSON: a cell's first tag, or for the
    untagged cells before the first tagged one "title" (later untagged cells stay in the section before them)."""
    tag, cells = "title", []
    for cell in json.loads(Path(path).read_text())["cells"]:
        tag = (cell["metadata"].get("tags") or [tag])[0]
        cells.append((tag, cell["cell_type"], "".join(cell["source"])))
    return cells


def notebook_tags(task):
    """Every section tag the notebooks of `task` carry, in order of first appearance."""
    tags = []
    for _, path in notebook_files(task):
        for tag, _, _ in notebook_cells(path):
            if tag not in tags:
                tags.append(tag)
    return tags


def page_sections(page):
    """{section id: (title, the section's HTML)} of a Rosetta page."""
    sections = {}
    for chunk in page.split("<section ")[1:]:
        match = SECTION.match("<section " + chunk)
        assert match, chunk[:200]
        sections[match.group(1)] = (html.unescape(match.group(2)), chunk.split("</section>")[0])
    return sections


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_page_lists_every_framework_with_a_notebook_and_links_its_source(task):
    page = rosetta_pages.page(task)
    found = notebook_files(task)
    # every framework has every task it does not declare it lacks
    assert [f.key for f, _ in found] == [f.key for f in catalog.FRAMEWORKS if task not in f.lacks]
    for framework, path in found:
        assert page.count('<option value="{}">{}</option>'.format(framework.key, framework.label)) == 3  # each picker
        assert '<div class="colhead" data-fw="{}" hidden><a class="source" href="../../notebooks/{}"'.format(
            framework.key, path.name) in page
    assert "<script>" in page and 'class="highlight"' in page


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_every_section_found_in_the_notebooks_has_its_row_and_its_title(task):
    """The sections come from the tags in the notebooks' JSON; each row's title from tasks.SECTION_TITLES."""
    sections = page_sections(rosetta_pages.page(task))
    expected = notebook_tags(task)
    assert set(tasks.TASKS[task].sections) <= set(expected)
    assert list(sections) == expected  # in the notebooks' order
    for tag in expected:
        assert sections[tag][0] == tasks.SECTION_TITLES[tag], tag
    assert [title for title, _ in sections.values()].count("Introduction") == 1


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_cells_the_notebooks_share_are_stored_once(task):
    """A cell is stored once with the frameworks whose notebooks have the same text: the parameters cell, that
    differs only in Keras 3's and Keras 2's, three times; every framework's cells are in the page, in its section."""
    sections = page_sections(rosetta_pages.page(task))
    cells = {f.key: notebook_cells(path) for f, path in notebook_files(task)}
    for tag in notebook_tags(task):
        for kind in ("markdown", "code"):
            sharing = collections.OrderedDict()  # the k-th cell of this kind in the section: text -> frameworks
            for key, notebook in cells.items():
                for index, source in enumerate(s for t, k, s in notebook if t == tag and k == kind):
                    sharing.setdefault((index, source), []).append(key)
            rows = [row for row in sections[tag][1].split('<div class="cellrow" data-kind="')[1:]
                    if row.startswith(kind + '"')]
            stored = [fws.split() for row in rows for none, fws in VARIANT.findall(row) if not none]
            assert sorted(stored) == sorted(sharing.values()), (tag, kind)
    parameters = page_sections(rosetta_pages.page(task))["parameters"][1]
    having = [f.key for f in catalog.FRAMEWORKS if task not in f.lacks]
    with_backend = [key for key in ("keras", "keras2") if key in having]  # their parameters cell adds `backend`
    expected = [" ".join(key for key in having if key not in with_backend)] + with_backend
    assert [fws for _, fws in VARIANT.findall(parameters)][-len(expected):] == expected


def test_a_cell_the_same_everywhere_is_written_once():
    results = page_sections(rosetta_pages.page("cnn"))["results"][1]
    everyone = " ".join(f.key for f in catalog.FRAMEWORKS)
    assert [fws for _, fws in VARIANT.findall(results)] == [everyone, everyone]  # its markdown cell and its code cell
    assert results.count("write_training_result") == 2  # once in the markdown cell, once in the code: for all frameworks


def test_a_missing_section_is_an_error(tmp_path, monkeypatch):
    notebook = json.loads((catalog.NOTEBOOKS / "PyTorch_CNN.ipynb").read_text())
    notebook["cells"] = [c for c in notebook["cells"] if "evaluation" not in c["metadata"].get("tags", [])]
    (tmp_path / "PyTorch_CNN.ipynb").write_text(json.dumps(notebook))
    monkeypatch.setattr(catalog, "NOTEBOOKS", tmp_path)
    with pytest.raises(rosetta_pages.RosettaError, match=r"PyTorch \(PyTorch_CNN.ipynb\) lacks evaluation"):
        rosetta_pages.page("cnn")


def test_a_tag_without_a_title_is_an_error(tmp_path, monkeypatch):
    """A new tag in a notebook cannot go unnamed: the page names the notebook and asks for a title."""
    notebook = json.loads((catalog.NOTEBOOKS / "JAX_RNN.ipynb").read_text())
    notebook["cells"].append({"cell_type": "code", "execution_count": None, "metadata": {"tags": ["plots"]},
                              "outputs": [], "source": ["print('a new section')\n"]})
    (tmp_path / "JAX_RNN.ipynb").write_text(json.dumps(notebook))
    monkeypatch.setattr(catalog, "NOTEBOOKS", tmp_path)
    with pytest.raises(rosetta_pages.RosettaError, match=r"JAX \(JAX_RNN.ipynb\): section tag 'plots' has no title"):
        rosetta_pages.page("rnn")
    monkeypatch.setitem(tasks.SECTION_TITLES, "plots", "Plots")
    assert page_sections(rosetta_pages.page("rnn"))["plots"][0] == "Plots"  # titled, it gets its row, after the others


def test_module_names_the_differences_mode_may_count_as_one():
    """The names a notebook binds by importing its framework, read from its code: nothing else."""
    by_key = {f.key: f for f in catalog.FRAMEWORKS}
    assert rosetta_pages.aliases_of(catalog.notebook_path(by_key["pytorch"], "rnn"), "pytorch") == ["nn", "pytorch", "torch"]
    mxnet = rosetta_pages.aliases_of(catalog.notebook_path(by_key["mxnet"], "rnn"), "mxnet")
    assert {"mx", "gluon", "autograd", "mxnet"} <= set(mxnet) and "np" not in mxnet and "datasets" not in mxnet
    assert "C" in rosetta_pages.aliases_of(catalog.notebook_path(by_key["cntk"], "cnn"), "cntk")


def test_committed_pages_are_current():
    for task in tasks.TASKS:
        committed = rosetta_pages.DOCS_DIR / (task + ".html")
        assert committed.exists() and committed.read_text() == rosetta_pages.page(task), (
            "{} is stale: run `python3 run_all.py rosetta` and commit docs/rosetta".format(committed))


def test_pages_written_elsewhere_link_to_the_notebooks(tmp_path):
    (written, *_) = rosetta_pages.write_pages(tmp_path / "run" / "rosetta")
    link = re.search(r'class="source" href="([^"]+)"', written.read_text()).group(1)
    assert Path(os.path.normpath(str(written.parent / link))) == catalog.notebook_path(catalog.FRAMEWORKS[0], written.stem)


def test_pages_are_deterministic():
    assert rosetta_pages.page("rnn") == rosetta_pages.page("rnn")
    assert not re.search(r"20\d\d-\d\d-\d\d", rosetta_pages.page("rnn"))
    assert not re.search(r"(src|href)=\"(https?:)?//", rosetta_pages.page("rnn"))  # nothing fetched from elsewhere
