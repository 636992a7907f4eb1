"""Same-weights verdicts kept between runs (runner/checks/verdict_cache.py): reused while what decides them is
unchanged, checked anew when it changes or with --recheck, and never kept when the check failed."""

import json

import pytest

from runner import catalog, run_folder
from runner.checks import equivalence, verdict_cache
from runner.run import environments

JAX_CNN = next(job for job in catalog.select(["jax"], ["cnn"]))
VERDICT = {"job": JAX_CNN.stem, "framework": "JAX", "task": "cnn", "equivalent": True, "failures": [],
           "step_differences": {}, "logits_max_abs": 1e-6}


@pytest.fixture
def cache_file(tmp_path, monkeypatch):
    monkeypatch.setenv(verdict_cache.PATH_VARIABLE, str(tmp_path / "verdicts.json"))
    return tmp_path / "verdicts.json"


def test_a_verdict_is_reused_with_its_date_until_what_decides_it_changes(cache_file, monkeypatch):
    verdict_cache.VerdictCache().keep(JAX_CNN, VERDICT)
    reused = verdict_cache.VerdictCache().lookup(JAX_CNN)
    assert reused["reused"] and reused["equivalent"] and len(reused["checked"]) == 10
    assert run_folder.equivalence_verdict(reused) == "yes (logits within 1.0e-06), checked " + reused["checked"]
    assert verdict_cache.VerdictCache(reuse=False).lookup(JAX_CNN) is None  # --recheck
    stamp = dict(environments.read_stamp(JAX_CNN.environment) or {}, lock="envs/jax.lock@000000000000")
    monkeypatch.setattr(environments, "read_stamp", lambda env: stamp if env.name == "jax" else {})
    assert verdict_cache.VerdictCache().lookup(JAX_CNN) is None  # another lock: another key
    monkeypatch.undo()  # the lock as it is, the cache file still this test's
    monkeypatch.setenv(verdict_cache.PATH_VARIABLE, str(cache_file))
    assert verdict_cache.VerdictCache().lookup(JAX_CNN)["reused"]
    monkeypatch.setattr(verdict_cache, "cpu_model", lambda: "another CPU")
    assert verdict_cache.VerdictCache().lookup(JAX_CNN) is None  # another CPU model


def test_a_failed_or_interrupted_check_is_not_kept(cache_file):
    cache = verdict_cache.VerdictCache()
    for result in (dict(VERDICT, error="reference: planted"), dict(VERDICT, failures=["logits differ"]),
                   dict(VERDICT, interrupted=True)):
        cache.keep(JAX_CNN, result)
    assert not cache_file.exists() and cache.lookup(JAX_CNN) is None


def test_the_check_runs_nothing_for_a_task_whose_verdicts_are_all_kept(cache_file, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(equivalence, "reference", lambda task, folder, run: calls.append(("reference", task)) or {})
    monkeypatch.setattr(equivalence, "compare", lambda job, entry: calls.append(("compare", job.stem)) or dict(VERDICT))
    first = equivalence.check([JAX_CNN], tmp_path / "first", say=list, cache=verdict_cache.VerdictCache())
    assert calls == [("reference", "cnn"), ("compare", JAX_CNN.stem)] and "reused" not in first["cnn"]["results"][0]
    calls.clear()
    again = equivalence.check([JAX_CNN], tmp_path / "again", say=list, cache=verdict_cache.VerdictCache())
    assert calls == [] and again["cnn"]["results"][0]["reused"]
    written = json.loads((tmp_path / "again" / run_folder.EQUIVALENCE_FILE).read_text())
    assert written["cnn"]["results"][0]["checked"] == again["cnn"]["results"][0]["checked"]
    equivalence.check([JAX_CNN], tmp_path / "anew", say=list, cache=verdict_cache.VerdictCache(reuse=False))
    assert calls == [("reference", "cnn"), ("compare", JAX_CNN.stem)]
