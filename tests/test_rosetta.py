"""The Rosetta pages and the concept index: every framework and every section found in the notebooks, titled by
common/tasks/task.py; every cell in its section, a concept's cells in the concept's row, titled and anchored; shared
cells stored once; the helpers a cell calls shown beside it; the task's introduction once; errors for a missing section
or an untitled tag; on the index, every concept of every framework as code, a reason or a note; every link resolving;
the committed pages kept current.

What each page must hold is read here from the notebooks' JSON, not from the page generator's own reading.
"""

import html
import json
import os
import re
from pathlib import Path

import pytest

from common import concepts, tasks
from runner import catalog
from runner.report import rosetta_pages

SECTION = re.compile(r'<section class="sec" id="([^"]+)" data-section="\1"><h2 class="sec-title"><a href="#\1">([^<]*)</a>')
ROW = re.compile(r'<div class="cellrow" data-kind="(code|markdown)"(?: data-concept="([^"]+)")?>')
VARIANT = re.compile(r'<div class="variant( none)?" data-fws="([^"]*)" data-lines="\d+">')
SRC = re.compile(r'<pre class="highlight src">(.*?)</pre>', re.S)
TAG = re.compile(r"<[^>]+>")
TAG_PREFIX = "concept:"


def notebook_files(task):
    """(framework, path) of every notebook of `task` in notebooks/."""
    found = [(f, catalog.notebook_path(f, task)) for f in catalog.FRAMEWORKS]
    return [(f, path) for f, path in found if path.exists()]


def notebook_cells(path):
    """(section, [concepts], cell type, source) of every cell, read from the notebook's JSON: the section is a cell's
    first tag that names no concept, or for the untagged cells before the first tagged one "title" (later untagged
    cells stay in the section before them); the concepts are its `concept:<name>` tags."""
    section, cells = "title", []
    for cell in json.loads(Path(path).read_text())["cells"]:
        tags = cell["metadata"].get("tags") or []
        sections = [tag for tag in tags if not tag.startswith(TAG_PREFIX)]
        section = sections[0] if sections else section
        names = [tag[len(TAG_PREFIX):] for tag in tags if tag.startswith(TAG_PREFIX)]
        cells.append((section, names, cell["cell_type"], "".join(cell["source"])))
    return cells


def notebook_tags(task):
    """Every section tag the notebooks of `task` carry, in order of first appearance."""
    tags = []
    for _, path in notebook_files(task):
        for tag, _, _, _ in notebook_cells(path):
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


def text(fragment):
    return html.unescape(TAG.sub("", fragment))


def page_rows(section_html):
    """[(kind, concept or None, [(framework keys, whether a note, body HTML)])] of a section's rows, in order."""
    rows = []
    for chunk in section_html.split('<div class="cellrow"')[1:]:
        match = ROW.match('<div class="cellrow"' + chunk)
        body = chunk.split('<div class="view"></div></div>')[0]
        variants = []
        parts = VARIANT.split(body)[1:]
        for none, fws, content in zip(parts[0::3], parts[1::3], parts[2::3]):
            variants.append((fws.split(), bool(none), content))
        rows.append((match.group(1), match.group(2), variants))
    return rows


def code_of(body):
    """The notebook code in a variant's HTML (each cell's lines, not the helpers'), one string per cell."""
    return [text(pre.replace('</span><span class="l">', "\n")) for pre in SRC.findall(body)]


def cleaned(source):
    return source.strip("\n")


def expected_rows(cells):
    """{row key: [cells]} of one section of one notebook, by the pages' rule: a code cell tagged with concepts in its
    first concept's row; a markdown cell that is not the section's first, just before such a cell, in that row too;
    the k-th other cell of a kind in row (kind, k)."""
    rows, counts = {}, {}
    for index, (_, names, kind, source) in enumerate(cells):
        following = cells[index + 1] if index + 1 < len(cells) else None
        if kind == "code" and names:
            key = ("concept", names[0])
        elif kind == "markdown" and index and following and following[2] == "code" and following[1]:
            key = ("concept", following[1][0])
        else:
            key = (kind, counts.get(kind, 0))
            counts[kind] = key[1] + 1
        rows.setdefault(key, []).append((names, kind, source))
    return rows


