"""`run_all.py bisect` (issue 60): the search on planted releases, the releases PyPI offers (a loopback index), the
figures read from a run folder, and the whole command with a stand-in for the run command that writes the records a
run writes; nothing is built and no notebook runs."""

import http.server
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from common import environment, results, timing
from runner import bisect, catalog, cli, run_folder
from runner.run import locks

SLOW = 1.85  # the planted step: as JAX 0.10.2 against 0.8.1 on the CNN


def releases(count):
    return ["1.{}.0".format(i) for i in range(count)]


def planted(step_at, count, noise=0.02, seed=0, failing=()):
    """A measure() whose releases from index `step_at` on are SLOW times slower, with `noise` per round; `failing`:
    releases that cannot run. It keeps every call, for the tests to count."""
    names, rng, calls = releases(count), np.random.default_rng(seed), []

    def measure(picked, number):
        calls.append(list(picked))
        found = {}
        for release in picked:
            if release in failing:
                found[release] = bisect.Measured(release, reason="failed: ImportError: no jaxlib for this release")
                continue
            base = 20.0 * (SLOW if names.index(release) >= step_at else 1.0)
            found[release] = bisect.Measured(release, tuple(base * (1 + noise * rng.standard_normal(3))), "rounds")
        return found

    return measure, calls


@pytest.mark.parametrize("count, step_at", [(16, 1), (16, 9), (16, 15), (9, 4), (2, 1), (3, 2)])
def test_a_planted_slow_release_is_found_in_log2_steps(count, step_at):
    measure, calls = planted(step_at, count)
    said = []
    outcome = bisect.search(releases(count), measure, said.append)
    assert (outcome.kind, outcome.good, outcome.bad) == ("step", releases(count)[step_at - 1], releases(count)[step_at])
    assert outcome.comparison.verdict == "slower" and 1.7 < outcome.comparison.ratio < 2.0
    assert len(calls) <= bisect.most_steps(count) == max(1, math.ceil(math.log2(count - 1)))
    assert all(len(c) <= 3 for c in calls)  # each step one run of three releases at most
    assert all(c[0] == outcome.steps[i].releases[0] for i, c in enumerate(calls))


def test_within_noise_ends_after_one_step_and_says_so():
    measure, calls = planted(99, 12)  # no release is slower
    said = []
    outcome = bisect.search(releases(12), measure, said.append)
    assert outcome.kind == "within noise" and outcome.comparison.verdict == "within noise" and len(calls) == 1
    assert any("within noise" in line for line in said)


def test_a_small_step_inside_the_noise_is_called_so():
    """A 1.05x step under 10% noise per round: three rounds cannot tell it, and the bisect does not pretend to."""
    names, rng = releases(6), np.random.default_rng(5)

    def measure(picked, number):
        return {r: bisect.Measured(r, tuple(20.0 * (1.05 if names.index(r) >= 3 else 1.0) *
                                            (1 + 0.10 * rng.standard_normal(3))), "rounds") for r in picked}

    outcome = bisect.search(names, measure, lambda line: None)
    assert outcome.kind == "within noise" and len(outcome.steps) == 1


def test_a_release_that_cannot_run_is_skipped_with_its_reason():
    names = releases(9)
    measure, calls = planted(6, 9, failing={names[4]})  # the first halfway point cannot run
    said = []
    outcome = bisect.search(names, measure, said.append)
    assert (outcome.good, outcome.bad) == (names[5], names[6]) and outcome.kind == "step"
    assert outcome.skipped == {names[4]: "failed: ImportError: no jaxlib for this release"}
    assert "[bisect]   {}: skipped, failed: ImportError: no jaxlib for this release".format(names[4]) in said
    assert calls[1] == [names[0], names[3], names[8]]  # the halfway point chosen again without it


def test_a_step_next_to_a_release_that_cannot_run_is_bracketed_around_it():
    names = releases(3)
    measure, _ = planted(2, 3, failing={names[1]})
    outcome = bisect.search(names, measure, lambda line: None)
    assert (outcome.kind, outcome.good, outcome.bad, list(outcome.skipped)) == ("step", names[0], names[2], [names[1]])


def test_an_end_that_cannot_run_stops_the_bisect_with_its_reason():
    names = releases(5)
    measure, _ = planted(2, 5, failing={names[0]})
    with pytest.raises(bisect.BisectError, match="1.0.0 cannot run, so nothing brackets the step: failed: ImportError"):
        bisect.search(names, measure, lambda line: None)


