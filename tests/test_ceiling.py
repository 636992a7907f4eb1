"""The measured ceiling (runner/run/ceiling.py) and the Util. column against it (runner/report/table.py): fake CPUs and
GEMM timings drive the per-cycle rule, the cache and the column; one real measurement on this machine bounds a real
smoke run."""

import dataclasses
import json
import subprocess
import sys
import time

import pytest
from conftest import require_environment

from common import environment, flops, results
from runner import catalog, run_folder
from runner.report import table
from runner.run import ceiling, execution, machine_probe

CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
cpu family\t: {family}
model\t\t: {model}
model name\t: A CPU
cpu MHz\t\t: 2596.000
flags\t\t: fpu sse sse2 avx fma avx2 {extra}
"""


def cpuinfo(vendor, family, model, extra=""):
    return CPUINFO.format(vendor=vendor, family=family, model=model, extra=extra)


def test_the_per_cycle_rule_names_the_families_it_knows_and_no_other():
    assert flops.cpu_simd(cpuinfo("GenuineIntel", 6, 143, "avx512f")) == "avx512"
    assert flops.cpu_simd(cpuinfo("GenuineIntel", 6, 85)) == "avx2"
    assert flops.cpu_simd(cpuinfo("AuthenticAMD", 25, 17, "avx512f")) == "avx512-on-256"  # Zen 4
    assert flops.cpu_simd(cpuinfo("AuthenticAMD", 23, 49)) == "avx2"  # Zen 2
    assert flops.cpu_simd(cpuinfo("AuthenticAMD", 23, 8)) is None  # Zen+: 128-bit units, not named
    assert flops.cpu_simd(cpuinfo("AuthenticAMD", 26, 2, "avx512f")) is None  # Zen 5: unknown, never guessed
    assert flops.cpu_peak_gflops(2, 2596.0, flops.cpu_simd(cpuinfo("AuthenticAMD", 26, 2, "avx512f"))) is None
    assert flops.cpu_family(cpuinfo("AuthenticAMD", 26, 2)) == "AuthenticAMD family 26 model 2"


def fake_probe(timings, calls, seconds=0.0):
    """A probe that answers each path with the GFLOP/s of `timings` (or an error where it has none) after `seconds`,
    counting calls."""
    def probe(env_name, paths, threads, budget_s=ceiling.BUDGET_S):
        calls.append((env_name, tuple(paths), threads))
        time.sleep(seconds)
        return {path: ({"gflops": timings[path], "library": "Fake 1.0", "environment": env_name} if path in timings
                       else {"error": "no such library"}) for path in paths}
    return probe


def quiet():
    """A machine on which no other program computes: what cpu_seconds_of_others() reads there."""
    return 0.0


TIMINGS = {"numpy.matmul fp32": 478.0, "torch.mm fp32": 214.0, "torch.conv1x1 fp32": 412.0, "torch.mm bf16": 845.0}


# What a machine's own environment may set for the libraries' kernels: nothing, or what some machines of this
# project's kind set for OpenBLAS (older builds fail on their processors); the tests hold whatever the machine has
MACHINE_KERNEL_VARIABLES = ({}, {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512"})


@pytest.mark.parametrize("machine", MACHINE_KERNEL_VARIABLES, ids=["unset", "openblas-set"])
def test_the_best_path_of_each_precision_is_the_ceiling_and_a_machine_measures_it_takes_times(tmp_path, monkeypatch,
                                                                                              machine):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")  # the cache, and no stamps: the key has no builds
    for name in environment.KERNEL_VARIABLES + ("OPENBLAS_L2_SIZE",):  # the machine's own, whatever it has, replaced
        monkeypatch.delenv(name, raising=False)
    for name, value in machine.items():
        monkeypatch.setenv(name, value)
    calls, probe = [], None
    probe = fake_probe(TIMINGS, calls)
    first = ceiling.cached_or_measured("cpu", 2, probe=probe, say=lambda line: None, others=quiet)
    assert {p: b["path"] for p, b in first["ceilings"].items()} == {"fp32": "numpy.matmul fp32", "bf16": "torch.mm bf16"}
    assert first["ceilings"]["fp32"]["gflops"] == 478.0 and not first["cached"]  # not MKL's slower 214
    assert first["paths"]["torch.mm fp16"] == {"error": "no such library"}
    assert first["key"]["threads"] == 2 and first["key"]["cpu"] and "kernel_variables" in first["key"]
    assert len(calls) == 2  # one probe per environment
    for take in range(2, ceiling.TAKES + 1):  # one take a run until TAKES quiet ones: the best kept, their spread said
        again = ceiling.cached_or_measured("cpu", 2, probe=probe, say=lambda line: None, others=quiet)
        assert not again["cached"] and again["taken"] == take and len(calls) == 2 * take
    assert run_folder.ceiling_spread(again["ceilings"]["fp32"]) == "best of 3 takes, 478 to 478 GFLOP/s"
    again = ceiling.cached_or_measured("cpu", 2, probe=probe, say=lambda line: None, others=quiet)
    assert again["cached"] and again["ceilings"]["fp32"]["gflops"] == 478.0 and len(calls) == 2 * ceiling.TAKES
    ceiling.cached_or_measured("cpu", 1, probe=probe, say=lambda line: None, others=quiet)  # another key: again
    assert len(calls) == 2 * ceiling.TAKES + 2
    other = "SkylakeX" if machine.get("OPENBLAS_CORETYPE") == "Haswell" else "Haswell"
    monkeypatch.setenv("OPENBLAS_CORETYPE", other)  # a variable that changes a library's kernels: another key
    assert not ceiling.cached_or_measured("cpu", 2, probe=probe, say=lambda line: None, others=quiet)["cached"]


def test_a_ceiling_measured_while_another_program_computes_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(ceiling, "TAKES", 1)  # kept at its first quiet take
    calls, said = [], []
    probe = fake_probe(TIMINGS, calls, seconds=2 * machine_probe.BUSY_WALL_S)  # the machine's own clock ticks read
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 20\nwhile time.time() < end: pass"])
    try:
        busy = ceiling.cached_or_measured("cpu", 2, probe=probe, say=said.append)
    finally:
        spinner.kill()
        spinner.wait()
    assert busy["busy_cores"] > 0.5 and not busy["cached"]  # the spinner kept a core, the sleeping probe none
    assert busy["ceilings"]["fp32"]["gflops"] == 478.0  # the run still has its figures...
    assert "not cached" in said[-1] and not (tmp_path / "envs" / ceiling.CACHE_FILE).exists()  # ...kept by no cache
    again = ceiling.cached_or_measured("cpu", 2, probe=probe, say=said.append, others=quiet)
    assert not again["cached"] and len(calls) == 4  # measured again; this time, quiet, it is kept
    assert ceiling.cached_or_measured("cpu", 2, probe=probe, say=said.append, others=quiet)["cached"]


def test_a_path_that_failed_for_a_passing_reason_is_measured_again_and_the_best_answer_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(ceiling, "TAKES", 1)  # kept at its first quiet take
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    calls, answers = [], {"torch.mm fp16": {"error": "no answer within 20 s", "retry": True},
                          "torch.mm bf16": {"gflops": 845.0, "library": "Fake 1.0"}}

    def probe(env_name, paths, threads):
        calls.append((env_name, tuple(paths)))
        return {path: dict(answers.get(path, {"gflops": 100.0, "library": "Fake 1.0"})) for path in paths}

    first = ceiling.cached_or_measured("cpu", 2, probe=probe, say=lambda line: None, others=quiet)
    assert "fp16" not in first["ceilings"] and first["paths"]["torch.mm fp16"]["retry"]
    answers.update({"torch.mm fp16": {"gflops": 0.4, "library": "Fake 1.0"},
                    "torch.mm bf16": {"gflops": 400.0, "library": "Fake 1.0"}})
    second = ceiling.cached_or_measured("cpu", 2, probe=probe, say=lambda line: None, others=quiet)
    assert calls[-1] == ("pytorch", ("torch.mm fp16",)) and len(calls) == 3  # that path alone, in its environment
    assert second["ceilings"]["fp16"]["gflops"] == 0.4 and second["ceilings"]["bf16"]["gflops"] == 845.0
    assert ceiling.cached_or_measured("cpu", 2, probe=probe, say=lambda line: None, others=quiet)["cached"]


SLOW_PROBE = """import json, sys, time
for path in json.loads(sys.argv[1])["paths"]:
    print("a library's own line")
    if path.startswith("slow"):
        time.sleep(60)
    print(json.dumps({path: {"gflops": 1.0, "library": "Fixture"}}), flush=True)
