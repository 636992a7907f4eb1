"""The notebooks read by concept (common/concepts): every (task, framework, concept) has a tagged code cell or a
declared reason, never both; every concept tag is a known concept of the notebook's task; every API the registry
names for a concept is in view, as code in the concept's cells or in the source of a helper they call, which the
pages show beside the call. Tags are read here from the notebooks' JSON."""

import json
import re

import pytest

from common import concepts, tasks
from runner import catalog
from runner.report import concept_cells

NOTEBOOKS = [(task, framework, catalog.notebook_path(framework, task)) for task in tasks.TASKS
             for framework in catalog.FRAMEWORKS if catalog.notebook_path(framework, task).exists()]
IDS = ["{}-{}".format(framework.key, task) for task, framework, _ in NOTEBOOKS]


def tagged_cells(path):
    """[(cell type, [tags], source)] of every cell, from the notebook's JSON."""
    return [(cell["cell_type"], cell["metadata"].get("tags") or [], "".join(cell["source"]))
            for cell in json.loads(path.read_text())["cells"]]


def test_the_registry_names_each_concept_once_with_its_title_and_tasks():
    assert len(concepts.CONCEPTS) >= 21
    for name, concept in concepts.CONCEPTS.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name) and concept.title and concept.what.endswith(".")
        assert concept.tasks and set(concept.tasks) <= set(tasks.TASKS), name
    with pytest.raises(ValueError, match="unknown concept 'lossy'; known concepts: imports"):
        concepts.get("lossy")


def test_the_frameworks_facts_name_known_concepts_of_their_tasks():
    """common/concepts/<key>.py: a module per framework of the catalog, whose APIS and LACKS keys are concepts, or
    (concept, task) pairs of a task that has the concept; every reason is a sentence."""
    import pkgutil

    keys = {framework.key for framework in catalog.FRAMEWORKS}
    modules = [name for _, name, _ in pkgutil.iter_modules(concepts.__path__)]
    assert set(modules) <= keys, set(modules) - keys
    for name in modules:
        module = __import__("common.concepts." + name, fromlist=["APIS"])
        for facts in (module.APIS, module.LACKS):
            for key in facts:
                concept, task = key if isinstance(key, tuple) else (key, None)
                assert concept in concepts.CONCEPTS, (name, key)
                assert task is None or task in concepts.CONCEPTS[concept].tasks, (name, key)
        assert all(len(reason.split()) >= 5 for reason in module.LACKS.values()), name
        assert all(isinstance(calls, tuple) and calls for calls in module.APIS.values()), name


@pytest.mark.parametrize("task, framework, path", NOTEBOOKS, ids=IDS)
def test_every_concept_of_the_task_has_its_cell_or_a_reason(task, framework, path):
    cells = tagged_cells(path)
    found = {name for kind, tags, _ in cells if kind == "code" for name in concepts.concept_tags(tags)}
    for _, tags, _ in cells:
        names = concepts.concept_tags(tags)
        assert all(name in concepts.CONCEPTS and task in concepts.CONCEPTS[name].tasks for name in names), tags
        if names:  # the section tag comes first: the pages group cells by it
            assert tags[0] in tasks.SECTION_TITLES and not tags[0].startswith(concepts.TAG_PREFIX), tags
    problems = []
    for concept in concepts.of_task(task):
        reason = concepts.lacks(framework.key, concept.name, task)
        if concept.name in found and reason:
            problems.append("{}: tagged, yet declared lacking ({})".format(concept.name, reason))
        elif concept.name not in found and not reason:
            problems.append("{}: no cell tagged {} and no reason in common/concepts/{}.py LACKS".format(
                concept.name, concept.tag, framework.key))
    assert not problems, "{}: {}".format(path.name, "; ".join(problems))


@pytest.mark.parametrize("task, framework, path", NOTEBOOKS, ids=IDS)
def test_the_frameworks_own_calls_are_in_view(task, framework, path):
    missing = []
    for concept in concepts.of_task(task):
        sources = concept_cells.concept_code(path, concept.name)
        helpers = concept_cells.helper_sources(path, sources)
        for api in concepts.apis(framework.key, concept.name, task):
            if not sources:
                missing.append("{} names {} but the notebook has no {} cell".format(concept.name, api, concept.tag))
            elif not concept_cells.api_in_view(api, sources, helpers):
                missing.append("{}: {} is neither in its cells nor in the helpers they call ({})".format(
                    concept.name, api, ", ".join(name for _, name, _ in helpers) or "none"))
    assert not missing, "{}: {}".format(path.name, "; ".join(missing))


def test_helpers_are_found_by_the_names_a_cell_calls(tmp_path):
    """A cell calling autocast (imported from frameworks.pytorch) shows autocast's source, which holds torch.autocast;
    a name the cell does not use is not shown."""
    notebook = {"cells": [
        {"cell_type": "code", "metadata": {"tags": ["imports", "concept:imports"]}, "source": [
            "from frameworks.pytorch import autocast, grad_scaler\n"]},
        {"cell_type": "code", "metadata": {"tags": ["training", "concept:mixed-precision"]}, "source": [
            "with autocast(dev):\n", "    loss = f(x)\n"]}]}
    path = tmp_path / "PyTorch_CNN.ipynb"
    path.write_text(json.dumps(notebook))
    sources = concept_cells.concept_code(path, "mixed-precision")
    shown = concept_cells.helper_sources(path, sources)
    assert [name for _, name, _ in shown] == ["autocast"]
    assert concept_cells.api_in_view("torch.autocast", sources, shown)
    assert not concept_cells.api_in_view("torch.amp.GradScaler", sources, shown)
    # a name in a comment is not in view: only code counts
    assert not concept_cells.api_in_view("torch.amp.GradScaler", ["scaler = make()  # torch.amp.GradScaler\n"], [])
    assert concept_cells.api_in_view('"NHWC"', ['layout = "NHWC"  # channels last\n'], [])