def test_the_releases_between_are_pypi_s_final_ones_with_the_ends_as_given():
    offered = ["0.8.1", "0.8.2", "0.9.0rc1", "0.9.0", "0.9.0.1", "0.10.0.dev1", "0.10.2", "0.10.1", "0.11.0", "0.6.2"]
    assert bisect.releases_between("jax", "0.8.1", "0.10.2", offered) == [
        "0.8.1", "0.8.2", "0.9.0", "0.9.0.1", "0.10.1", "0.10.2"]
    assert bisect.releases_between("jax", "0.9.0rc1", "0.9.0", offered) == ["0.9.0rc1", "0.9.0"]
    with pytest.raises(bisect.BisectError, match="GOOD must be the older release: 0.10.2 is not older than 0.8.1"):
        bisect.releases_between("jax", "0.10.2", "0.8.1", offered)
    with pytest.raises(bisect.BisectError, match="jax 0.8.7 is not on PyPI; its newest releases there: .*0.11.0$"):
        bisect.releases_between("jax", "0.8.7", "0.10.2", offered)


@pytest.fixture
def loopback_index(monkeypatch):
    """A package index on 127.0.0.1 that answers PyPI's simple JSON for 'jax' (one release yanked) and 404 else."""
    files = [{"filename": name, "upload-time": "2026-01-01T00:00:00Z", "yanked": name.startswith("jax-0.9.0-")}
             for name in ("jax-0.8.1-py3-none-any.whl", "jax-0.8.1.tar.gz", "jax-0.9.0-py3-none-any.whl",
                          "jax-0.9.1-py3-none-any.whl", "jax-0.10.2-py3-none-any.whl")]

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path != "/simple/jax/":
                self.send_error(404)
                return
            body = json.dumps({"name": "jax", "files": files}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Index)
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(locks, "PYPI_SIMPLE", "http://127.0.0.1:{}/simple/{{package}}/".format(server.server_port))
    yield
    server.shutdown()
    server.server_close()


def test_the_releases_offered_are_read_from_the_index_without_the_yanked(loopback_index):
    assert locks.releases_on_index("jax", timeout=5) == ["0.10.2", "0.8.1", "0.9.1"]
    assert locks.releases_on_index("nothing-here", timeout=5) == []


def jax_record(framework, epochs, status="ok", error=None):
    """A JAX CNN record with these epoch times (the headline is their sum), or a failed one."""
    if status != "ok":
        return results.failure_record(framework, "cnn", "quick", status, error)
    record = results.new_record(framework, "cnn", "quick")
    record.update(device="cpu", data={"source": "synthetic", "description": "x"},
                  environment=environment.facts("JAX", framework.split()[-1], "cpu", threads=2))
    record["timings"] = timing.training_timings(epochs)
    record["metrics"] = {"train_s": sum(epochs), "accuracy": 0.5}
    return results.write_result("", record)


def write_run(run_dir, figures, rounds=3, failing=()):
    """A run folder as `run -f jax@a,jax@b -t cnn --repeat N` leaves it: a record per release and round."""
    for number in range(1, rounds + 1):
        folder = run_folder.round_folder(run_dir, number)
        folder.mkdir(parents=True, exist_ok=True)
        for release, seconds in figures.items():
            framework = "JAX " + release
            record = (jax_record(framework, None, "failed", "ImportError: no jaxlib") if release in failing else
                      jax_record(framework, [seconds * (1 + 0.01 * number)] * 4))
            record["release"] = release
            results.write_result(str(run_folder.record_path(folder, "JAX_CNN@" + release)), record,
                                 status=record["status"])


def test_each_release_s_rounds_are_read_from_the_run_folder(tmp_path):
    write_run(tmp_path, {"0.8.1": 5.0, "0.10.2": 9.0}, failing={"0.9.1"})
    write_run(tmp_path, {"0.9.1": 0.0}, failing={"0.9.1"})
    found = bisect.measured_in(tmp_path, catalog.framework("jax"), "cnn", ["0.8.1", "0.9.1", "0.10.2", "0.9.9"])
    assert found["0.8.1"].kind == "rounds" and found["0.8.1"].samples == pytest.approx((20.2, 20.4, 20.6))
    assert found["0.9.1"].samples is None and found["0.9.1"].reason == "failed: ImportError: no jaxlib"
    assert found["0.9.9"].reason.startswith("no record in ")
    assert found["0.8.1"].text() == "20.4 [20.2–20.6] n=3"


def fake_lock(path, pins):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# a lock\n" + "".join("{}=={} \\\n    --hash=sha256:{}\n    # via x\n".format(name, version, "0" * 64)
                                         for name, version in pins.items()))


