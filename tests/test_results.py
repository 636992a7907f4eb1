import json
import re

import numpy as np
import pytest

from common import environment, results, timing


def finished_cnn_record():
    record = results.new_record("PyTorch", "cnn", "smoke", params={"epochs": 1})
    record.update(data={"source": "synthetic", "description": "x"}, device="cpu",
                  environment=environment.facts("PyTorch", "2.0", "cpu", threads=2))
    record["metrics"] = {"train_s": np.float64(1.5), "accuracy": np.float32(0.5)}
    return record


def test_write_and_read_round_trip(tmp_path):
    path = tmp_path / "sub" / "r.json"
    written = results.write_result(str(path), finished_cnn_record())
    stored = results.read_result(str(path))
    assert stored == json.loads(json.dumps(written, default=float))
    assert stored["status"] == "ok" and stored["schema_version"] == results.SCHEMA_VERSION
    assert stored["duration_s"] >= 0 and stored["started_at"].endswith("Z")
    assert stored["metrics"]["accuracy"] == 0.5
    assert set(stored) == set(results.FIELDS + results.OPTIONAL_FIELDS)
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_a_record_from_before_the_optional_fields_is_still_read(tmp_path):
    path = tmp_path / "old.json"
    record = results.write_result("", finished_cnn_record())
    path.write_text(json.dumps({k: v for k, v in record.items() if k not in results.OPTIONAL_FIELDS}, default=float))
    assert results.read_result(str(path))["status"] == "ok"


def test_empty_path_writes_nothing_but_checks():
    record = results.write_result("", finished_cnn_record())
    assert record["status"] == "ok"


def test_ok_record_without_metrics_is_refused():
    record = finished_cnn_record()
    record["metrics"] = {"train_s": 1.0}
    with pytest.raises(ValueError, match="accuracy"):
        results.write_result("", record)


def test_unknown_status_is_refused():
    with pytest.raises(ValueError, match="status"):
        results.write_result("", finished_cnn_record(), status="great")


def test_failure_record_keeps_the_first_line():
    record = results.failure_record("PyTorch", "rnn", "quick", "failed", "\nValueError: bad\n  more", notebook="x.ipynb")
    assert record["error"] == "ValueError: bad" and record["metrics"] == {}


def test_summary_line_names_the_headline():
    line = results.summary_line(results.write_result("", finished_cnn_record()))
    assert "training time (s): 1.500" in line and "accuracy: 0.5000" in line and "synthetic" in line


def test_environment_facts_and_hardware_label():
    cpu = environment.facts("PyTorch", "2.0", "cpu", threads=2)
    assert cpu["python"] and cpu["numpy"] == np.__version__ and cpu["gpu_count"] == 0
    assert "cores" in environment.hardware_label(cpu)
    gpu = environment.facts("PyTorch", "2.0", "cuda:0", gpus=["NVIDIA H100"], cuda="12.8", cudnn=90100)
    assert environment.hardware_label(gpu) == "NVIDIA H100 x1" and gpu["cudnn"] == "90100"


def test_prepare_pins_threads_and_hides_gpus(monkeypatch):
    fake_environ = {}
    monkeypatch.setattr(environment.os, "environ", fake_environ)  # the real environment stays untouched
    calls = []
    monkeypatch.setattr(environment.os, "sched_setaffinity", lambda pid, cpus: calls.append(list(cpus)), raising=False)
    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    environment.prepare(threads=2, device="cpu")
    assert calls == [[0, 1]]
    assert all(fake_environ[name] == "2" for name in environment.THREAD_VARIABLES)
    assert fake_environ["CUDA_VISIBLE_DEVICES"] == ""


@pytest.mark.parametrize("machines, rank, coordinator, message", [
    (2, 0, "", "machines=2: coordinator must name machine 0 as host:port"),
    (2, 2, "10.0.0.1:29500", "machine_rank=2: must be 0 to 1 (machines=2)"),
    (1, -1, "", "machine_rank=-1: must be 0 to 0 (machines=1)"),
])
def test_a_machine_that_cannot_join_is_a_one_line_error(machines, rank, coordinator, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        environment.check_machines(machines, rank, coordinator)


def test_one_machine_and_each_of_several_with_a_coordinator_may_join():
    environment.check_machines(1, 0, "")
    for rank in (0, 1):
        environment.check_machines(2, rank, "10.0.0.1:29500")


def test_a_training_result_gets_its_timings_and_headline_and_is_written(tmp_path):
    record = finished_cnn_record()
    said = []
    written = results.write_training_result(str(tmp_path / "r.json"), record, [3.0, 2.0, 2.5], 0.75, compile_s=1.5,
                                            say=said.append)
    assert written["metrics"] == {"train_s": 7.5, "accuracy": 0.75} and written["timings"]["compile_s"] == 1.5
    assert written["timings"]["first_epoch_s"] == 3.0 and results.read_result(str(tmp_path / "r.json")) == json.loads(
        json.dumps(written, default=float))
    assert said == [results.summary_line(written)]


def test_a_throughput_result_takes_the_medians_of_its_passes(tmp_path):
    record = results.new_record("PyTorch", "train", "smoke", params={"steps": 1})
    record.update(data={"source": "synthetic", "description": "x"}, device="cpu",
                  environment=environment.facts("PyTorch", "2.0", "cpu", threads=2))
    timings = timing.training_throughput([2.0, 4.0, 3.0], images_per_pass=100, warmup_s=1.0)
    written = results.write_throughput_result(str(tmp_path / "r.json"), record, timings, say=lambda line: None)
    assert written["metrics"] == {"s_per_1000_images": 30.0, "images_per_s": pytest.approx(100 / 3.0)}
    assert results.read_result(str(tmp_path / "r.json"))["timings"]["passes_s"] == [2.0, 4.0, 3.0]
