"""Smoke runs: every notebook of every framework, through papermill on its own kernel, on tiny synthetic data.

Each notebook runs once per session (tests/notebook_runs.py): the run that the equivalence tests compare
is also the one checked here.
"""

import json

import pytest
from conftest import require_environment

from common import hyperparams, results, tasks
from runner import catalog

JOBS = catalog.select()
# How a notebook's source shows that it computes on NHWC images, for the frameworks whose layout is the notebook's
# choice (Keras 3 and 2 read theirs from image_data_format): PyTorch keeps NCHW shapes in the channels-last memory
# format; TensorFlow's CNN takes NHWC on the CPU (NCHW on a GPU)
NHWC_IN_SOURCE = ("channels_last=True", "memory_format=torch.channels_last", 'else \\"NHWC\\"')


def check_ledger(job, record):
    """The record's ledger (common/results.py SETTINGS) names every setting that applies to a CPU run, and the image
    layout it names is the one the notebook computes in."""
    settings = record["settings"]
    assert sorted(settings) == sorted(results.SETTINGS), settings  # a record stores its keys sorted
    assert all(settings[name] for name in ("compiler", "kernels", "precision")), settings
    assert settings["threads"] == 2 and settings["autotune"] is None, settings  # 2 threads, no GPU: nothing to autotune
    assert settings["precision"].startswith(record["environment"]["computed_precision"]), settings
    if tasks.get(job.task).inputs != "images":
        assert settings["layout"] is None, settings
        return
    layout = settings["layout"].split()[0]
    if job.framework.label not in ("Keras", "Keras 2"):
        source = job.notebook.read_text()
        assert any(words in source for words in NHWC_IN_SOURCE) == (layout == "NHWC"), layout


@pytest.mark.parametrize("job", JOBS, ids=lambda job: job.stem)
def test_notebook_runs_on_its_kernel(job, notebook_runs):
    require_environment(job.environment)
    record, overrides = notebook_runs.smoke(job)
    assert record["status"] == "ok", record["error"]
    assert record["framework"] == job.framework.label and record["task"] == job.task
    assert record["params"] == hyperparams.for_task(job.task, "smoke", overrides)
    assert record["environment"]["framework_version"] and record["environment"]["threads"] == 2
    assert record["device"] and record["data"]["source"] == "synthetic"
    check_ledger(job, record)
    # peak resident memory of the timed blocks (common/memory.py): a process with a framework in it holds 50 MB+
    assert record["timings"]["peak_rss_bytes"] > 50 << 20 and record["timings"]["peak_rss_scope"] == "timed blocks"
    if job.task == "inference":
        assert record["weights"] in ("imagenet", "random")
        assert record["model"].startswith(("ResNet-50 v1,", "ResNet-50 v1.5,")), record["model"]
        assert record["metrics"]["images_per_s"] > 0
        assert len(record["timings"]["passes_s"]) == record["params"]["repeats"]
        # every batch of every pass timed on its own, for the latency (common.timing.latency)
        batches = record["timings"]["batch_s"]
        assert batches["n"] == record["params"]["repeats"] * record["params"]["batches"]
        assert 0 < batches["median"] <= batches["p99"]
    elif job.task == "train":
        assert record["model"].startswith("ResNet-50 v1.5,") and record["metrics"]["images_per_s"] > 0
        assert len(record["timings"]["passes_s"]) == record["params"]["repeats"]
        assert record["timings"]["images_per_pass"] == record["params"]["batch_size"] * record["params"]["steps"]
    else:
        assert 0.0 <= record["metrics"]["accuracy"] <= 1.0
        assert len(record["timings"]["epochs_s"]) == record["params"]["epochs"]
    executed = notebook_runs.folder.glob("**/{}.ipynb".format(job.stem))
    executed = json.loads(next(executed).read_text())
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in executed["cells"])
    # the executed copy went to the results folder; the stored notebook stays without outputs
    stored = json.loads(job.notebook.read_text())
    assert all(not c.get("outputs") for c in stored["cells"] if c["cell_type"] == "code")