@pytest.fixture(scope="module")
def pages():
    """Every task page and the index, built once: {name: HTML}."""
    built = {task: rosetta_pages.page(task) for task in tasks.TASKS}
    built["index"] = rosetta_pages.index_page()
    return built


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_page_lists_every_framework_with_a_notebook_and_links_its_source(task, pages):
    page = pages[task]
    found = notebook_files(task)
    # every framework has every task it does not declare it lacks
    assert [f.key for f, _ in found] == [f.key for f in catalog.FRAMEWORKS if task not in f.lacks]
    for framework, path in found:
        assert page.count('<input type="checkbox" name="fw" value="{}"> {}</label>'.format(
            framework.key, framework.label)) == 1  # a checkbox each
        assert '<div class="colhead" data-fw="{}" hidden><a class="source" href="../../notebooks/{}"'.format(
            framework.key, path.name) in page
    assert "<script>" in page and 'class="highlight' in page and 'id="search"' in page
    assert '<a href="index.html">Concepts</a>' in page  # back to the concept index


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_every_section_found_in_the_notebooks_has_its_row_and_its_title(task, pages):
    """The sections come from the tags in the notebooks' JSON; each row's title from tasks.SECTION_TITLES."""
    sections = page_sections(pages[task])
    expected = notebook_tags(task)
    assert set(tasks.TASKS[task].sections) <= set(expected)
    assert list(sections) == expected  # in the notebooks' order
    for tag in expected:
        assert sections[tag][0] == tasks.SECTION_TITLES[tag], tag
    assert [title for title, _ in sections.values()].count("Introduction") == 1


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_every_cell_is_in_its_section_and_row_and_stored_once(task, pages):
    """Each row stores each framework once (a text the frameworks share, once); a concept's code cells are in its
    row in their framework's column, whole; the other cells by their position in the section."""
    sections = page_sections(pages[task])
    cells = {f.key: notebook_cells(path) for f, path in notebook_files(task)}
    for tag in notebook_tags(task):
        rows = page_rows(sections[tag][1])
        for _, concept, variants in rows:
            keys = [key for fws, _, _ in variants for key in fws]
            assert sorted(keys) == sorted(cells) and len(set(keys)) == len(keys), (tag, concept)
            assert len({body for _, _, body in variants}) == len(variants), (tag, concept)  # each text once
        for key, notebook in cells.items():
            expected = expected_rows([cell for cell in notebook if cell[0] == tag])
            by_position = {"code": [], "markdown": []}
            for kind, concept, variants in rows:
                (none, body), = [(none, body) for fws, none, body in variants if key in fws]
                if concept is None:
                    by_position[kind].append((none, body))
                    continue
                found = expected.get(("concept", concept), [])
                assert none == (not found), (key, tag, concept)
                code = [cleaned(source) for _, cell_kind, source in found if cell_kind == "code"]
                assert code_of(body) == code, (key, tag, concept)
            for kind in ("code", "markdown"):
                mine = [cells_ for (row_kind, _), cells_ in expected.items() if row_kind == kind]
                shown = by_position[kind]
                assert len(shown) >= len(mine), (key, tag, kind)
                for (none, body), found in zip(shown, mine):
                    assert not none, (key, tag, kind)
                    if kind == "code":
                        assert code_of(body) == [cleaned(found[0][2])], (key, tag)
                    else:
                        first = re.sub(r"[^A-Za-z0-9]", "", re.sub(r"\]\([^)]*\)", "", found[0][2].split("\n")[0]))
                        assert first in re.sub(r"[^A-Za-z0-9]", "", text(body)), (key, tag)
                assert all(none for none, _ in shown[len(mine):]), (key, tag, kind)


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_each_concept_row_is_titled_and_anchored(task, pages):
    """Every (section, concept) a code cell is tagged with has its anchor, <section>--<concept>, once; the row of a
    concept is titled by the registry and links to the concept index."""
    page = pages[task]
    places = {(section, name) for _, path in notebook_files(task) for section, names, kind, _ in notebook_cells(path)
              if kind == "code" for name in names}
    for section, name in places:
        assert page.count(' id="{}--{}"'.format(section, name)) == 1, (section, name)
    for section, (_, section_html) in page_sections(page).items():
        for chunk in section_html.split('<div class="cellrow"')[1:]:
            concept = ROW.match('<div class="cellrow"' + chunk).group(2)
            if concept is None:
                assert '<h3 class="concept">' not in chunk.split('<div class="variant')[0]
                continue
            head = chunk.split('<div class="variant')[0]
            assert 'href="#{}--{}">{}'.format(section, concept, html.escape(concepts.CONCEPTS[concept].title)) in head
            assert 'href="index.html?task={}#{}"'.format(task, concept) in head


