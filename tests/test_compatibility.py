"""`common` on the oldest and newest Python and numpy it promises: 3.6 with numpy 1.19, 3.12 with numpy 2.

Their environments (.envs/compat-<version>, only numpy, hash-checked) are built by `run_all.py test` before pytest
starts (runner/run/for_tests.py); here they are only used."""

import json
import os
import subprocess

import pytest

from runner import catalog
from runner.run import for_tests


@pytest.mark.parametrize("version", list(for_tests.COMPAT))
def test_common_works_on(version, tmp_path):
    try:
        python = for_tests.compat_python(version)
    except for_tests.MissingForTests as error:
        pytest.fail(str(error))
    if python is None:
        pytest.skip("no Python {} on this machine (CI has them through pyenv)".format(version))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(catalog.REPO), str(catalog.REPO / "tests")]),
               PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(tmp_path))  # no bytecode of these Pythons in the checkout
    out = subprocess.run([str(python), str(catalog.REPO / "tests" / "compat_check.py")], capture_output=True,
                         text=True, env=env, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["python"].startswith(version + ".") and summary["status"] == "ok"
    assert summary["numpy"] == for_tests.COMPAT[version].version
