"""Shared fixtures and helpers: a private data cache per test; the environment a notebook test needs; the train rows
that run on one device only."""

import json
import os

import pytest
from notebook_runs import NotebookRuns

from runner import environments

# Train rows whose notebook runs on one device only (keras.distribution is JAX's), and the words of its refusal of two
TRAIN_ONE_DEVICE = {"Keras (tensorflow)": "implemented for the JAX backend only",
                    "Keras (torch)": "implemented for the JAX backend only"}


@pytest.fixture
def data_cache(tmp_path, monkeypatch):
    """An empty download cache that common.datasets uses instead of data/."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("ROSETTA_DATA_DIR", str(cache))
    return cache


def require_environment(env):
    """Skip the test where `env` needs a Python this machine lacks; fail it where `env` is simply not built."""
    if environments.is_ready(env):
        return
    if environments.find_python(env.python, env.python_shared) is None:
        pytest.skip("environment {} needs Python {}, which this machine lacks".format(env.name, env.python))
    lacks = json.loads(os.environ.get(environments.UNAVAILABLE_VARIABLE, "{}")).get(env.name)
    if lacks:  # `run_all.py test` could not build it, for want of something this machine lacks
        pytest.skip("environment {} {}".format(env.name, lacks))
    pytest.fail("environment {} is not built: run `python3 run_all.py setup {}`".format(env.name, env.name))


@pytest.fixture(scope="session")
def notebook_runs(tmp_path_factory):
    """The session's notebook runs (tests/notebook_runs.py), shared by the smoke and equivalence tests."""
    return NotebookRuns(tmp_path_factory.mktemp("notebooks"))
