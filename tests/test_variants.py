"""common/variants.py: the precision and compile-mode names, the float32 decision, refusals and row labels."""

import pytest
from conftest import json_from_environment

from common import results, variants
from runner import catalog, cli, run_folder


def test_the_float32_mode_follows_the_precision_and_the_device():
    assert variants.float32_mode("X", "auto", True, "this GPU") == "tf32"
    assert variants.float32_mode("X", "auto", False, "the CPU") == "fp32"
    assert variants.float32_mode("X", "fp32", True, "this GPU") == "fp32"  # strict: TF32 off even where it exists
    assert variants.float32_mode("X", "tf32", True, "this GPU") == "tf32"
    assert variants.float32_mode("X", "bf16", True, "this GPU") == "tf32"  # what float32 parts of a mixed run use
    assert variants.float32_mode("X", "fp16", False, "the CPU") == "fp32"


def test_tf32_where_there_is_none_is_refused_with_the_reason():
    with pytest.raises(variants.Unsupported) as refused:
        variants.float32_mode("PyTorch", "tf32", False, "the CPU")
    assert str(refused.value) == ("PyTorch cannot run precision=tf32: the CPU has no TF32 (GPUs of compute capability "
                                  "8.0 and newer do)")


@pytest.mark.parametrize("precision, mode, message", [
    ("fp8", "default", "precision='fp8': use one of auto, fp32, tf32, bf16, fp16"),
    ("auto", "max", "compile_mode='max': use one of default, on"),
])
def test_unknown_names_are_one_line_errors(precision, mode, message):
    with pytest.raises(ValueError) as error:
        variants.check(precision, mode)
    assert str(error.value) == message


def test_labels_and_file_suffixes_name_only_what_is_not_the_default():
    assert variants.label() == "" and variants.suffix() == ""
    assert variants.label("bf16", "on") == "bf16 · compiled" and variants.suffix("bf16", "on") == "-bf16-compiled"
    assert variants.label("auto", "on") == "compiled" and variants.suffix("fp32") == "-fp32"
    assert results.label("Keras", "jax", "bf16", "on") == "Keras (jax) · bf16 · compiled"
    assert results.label("PyTorch", None, "auto", "default", {"batch_size": 8}) == "PyTorch · batch_size=8"
    assert results.label("PyTorch") == "PyTorch"
    old = {"framework": "MXNet", "variant": None}  # a record from before variants: the default run
    assert results.row_label(old) == "MXNet"


def test_a_backend_s_refusal_is_reworded_as_the_framework_s_that_runs_on_it():
    with pytest.raises(variants.Unsupported) as refused:
        with variants.refused_as("Keras 2"):
            variants.refuse("Theano", "precision", "bf16", "no bfloat16")
    assert str(refused.value) == "Keras 2 on Theano cannot run precision=bf16: no bfloat16"
    with variants.refused_as("Keras 2"):
        pass  # nothing refused: nothing raised


def test_a_ledger_names_the_mixed_policy_and_leaves_float32_as_it_is():
    assert variants.precision_setting("bf16", "torch.autocast") == "bf16 (torch.autocast)"
    assert variants.precision_setting("fp16", "AMP") == "fp16 (AMP)"
    assert variants.precision_setting("tf32", "torch.autocast") == "tf32" == variants.precision_setting("tf32", None)


PYTORCH_TF32_SETTINGS = """
import json, sys, torch
from frameworks import pytorch
torch.cuda.get_device_capability = lambda dev=None: (9, 0)  # an H100, as far as set_variant asks
answers = {}
for precision in ("auto", "fp32", "tf32"):
    pytorch.set_variant(torch.device("cuda"), precision)
    # what Inductor's autotuning reads (torch 2.11, max_autotune), and the per-backend settings of 2.9 and newer
    answers[precision] = [torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
                          torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.fp32_precision]
json.dump(answers, sys.stdout)
"""


def test_pytorchs_tf32_setting_is_one_that_inductor_can_read():
    """On an H100, PyTorch 2.11's compiled inference failed in Inductor's autotuning ("mix of the legacy and new
    APIs") after set_variant used the per-backend fp32_precision; every reader must get an answer, and the right one."""
    answers = json_from_environment("pytorch", PYTORCH_TF32_SETTINGS)
    assert answers["auto"] == answers["tf32"] == ["high", True, True, "tf32"]
    assert answers["fp32"] == ["highest", False, False, "ieee"]