def test_shared_cells_are_stored_once():
    """The parameters cell is one text for every framework but Keras 3 and Keras 2 (which add `backend`), the result
    record's code one text for every framework."""
    for task in tasks.TASKS:
        rows = page_rows(page_sections(rosetta_pages.page(task))["parameters"][1])
        having = [f.key for f in catalog.FRAMEWORKS if task not in f.lacks]
        with_backend = [key for key in ("keras", "keras2") if key in having]
        code = [fws for kind, _, variants in rows if kind == "code" for fws, none, _ in variants if not none]
        assert [key for key in having if key not in with_backend] in code and all([key] in code for key in with_backend)
    results = page_rows(page_sections(rosetta_pages.page("cnn"))["results"][1])
    everyone = [f.key for f in catalog.FRAMEWORKS]
    assert [[fws for fws, _, _ in variants] for kind, _, variants in results if kind == "code"] == [[everyone]]


def untag(notebook):
    """The notebook's JSON with its concept tags taken off: as before it was cut by concept."""
    for cell in notebook["cells"]:
        tags = [tag for tag in cell["metadata"].get("tags", []) if not tag.startswith(TAG_PREFIX)]
        if tags:
            cell["metadata"]["tags"] = tags
        else:
            cell["metadata"].pop("tags", None)
    return notebook


def half_cut(tmp_path, monkeypatch, tagging):
    """The CNN notebooks of PyTorch, TensorFlow and JAX in tmp_path, untagged, then tagged by `tagging`:
    {framework key: [(section, text, concepts)]}, the concepts given to the first code cell of the section (text None)
    or to every code cell with the text in it (section None: in any section)."""
    for key, label in (("pytorch", "PyTorch"), ("tensorflow", "TensorFlow"), ("jax", "JAX")):
        notebook = untag(json.loads((catalog.NOTEBOOKS / "{}_CNN.ipynb".format(label)).read_text()))
        for section, needle, names in tagging.get(key, []):
            code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code" and
                    (section is None or (cell["metadata"].get("tags") or [None])[0] == section)]
            chosen = code[:1] if needle is None else [cell for cell in code if needle in "".join(cell["source"])]
            assert chosen, (key, section, needle)
            for cell in chosen:
                own = [tag for tag in cell["metadata"].get("tags", []) if not tag.startswith(TAG_PREFIX)]
                if not own:  # an untagged cell is in the section of the tagged cell before it
                    own = [[c for c in notebook["cells"][:notebook["cells"].index(cell)]
                            if c["metadata"].get("tags")][-1]["metadata"]["tags"][0]]
                cell["metadata"]["tags"] = own[:1] + [TAG_PREFIX + name for name in names]
        (tmp_path / "{}_CNN.ipynb".format(label)).write_text(json.dumps(notebook))
    monkeypatch.setattr(catalog, "NOTEBOOKS", tmp_path)