def test_the_whole_command_finds_the_step_and_names_the_packages_that_differ(tmp_path, monkeypatch):
    """bisect() with a stand-in for the run command, which writes what the run of those releases would: JAX from
    0.10.0 on takes 1.85 times as long; the releases' locks differ in jax, jaxlib and one companion."""
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / ".envs")
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", tmp_path / "envs")
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    offered = ["0.8.1", "0.8.2", "0.9.0", "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2"]
    for index, release in enumerate(offered):
        fake_lock(tmp_path / "envs" / "versions" / "jax@{}.lock".format(release),
                  {"jax": release, "jaxlib": release, "numpy": "2.4.6", "ml-dtypes": "0.5.{}".format(index // 3)})
    argvs = []

    def run(argv):
        argvs.append(argv)
        assert os.environ["XLA_FLAGS"] == ""  # each release with XLA's own defaults, not the project's CPU flags
        names = argv[argv.index("-f") + 1].split(",")
        run_dir = Path(argv[argv.index("--results") + 1]) / "20261129-000000-quick"  # as the run names its folder
        write_run(run_dir, {name.split("@")[1]: 5.0 * (SLOW if offered.index(name.split("@")[1]) >= 5 else 1.0)
                            for name in names}, rounds=int(argv[argv.index("--repeat") + 1]))
        return 0

    said = []
    status = bisect.bisect("jax", "0.8.1", "0.10.2", "cnn", run, results=tmp_path / "results", offered=offered,
                           say=said.append)
    assert status == 0
    text = "\n".join(said)
    assert said[0].startswith("[bisect] JAX (jax on PyPI) on cnn, profile quick, 3 rounds a release: 8 releases")
    assert "at most 3 steps, each one run of three releases" in said[2]
    assert "[bisect] each release with its own defaults: XLA_FLAGS= (set XLA_FLAGS to choose otherwise)" in said
    assert "XLA_FLAGS" not in os.environ
    assert len(argvs) <= 3 and all(a[:2] == ["run", "-f"] and "--no-equivalence" in a for a in argvs)
    assert argvs[0][2] == "jax@0.8.1,jax@0.9.1,jax@0.10.2"
    assert "[bisect] The step: JAX 0.10.0 against 0.9.2 on cnn (training time (s)): 1.8" in text
    assert "  jax 0.9.2 → 0.10.0" in said and "  jaxlib 0.9.2 → 0.10.0" in said
    assert not any(line.startswith(("  numpy", "  ml-dtypes")) for line in said)  # the same in both locks
    (folder,) = (tmp_path / "results").glob("bisect-*-jax-0.8.1-0.10.2")
    record = json.loads((folder / "bisect.json").read_text())
    assert record["outcome"]["kind"] == "step" and (record["outcome"]["good"], record["outcome"]["bad"]) == (
        "0.9.2", "0.10.0")
    assert all(step["run_dir"] for step in record["steps"])
    assert "## Outcome" in (folder / "bisect.md").read_text()


@pytest.mark.parametrize("argv, message", [
    (["bisect", "mxnet", "1.8.0", "1.9.1", "-t", "cnn"], "mxnet@1.8.0: MXNet has no releases to choose from here"),
    (["bisect", "jax", "0.8.1", "nope", "-t", "cnn"], "jax@nope: 'nope' is not a release number"),
    (["bisect", "jax", "0.8.1", "0.10.2", "-t", "cnn", "-p", "huge"], "huge"),
    (["bisect", "jax", "0.8.1", "0.10.2", "-t", "cnn", "--repeat", "0"], "--repeat 0: must be 1 or more"),
])
def test_bad_input_is_refused_in_one_line(argv, message, capsys):
    assert cli.main(argv) == cli.USAGE_ERROR
    error = capsys.readouterr().err
    assert error.startswith("run_all.py: error: ") and message in error and error.count("\n") == 1


def test_bisect_is_a_command_with_its_own_help():
    out = subprocess.run([sys.executable, "run_all.py", "bisect", "-h"], capture_output=True, text=True,
                         cwd=str(catalog.REPO), timeout=60)
    text = " ".join(out.stdout.split())  # argparse wraps the description
    assert out.returncode == 0 and "binary-search order" in text and "pytorch, tensorflow, keras, jax" in text


def test_a_step_stopped_by_a_signal_stops_the_bisect_without_a_verdict(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / ".envs")

    def run(argv):
        write_run(Path(argv[argv.index("--results") + 1]) / "20261129-000000-quick",
                  {"0.8.1": 5.0, "0.10.2": 9.0}, rounds=1)  # what finished before the signal
        return 130

    said = []
    status = bisect.bisect("jax", "0.8.1", "0.10.2", "cnn", run, results=tmp_path, offered=["0.8.1", "0.10.2"],
                           say=said.append)
    assert status == 130 and said[-1].startswith("[bisect] interrupted in step 1: no verdict from a partial step")
    assert not any("The step" in line or "No step" in line for line in said)
