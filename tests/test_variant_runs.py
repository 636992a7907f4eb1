"""Smoke runs of the variants: each precision and compile mode reaches every framework's notebooks and runs the
framework's own way of it, or is refused with the reason (status 'unsupported'); a batch-size sweep draws its plot.

Every framework row gets three runs on the smoke profile and the CPU: the CNN in bf16 and compiled (bf16 alone
where the framework has no compile mode of its own), the RNN in fp16 (mixed precision with loss scaling) and
inference in tf32, which no CPU has; the transformer runs in fp16 where its attention has a path of its own for it
(TRANSFORMER_FP16). EXPECTED_UNSUPPORTED says which of them this CPU must refuse, and why. The
train task runs once per row in fp16 (bf16 where the row has no fp16 here) and compiled where it compiles, on two
devices (one where the row has one only), on each framework's data-parallel engine, with the same expectations.
"""

import dataclasses

import numpy as np
import pytest
from conftest import TRAIN_ONE_DEVICE, require_environment
from numpy_models import cnn_logits, rnn_forward, transformer_forward

from common import datasets, hyperparams, results, weights
from runner import catalog, cli
from runner.report import table
from runner.run import execution

# (framework label, variant name, precision or "compile") -> words of the reason it must be refused on this CPU
EXPECTED_UNSUPPORTED = {
    ("JAX", None, "compile"): "JAX always compiles",
    ("Keras", "jax", "compile"): "compiles by default",
    ("MXNet", None, "fp16"): "FP16 gemm on cpu not implemented",
    ("Chainer", None, "compile"): "no compiler",
    ("Chainer", None, "bf16"): "no bfloat16",
    ("CNTK", None, "compile"): "static graph",
    ("CNTK", None, "bf16"): "no bfloat16",
    ("CNTK", None, "fp16"): "GPU",
    ("Keras 2", "cntk", "compile"): "static graph",
    ("Keras 2", "cntk", "bf16"): "no mixed precision",
    ("Keras 2", "cntk", "fp16"): "no mixed precision",
    ("Keras 2", "theano", "compile"): "compiles every function",
    ("Keras 2", "theano", "bf16"): "no mixed precision",
    ("Keras 2", "theano", "fp16"): "no mixed precision",
    ("Lasagne", None, "compile"): "compiles every function",
    ("Lasagne", None, "bf16"): "no bfloat16",
    ("Lasagne", None, "fp16"): "GPU back end",
    ("Caffe", None, "compile"): "no compiler",
    ("Caffe", None, "bf16"): "float32 and float64 only",
    ("Caffe", None, "fp16"): "float32 and float64 only",
    ("Caffe2", None, "compile"): "static graph",
    ("Caffe2", None, "bf16"): "no bfloat16",
    ("Caffe2", None, "fp16"): "CUDA ones",
}

# The transformer rows whose fp16 attention on this CPU is code of their own: XLA cannot compile jax.nn's float16
# attention on a CPU, so the JAX notebook and Keras on JAX compute the attention in float32 there
TRANSFORMER_FP16 = (("JAX", None), ("Keras", "jax"))

# frameworks whose compiled mode compiles inside the first epoch (reported apart), not ahead of it
COMPILE_IN_FIRST_EPOCH = ("Keras", "MXNet")


def cases():
    """(job, what it must do: 'ok' or the reason words of its refusal), three per framework row."""
    found = []
    for job in catalog.select():
        key = (job.framework.label, job.variant.name)
        if job.task == "cnn":
            compiles = key + ("compile",) not in EXPECTED_UNSUPPORTED
            job = dataclasses.replace(job, precision="bf16", compile_mode="on" if compiles else "default")
            found.append((job, EXPECTED_UNSUPPORTED.get(key + ("bf16",), "ok")))
        elif job.task == "rnn":
            found.append((dataclasses.replace(job, precision="fp16"), EXPECTED_UNSUPPORTED.get(key + ("fp16",), "ok")))
        elif job.task == "transformer" and key in TRANSFORMER_FP16:
            found.append((dataclasses.replace(job, precision="fp16"), "ok"))
        elif job.task == "inference":  # the data-parallel task's variants come with its other frameworks
            found.append((dataclasses.replace(job, precision="tf32"), "has no TF32"))
    return found