def test_a_half_cut_set_of_notebooks_reads_by_concept_and_by_position(tmp_path, monkeypatch):
    """Tagged cells meet in their concept's row, the untagged by position; a framework without the concept's cell
    says where it is, why it has none (common/concepts LACKS), or that none is tagged yet."""
    half_cut(tmp_path, monkeypatch, {"pytorch": [("training", None, ["loss"])],
                                     "tensorflow": [("training", None, ["training-step", "loss"])],
                                     "jax": [("model", None, ["model"])]})
    monkeypatch.setattr(concepts, "lacks", lambda fw, concept, task: "its loss is the model's last layer, which "
                        "no cell computes apart" if (fw, concept) == ("jax", "loss") else None)
    page = rosetta_pages.page("cnn")
    training = page_rows(page_sections(page)["training"][1])
    (step,) = [variants for _, concept, variants in training if concept == "training-step"]
    bodies = {key: (none, body) for fws, none, body in step for key in fws}
    assert not bodies["tensorflow"][0] and bodies["pytorch"][0] and bodies["jax"][0]
    assert "No cell tagged <code>concept:training-step</code> yet." in bodies["pytorch"][1]
    (loss,) = [variants for _, concept, variants in training if concept == "loss"]
    bodies = {key: (none, body) for fws, none, body in loss for key in fws}
    assert not bodies["pytorch"][0]
    assert 'In <a href="#training--training-step">the cell of Training step, in Training step and loop</a>' in (
        bodies["tensorflow"][1])
    assert "its loss is the model&#x27;s last layer" in bodies["jax"][1] and 'class="note reason"' in bodies["jax"][1]
    assert page.count(' id="training--loss"') == 1 and page.count(' id="training--training-step"') == 1
    model = page_rows(page_sections(page)["model"][1])
    assert [concept for _, concept, _ in model if concept] == ["model"]
    positional = [variants for kind, concept, variants in model if kind == "code" and concept is None]
    assert positional and {"pytorch", "tensorflow"} <= {key for fws, none, _ in positional[0] if not none for key in fws}


def test_a_cell_shows_the_source_of_the_helpers_it_calls(tmp_path, monkeypatch):
    """PyTorch's cells that call frameworks/pytorch.py's autocast and grad_scaler: their source is on the page
    beside them, with torch.autocast and torch.amp.GradScaler in it."""
    half_cut(tmp_path, monkeypatch, {"pytorch": [(None, "autocast(", ["mixed-precision"]),
                                                 (None, "grad_scaler(", ["mixed-precision"])]})
    page = rosetta_pages.page("cnn")
    body = "".join(body for _, section in page_sections(page).values() for _, concept, variants in page_rows(section)
                   if concept == "mixed-precision" for fws, _, body in variants if "pytorch" in fws)
    assert "<summary>frameworks/pytorch.py: autocast" in body and "<summary>frameworks/pytorch.py: grad_scaler" in body
    helpers = text("".join(part.split("</details>")[0] for part in body.split("<details")[1:]))
    assert "torch.autocast(" in helpers and "torch.amp.GradScaler" in helpers
    assert '<span class="uses">torch.autocast</span>' in body  # the call the concept names, in the summary


def test_the_task_introduction_is_shown_once_and_its_links_still_resolve(tmp_path, monkeypatch):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "results.md").write_text("# Results\n")
    (tmp_path / "tasks" / "cnn.md").write_text("# The CNN\n\nWhat every notebook does; [the results](../results.md).\n")
    monkeypatch.setattr(rosetta_pages, "TASK_DOCS", tmp_path / "tasks")
    out = tmp_path / "out"
    page = rosetta_pages.page("cnn", out)
    title = page_sections(page)["title"][1]
    assert page.count('<div class="intro prose">') == 1 and '<div class="intro prose"><h1>The CNN</h1>' in title
    (link,) = re.findall(r'<a href="([^"]+)">the results</a>', title)
    assert (out / link).resolve() == (tmp_path / "results.md").resolve()
    assert 'class="intro' not in rosetta_pages.page("rnn", out)  # no docs/tasks/rnn.md: no introduction


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


def index_cells(page):
    """{(concept, framework): [(tasks, entry HTML)]} of the concept index."""
    cells = {}
    for chunk in page.split('<section class="crow" id="')[1:]:
        concept = chunk.split('"', 1)[0]
        for cell in chunk.split('<div class="fwcell" data-fw="')[1:]:
            framework = cell.split('"', 1)[0]
            entries = cell.split('<div class="entry" data-tasks="')[1:]
            cells[(concept, framework)] = [(entry.split('"', 1)[0].split(), entry) for entry in entries]
    return cells


