"""Path options mean what the user typed: the command line makes each absolute against the folder it runs from, so
that the kernels (which start in the notebooks' folder) and every subprocess get the folder the user meant."""

import argparse
import os
import sys
from pathlib import Path

import pytest

from runner import catalog, cli
from runner.report import table


def subcommands(parser):
    """{command: its parser} of run_all.py's parser."""
    (actions,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return actions.choices


def test_no_option_takes_a_path_as_given():
    """Every path option goes through cli._path: a new option with type=Path would hand a relative path on."""
    for name, parser in subcommands(cli.build_parser()).items():
        for action in parser._actions:
            assert action.type is not Path, "{} {}: type=Path keeps a relative path; use cli._path".format(
                name, "/".join(action.option_strings) or action.dest)


@pytest.mark.parametrize("argv, name", [
    (["run", "--results", "rel/out"], "results"),
    (["run", "--resume", "rel/out"], "resume"),
    (["run", "--wheels", "rel/out"], "wheels"),
    (["setup", "--wheels", "rel/out"], "wheels"),
    (["setup", "pytorch", "--python", "rel/out"], "python"),
    (["report", "x", "--out", "rel/out"], "out"),
    (["rosetta", "--out", "rel/out"], "out"),
    (["site", "--out", "rel/out"], "out"),
    (["site", "rel/out"], "run_dir"),
])
def test_a_relative_path_option_is_made_absolute_against_the_current_folder(argv, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert getattr(cli.build_parser().parse_args(argv), name) == tmp_path / "rel" / "out"


def test_parse_hands_on_absolute_paths_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for folder in ("a", "b", "wheels"):
        (tmp_path / folder).mkdir()
    assert cli.parse(["report", "a", "./b", "--out", "../merged"]).run_dirs == [tmp_path / "a", tmp_path / "b"]
    assert cli.parse(["report", "a", "b", "--out", "../merged"]).out == tmp_path.parent / "merged"
    assert cli.parse(["-f", "pytorch", "-t", "cnn", "--wheels", "wheels"]).wheels == tmp_path / "wheels"
    assert cli.parse(["-f", "pytorch", "-t", "cnn"]).results == catalog.REPO / "results"  # the default stays the repo's
    assert cli.parse(["run", "--results", str(tmp_path / "abs")]).results == tmp_path / "abs"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cli.parse(["rosetta", "--out", "~/pages"]).out == tmp_path / "pages"


def test_setup_python_is_a_file_of_the_current_folder_and_a_link_stays_a_link(tmp_path, monkeypatch):
    """`--python NAME` without a slash was always a file here (adopt's abspath, parse's exists check), not a PATH
    lookup; a venv's python is a link to the base interpreter, which must not be followed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "python3").symlink_to(sys.executable)
    args = cli.parse(["setup", "pytorch", "--python", "python3"])
    assert args.python == tmp_path / "python3" and args.python.is_symlink()
    assert cli.main(["setup", "pytorch", "--python", "python3.0"]) == cli.USAGE_ERROR  # not in this folder: refused


def test_relative_results_resume_and_report_work_from_another_folder(fixture_catalog, tmp_path, monkeypatch):
    """The reported failures: `--results rel_out` left no record (the kernel wrote it relative to the notebooks'
    folder), `--resume results/<run>` did not find the run's files."""
    monkeypatch.chdir(tmp_path)
    assert Path.cwd() != catalog.REPO
    assert cli.main(["run", "-f", "ok", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--results", "rel_out",
                     "-q"]) == 0
    (run_dir,) = [path for path in (tmp_path / "rel_out").iterdir() if path.is_dir()]
    record = run_dir / "OK_CNN.result.json"
    assert [r["status"] for r in table.load_records(run_dir)] == ["ok"]
    assert not (catalog.NOTEBOOKS / "rel_out").exists()

    record.unlink()  # the notebook is left to run again
    relative = os.path.join("rel_out", run_dir.name)
    assert cli.main(["run", "--resume", relative, "-q"]) == 0
    assert record.exists() and [r["status"] for r in table.load_records(run_dir)] == ["ok"]
    assert [path for path in (tmp_path / "rel_out").iterdir() if path.is_dir()] == [run_dir]  # no new run folder

    (run_dir / "results.md").unlink()
    assert cli.main(["report", relative]) == 0
    assert "| OK |" in (run_dir / "results.md").read_text()
