"""The comparison table and plot, from hand-made records (no notebook runs)."""

from common import environment, results
from runner import report


def ok_record(framework, task, variant=None, **metrics):
    record = results.new_record(framework, task, "quick", variant=variant)
    record.update(device="cpu", data={"source": "synthetic", "description": "x"},
                  environment=environment.facts(framework, "1.0", "cpu", threads=2))
    record["timings"] = {"compile_s": metrics.pop("compile_s", None)}
    record["metrics"] = metrics
    return results.write_result("", record)


def test_rows_follow_the_catalog_and_show_compile_time_and_failures(tmp_path):
    records = [
        ok_record("Keras", "cnn", "torch", train_s=3.0, accuracy=0.5),
        ok_record("JAX", "cnn", train_s=1.0, accuracy=0.9, compile_s=2.5),
        ok_record("Keras", "cnn", "tensorflow", train_s=2.0, accuracy=0.7),
        results.failure_record("PyTorch", "cnn", "quick", "failed", "RuntimeError: CUDA | out of memory"),
        ok_record("PyTorch", "inference", s_per_1000_images=5.0, images_per_s=200.0),
    ]
    for number, record in enumerate(records):
        results.write_result(str(tmp_path / "{}.result.json".format(number)), record, record["status"])
    ordered = report.load_records(tmp_path)
    assert [(r["task"], r["framework"], r["variant"]) for r in ordered] == [
        ("cnn", "PyTorch", None), ("cnn", "Keras", "tensorflow"), ("cnn", "Keras", "torch"), ("cnn", "JAX", None),
        ("inference", "PyTorch", None),
    ]
    text = report.markdown(ordered)
    assert "| JAX | 1.0 | cpu | synthetic | 1.0 |" in text and "| 2.50 | 0.900 | ok |" in text
    assert "failed: RuntimeError: CUDA / out of memory" in text  # a '|' in an error cannot break the table
    assert "### RNN" not in text  # no empty sections
    report.plot(ordered, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"
