"""The notebooks' prose is for readers of the framework (runner/report/prose.py TARGETS): short notebooks, short cells
and sentences, few words on the project's own machinery, which each task's introduction (docs/tasks/) says once."""

import json

from common import tasks
from runner import catalog
from runner.report import prose


def test_sentences_and_words_are_counted_as_read():
    cell = "## Training\nOne step: forward, loss, backward. With `precision=\"bf16\"` it runs under `torch.autocast`.\n\n" \
           "- the first item\n- a second one, `common/timing.py`'s clock"
    assert prose.sentences(cell) == ["Training", "One step: forward, loss, backward.",
                                     'With `precision="bf16"` it runs under `torch.autocast`.', "the first item",
                                     "a second one, `common/timing.py`'s clock"]
    helpers = {"grad_scaler"}
    assert [prose.names_harness(s, helpers) for s in prose.sentences(cell)] == [False, False, False, False, True]
    assert prose.names_harness("The `grad_scaler(dev)` helper.", helpers)
    assert not prose.names_harness("`torch.amp.GradScaler` scales the loss.", helpers)
    assert not prose.names_harness("Gradients are taken under `autograd.record()`.", helpers)  # MXNet's, not ours


def test_the_notebooks_prose_meets_its_targets():
    found = prose.summary(sorted(catalog.NOTEBOOKS.glob("*.ipynb")))
    assert found["median_words"] <= prose.TARGETS["median_words"], found["median_words"]
    assert found["harness_share"] <= prose.TARGETS["harness_share"], found["harness_share"]
    assert found["cells_over"] == []
    assert [(name, count) for name, count, _ in found["sentences_over"]] == []


def test_each_task_has_its_introduction_once():
    """What is the same in every framework's notebook of a task is in docs/tasks/<task>.md; each notebook's title
    cell links to it."""
    for task in tasks.TASKS:
        introduction = catalog.REPO / "docs" / "tasks" / (task + ".md")
        assert introduction.exists(), introduction
        for framework in catalog.FRAMEWORKS:
            path = catalog.notebook_path(framework, task)
            if path.exists():
                title = "".join(json.loads(path.read_text())["cells"][0]["source"])
                assert "../docs/tasks/{}.md".format(task) in title, path.name
