"""`common` on the oldest and newest Python and numpy it promises: 3.6 with numpy 1.19, 3.12 with numpy 2."""

import json
import os
import subprocess

import pytest

from runner import catalog
from runner.run import environments

TARGETS = [("3.6", "numpy==1.19.5"), ("3.12", "numpy==2.4.6")]


def compat_env(version, requirement):
    """A cached virtual environment with only numpy, under .envs/compat-<version>; None if that Python is absent."""
    python = environments.find_python(version)
    if python is None:
        return None
    path = catalog.ENVS_DIR / ("compat-" + version)
    stamp = path / "rosetta-stamp.txt"
    if not (stamp.exists() and stamp.read_text() == requirement):
        subprocess.run([python, "-m", "venv", "--clear", str(path)], check=True, capture_output=True)
        subprocess.run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", requirement],
                       check=True, capture_output=True)
        stamp.write_text(requirement)
    return path / "bin" / "python"


@pytest.mark.parametrize("version, requirement", TARGETS, ids=[v for v, _ in TARGETS])
def test_common_works_on(version, requirement):
    python = compat_env(version, requirement)
    if python is None:
        pytest.skip("no Python {} on this machine (CI has them through pyenv)".format(version))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(catalog.REPO), str(catalog.REPO / "tests")]))
    out = subprocess.run([str(python), str(catalog.REPO / "tests" / "compat_check.py")], capture_output=True,
                         text=True, env=env, cwd=str(catalog.REPO))
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["python"].startswith(version + ".") and summary["status"] == "ok"
    assert summary["numpy"] == requirement.split("==")[1]
