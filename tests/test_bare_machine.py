"""A machine with only its system Python: the setup obtains Python 3.9 from Debian for Caffe, Caffe2 and Theano, builds
their environments on it and runs a smoke notebook on each; CNTK's rows say which command adds Python 3.6, and
leave the run's exit status 0, as an absent framework's do.

Real packages, real builds, real kernels, in a folder of their own: PATH holds only the system's folders, PYENV_ROOT
an empty one, and no ROSETTA_PYTHONxy or conda is set. The runner's own environment is this test's (the system Python
builds it on a bare machine, as on any other)."""

import os
import subprocess
import sys

import pytest

from common import results
from runner import catalog, run_folder
from runner.run import interpreters

BARE = """
import sys
from pathlib import Path
from runner import catalog, cli
root = Path(sys.argv[1])
catalog.ENVS_DIR, catalog.JUPYTER_DIR = root / "envs", root / "jupyter"
sys.exit(cli.main(sys.argv[2:]))
"""
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def bare_machine(root):
    """The variables of a process that sees only the system's Python, and the folder its environments go to."""
    (root / "pyenv").mkdir()
    (root / "envs").mkdir()
    (root / "envs" / "runner").symlink_to(catalog.ENVIRONMENTS["runner"].path)  # this process's own
    environ = {name: value for name, value in os.environ.items()
               if not name.startswith(("ROSETTA_PYTHON", "CONDA", "PYENV", "VIRTUAL_ENV"))}
    environ.update(PATH=SYSTEM_PATH, PYENV_ROOT=str(root / "pyenv"))
    return environ


def test_a_machine_with_only_its_system_python_runs_every_row_but_python_3_6_s(tmp_path):
    for version in ("3.9", "3.6"):
        found = subprocess.run(["sh", "-c", "command -v python" + version], env={"PATH": SYSTEM_PATH},
                               capture_output=True, text=True).stdout.strip()
        if found:
            pytest.skip("this machine's system has python{} ({}): it is not bare".format(version, found))
    environ = bare_machine(tmp_path)
    out = subprocess.run([sys.executable, "-c", BARE, str(tmp_path), "-f", "keras2,lasagne,caffe,caffe2", "-t", "cnn",
                          "-p", "smoke", "--data", "synthetic", "--no-equivalence", "--results", str(tmp_path / "results"), "-q"],
                         cwd=str(catalog.REPO), env=environ, capture_output=True, text=True, timeout=1500)
    # 0: the CNTK row cannot run on any machine without a Python 3.6, like an absent framework's; the last line says so
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1].startswith("Not run here, as for an absent framework (this machine "
                                                          "cannot have what environment cntk needs: needs Python 3.6")
    assert "[setup] python3.9: none found on this machine; obtaining Debian bullseye's" in out.stdout
    (run_dir,) = (tmp_path / "results").iterdir()
    records = {path.name[:-len(run_folder.RECORD_SUFFIX)]: results.read_result(str(path))
               for path in run_dir.glob("*" + run_folder.RECORD_SUFFIX)}
    for stem, env in (("Keras2_CNN-theano", "theano"), ("Lasagne_CNN", "theano"), ("Caffe_CNN", "caffe"),
                      ("Caffe2_CNN", "caffe2")):
        record = records[stem]
        assert record["status"] == "ok", (stem, record.get("error"), out.stdout[-3000:])
        assert record["environment"]["python"] == "3.9.2"  # bullseye's, not one of this machine's
        assert record["environment"]["build"].endswith(" envs/{}.txt".format(env))  # caffe2.txt is a GPU build too
    unavailable = records["Keras2_CNN-cntk"]
    assert unavailable["status"] == "unavailable" and "`pyenv install 3.6`" in unavailable["error"], unavailable
    listed = subprocess.run([sys.executable, "-c", BARE, str(tmp_path), "list"], cwd=str(catalog.REPO), env=environ,
                            capture_output=True, text=True, timeout=300).stdout
    lines = {line.split()[0]: line for line in listed.splitlines() if line.startswith("  ") and len(line.split()) > 2}
    for env in ("theano", "caffe", "caffe2"):
        assert "Python 3.9.2 (obtained from Debian bullseye)" in lines[env], listed
    assert "Python 3.6: none here; `pyenv install 3.6` adds it" in lines["cntk"], listed
    assert interpreters.OBTAINED_STAMP in os.listdir(str(tmp_path / "envs" / "python3.9-debian"))
