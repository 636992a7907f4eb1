"""Locks: every requirements file has a current lock; the setup installs exactly a lock's packages with their hashes
checked, and refuses a file whose hash is not in it; records name the lock, and a merged table from two locks says so."""

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require_environment

from common import environment, results
from runner import catalog
from runner.report import html_pages
from runner.run import build_steps, environments, for_tests, locks

LOCKED = [(env.name, path) for env in catalog.ENVIRONMENTS.values() for path in locks.requirement_files(env)]


@pytest.mark.parametrize("name, requirements", LOCKED, ids=[path.name for _, path in LOCKED])
def test_every_requirements_file_has_a_current_lock(name, requirements):
    assert locks.stale(requirements) is None, locks.stale(requirements)
    lock = locks.lock_path(requirements)
    assert locks.header_value(lock, locks.PYTHON_LINE) == "{} on {}".format(
        locks.python_for(catalog.ENVIRONMENTS[name]), locks.PLATFORM)
    pinned = environments.pins(requirements)
    held = {locks.normalized(package): version for package, version in locks.packages(lock).items()}
    for package, version in pinned.items():  # the lock holds each pin at its version, each package with hashes
        assert held.get(locks.normalized(package)) == version, (lock.name, package)
    assert lock.read_text().count("--hash=sha256:") >= len(held)


def test_a_changed_pin_makes_the_lock_stale_and_names_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", tmp_path)
    requirements = tmp_path / "demo.txt"
    requirements.write_text("# a comment\nsix==1.17.0\n")
    assert locks.stale(requirements) == "envs/demo.txt has no lock: `python3 run_all.py lock` makes it"
    locks.lock_path(requirements).write_text(locks.PINS_LINE + locks.pins_digest(requirements) + "\nsix==1.17.0\n")
    requirements.write_text("# another comment\nsix == 1.17.0\n")  # comments and spaces: still current
    assert locks.stale(requirements) is None
    requirements.write_text("six==1.16.0\n")
    assert locks.stale(requirements) == ("envs/demo.lock is older than the pins of envs/demo.txt: `python3 run_all.py "
                                         "lock` regenerates it")


def test_what_changed_between_two_locks_is_said_package_by_package():
    old = {"numpy": "1.26.4", "Six": "1.16.0", "gone": "1.0"}
    new = {"numpy": "2.4.6", "six": "1.16.0", "added": "0.1"}
    assert locks.changes(old, new) == ["+ added 0.1", "- gone 1.0", "  numpy 1.26.4 -> 2.4.6"]
    text = "six==1.17.0 \\\n    --hash=sha256:ab\nKeras_Preprocessing==1.1.2 ; python_version >= '3'\n    # via x\n"
    assert locks.packages_of_text(text) == {"six": "1.17.0", "Keras_Preprocessing": "1.1.2"}