def test_the_index_has_every_concept_of_every_framework_as_code_a_reason_or_a_note(pages):
    """A row per concept and a cell per framework; in it, for each task that has the concept, the code of the cells
    tagged with it in the framework's notebook, or the reason it has none (the catalog's for a task the framework
    lacks, common/concepts' for the concept), or the note that no cell is tagged yet."""
    cells = index_cells(pages["index"])
    assert list(dict.fromkeys(concept for concept, _ in cells)) == list(concepts.CONCEPTS)
    missing = []
    for concept in concepts.CONCEPTS.values():
        for framework in catalog.FRAMEWORKS:
            entries = cells[(concept.name, framework.key)]
            assert sorted(task for found, _ in entries for task in found) == sorted(concept.tasks)
            for task in concept.tasks:
                (entry,) = [entry for found, entry in entries if task in found]
                path = catalog.notebook_path(framework, task)
                code = [] if task in framework.lacks else [
                    cleaned(source) for _, names, kind, source in notebook_cells(path)
                    if kind == "code" and concept.name in names]
                if code:
                    assert code_of(entry) == code, (concept.name, framework.key, task)
                    assert 'href="../../notebooks/{}"'.format(path.name) in entry
                elif task in framework.lacks or concepts.lacks(framework.key, concept.name, task):
                    assert '<p class="note reason">' in entry and not code_of(entry), (concept.name, framework.key, task)
                else:
                    assert "No cell tagged <code>{}</code>".format(concept.tag) in entry, (concept.name, framework.key)
                    missing.append("{} {} {}".format(framework.key, task, concept.name))
    print("{} (framework, task, concept) without a tagged cell or a reason yet".format(len(missing)))


def test_links_resolve_to_files_and_anchors(tmp_path):
    """Every link of the index and of the task pages, written elsewhere, reaches a file, and its anchor an id there."""
    written = rosetta_pages.write_pages(tmp_path / "run" / "rosetta")
    assert [path.name for path in written] == [task + ".html" for task in tasks.TASKS] + ["index.html"]
    ids = {}
    broken = []
    for path in written:
        for href in re.findall(r'href="([^"]*)"', path.read_text()):
            href = html.unescape(href)
            assert not re.match(r"(https?:)?//", href), href  # nothing from elsewhere
            target, _, fragment = href.partition("#")
            target = target.split("?")[0]
            file = Path(os.path.normpath(str(path.parent / target))) if target else path
            if not file.exists():
                broken.append("{}: {}".format(path.name, href))
            elif fragment and file.suffix == ".html":
                if file not in ids:
                    ids[file] = set(re.findall(r' id="([^"]+)"', file.read_text()))
                if fragment not in ids[file]:
                    broken.append("{}: {}".format(path.name, href))
    assert broken == []


def test_the_index_links_each_task_page_and_each_concept_row_to_its_place(pages):
    index = pages["index"]
    for task in tasks.TASKS:
        assert '<a href="{}.html">'.format(task) in index
    entry = [entry for _, entry in index_cells(index)[("loss", "pytorch")]][0]
    assert re.search(r'href="cnn\.html\?fw=pytorch,tensorflow(#[a-z]+--loss)?"', entry)


def test_committed_pages_are_current(pages):
    for name, built in pages.items():
        committed = rosetta_pages.DOCS_DIR / (name + ".html")
        assert committed.exists() and committed.read_text() == built, (
            "{} is stale: run `python3 run_all.py rosetta` and commit docs/rosetta".format(committed))


def test_pages_written_elsewhere_link_to_the_notebooks(tmp_path):
    (written, *_) = rosetta_pages.write_pages(tmp_path / "run" / "rosetta")
    link = re.search(r'class="source" href="([^"]+)"', written.read_text()).group(1)
    assert Path(os.path.normpath(str(written.parent / link))) == catalog.notebook_path(catalog.FRAMEWORKS[0], written.stem)


def test_pages_are_deterministic(pages):
    for name, built in (("rnn", rosetta_pages.page("rnn")), ("index", rosetta_pages.index_page())):
        assert built == pages[name]
        assert not re.search(r"20\d\d-\d\d-\d\d", built)
        assert not re.search(r"(src|href)=\"(https?:)?//", built)  # nothing fetched from elsewhere