# A mixed-precision run computes from the shared weights at learning rate 0 (so that its logits can be compared with
# float32 ones): the check's 64 images or reviews, one epoch
AT_SHARED_WEIGHTS = {"train_samples": 64, "test_samples": 64, "epochs": 1, "lr": 0.0}
# The largest difference of a mixed-precision run's logits from float32 ones, relative to the largest logit: at least
# LOWEST (float32 rounding is below 1e-6 of it; a run that ignored the precision would be there) and at most the
# format's HIGHEST (bfloat16 keeps 8 bits of mantissa, float16 11: a few units of 2^-8 and 2^-11 over the layers)
# (measured on this CPU: bf16 CNNs 3.0e-3 to 5.6e-3, fp16 RNNs 5.6e-4 to 8.2e-4; the float32 notebooks within 1e-6)
PRECISION_ERROR = {"bf16": {"lowest": 1e-4, "highest": 3e-2}, "fp16": {"lowest": 1e-5, "highest": 5e-3}}


def shared_weights(task, folder):
    """The shared weights of `task` (common/weights.py) in `folder`, and the float32 logits they give on the first test
    batch of AT_SHARED_WEIGHTS' data (tests/numpy_models.py). The RNN's new gate has no recurrent bias here, which
    Flax's and Lasagne's GRUs lack, so that every GRU computes the reference function."""
    params = hyperparams.for_task(task, "smoke", AT_SHARED_WEIGHTS)
    start = weights.reference_weights(task, params, seed=0)
    if task == "cnn":
        cifar = datasets.load_cifar10("synthetic", train_samples=64, test_samples=64, seed=0)
        logits = cnn_logits(start, cifar.x_test[:params["batch_size"]])[0]
    else:
        imdb = datasets.load_imdb("synthetic", vocab_size=params["vocab_size"], maxlen=params["maxlen"], train_samples=64,
                                  test_samples=64, seed=0)
        if task == "transformer":
            logits = transformer_forward(start, imdb.x_test[:params["batch_size"]], params)[0]
        else:
            start["gru/bias_recurrent"][2 * params["hidden_units"]:] = 0.0
            logits = rnn_forward(start, imdb.x_test[:params["batch_size"]])[0]
    return weights.save_weights(str(folder / "init.npz"), task, params, start), logits


def precision_error(logits, expected):
    """The largest difference of `logits` from the float32 `expected`, relative to the largest of those."""
    return float(np.abs(logits - expected).max() / np.abs(expected).max())


@pytest.mark.parametrize("job, expected", cases(), ids=lambda case: getattr(case, "stem", None))
def test_each_variant_runs_the_framework_s_own_way_or_says_why_not(job, expected, tmp_path):
    require_environment(job.environment)
    parameters = {"data_source": "synthetic", "device": "cpu", "threads": 2, "seed": 0,
                  "overrides": {"weights": "random"} if job.task == "inference" else {}}  # no download
    mixed = job.precision in PRECISION_ERROR and expected == "ok"
    if mixed:  # what it computed is checked too
        init, float32_logits = shared_weights(job.task, tmp_path)
        parameters.update(overrides=AT_SHARED_WEIGHTS, init_weights=init, export_weights=str(tmp_path / "out.npz"))
    record = execution.run_job(job, tmp_path, "smoke", parameters, timeout=900, show_output=False)
    assert (record["precision"], record["compile"]) == (job.precision, job.compile_mode)
    if expected != "ok":
        assert record["status"] == "unsupported", record["error"]
        assert record["error"].startswith(job.framework.label.split(" ")[0]) and expected in record["error"]
        assert table.status_text(table.row(record)).startswith("unsupported: ")
        return
    assert record["status"] == "ok", record["error"]
    assert record["environment"]["computed_precision"] == job.precision  # what it computed in, as the framework module says
    assert record["timings"]["peak_rss_bytes"] > 50 << 20
    assert 0.0 <= record["metrics"]["accuracy"] <= 1.0
    if job.compile_mode == "on" and job.framework.label not in COMPILE_IN_FIRST_EPOCH:
        assert record["timings"]["compile_s"] > 0
    if mixed:  # and it computed in that precision: its logits are as far from float32 ones as the format makes them
        params = hyperparams.for_task(job.task, "smoke", AT_SHARED_WEIGHTS)
        error = precision_error(weights.load_weights(str(tmp_path / "out.npz"), job.task, params)[weights.LOGITS],
                                float32_logits)
        bounds = PRECISION_ERROR[job.precision]
        assert bounds["lowest"] < error < bounds["highest"], "{}: logits {:.1e} from float32's".format(job.precision, error)


