"""The comparison table and plot, from hand-made records (no notebook runs)."""

from html.parser import HTMLParser

import pytest

from common import environment, results, tasks, timing
from runner import run_folder
from runner.report import html_pages, plots, run_report, table


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
    ordered = table.load_records(tmp_path)
    assert [(r["task"], r["framework"], r["variant"]) for r in ordered] == [
        ("cnn", "PyTorch", None), ("cnn", "Keras", "tensorflow"), ("cnn", "Keras", "torch"), ("cnn", "JAX", None),
        ("inference", "PyTorch", None),
    ]
    assert table.label(table.row(ordered[2])) == "Keras (torch)" == results.label("Keras", "torch")
    text = run_report.markdown(ordered)
    assert "| JAX | 1.0 | cpu | synthetic | 1.0 |" in text and "| 2.50 |  |  |  | 0.900 | ok |" in text
    assert "failed: RuntimeError: CUDA / out of memory" in text  # a '|' in an error cannot break the table
    assert "### RNN" not in text  # no empty sections
    plots.plot(ordered, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def write_run(directory, profile, records):
    directory.mkdir()
    for number, record in enumerate(records):
        record = dict(record, profile=profile)
        results.write_result(str(directory / "{}.result.json".format(number)), record, record["status"])
    return directory


def test_html_run_page_lists_every_row_and_links_notebooks(tmp_path):
    records = [ok_record("PyTorch", "cnn", train_s=2.0, accuracy=0.5),
               results.failure_record("JAX", "cnn", "quick", "timeout", "stopped after 10 s", notebook="JAX_CNN.ipynb")]
    records[0]["notebook"] = "PyTorch_CNN.ipynb"
    from runner.report import html_pages

    page = html_pages.run_page(tmp_path, records, {"PyTorch_CNN.ipynb": "PyTorch_CNN.html"})
    assert '<a href="PyTorch_CNN.html">PyTorch</a>' in page
    assert "timeout: stopped after 10 s" in page and 'class="bar"' in page
    assert page.count("<h2>") == 2  # CNN and the environment


def test_merged_table_has_a_column_per_run_and_flags_what_differs(tmp_path):
    from runner.report import html_pages

    quick = write_run(tmp_path / "a-quick", "quick", [ok_record("PyTorch", "cnn", train_s=40.0, accuracy=0.5)])
    smoke = write_run(tmp_path / "b-smoke", "smoke", [ok_record("PyTorch", "cnn", train_s=1.0, accuracy=0.1),
                                                      ok_record("JAX", "cnn", train_s=2.0, accuracy=0.2)])
    text = html_pages.merged_markdown([quick, smoke])
    header = next(line for line in text.splitlines() if line.startswith("| Framework"))
    assert "/ quick (a-quick)" in header and "/ smoke (b-smoke)" in header
    assert "| PyTorch | 40.0 (acc 0.500) [synthetic data] | 1.0 (acc 0.100) [synthetic data] |" in text
    assert "| JAX | not run | 2.0 (acc 0.200) [synthetic data] |" in text
    assert "<th>" in html_pages.merged_page([quick, smoke])


def test_the_equivalence_check_fills_a_same_as_pytorch_column(tmp_path):
    import json

    from runner.checks import equivalence

    run_dir = write_run(tmp_path / "run", "quick", [
        ok_record("PyTorch", "rnn", train_s=2.0, accuracy=0.6), ok_record("CNTK", "rnn", train_s=3.0, accuracy=0.5),
        ok_record("Keras", "rnn", "jax", train_s=3.0, accuracy=0.5), ok_record("MXNet", "rnn", train_s=1.0, accuracy=0.5),
        ok_record("PyTorch", "inference", s_per_1000_images=5.0, images_per_s=200.0)])
    base = {"task": "rnn", "failures": [], "equivalent": True, "reason": None, "step_differences": {}}
    checked = [dict(base, framework="Keras (jax)", logits_max_abs=1.5e-7),
               dict(base, framework="CNTK", equivalent=False, reason="reset gate | before")]
    (run_dir / run_folder.CHECKS_DIR).mkdir()
    (run_dir / run_folder.CHECKS_DIR / run_folder.EQUIVALENCE_FILE).write_text(
        json.dumps({"rnn": equivalence.document("rnn", checked)}))
    text = run_report.write_report(run_dir)
    assert "| Accuracy | Status | Same as PyTorch |" in text and table.EQUIVALENCE_NOTE in text
    assert text.count("| ok | reference |") == 1 and "| ok | yes (logits within 1.5e-07) |" in text
    assert "| ok | no: reset gate / before |" in text and "| ok | not checked |" in text  # MXNet was not checked
    assert "| 200.0 |  |  |  | ok |\n" in text  # no check of inference ran: no such column there
    page = (run_dir / "report.html").read_text()
    assert "Same as PyTorch" in page and "no: reset gate / before" in page
    rows = {(r["task"], r["framework"]): r for r in json.loads((run_dir / "results.json").read_text())["rows"]}
    assert rows["rnn", "CNTK"]["same_as_pytorch"] == "no: reset gate / before"
    assert rows["inference", "PyTorch"]["same_as_pytorch"] == "reference"


def test_accuracy_flags_chance_level_runs_and_full_runs_off_the_median():
    def row_of(framework, accuracy, profile="quick", data="synthetic", task="cnn", test_samples=1024):
        record = ok_record(framework, task, train_s=1.0, accuracy=accuracy)
        record.update(profile=profile, data={"source": data, "description": "x"},
                      params={"num_classes": 10 if task == "cnn" else 2, "test_samples": test_samples})
        return table.row(record)

    quick = [row_of("PyTorch", 0.104), row_of("JAX", 0.149), row_of("MXNet", 0.151)]
    assert [table.accuracy_flag(r, quick) for r in quick] == ["not above chance", "not above chance", None]
    small = row_of("PyTorch", 0.60, task="rnn", test_samples=128)  # 3 standard errors at 128 reviews: 0.13
    assert table.accuracy_flag(small, [small]) == "not above chance"
    full = [row_of(name, acc, "full", "real", test_samples=None) for name, acc in
            (("PyTorch", 0.770), ("TensorFlow", 0.766), ("Keras", 0.778), ("JAX", 0.730))]
    assert [table.accuracy_flag(r, full) for r in full] == [None, None, None, "3.8 points from median"]
    assert table.accuracy_text(full[3], full) == "0.730 (3.8 points from median)"
    synthetic_full = row_of("JAX", 0.731, "full", "synthetic", test_samples=None)
    assert table.accuracy_flag(synthetic_full, full + [synthetic_full]) is None  # only real data is compared


def test_throughput_counts_an_epochs_flops_against_the_device_peak():
    from common import hyperparams, tasks

    params = hyperparams.for_task("cnn", "quick", {"train_samples": 10000})
    record = ok_record("PyTorch", "cnn", train_s=100.0, accuracy=0.5)
    record.update(params=params, timings={"epoch_s": {"median": 100.0}})
    record["environment"].update(threads=2, cpu_mhz=2000.0, cpu_simd="avx2")
    gflops, peak = table.throughput(record)
    samples = 10000 // 64 * 64  # whole batches
    assert gflops == pytest.approx(tasks.get("cnn").training_flops(params) * samples / 100.0 / 1e9) and 35 < gflops < 40
    assert peak == 2 * 2.0 * 32  # cores x GHz x FLOPs per cycle
    assert table.row(record)["utilisation_of_peak"] == pytest.approx(gflops / peak)  # beside Util., never in it
    assert table.utilisation_text(table.row(record)) == ""  # no measured ceiling
    record["ceiling"] = {"gflops": 4 * gflops, "path": "numpy.matmul fp32"}
    assert table.utilisation_text(table.row(record)) == "25%"
    record["ceiling"] = None  # a GPU row's would be its GPU's (runner/run_folder.py ceiling_for)
    record["environment"].update(device="cuda:0", gpus=["NVIDIA H100 80GB HBM3"])
    assert table.throughput(record)[1] == 67000.0
    record["environment"].update(gpus=["Some Future GPU"])
    assert table.throughput(record)[1] is None and table.utilisation_text(table.row(record)) == ""


def gpu_record(framework, device, gpu_name, details=None, precision="tf32", **metrics):
    """A finished inference record of a GPU run, as a framework module writes it."""
    record = ok_record(framework, "inference", s_per_1000_images=metrics.pop("s", 1.0), images_per_s=1000.0)
    record["device"] = device
    record["params"] = {"image_size": 224}
    record["model"] = "ResNet-50 v1.5, torchvision"
    record["environment"].update(device=device, gpus=[gpu_name], gpu_count=1, computed_precision=precision,
                                 gpu_details=details or [])
    return record


def test_gpu_rows_name_their_gpu_precision_and_peak_for_every_framework_spelling():
    h100 = table.row(gpu_record("TensorFlow", "/GPU:0", "NVIDIA H100 80GB HBM3"))
    assert h100["hardware"] == "NVIDIA H100 80GB HBM3 x1"  # not the CPU: TensorFlow's /GPU:0 is a GPU run
    assert h100["peak_gflop_per_s"] == 67000.0 and not h100["peak_estimated"]
    assert table.device_text(h100) == "/GPU:0 tf32"
    older = gpu_record("TensorFlow", "/GPU:0", "NVIDIA H100 80GB HBM3")  # a record from before computed_precision
    older["environment"]["precision"] = older["environment"].pop("computed_precision")
    assert table.row(older)["computed_precision"] == "tf32" and table.device_text(table.row(older)) == "/GPU:0 tf32"
    a10g = table.row(gpu_record("MXNet", "gpu(0)", "NVIDIA A10G", precision="tf32", details=[
        {"name": "NVIDIA A10G", "compute_capability": "8.6", "multiprocessors": 80, "max_clock_mhz": 1710.0}]))
    assert a10g["peak_gflop_per_s"] == pytest.approx(35020.8) and a10g["peak_estimated"]
    assert a10g["utilisation_of_peak"] is not None and table.utilisation_text(a10g) == ""  # Util.: measured only
    t4 = table.row(gpu_record("Chainer", "@cupy:0", "Tesla T4", precision="fp32"))
    assert table.device_text(t4) == "@cupy:0" and t4["peak_gflop_per_s"] == 8100.0


def test_rows_that_could_not_use_the_gpu_say_why():
    unusable = ok_record("JAX", "cnn", train_s=1.0, accuracy=0.9)
    unusable["environment"]["gpu_unused"] = "JAX could not use this machine's NVIDIA H100 80GB HBM3: no CUDA plugin"
    unavailable = results.failure_record("MXNet", "cnn", "quick", "unavailable", "unavailable on this GPU: "
                                         "mxnet-gpu.txt (CUDA 11.2): this NVIDIA H100 80GB HBM3 is compute capability 9.0")
    adopted = ok_record("PyTorch", "cnn", train_s=1.0, accuracy=0.9)
    adopted["environment"].update(build="adopted /usr/bin/python3.12", framework_version="2.11.0+cu130")
    text = run_report.markdown([adopted, unusable, unavailable])
    assert "| JAX | 1.0 | cpu (GPU not used) |" in text
    assert "- JAX: JAX could not use this machine's NVIDIA H100 80GB HBM3: no CUDA plugin." in text
    assert "| unavailable on this GPU: mxnet-gpu.txt (CUDA 11.2): this NVIDIA H100" in text  # said once, not twice
    assert "| PyTorch | 2.11.0+cu130 (adopted) |" in text
    assert "every framework's timed loop starts from batches in host memory" in text


class _HTMLTables(HTMLParser):
    """The tables of one class of a page (<table class="results">, say): per table, rows of cell texts; bar cells left
    out."""

    def __init__(self, kind):
        super().__init__()
        self.kind, self.tables, self.titles, self._title, self._cell, self._in_results = kind, [], [], None, None, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "h2":
            self._title = ""
        elif tag == "table":
            self._in_results = attrs.get("class") == self.kind
            if self._in_results:
                self.tables.append([])
                self.titles.append(self.last_title)
        elif tag == "tr" and self._in_results:
            self.tables[-1].append([])
        elif tag in ("th", "td") and self._in_results and attrs.get("class") != html_pages.BAR_CLASS:
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "h2":
            self.last_title, self._title = self._title, None
        elif tag == "table":
            self._in_results = False
        elif tag in ("th", "td") and self._cell is not None:
            self.tables[-1][-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._title is not None:
            self._title += data
        if self._cell is not None:
            self._cell += data


def test_every_row_s_ledger_is_in_the_csv_and_on_the_html_page(tmp_path):
    fast = ok_record("PyTorch", "inference", s_per_1000_images=5.0, images_per_s=200.0)
    fast.update(compile="on", settings=results.speed_settings(
        "inference", layout="NHWC (channels_last memory format)", compiler="torch.compile (Inductor): freezing",
        kernels="oneDNN", threads=2, precision="fp32"))
    slow = ok_record("Keras", "rnn", "torch", train_s=3.0, accuracy=0.5)
    slow["settings"] = results.speed_settings("rnn", layout="NHWC", compiler="eager", kernels="oneDNN", autotune=True,
                                              threads=2, precision="bf16 (Keras' dtype policy mixed_bfloat16)")
    old = ok_record("JAX", "cnn", train_s=1.0, accuracy=0.9)  # a record from before the ledger
    run_dir = write_run(tmp_path / "run", "quick", [fast, slow, old])
    run_report.write_report(run_dir)
    import csv

    with open(str(run_dir / "results.csv")) as f:
        rows = {(row["framework"], row["task"]): row for row in csv.DictReader(f)}
    assert rows["PyTorch", "inference"]["settings"] == ("layout: NHWC (channels_last memory format); compiler: "
                                                        "torch.compile (Inductor): freezing; kernels: oneDNN; threads: 2; "
                                                        "precision: fp32")
    assert rows["Keras", "rnn"]["settings"].startswith("compiler: eager; kernels: oneDNN; autotune: on;")  # no layout
    assert rows["JAX", "cnn"]["settings"] == ""
    ledger = html_tables((run_dir / "report.html").read_text(), "settings")["What decides each row's speed"]
    assert ledger[0] == ["Row", "Task", "Layout", "Compiler", "Kernels", "Autotune", "Threads", "Precision"]
    assert ledger[1:] == [  # the rows with a ledger, in the table's order
        ["PyTorch · compiled", "inference", "NHWC (channels_last memory format)", "torch.compile (Inductor): freezing",
         "oneDNN", "-", "2", "fp32"],
        ["Keras (torch)", "rnn", "-", "eager", "oneDNN", "on", "2", "bf16 (Keras' dtype policy mixed_bfloat16)"]]
    with pytest.raises(ValueError, match="speed settings: unknown memory_format; known: layout, "):
        results.speed_settings("cnn", memory_format="NHWC")


def html_tables(page, kind="results"):
    """{table title (the h2 above it): rows of cell texts, the heading row first} of an HTML page's tables of class
    `kind` (the results tables by default)."""
    parser = _HTMLTables(kind)
    parser.feed(page)
    return dict(zip(parser.titles, parser.tables))


def markdown_tables(text):
    """{table title (the ### above it): rows of cell texts, the heading row first} of a Markdown page's tables."""
    tables, title = {}, None
    for line in text.splitlines():
        if line.startswith("### "):
            title = line[4:]
        elif line.startswith("|") and not line.startswith("|---"):
            tables.setdefault(title, []).append([cell.strip() for cell in line.strip()[1:-1].split(" | ")])
    return tables


def test_markdown_and_html_show_the_same_tables(tmp_path):
    import json

    from runner.checks import equivalence

    unusable = ok_record("JAX", "cnn", train_s=1.0, accuracy=0.9, compile_s=2.5)
    unusable["environment"]["gpu_unused"] = "JAX could not use this machine's GPU: no CUDA plugin"
    adopted = ok_record("PyTorch", "rnn", train_s=7.25, accuracy=0.55)
    adopted["environment"].update(build="adopted /usr/bin/python3.12", framework_version="2.11.0+cu130")
    inference = gpu_record("PyTorch", "cuda:0", "NVIDIA H100 80GB HBM3", s=4.0)
    inference["timings"] = {"s_per_1000_images": {"min": 3.5, "max": 4.75}}
    run_dir = write_run(tmp_path / "run", "quick", [
        ok_record("PyTorch", "cnn", train_s=2.0, accuracy=0.5), unusable,
        results.failure_record("MXNet", "cnn", "quick", "failed", "ValueError: planted failure"),
        results.failure_record("TensorFlow", "cnn", "quick", "timeout", "stopped after 10 s"),
        adopted, ok_record("Keras", "rnn", "jax", train_s=3.0, accuracy=0.6), inference,
        ok_record("JAX", "inference", s_per_1000_images=5.0, images_per_s=200.0)])
    checked = [{"task": "cnn", "framework": "JAX", "failures": [], "equivalent": True, "reason": None,
                "step_differences": {}, "logits_max_abs": 1e-6}]
    (run_dir / run_folder.CHECKS_DIR).mkdir()
    (run_dir / run_folder.CHECKS_DIR / run_folder.EQUIVALENCE_FILE).write_text(
        json.dumps({"cnn": equivalence.document("cnn", checked)}))
    markdown = markdown_tables(run_report.write_report(run_dir))
    page = html_tables((run_dir / "report.html").read_text())
    assert list(markdown) == list(page) == [tasks.TASKS[key].title for key in ("cnn", "inference", "rnn")]  # those run
    assert markdown == page
    cnn = markdown[tasks.TASKS["cnn"].title]
    assert cnn[0][-3:] == ["Accuracy", "Status", "Same as PyTorch"]
    assert ["MXNet"] + [""] * 12 + ["failed: ValueError: planted failure", "not checked"] in cnn
    jax = next(cells for cells in cnn if cells[0] == "JAX")
    assert jax[1:3] == ["1.0", "cpu (GPU not used)"] and jax[-1] == "yes (logits within 1.0e-06)"
    inference_rows = markdown[tasks.TASKS["inference"].title]
    assert "Accuracy" not in inference_rows[0] and "3.50 - 4.75" in inference_rows[1]


def test_merged_markdown_and_html_show_the_same_tables(tmp_path):
    quick = write_run(tmp_path / "a-quick", "quick", [ok_record("PyTorch", "cnn", train_s=40.0, accuracy=0.5),
                                                      ok_record("PyTorch", "inference", s_per_1000_images=5.0,
                                                                images_per_s=200.0)])
    smoke = write_run(tmp_path / "b-smoke", "smoke", [
        ok_record("JAX", "cnn", train_s=2.0, accuracy=0.2),
        results.failure_record("PyTorch", "cnn", "smoke", "failed", "RuntimeError: out of memory")])
    markdown = markdown_tables(html_pages.merged_markdown([quick, smoke]))
    page = html_tables(html_pages.merged_page([quick, smoke]))
    # the Markdown makes the '|' between hardware and profile in a heading a '/'
    assert markdown == {title: [[cell.replace("|", "/") for cell in cells] for cells in rows] for title, rows in page.items()}
    assert markdown[tasks.TASKS["inference"].title][1] == ["PyTorch", "5.00", "not run"]
    assert markdown[tasks.TASKS["cnn"].title][1][2] == "failed: RuntimeError: out of memory"


def test_each_column_is_declared_once_and_the_task_chooses_its_columns():
    keys = [column.key for column in table.COLUMNS]
    assert len(keys) == len(set(keys)) and len({c.heading for c in table.COLUMNS}) == len(keys)
    for task in tasks.TASKS.values():
        columns = table.columns_for(task)
        headlines = [column.key for column in columns if column.headline]
        assert headlines == [task.headline[0]]  # one headline figure per table: the task's
        assert ("Accuracy" in [c.heading for c in columns]) == task.trains
        assert ("Model" in [c.heading for c in columns]) != task.trains
        assert "Same as PyTorch" not in [c.heading for c in columns]
        assert table.columns_for(task, {("another task", "y"): {}}) == columns
        checked = [c.heading for c in table.columns_for(task, {(task.key, "y"): {}})]
        assert (checked[-1] == "Same as PyTorch") == (task.same_weights is not None), task  # only tasks the check covers
        assert (checked[-1] == "Data-parallel step = one device's") == (task.key == "train"), task
    assert all(any(column.applies(task) for task in tasks.TASKS.values()) for column in table.COLUMNS)


def test_an_unreadable_record_is_named_and_the_rest_is_reported(tmp_path, capsys):
    from runner import cli

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    results.write_result(str(run_dir / "PyTorch_CNN.result.json"), ok_record("PyTorch", "cnn", train_s=2.0, accuracy=0.5))
    good = (run_dir / "PyTorch_CNN.result.json").read_text()
    (run_dir / "JAX_CNN.result.json").write_text(good[:len(good) // 2])  # a copy that broke off
    (run_dir / "Keras_RNN-jax.result.json").write_text('{"schema_version": 1}')  # JSON, but not a record
    (run_dir / "notes.result.json").write_text("")  # a name that says no task: named, no row
    assert cli.main(["report", str(run_dir)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("run_all.py: warning: unreadable record: ") for line in err)
    assert "JAX_CNN.result.json: Unterminated string" in " ".join(err) or "JAX_CNN.result.json: Expecting" in " ".join(err)
    assert "Keras_RNN-jax.result.json: result record lacks fields: framework" in " ".join(err)
    text = (run_dir / "results.md").read_text()
    assert "| PyTorch | 1.0 | cpu | synthetic | 2.0 |" in text
    assert "| JAX |" in text and "| unreadable record: JAX_CNN.result.json: " in text
    assert "| Keras (jax) |" in text and "### RNN" in text
    assert "unreadable record: JAX_CNN.result.json" in (run_dir / "report.html").read_text()
    assert cli.main(["report", str(run_dir), str(run_dir), "--out", str(tmp_path / "merged")]) == 1
    assert "unreadable record: JAX_CNN.result.json" in (tmp_path / "merged" / "merged.md").read_text()


def test_training_rows_show_the_spread_of_the_epochs_after_the_first():
    """The 'min - max' column: the passes of inference, the epochs after the first of training; nothing for one
    epoch (it is all warm-up), so no spread is shown that was not measured."""
    three = ok_record("PyTorch", "cnn", train_s=12.0, accuracy=0.9)
    three["timings"].update(timing.training_timings([5.0, 3.0, 4.0]))
    one = ok_record("JAX", "cnn", train_s=5.0, accuracy=0.9)
    one["timings"].update(timing.training_timings([5.0]))
    (cnn,) = table.build([three, one]).tables
    headings = [column.heading for column in cnn.columns]
    spread = headings.index("min - max")
    assert headings[spread - 2:spread] == ["First epoch (s)", "Epoch (s, median)"]
    assert [r.cells[spread - 2:spread + 1] for r in cnn.rows] == [["5.0", "3.5", "3.0 - 4.0"], ["5.0", "5.0", ""]]
    assert table.row(three)["epoch_s_min"] == 3.0 and table.row(one)["epoch_s_max"] is None


def test_the_peak_resident_memory_of_the_timed_blocks_is_a_column_of_every_task():
    record = ok_record("PyTorch", "inference", s_per_1000_images=5.0, images_per_s=200.0)
    record["timings"].update(peak_rss_bytes=300 << 20, peak_rss_scope="timed blocks")
    (inference,) = table.build([record]).tables
    column = [c.heading for c in inference.columns].index("Peak RSS (MB)")
    assert inference.rows[0].cells[column] == "300" and table.row(record)["peak_rss_mb"] == 300.0
    assert table.MEMORY_NOTE in table.notes()


def test_variant_rows_stay_apart_in_run_and_merged_tables_and_only_default_rows_get_a_verdict(tmp_path):
    from runner.report import html_pages

    bf16 = ok_record("PyTorch", "cnn", train_s=20.0, accuracy=0.5)
    bf16.update(precision="bf16", compile="on")
    mxnet = ok_record("MXNet", "cnn", train_s=25.0, accuracy=0.5)
    refused = results.failure_record("Chainer", "cnn", "quick", "unsupported", "Chainer cannot run precision=bf16: "
                                     "NumPy has no bfloat16", precision="bf16")
    records = [bf16, ok_record("PyTorch", "cnn", train_s=40.0, accuracy=0.5), refused, mxnet]
    run = write_run(tmp_path / "a-quick", "quick", records)
    rows = [table.row(r) for r in table.load_records(run)]
    assert [table.label(r) for r in rows] == ["PyTorch", "PyTorch · bf16 · compiled", "MXNet", "Chainer · bf16"]
    checks = {("cnn", "MXNet"): {"equivalent": True, "failures": [], "reason": None, "logits_max_abs": 1e-7,
                                 "step_differences": {}}}
    assert table.same_as_pytorch(rows[1], checks) is None  # the check ran the notebooks as they stand
    assert table.same_as_pytorch(rows[2], checks).startswith("yes")
    text = run_report.markdown(table.load_records(run))  # a refused variant: a note under the table, not a row
    assert "| Chainer · bf16 |" not in text
    assert "- Chainer · bf16: not run, unsupported: Chainer cannot run precision=bf16" in text
    merged = html_pages.merged_markdown([run])
    assert "| PyTorch | 40.0 " in merged and "| PyTorch · bf16 · compiled | 20.0 " in merged


def test_a_devices_sweep_shows_the_scaling_efficiency_from_the_same_run():
    records = []
    for framework, throughputs in (("PyTorch", (10.0, 16.0, 30.0)), ("JAX", (10.0, None, 20.0))):
        for devices, images_per_s in zip((1, 2, 4), throughputs):
            if images_per_s is None:
                record = results.failure_record(framework, "train", "quick", "failed", "RuntimeError: gloo timed out",
                                                params={"devices": devices})
            else:
                record = ok_record(framework, "train", s_per_1000_images=1000.0 / images_per_s,
                                   images_per_s=images_per_s)
                record["params"] = {"devices": devices}
            record["sweep"] = {"devices": devices}
            records.append(record)
    (sweep,) = table.sweep_tables(table.order_records(records))
    lines = table.markdown_lines(sweep)
    assert lines[0] == ("| Framework | devices=1 | devices=2 | devices=4 | Efficiency at devices=2 | "
                        "Efficiency at devices=4 |")
    assert "| PyTorch | 10.0 | 16.0 | 30.0 | 80% | 75% |" in lines  # 16 / (2 x 10), 30 / (4 x 10)
    assert "| JAX | 10.0 | failed: RuntimeError: gloo timed out | 20.0 |  | 50% |" in lines
    batch_sweep = [dict(r, sweep={"batch_size": r["params"]["devices"]}) for r in records]
    assert "Efficiency" not in table.markdown_lines(table.sweep_tables(batch_sweep)[0])[0]  # only for devices


def test_a_sequence_length_sweep_shows_throughput_and_peak_memory():
    """The transformer's `--sweep maxlen=...`: samples/s, then the peak memory (the GPU's where a run recorded it)."""
    records = []
    for framework, peaks in (("PyTorch", (900.0, 2100.0, None)), ("JAX", (700.0, 1500.0, 6000.0))):
        for maxlen, peak in zip((128, 512, 2048), peaks):
            if peak is None:
                record = results.failure_record(framework, "transformer", "quick", "failed",
                                                "OutOfMemoryError: CUDA out of memory", params={"maxlen": maxlen})
            else:
                record = ok_record(framework, "transformer", train_s=10.0, accuracy=0.9)
                record["params"] = {"maxlen": maxlen, "train_samples": 1000, "batch_size": 50}
                record["timings"].update(peak_rss_bytes=peak * 2 ** 20, epoch_s={"median": 10.0, "min": 10.0,
                                                                                   "max": 10.0, "values": [10.0]})
            record["sweep"] = {"maxlen": maxlen}
            records.append(record)
    speed, memory = table.sweep_tables(table.order_records(records))
    assert table.markdown_lines(speed)[0] == "| Framework | maxlen=128 | maxlen=512 | maxlen=2048 |"
    lines = table.markdown_lines(memory)
    assert memory.title == "Transformer: encoder on IMDB: peak RSS (MB) against maxlen"
    assert "| PyTorch | 900 | 2100 | out of memory |" in lines and "| JAX | 700 | 1500 | 6000 |" in lines


def test_the_data_parallel_check_fills_its_column_in_the_train_and_sweep_tables(tmp_path):
    import json


    records = []
    for framework in ("PyTorch", "JAX", "TensorFlow"):
        for devices in (1, 2):
            record = ok_record(framework, "train", s_per_1000_images=100.0 / devices, images_per_s=10.0 * devices)
            record.update(params={"devices": devices}, sweep={"devices": devices})
            records.append(record)
    run_dir = write_run(tmp_path / "run", "smoke", records)
    base = {"task": "train", "devices": 2, "failures": [], "reference": None}
    checked = [dict(base, framework="PyTorch", moved=0.45, max_abs=0.0, allowed=1e-5),
               dict(base, framework="JAX", moved=0.45, max_abs=1e-2, parallel_error=9.3e-3, single_error=8.6e-3,
                    allowed=1.72e-2, reference="XLA | apart"),
               {"framework": "TensorFlow", "task": "train", "error": "TensorFlow_Train failed: ValueError: x"}]
    (run_dir / run_folder.CHECKS_DIR).mkdir()
    (run_dir / run_folder.CHECKS_DIR / run_folder.DATA_PARALLEL_FILE).write_text(
        json.dumps({"results": checked}))
    text = run_report.write_report(run_dir)
    assert table.DATA_PARALLEL_NOTE in text and table.EQUIVALENCE_NOTE not in text
    assert "| Status | Data-parallel step = one device's |" in text  # the train table
    assert "| PyTorch · devices=2 |" in text and text.count("| ok | yes (0.0e+00 of a 0.45 step) |") == 2
    assert "| ok | as exact as one device (9.3e-03 from the float64 step, one device 8.6e-03, of a 0.45 step; XLA / " \
        "apart) |" in text
    assert "| ok | check failed: TensorFlow_Train failed: ValueError: x |" in text
    sweep = text.split("## Sweep")[1]
    assert "| Efficiency at devices=2 | Data-parallel step = one device's |" in sweep
    assert "| PyTorch | 10.0 | 20.0 | 100% | yes (0.0e+00 of a 0.45 step) |" in sweep
    assert "Data-parallel step" in (run_dir / "report.html").read_text()


def test_a_gpu_sweep_of_devices_draws_its_efficiency_beside_the_prediction(tmp_path):
    """report.measured_scaling: one GPU's step time (its batch over images/s on one) and the efficiency at each other
    value, for scaling.png; nothing for a CPU sweep, whose devices share the cores."""
    records = []
    for device, framework in (("cuda:0", "PyTorch"), ("cpu", "JAX")):
        for devices, per_s in ((1, 500.0), (2, 900.0), (4, 1600.0)):
            record = ok_record(framework, "train", s_per_1000_images=1000.0 / per_s, images_per_s=per_s)
            record.update(device=device, params={"devices": devices, "batch_size": 64}, sweep={"devices": devices})
            records.append(record)
    measured = plots.measured_scaling(records)
    assert list(measured) == ["PyTorch"]
    step, efficiency = measured["PyTorch"]
    assert step == pytest.approx(64 / 500.0) and efficiency == pytest.approx({2: 0.9, 4: 0.8})
    gpu_run = write_run(tmp_path / "gpu", "full", records)
    run_report.write_report(gpu_run)
    assert (gpu_run / "scaling.png").read_bytes()[:4] == b"\x89PNG"
    assert "measured scaling efficiency beside the prediction" in (gpu_run / "report.html").read_text()
    cpu_run = write_run(tmp_path / "cpu", "full", [r for r in records if r["device"] == "cpu"])
    run_report.write_report(cpu_run)
    assert not (cpu_run / "scaling.png").exists()


def test_the_data_parallel_verdict_names_synchronised_batch_norm_and_refusals():

    synchronised = {"framework": "Keras (jax)", "task": "train", "devices": 2, "moved": 0.41, "max_abs": 6.4e-3,
                    "parallel_error": 6.9e-3, "single_error": 8.2e-3, "allowed": 1.64e-2, "reference": "XLA",
                    "synchronised": "one program", "failures": []}
    assert run_folder.data_parallel_verdict(synchronised) == (
        "as exact as one device (6.9e-03 from the float64 step, one device 8.2e-03, of a 0.41 step; batch norm over "
        "the whole batch; XLA)")
    exact = {"framework": "PyTorch", "task": "train", "devices": 2, "moved": 0.45, "max_abs": 0.0, "allowed": 1e-5,
             "reference": None, "synchronised": None, "failures": []}
    assert run_folder.data_parallel_verdict(exact) == "yes (0.0e+00 of a 0.45 step)"
    no_reference = {"framework": "JAX", "task": "train", "status": "unavailable",
                    "error": "the float64 reference step needs the PyTorch environment (python3 run_all.py setup pytorch)"}
    assert run_folder.data_parallel_verdict(no_reference) == "not checked: " + no_reference["error"]
    refused = {"framework": "Keras (torch)", "task": "train", "status": "unsupported",
               "error": "Keras_Train-torch unsupported: Keras on torch cannot run devices=2: no engine"}
    assert run_folder.data_parallel_verdict(refused) == "not checked: Keras on torch cannot run devices=2: no engine"
    failed = dict(refused, status="failed", error="Keras_Train-torch failed: ValueError: x")
    assert run_folder.data_parallel_verdict(failed) == "check failed: Keras_Train-torch failed: ValueError: x"
