"""Rounds (--repeat N): every job once per round in the round's recorded order, a resumed run finishing the missing
rounds only, and the table's medians, intervals and 'within noise' marks over rounds (on synthetic samples)."""

import csv
import json
import re
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np

from common import environment, results, timing
from runner import cli, run_folder
from runner.report import intervals, table
from runner.run import batch, machine_probe


def test_one_round_keeps_the_catalog_order_and_rounds_are_seeded_permutations():
    jobs = [SimpleNamespace(stem="job{}".format(number)) for number in range(6)]
    stems = [job.stem for job in jobs]
    assert batch.round_orders(jobs, 1, seed=0) == [stems]
    orders = batch.round_orders(jobs, 4, seed=0)
    assert len(orders) == 4 and all(sorted(order) == sorted(stems) for order in orders)
    assert len({tuple(order) for order in orders}) > 1  # not one order four times
    assert orders == batch.round_orders(jobs, 4, seed=0) and orders != batch.round_orders(jobs, 4, seed=1)


def started_order(out):
    """(stem, round) of every notebook the progress lines say was started, in order."""
    found = re.findall(r"\] (\S+?)(?: \(round (\d+)\))? on kernel", out)
    return [(stem, int(number or 1)) for stem, number in found]


def quiet_watch():
    """A machine watch that reads a quiet machine: for tests of rounds that are not about the machine, whose real
    watch would count the other pytest worker's notebooks as other programs and run their rounds again."""
    return machine_probe.Watch(probe=lambda: {"python_s": 0.02, "numpy_s": 0.012, "at": time.time()},
                               others=lambda: 0.0)