@pytest.fixture
def six_wheels(tmp_path, pinned_wheels):
    """A folder holding six 1.17.0's wheel (a copy of the one `run_all.py test` obtained: no index is asked), and
    that wheel's sha256."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    wheel = Path(shutil.copy(str(pinned_wheels["six"]), str(folder)))
    assert wheel.name.startswith("six-1.17.0-")
    return folder, hashlib.sha256(wheel.read_bytes()).hexdigest()


def demo_environment(tmp_path, monkeypatch, sha256):
    """An environment `demo` whose requirements pin six 1.17.0 and whose lock gives it the hash `sha256`."""
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setattr(catalog, "JUPYTER_DIR", tmp_path / "jupyter")
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", tmp_path)
    monkeypatch.setattr(catalog, "REPO", tmp_path)
    requirements = tmp_path / "demo.txt"
    requirements.write_text("six==1.17.0\n")
    locks.lock_path(requirements).write_text("{}{}\nsix==1.17.0 \\\n    --hash=sha256:{}\n".format(
        locks.PINS_LINE, locks.pins_digest(requirements), sha256))
    return catalog.Environment("demo", "Demo")


def test_a_file_whose_hash_is_not_in_the_lock_is_refused_in_one_line(tmp_path, monkeypatch, six_wheels):
    folder, _ = six_wheels
    env = demo_environment(tmp_path, monkeypatch, "0" * 64)
    with pytest.raises(environments.SetupError) as raised:
        environments.ensure(env, say=lambda line: None, wheels=str(folder))
    assert str(raised.value) == ("demo: six==1.17.0 does not match the hashes of envs/demo.lock (a file changed on the "
                                 "index, or a stale lock: `python3 run_all.py lock demo`)")
    assert not environments.is_ready(env)


def test_a_build_holds_exactly_its_lock_and_its_kernel_names_it(tmp_path, monkeypatch, six_wheels):
    folder, sha256 = six_wheels
    env = demo_environment(tmp_path, monkeypatch, sha256)
    environments.ensure(env, say=lambda line: None, wheels=str(folder))
    installed = json.loads(subprocess.run([str(env.python_path), "-m", "pip", "list", "--format=json"],
                                          capture_output=True, text=True, check=True).stdout)
    assert {p["name"]: p["version"] for p in installed if p["name"] not in ("pip", "setuptools")} == {"six": "1.17.0"}
    label = locks.label(locks.lock_path(tmp_path / "demo.txt"))
    spec = json.loads(environments.kernel_spec_path(env).read_text())  # the kernel the build registered
    assert spec["env"][environments.LOCK_VARIABLE] == label
    assert environments.installation(env).origin().endswith(", lock " + label)


def test_the_wheels_the_tests_install_are_obtained_hash_checked_before_pytest(tmp_path, monkeypatch, pinned_wheels):
    """for_tests.ensure_wheels, as `run_all.py test` runs it before pytest, here from a folder of wheels instead of
    the index: each file checked against its pinned hashes; a changed file is neither used by the tests nor taken."""
    source = tmp_path / "source"
    source.mkdir()
    for path in pinned_wheels.values():
        shutil.copy(str(path), str(source))
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    monkeypatch.setenv(build_steps.WHEELS_VARIABLE, str(source))
    with pytest.raises(for_tests.MissingForTests, match=r"from \S+/envs/test-wheels, .* `python3 run_all.py test` obtains"):
        for_tests.wheels()
    for_tests.ensure_wheels(say=lambda line: None)
    assert {package: path.name for package, path in for_tests.wheels().items()} == {
        package: path.name for package, path in pinned_wheels.items()}
    for folder in (source, tmp_path / "envs" / for_tests.WHEELS_FOLDER):
        with open(str(folder / pinned_wheels["six"].name), "ab") as wheel:
            wheel.write(b"changed")
    with pytest.raises(for_tests.MissingForTests, match="six==1.17.0 without an index"):
        for_tests.wheels()
    with pytest.raises(environments.SetupError, match="^pip could not download six==1.17.0 from {}: six==1.17.0 does not "
                       "match its pinned hashes; see ".format(re.escape(str(source)))):
        for_tests.ensure_wheels(say=lambda line: None)


BUILT = [name for name, env in catalog.ENVIRONMENTS.items() if name != "runner"]


@pytest.mark.parametrize("name", ["runner"] + BUILT)
def test_a_built_environment_holds_exactly_its_locks_packages(name):
    env = catalog.ENVIRONMENTS[name]
    require_environment(env)
    stamp = environments.read_stamp(env)
    if stamp["build"] == "adopted":  # chosen by hand (`setup ENV --python PATH`): its packages are the interpreter's
        pytest.skip("environment {} is the adopted interpreter {}, not built from its lock".format(name, stamp["python_path"]))
    built = catalog.REQUIREMENTS_DIR / stamp["requirements"]
    expected = {}
    for path in (env.build_requirements, built):
        if path is not None:
            expected.update({locks.normalized(n): v for n, v in locks.packages(locks.lock_path(path)).items()})
    out = subprocess.run([str(env.python_path), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True).stdout
    installed = {locks.normalized(p["name"]): p["version"] for p in json.loads(out.strip().splitlines()[-1])}
    venv_own = {"pip", "setuptools"} - set(expected)  # what the venv came with, where the lock does not hold it
    installed = {n: v for n, v in installed.items() if n not in venv_own}
    for extra in env.extras:  # an optional part (Ray in the runner's) added since: exactly its lock's packages too
        extra_lock = locks.packages(locks.lock_path(env.extra_requirements(extra)))
        if locks.normalized(extra) in installed:
            expected.update({locks.normalized(n): v for n, v in extra_lock.items()})
    for n, v in expected.items():  # CNTK's wheels of 2.7.post2 say 2.7 in their own metadata
        if installed.get(n) != v and v.startswith("{}.post".format(installed.get(n))):
            installed[n] = v
    assert installed == expected
    assert stamp.get("lock") == locks.label(locks.lock_path(built))


def test_records_name_the_lock_and_a_merged_table_from_two_locks_says_so(tmp_path, monkeypatch):
    runs = []
    for name, digest in (("a-quick", "111111111111"), ("b-quick", "222222222222")):
        monkeypatch.setenv(environment.LOCK_VARIABLE, "envs/pytorch.lock@" + digest)
        record = results.new_record("PyTorch", "cnn", "quick")
        record.update(device="cpu", data={"source": "synthetic", "description": "x"}, metrics={"train_s": 1.0, "accuracy": 0.5},
                      environment=environment.facts("PyTorch", "2.0", "cpu", threads=2))
        assert record["environment"]["lock"] == "envs/pytorch.lock@" + digest
        (tmp_path / name).mkdir()
        results.write_result(str(tmp_path / name / "PyTorch_CNN.result.json"), record, "ok")
        runs.append(tmp_path / name)
    line = ("Built from different locks: envs/pytorch.lock: 111111111111 in a-quick; 222222222222 in b-quick; the rows "
            "of its environment ran on other package versions.")
    assert line in html_pages.merged_markdown(runs)
    assert "Built from different locks" not in html_pages.merged_markdown(runs[:1])
    assert "Built from different locks: envs/pytorch.lock" in html_pages.merged_page(runs)
