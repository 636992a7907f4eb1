"""Shared fixtures: a private data cache per test."""

import pytest


@pytest.fixture
def data_cache(tmp_path, monkeypatch):
    """An empty download cache that common.datasets uses instead of data/."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("ROSETTA_DATA_DIR", str(cache))
    return cache
