"""`run --kernel-env NAME=VALUE` (issue 60): a row of its own per variable set in the kernel's environment, beside the
notebook as it stands; the kernel sees the variable, its record and row say so, and bad settings are refused in one
line. Runs the fixture notebook on the runner's own kernel."""

import json

import pytest

from runner import catalog, cli
from runner.report import table

ONEDNN = ("XLA_FLAGS", "--xla_cpu_use_onednn=true")
NO_YNN = ("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=")


def test_each_setting_is_a_job_of_its_own_beside_the_notebook_as_it_stands():
    jobs = catalog.expand(catalog.select(["jax"], ["cnn", "inference"]), kernel_envs=[ONEDNN, NO_YNN])
    cnn = [job for job in jobs if job.task == "cnn"]
    assert [job.kernel_env for job in cnn] == [(), (ONEDNN,), (NO_YNN,)]
    assert [job.stem for job in cnn] == ["JAX_CNN", "JAX_CNN-XLA_FLAGS-xla_cpu_use_onednn-true",
                                         "JAX_CNN-XLA_FLAGS-xla_cpu_experimental_ynn_fusion_type"]
    assert cnn[1].label == "JAX · XLA_FLAGS=--xla_cpu_use_onednn=true"
    assert cnn[0].is_default and not cnn[1].is_default
    assert len([job for job in jobs if job.task == "inference"]) == 2 * 3  # its compile modes, each with each setting
    assert catalog.kernel_env_slug("XLA_FLAGS", "") == "XLA_FLAGS-empty"


@pytest.mark.parametrize("setting, message", [
    ("XLA_FLAGS", "expected NAME=VALUE, a variable of the kernel's environment, got 'XLA_FLAGS'"),
    ("9X=1", "expected NAME=VALUE"),
])
def test_a_setting_that_is_no_variable_is_refused_in_one_line(setting, message, capsys):
    assert cli.main(["-f", "jax", "-t", "cnn", "--no-setup", "--kernel-env", setting]) == cli.USAGE_ERROR
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1


def test_two_settings_with_one_file_name_are_refused(capsys):
    assert cli.main(["-f", "jax", "-t", "cnn", "--no-setup", "--kernel-env", "X=a b", "--kernel-env", "X=a-b"]) == (
        cli.USAGE_ERROR)
    assert "--kernel-env: each setting once" in capsys.readouterr().err


def test_the_kernel_sees_the_variable_and_the_row_names_it(fixture_catalog, tmp_path, monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert cli.main(["-f", "ok", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--no-equivalence", "-q",
                     "--results", str(tmp_path), "--kernel-env", "=".join(ONEDNN)]) == 0
    (run_dir,) = tmp_path.iterdir()
    plain = json.loads((run_dir / "OK_CNN.result.json").read_text())
    flagged = json.loads((run_dir / "OK_CNN-XLA_FLAGS-xla_cpu_use_onednn-true.result.json").read_text())
    assert "XLA_FLAGS" not in (plain["environment"].get("kernel_variables") or {}) and plain["kernel_env"] is None
    assert flagged["environment"]["kernel_variables"]["XLA_FLAGS"] == ONEDNN[1]  # what the kernel's process saw
    assert flagged["kernel_env"] == dict([ONEDNN])
    labels = [table.label(r) for r in table.flat_rows(table.load_records(run_dir))]
    assert labels == ["OK", "OK · XLA_FLAGS=--xla_cpu_use_onednn=true"]
    assert json.loads((run_dir / "run.json").read_text())["kernel_envs"] == [list(ONEDNN)]