def train_cases():
    """(job, devices, what it must do) for the train task, one run per row that covers its new paths: fp16 (loss
    scaling under the engine; bf16 where the row has no fp16 on this CPU) and compiled where the row compiles (not
    Keras: model.compile's jit_compile, the same as in its CNN, tested there); then each mixed precision this CPU
    must refuse, for its reason."""
    found = []
    for job in catalog.select(task_keys=["train"]):
        key = (job.framework.label, job.variant.name)
        devices = 1 if results.label(*key) in TRAIN_ONE_DEVICE else 2  # else two, on the row's own engine
        refused = {precision: EXPECTED_UNSUPPORTED[key + (precision,)] for precision in ("fp16", "bf16")
                   if key + (precision,) in EXPECTED_UNSUPPORTED}
        mixed = "bf16" if "fp16" in refused else "fp16"
        compiles = key + ("compile",) not in EXPECTED_UNSUPPORTED and job.framework.label != "Keras"
        found.append((dataclasses.replace(job, precision=mixed, compile_mode="on" if compiles else "default"),
                      devices, refused.get(mixed, "ok")))
        found += [(dataclasses.replace(job, precision=precision), devices, why)
                  for precision, why in refused.items() if precision != mixed]
    return found


@pytest.mark.parametrize("job, devices, expected", train_cases(), ids=lambda case: getattr(case, "stem", None))
def test_the_train_task_runs_its_variants_on_its_engine_or_says_why_not(job, devices, expected, tmp_path):
    require_environment(job.environment)
    parameters = {"data_source": "synthetic", "device": "cpu", "threads": 2, "seed": 0,
                  "overrides": {"devices": devices, "repeats": 1}}  # warm-up and one timed step: the path, not speed
    record = execution.run_job(job, tmp_path, "smoke", parameters, timeout=900, show_output=False)
    assert (record["precision"], record["compile"]) == (job.precision, job.compile_mode)
    if expected != "ok":
        assert record["status"] == "unsupported" and expected in record["error"], record["error"]
        return
    assert record["status"] == "ok", record["error"]
    assert record["environment"]["computed_precision"] == job.precision and record["params"]["devices"] == devices
    assert record["metrics"]["images_per_s"] > 0 and record["timings"]["peak_rss_bytes"] > 50 << 20


def test_a_batch_size_sweep_of_inference_draws_throughput_and_latency(tmp_path):
    (job,) = catalog.select(["pytorch"], ["inference"])
    require_environment(job.environment)
    status = cli.main(["run", "-f", "pytorch", "-t", "inference", "-p", "smoke", "--sweep", "batch_size=1,2",
                       "--device", "cpu", "--threads", "2", "--data", "synthetic", "--set", "weights=random",
                       "--no-equivalence", "--no-setup", "--results", str(tmp_path), "-q"])
    assert status == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    records = table.load_records(run_dir)
    assert [r["sweep"] for r in records] == [{"batch_size": 1}, {"batch_size": 2}]
    one = records[0]["timings"]["batch_s"]
    assert one["n"] == records[0]["params"]["batches"] * records[0]["params"]["repeats"] and one["p99"] >= one["median"]
    markdown = (run_dir / "results.md").read_text()
    header, _, line = [text for text in markdown.split("## Sweep")[1].splitlines() if text.startswith("|")][:3]
    assert header == "| Framework | batch_size=1 | batch_size=2 | Latency at batch 1 (ms, median / p99) |"
    assert line.startswith("| PyTorch | ") and " / " in line.split("|")[-2]
    assert (run_dir / "sweep.png").stat().st_size > 1000