def test_each_round_runs_every_job_once_in_its_recorded_order_and_resume_finishes_missing_rounds(
        fixture_catalog, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(machine_probe, "watching", quiet_watch)
    assert cli.main(["-f", "ok", "-t", "cnn", "-p", "smoke", "--sweep", "epochs=1,2,3", "--repeat", "3",
                     "--data", "synthetic", "--results", str(tmp_path), "-q"]) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    orders = json.loads((run_dir / run_folder.RUN_FILE).read_text())["round_orders"]
    assert len(orders) == 3 and all(sorted(order) == ["OK_CNN-epochs-1", "OK_CNN-epochs-2", "OK_CNN-epochs-3"]
                                    for order in orders)
    ran = started_order(capsys.readouterr().out)
    assert ran == [(stem, number) for number, order in enumerate(orders, 1) for stem in order]
    for number, folder in run_folder.round_folders(run_dir).items():
        for stem in orders[0]:
            record = json.loads(run_folder.record_path(folder, stem).read_text())
            assert record["round"] == number and record["status"] == "ok"
    rows = list(csv.DictReader(open(str(run_dir / "results.csv"))))
    assert [row["headline_n"] for row in rows] == ["3", "3", "3"] and {row["headline_interval"] for row in rows} == {"min–max"}
    assert re.search(r"\| 1\.\d \[1\.\d–1\.\d\] n=3 \|", (run_dir / "results.md").read_text())

    run_folder.record_path(run_folder.round_folder(run_dir, 2), "OK_CNN-epochs-2").unlink()
    assert cli.main(["run", "--resume", str(run_dir), "--no-setup", "-q"]) == 0
    out = capsys.readouterr().out
    assert "1 of its 9 notebooks in 3 rounds to run" in out and started_order(out) == [("OK_CNN-epochs-2", 2)]
    assert run_folder.finished(run_folder.round_folder(run_dir, 2), "OK_CNN-epochs-2")


def repeated(framework, figures):
    """A finished record of a repeated CNN run with its training time in each round."""
    return {"framework": framework, "task": "cnn", "profile": "quick", "status": "ok", "metrics": {"train_s": figures[0]},
            "rounds": len(figures), "round_headlines": list(figures)}


def test_rows_are_medians_with_intervals_and_those_the_noise_cannot_tell_from_the_best_say_so():
    noise = np.random.default_rng(0)
    fast = list(10.0 * (1 + 0.02 * noise.standard_normal(7)))
    same = [value * 1.001 for value in reversed(fast)]  # the same spread, a 0.1% shift
    slow = list(11.0 * (1 + 0.02 * noise.standard_normal(7)))
    rows = {r["framework"]: r for r in table.flat_rows([repeated("PyTorch", fast), repeated("JAX", same),
                                                        repeated("MXNet", slow)])}
    best = min(("PyTorch", "JAX"), key=lambda name: rows[name]["headline_median"])
    other = "JAX" if best == "PyTorch" else "PyTorch"
    assert rows[best]["vs_best_verdict"] == "best" and rows[other]["vs_best_verdict"] == "within noise"
    assert rows["MXNet"]["vs_best_verdict"] == "slower" and 1.05 < rows["MXNet"]["vs_best_low"] < rows["MXNet"]["vs_best"]
    assert all(r["headline_interval"] == "bootstrap" and r["headline_low"] <= r["headline_median"] <= r["headline_high"]
               for r in rows.values())
    (cnn,) = table.build([repeated("PyTorch", fast), repeated("MXNet", slow)]).tables
    cells = dict(zip([column.key for column in cnn.columns], cnn.rows[1].cells))
    assert re.fullmatch(r"1\d\.\d \[1\d\.\d–1\d\.\d\] n=7", cells["train_s"]) and cells["vs_best"].endswith("]")
    assert any(note.startswith("Rounds (--repeat N)") for note in table.build([repeated("PyTorch", fast)]).notes)


def test_a_run_of_one_round_has_no_interval_columns():
    record = dict(repeated("PyTorch", [10.0]))
    del record["rounds"], record["round_headlines"]
    (cnn,) = table.build([record]).tables
    assert "vs_best" not in [column.key for column in cnn.columns] and cnn.rows[0].cells[
        [column.key for column in cnn.columns].index("train_s")] == "10.0"
    assert not any(note.startswith("Rounds") for note in table.build([record]).notes)


def timed_record(framework, epochs):
    """A finished CNN record of one round with these epoch times."""
    record = results.new_record(framework, "cnn", "quick")
    record.update(device="cpu", data={"source": "synthetic", "description": "x"},
                  environment=environment.facts(framework, "1.0", "cpu", threads=2))
    record["timings"] = timing.training_timings(epochs)
    record["metrics"] = {"train_s": sum(epochs), "accuracy": 0.5}
    return results.write_result("", record)


def write_run(folder, records):
    folder.mkdir()
    for number, record in enumerate(records):
        results.write_result(str(folder / "{}.result.json".format(number)), record, record["status"])
    return folder


def test_report_of_two_runs_gives_each_row_s_ratio_with_its_interval_and_verdict(tmp_path, capsys):
    noise = np.random.default_rng(1)

    def epochs(seconds):
        return list(seconds * (1 + 0.02 * noise.standard_normal(8)))

    before = write_run(tmp_path / "before", [timed_record("PyTorch", epochs(4.0)), timed_record("JAX", epochs(3.0)),
                                             timed_record("Chainer", epochs(9.0)), timed_record("MXNet", epochs(5.0))])
    after = write_run(tmp_path / "after", [timed_record("PyTorch", epochs(6.0)), timed_record("JAX", epochs(3.0)),
                                           timed_record("Chainer", epochs(9.9)),
                                           results.failure_record("MXNet", "cnn", "quick", "failed", "planted")])
    assert cli.main(["report", str(before), str(after), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "comparison.md").read_text()
    assert text in capsys.readouterr().out
    lines = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    # One round a side: the epochs of one kernel, whose interval is widened by how far two runs move apart
    widened = "7 epochs, 7 epochs; widened {:.0%}".format(intervals.RUN_TO_RUN)
    assert re.search(r"\| 1\.[45]\d\d \[1\.\d+–\d\.\d+\] \| slower \| " + widened + r" \|", lines["PyTorch"])
    assert "| within noise | " + widened in lines["Chainer"]  # 10% slower epochs: not beyond what two runs differ by
    assert "| within noise |" in lines["JAX"] and "not compared: not finished in both runs" in lines["MXNet"]


def test_report_of_two_repeated_runs_compares_their_rounds_without_widening(tmp_path, capsys):
    def repeated(folder, seconds):
        rounds = [[timed_record("PyTorch", [s] * 3)] for s in seconds]
        write_run(folder, rounds[0])
        for number, records in enumerate(rounds[1:], 2):
            write_run(run_folder.round_folder(folder, number), records)
        return folder

    before = repeated(tmp_path / "before", [4.00, 4.02, 4.04, 4.01, 4.03])
    after = repeated(tmp_path / "after", [4.40, 4.42, 4.44, 4.41, 4.43])
    assert cli.main(["report", str(before), str(after), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    (line,) = [line for line in (tmp_path / "out" / "comparison.md").read_text().splitlines()
               if line.startswith("| PyTorch")]
    assert "| slower | 5 rounds, 5 rounds |" in line  # rounds are runs of their own: 10% is beyond their noise


def test_a_planted_slow_down_of_the_machine_probe_during_one_notebook_flags_that_row_only(
        fixture_catalog, tmp_path, monkeypatch):
    calls = []

    def probe():  # before and after each of three notebooks, in catalog order: calls 3 and 4 are the second's
        calls.append(len(calls) + 1)
        slower = 1.5 if calls[-1] in (3, 4) else 1.3 if calls[-1] == 5 else 1.0  # the third's: slow at one end only
        return {"python_s": 0.020 * slower, "numpy_s": 0.025, "at": 0.0}

    monkeypatch.setattr(machine_probe, "speed", probe)
    monkeypatch.setattr(machine_probe, "cpu_seconds_of_others", lambda: 0.0)
    assert cli.main(["-f", "ok", "-t", "cnn", "-p", "smoke", "--sweep", "epochs=1,2,3", "--data", "synthetic",
                     "--results", str(tmp_path), "-q"]) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(calls) == 6
    rows = {row["sweep_value"]: row for row in csv.DictReader(open(str(run_dir / "results.csv")))}
    assert abs(float(rows["2"]["machine_slowdown"]) - 0.5) < 1e-6
    assert float(rows["1"]["machine_slowdown"]) == float(rows["3"]["machine_slowdown"]) == 0.0
    assert rows["1"]["others_cores"] in ("", "0.0")  # none where the notebook took under machine_probe.BUSY_WALL_S
    text = (run_dir / "results.md").read_text()
    assert text.count("machine 50% slower during this row") == 1 and "OK · epochs=2: machine 50% slower" in text
    assert "6 probes, the loop 20.0 to 30.0 ms" in text and "cores busy during this row" not in text


def test_the_machine_watch_counts_the_cores_another_program_kept_busy():
    watch = machine_probe.Watch()
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 4\nwhile time.time() < end: pass"])
    try:
        time.sleep(2.0)
        readings = watch.ended()  # the busy child still runs, unwaited: its time is not this process's (yet)
    finally:
        busy.wait(timeout=30)
    assert readings["others_cores"] > 0.3  # a whole core busy for most of the span, shared with whatever else runs
    assert readings["before"]["python_s"] > 0 and readings["after"]["numpy_s"] > 0


def test_the_machine_watch_waits_for_the_kernel_to_exit_before_its_last_probe():
    watch, asked = machine_probe.Watch(probe=lambda: {"python_s": 0.01, "numpy_s": 0.01, "at": time.time()}), []

    def settled():
        asked.append(time.time())
        return len(asked) >= 3

    readings = watch.ended(settled)
    assert len(asked) == 3 and readings["after"]["at"] >= asked[-1]


def test_the_machine_probe_warms_its_core_up_before_it_times_and_between_pieces(monkeypatch):
    asked = []
    real = machine_probe.warm_up
    monkeypatch.setattr(machine_probe, "warm_up", lambda seconds: asked.append(seconds) or real(0))
    machine_probe.speed()
    assert asked[0] == machine_probe.WARM_UP_S > 0  # untimed work first: an idle core starts slowly
    assert asked[1:] == [machine_probe.SPREAD_S / machine_probe.SAMPLES] * machine_probe.SAMPLES
    assert real(0.05) >= 1 and real(0) == 0


def test_the_machine_probe_gives_the_best_times_of_its_fixed_work():
    probe = machine_probe.speed()
    assert set(probe) == {"python_s", "numpy_s", "at"} and probe["python_s"] > 0 and probe["numpy_s"] > 0


def test_the_machine_probe_times_its_products_on_one_blas_thread_whatever_the_machine_sets(monkeypatch):
    """OpenBLAS's Haswell kernels (what machines setting OPENBLAS_CORETYPE=Haswell run) split the probe's product over
    two threads, which made it read one of two times at random: the probe holds BLAS to one thread while it times,
    and gives the process its threads back after."""
    from threadpoolctl import threadpool_info

    seen = []
    real = machine_probe._timed_pieces
    monkeypatch.setattr(machine_probe, "_timed_pieces", lambda matrix: seen.append(
        [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"]) or real(matrix))
    before = [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"]
    machine_probe.speed()
    assert seen and seen[0] and set(seen[0]) == {1}
    assert [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"] == before


def test_a_round_disturbed_by_a_busy_neighbour_is_named_and_run_again_at_the_end(fixture_catalog, tmp_path,
                                                                              monkeypatch, capsys):
    """A repeated run whose second notebook ran while other programs kept 0.74 cores busy (planted in its watch's
    reading of the machine's busy time): that round is run once more after the last round, the undisturbed take is
    used, both are kept in its record, and the table names the round with its figure."""
    watches = []

    class Planted(machine_probe.Watch):
        def __init__(self):
            watches.append(self)
            started, busy = time.monotonic(), 0.74 if len(watches) == 2 else 0.0
            super().__init__(probe=lambda: {"python_s": 0.02, "numpy_s": 0.012, "at": time.time()},
                             others=lambda: busy * (time.monotonic() - started))

    monkeypatch.setattr(machine_probe, "watching", Planted)
    monkeypatch.setattr(machine_probe, "BUSY_WALL_S", 0.0)  # the fixture's notebook takes under a second
    assert cli.main(["-f", "ok", "-t", "cnn", "-p", "smoke", "--repeat", "3", "--data", "synthetic",
                     "--results", str(tmp_path), "-q"]) == 0
    out = capsys.readouterr().out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(watches) == 4  # three rounds, and the disturbed one again
    assert "[again] 1 round the machine watch found disturbed, run once more: OK_CNN (round 2) (other programs " \
           "kept 0.74 cores busy)" in out and "[again] OK_CNN (round 2): take 2 used (undisturbed)" in out
    folder = run_folder.round_folder(run_dir, 2)
    record = json.loads(run_folder.record_path(folder, "OK_CNN").read_text())
    first, second = record["takes"]
    assert first["disturbed"] == "other programs kept 0.74 cores busy" and not first["used"]
    assert second["disturbed"] is None and second["used"] and record["machine_probe"] == second["machine_probe"]
    assert first["metrics"]["train_s"] > 0 and record["metrics"] == second["metrics"]
    assert (folder / run_folder.DISTURBED_DIR / "OK_CNN.ipynb").exists() and (folder / "OK_CNN.ipynb").exists()
    text = (run_dir / "results.md").read_text()
    assert re.search(r"OK, rounds the machine watch found disturbed \(training time \(s\)\): round 2: other programs "
                     r"kept 0\.74 cores busy, \d+\.\d; run again at the end of the run: undisturbed, \d+\.\d; take 2 "
                     r"used\.", text), text
    row = next(csv.DictReader(open(str(run_dir / "results.csv"))))
    assert row["disturbed_rounds"].startswith("round 2: other programs kept 0.74 cores busy")
    assert "other programs kept up to 0.74 cores busy during a notebook" in text  # the unused take's watch counts