"""


def test_a_path_that_does_not_answer_in_its_time_is_stopped_alone(tmp_path, monkeypatch):
    require_environment(catalog.ENVIRONMENTS["runner"])
    script = tmp_path / "probe.py"
    script.write_text(SLOW_PROBE)
    monkeypatch.setattr(ceiling, "PROBE", script)
    monkeypatch.setattr(ceiling, "START_LIMIT_S", 30.0)  # the runner's interpreter, loaded or not
    answers = ceiling.run_probe("runner", ["quick fp32", "slow fp16", "after bf16"], 1, path_limit_s=1.0)
    assert answers["quick fp32"]["gflops"] == 1.0 and answers["after bf16"]["gflops"] == 1.0  # a new probe for it
    assert answers["slow fp16"] == {"error": "no answer within 1 s", "environment": "runner", "retry": True}


def record_of(run_dir, framework, s_per_1000, precision="fp32", device="cpu", gpus=()):
    """A finished inference record in `run_dir` with the time per image that gives the wanted GFLOP/s."""
    record = results.new_record(framework, "inference", "smoke")
    record.update(status="ok", model="ResNet-50 v1.5, torchvision", params={"image_size": 224},
                  metrics={"s_per_1000_images": s_per_1000, "images_per_s": 1000.0 / s_per_1000})
    record["environment"] = {"device": device, "gpus": list(gpus), "computed_precision": precision, "threads": 2,
                             "cpu_mhz": 2596.0, "cpu_simd": "avx512", "kernel_variables": {"OPENBLAS_CORETYPE": "Haswell"}}
    results.write_result(str(run_folder.record_path(run_dir, framework + "_Inference")), record, "ok")
    return record


def test_util_is_against_the_measured_ceiling_and_flags_what_passes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    written = ceiling.for_run(run_dir, 2, probe=fake_probe(TIMINGS, []), say=lambda line: None)
    assert json.loads((run_dir / run_folder.CEILING_FILE).read_text()) == written
    forward = flops.resnet50_forward_flops(224, "1.5")  # FLOPs of one image
    at = {name: forward * 1000 / (gflops * 1e9) for name, gflops in
          (("half", 239.0), ("above", 478.0 * 1.2), ("noise", 478.0 * 1.03), ("bf16", 422.5))}
    record_of(run_dir, "Half", at["half"])
    record_of(run_dir, "Above", at["above"])
    record_of(run_dir, "Noise", at["noise"])
    record_of(run_dir, "Bf", at["bf16"], precision="bf16")
    record_of(run_dir, "Gpu", at["half"], device="cuda:0", gpus=["NVIDIA H100 80GB HBM3"])  # no GPU ceiling here
    rows = {r["framework"]: r for r in (table.row(record) for record in table.load_records(run_dir))}
    assert rows["Half"]["utilisation"] == pytest.approx(0.5) and table.utilisation_text(rows["Half"]) == "50%"
    assert table.utilisation_text(rows["Above"]) == "120%!"  # flagged: past the ceiling by more than its noise
    assert table.utilisation_text(rows["Noise"]) == "103%"  # within the noise: not flagged
    assert rows["Bf"]["ceiling_path"] == "torch.mm bf16" and table.utilisation_text(rows["Bf"]) == "50%"
    assert rows["Gpu"]["utilisation"] is None and rows["Gpu"]["peak_gflop_per_s"] == 67000.0  # never mixed
    assert rows["Half"]["peak_gflop_per_s"] == pytest.approx(2 * 2.596 * 64)  # the guess, beside it
    notes = table.row_notes(list(rows.values()))
    assert "Util.'s ceiling, fp32: 478 GFLOP/s by numpy.matmul fp32 (Fake 1.0, 2 threads)." in notes
    assert any("OPENBLAS_CORETYPE=Haswell" in line for line in notes)
    old = dict(table.load_records(run_dir)[0], ceiling=None)  # a record of a run that measured no ceiling
    assert table.utilisation_text(table.row(old)) == ""


def test_this_machine_s_ceiling_is_measured_in_seconds_and_bounds_a_real_run(tmp_path, monkeypatch):
    monkeypatch.delenv(ceiling.SKIP_VARIABLE, raising=False)
    (job,) = catalog.select(["pytorch"], ["inference"])
    require_environment(job.environment)
    require_environment(catalog.ENVIRONMENTS["runner"])
    measured = ceiling.measure("cpu", 2, say=lambda line: None)
    assert {"fp32", "bf16"} <= set(measured["ceilings"]), measured["paths"]
    for path, answer in measured["paths"].items():  # every path answered in its own time, slow or not (fp16 on a
        assert "gflops" in answer or not answer.get("retry"), (path, answer)  # CPU without a float16 unit: 0.4 GFLOP/s)
        assert "gflops" not in answer or answer["repeats"] >= 2 and answer["size"], (path, answer)
    parameters = {"data_source": "synthetic", "device": "cpu", "threads": 2, "seed": 0, "overrides": {"weights": "random"}}
    record = execution.run_job(job, tmp_path, "smoke", parameters, timeout=600, show_output=False)
    assert record["status"] == "ok", record["error"]
    achieved = table.achieved_gflops(record)
    assert 0 < achieved <= measured["ceilings"]["fp32"]["gflops"] * (1 + table.CEILING_NOISE)


GPU_TIMINGS = {"torch.cuda.mm fp32": 51200.0, "torch.cuda.mm tf32": 409000.0, "torch.cuda.mm bf16": 784000.0,
               "torch.cuda.mm fp16": 756000.0, **TIMINGS}


def test_a_gpu_run_measures_its_gpu_too_and_each_row_takes_its_device_s_ceiling(tmp_path, monkeypatch):
    monkeypatch.setattr(ceiling, "TAKES", 1)  # kept at its first quiet take
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    h200 = {"name": "NVIDIA H200", "driver": "580.159.04"}
    calls = []
    written = ceiling.for_run(run_dir, 16, gpu=h200, probe=fake_probe(GPU_TIMINGS, calls), say=lambda line: None)
    assert [m["device"] for m in written["measured"]] == ["cpu", "NVIDIA H200"]
    assert written["measured"][1]["key"]["driver"] == "580.159.04" and written["measured"][1]["ceilings"]["tf32"][
        "gflops"] == 409000.0
    forward = flops.resnet50_forward_flops(224, "1.5")
    record_of(run_dir, "Tf32", forward * 1000 / (204500.0 * 1e9), precision="tf32", device="cuda:0", gpus=["NVIDIA H200"])
    record_of(run_dir, "Other", forward * 1000 / (204500.0 * 1e9), precision="tf32", device="cuda:0", gpus=["NVIDIA H100"])
    rows = {r["framework"]: r for r in (table.row(record) for record in table.load_records(run_dir))}
    assert rows["Tf32"]["ceiling_path"] == "torch.cuda.mm tf32" and table.utilisation_text(rows["Tf32"]) == "50%"
    assert rows["Tf32"]["utilisation_of_peak"] == pytest.approx(204500.0 / 67000.0)  # the datasheet's fp32, apart
    assert rows["Other"]["utilisation"] is None  # another GPU than the one measured
    ceiling.for_run(tmp_path, 16, gpu=dict(h200, driver="590.1"), probe=fake_probe(GPU_TIMINGS, calls),
                    say=lambda line: None)
    assert [env for env, _, _ in calls].count("pytorch") == 3  # a new driver: the GPU measured again, the CPU not


def test_a_gpu_without_pytorch_takes_jax_s_products_as_its_ceiling(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    jax_only = {"jax.dot fp32": 48000.0, "jax.dot tf32": 380000.0, "jax.dot bf16": 700000.0, **TIMINGS}
    measured = ceiling.cached_or_measured("gpu", 16, {"name": "NVIDIA H100", "driver": "590.1"},
                                          probe=fake_probe(jax_only, []), say=lambda line: None)
    assert {p: b["path"] for p, b in measured["ceilings"].items()} == {
        "fp32": "jax.dot fp32", "tf32": "jax.dot tf32", "bf16": "jax.dot bf16"}  # fp16: neither answered
    both = dict(jax_only, **{"torch.cuda.mm bf16": 750000.0})
    measured = ceiling.measure("gpu", 16, {"name": "NVIDIA H100"}, probe=fake_probe(both, []), say=lambda line: None)
    assert measured["ceilings"]["bf16"]["path"] == "torch.cuda.mm bf16"  # where both answer, the faster


def test_jax_s_probe_runs_in_its_environment_and_says_when_it_has_no_gpu():
    env = catalog.ENVIRONMENTS["jax"]
    require_environment(env)
    paths = [path for name, path in ceiling.GPU_PATHS if name == "jax"]
    answers = ceiling.run_probe("jax", paths, 1, budget_s=0.1)
    assert answers == {path: {"error": "no GPU that JAX can use", "environment": "jax"} for path in paths}


def test_a_notebook_run_on_a_ray_node_carries_its_node_s_ceiling(tmp_path, monkeypatch):
    from runner.run import on_ray

    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ceiling.for_run(run_dir, 2, probe=fake_probe(TIMINGS, []), say=lambda line: None)  # the head's: 478 fp32
    node = dict(ceiling.here(4, probe=fake_probe({"torch.mm fp32": 1000.0}, []), say=lambda line: None), host="node-7")
    forward = flops.resnet50_forward_flops(224, "1.5")
    record = record_of(tmp_path, "Far", forward * 1000 / (250.0 * 1e9))  # 250 GFLOP/s, written where the node left it
    (job,) = catalog.select(["pytorch"], ["inference"])
    job = dataclasses.replace(job, framework=dataclasses.replace(job.framework, label="Far", notebook_prefix="Far"))
    placement = {"host": "node-7", "node_ip": "10.0.0.7", "threads": 4}
    for answer_ceiling, expected in ((node, "25%"), (None, "")):  # its node's; without one, not the head's
        answer = {"status": "ok", "error": None, "elapsed": 1.0, "notebook": None, "ceiling": answer_ceiling,
                  "record": json.dumps(record), "placement": placement}
        landed = on_ray.land(job, run_dir, "smoke", answer)
        assert landed.get("node_ceiling") == answer_ceiling
        (row,) = [table.row(r) for r in table.load_records(run_dir) if r["framework"] == "Far"]
        assert table.utilisation_text(row) == expected and row["ceiling_threads"] == (4 if answer_ceiling else None)