def test_a_framework_that_compiles_as_written_refuses_compiling_with_its_one_reason():
    with pytest.raises(variants.Unsupported) as refused:
        variants.refuse_compiling("Theano", "on")
    assert str(refused.value) == variants.compile_refusal("Theano")
    variants.refuse_compiling("Theano", "default")  # the default row runs
    variants.refuse_compiling("PyTorch", "on")  # a framework with a compiler of its own compiles
    assert variants.compile_refusal("PyTorch") is None
    assert variants.compile_refusal("Keras 2", runs_on="Theano") == "Keras 2 on " + variants.compile_refusal("Theano")
    # each such framework's module refuses through refuse_compiling alone: the runner's words are the notebook's
    for name in variants.COMPILED_AS_WRITTEN:
        source = (catalog.REPO / "frameworks" / (name.lower() + ".py")).read_text()
        assert 'NAME = "{}"'.format(name) in source and "variants.refuse_compiling(NAME, compile_mode)" in source
        assert '"compile_mode", compile_mode' not in source, name


def test_the_runner_writes_a_refused_compile_mode_s_row_without_starting_a_kernel(fixture_catalog, tmp_path,
                                                                                monkeypatch):
    monkeypatch.setitem(variants.COMPILED_AS_WRITTEN, "Ok", "the fixture compiles every step as written")
    assert cli.main(["-f", "ok", "-t", "cnn", "-p", "smoke", "--compile", "default,on", "--data", "synthetic",
                     "--results", str(tmp_path), "-q"]) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    record = results.read_result(str(run_folder.record_path(run_dir, "OK_CNN-compiled")))
    assert record["status"] == "unsupported" and record["error"] == (
        "Ok cannot run compile_mode=on: the fixture compiles every step as written")
    assert not (run_dir / "OK_CNN-compiled.ipynb").exists() and (run_dir / "OK_CNN.ipynb").exists()


JAX_CPU_FLAGS = """
import json, os, sys
from frameworks import jax as jax_module
answers = {"defaults": [list(pair) for pair in jax_module.CPU_XLA_FLAGS], "jaxlib": list(jax_module.jaxlib_version())}
jax_module.CPU_XLA_FLAGS = (("--xla_cpu_experimental_ynn_fusion_type=", (0, 8, 1)), ("--xla_cpu_not_yet=1", (99,)))
for given in ("--xla_cpu_experimental_ynn_fusion_type=reduce", ""):  # the user's own, even empty, stays as given
    os.environ["XLA_FLAGS"] = given
    answers[repr(given)] = [jax_module.set_cpu_flags(), os.environ["XLA_FLAGS"]]
os.environ.pop("XLA_FLAGS")
answers["unset"] = [jax_module.set_cpu_flags(), os.environ["XLA_FLAGS"]]
dev = jax_module.choose_device("cpu")  # XLA starts with them: a flag it did not know would stop this process
answers["ledger"] = jax_module.speed_settings("cnn", dev)["kernels"]
os.environ.pop("XLA_FLAGS")
answers["late"] = jax_module.set_cpu_flags()  # XLA has read its flags: nothing more is set
json.dump(answers, sys.stdout)
"""


def test_jax_s_cpu_flags_are_set_before_xla_starts_where_its_jaxlib_knows_them_and_the_user_set_none():
    answers = json_from_environment("jax", JAX_CPU_FLAGS)
    assert answers["jaxlib"][:2] >= [0, 8]
    assert all(flag.startswith("--xla_cpu_") and len(first) >= 3 for flag, first in answers["defaults"])
    assert answers[repr("--xla_cpu_experimental_ynn_fusion_type=reduce")] == [
        [], "--xla_cpu_experimental_ynn_fusion_type=reduce"]
    assert answers[repr("")] == [[], ""]
    assert answers["unset"] == [["--xla_cpu_experimental_ynn_fusion_type="], "--xla_cpu_experimental_ynn_fusion_type="]
    assert answers["ledger"] == "XLA's CPU backend, XLA_FLAGS --xla_cpu_experimental_ynn_fusion_type="
    assert answers["late"] == []
