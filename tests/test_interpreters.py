"""The Python each environment is built on: found first (ROSETTA_PYTHONxy, PATH, pyenv, conda), else obtained from
the Debian packages of envs/python<X.Y>-debian.txt; where neither, a one-line reason naming the command that adds it.
The whole path on a bare machine, real packages and notebooks, is tests/test_bare_machine.py."""

import shutil
import subprocess
import sys

import pytest

from runner import catalog
from runner.run import build_steps, debian, environments, interpreters

THIS = "{}.{}".format(*sys.version_info[:2])


@pytest.fixture
def bare(tmp_path, monkeypatch):
    """A machine without pyenv, conda or any python<X.Y> on PATH, and an empty .envs/."""
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    for version in ("3.6", "3.9", THIS):
        monkeypatch.delenv(interpreters.python_variable(version), raising=False)
    monkeypatch.setattr(catalog, "ENVS_DIR", tmp_path / "envs")
    return tmp_path


def test_an_interpreter_is_found_in_order_and_says_where_it_came_from(bare, monkeypatch):
    pyenv = bare / "pyenv" / "versions" / (THIS + ".99") / "bin"
    pyenv.mkdir(parents=True)
    (pyenv / ("python" + THIS)).symlink_to(sys.executable)
    found = interpreters.find(THIS)
    assert (found.path, found.origin, found.pip_wheels) == (str(pyenv / ("python" + THIS)), "pyenv", None)
    assert found.version == sys.version.split()[0] and found.describe().endswith("(pyenv)")
    monkeypatch.setenv(interpreters.python_variable(THIS), sys.executable)  # named explicitly: first
    assert interpreters.find(THIS).origin == "ROSETTA_PYTHON" + THIS.replace(".", "")
    assert interpreters.find("2.1") is None and interpreters.find_python("2.1") is None
    assert interpreters.find(None).path == sys.executable


def test_a_python_no_source_has_is_named_with_the_command_that_adds_it(bare):
    assert interpreters.source("3.6") is None and interpreters.source("3.9") is not None  # the repository's envs/
    with pytest.raises(build_steps.PythonMissing) as raised:
        interpreters.find_or_obtain("3.6", say=lambda line: None)
    message = str(raised.value)
    assert message.startswith("needs Python 3.6: none found (ROSETTA_PYTHON36, PATH, pyenv, conda)")
    assert "`pyenv install 3.6`" in message and "ROSETTA_PYTHON36" in message and "\n" not in message
    assert interpreters.plan("3.6").startswith("Python 3.6: none here; `pyenv install 3.6` adds it")
    assert interpreters.plan("3.9") == ("Python 3.9: none here; setup obtains Debian bullseye's "
                                        "(envs/python3.9-debian.txt)")


def test_an_unreachable_source_is_one_line_saying_which(bare, monkeypatch):
    """A real apt-get against a mirror that refuses connections: the setup ends in SourceUnreachable, naming it (a
    failure `run_all.py test` stops on, not a lack of the machine its tests would skip for)."""
    listing = catalog.REQUIREMENTS_DIR / "python3.9-debian.txt"
    unreachable = bare / "python3.9-debian.txt"
    unreachable.write_text("".join(line + "\n" for line in listing.read_text().splitlines()
                                   if not line.startswith("# debian-mirror:")) + "# debian-mirror: http://127.0.0.1:9/debian\n")
    monkeypatch.setattr(interpreters, "source", lambda version: unreachable)
    monkeypatch.setattr(build_steps, "shown", lambda path: path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # apt-get and dpkg; the system has no python3.9 there
    said = []
    with pytest.raises(build_steps.SourceUnreachable) as raised:
        interpreters.find_or_obtain("3.9", say=said.append)
    assert not isinstance(raised.value, build_steps.MachineLacks)
    assert str(raised.value).startswith("needs Debian's bullseye packages, which none of http://127.0.0.1:9/debian "
                                        "served (see ")
    assert not list(catalog.ENVS_DIR.glob("python3.9-debian*"))  # nothing half made is left to be found
    assert any("Debian bullseye not available from http://127.0.0.1:9/debian" in line for line in said)


def test_the_listing_pins_every_package_and_python_s_own_parts(bare):
    listing = catalog.REQUIREMENTS_DIR / "python3.9-debian.txt"
    pinned = dict(line.split("=", 1) for line in debian.debian_packages(listing))
    assert all(version and " " not in version for version in pinned.values())
    assert {"python3.9-minimal", "libpython3.9", "libpython3.9-dev", "python-pip-whl", "patchelf", "libssl1.1"} <= set(pinned)
    assert len({version for name, version in pinned.items() if "python3.9" in name}) == 1  # one build of Python
    assert debian.debian_suite(listing) == ("bullseye", ["http://deb.debian.org/debian", "http://archive.debian.org/debian"])


def test_the_build_paths_debian_recorded_are_moved_into_the_folder(tmp_path):
    lib = tmp_path / "usr" / "lib" / "python3.9"
    lib.mkdir(parents=True)
    (lib / "_sysconfigdata__x86_64-linux-gnu.py").write_text(
        "build_time_vars = {'INCLUDEPY': '/usr/include/python3.9', 'INSTALL': '/usr/bin/install -c',\n"
        " 'LIBDIR': '/usr/lib', 'LDLIBRARY': 'libpython3.9.so', 'prefix': '/usr', 'CC': 'x86_64-linux-gnu-gcc'}\n")
    (lib / "_sysconfigdata__linux_x86_64-linux-gnu.py").symlink_to("_sysconfigdata__x86_64-linux-gnu.py")
    assert sorted(interpreters.relocate_paths(tmp_path, "3.9")) == ["INCLUDEPY", "LIBDIR", "prefix"]
    namespace = {}
    exec((lib / "_sysconfigdata__x86_64-linux-gnu.py").read_text(), namespace)
    assert namespace["build_time_vars"] == {
        "INCLUDEPY": "{}/usr/include/python3.9".format(tmp_path), "INSTALL": "/usr/bin/install -c",
        "LIBDIR": "{}/usr/lib/x86_64-linux-gnu".format(tmp_path), "LDLIBRARY": "libpython3.9.so",
        "prefix": "{}/usr".format(tmp_path), "CC": "x86_64-linux-gnu-gcc"}


def test_an_obtained_interpreter_is_found_only_while_its_listing_is_unchanged(bare, monkeypatch):
    listing = bare / "python{}-debian.txt".format(THIS)
    listing.write_text("# debian-suite: bullseye\npython{}=1\n".format(THIS))
    monkeypatch.setattr(interpreters, "source", lambda version: listing if version == THIS else None)
    folder = interpreters.obtained_folder(THIS)
    (folder / "usr" / "bin").mkdir(parents=True)
    (folder / "usr" / "bin" / ("python" + THIS)).symlink_to(sys.executable)
    (folder / "usr" / "share" / "python-wheels").mkdir(parents=True)
    digest = __import__("hashlib").sha256(listing.read_bytes()).hexdigest()
    (folder / interpreters.OBTAINED_STAMP).write_text('{"listing_sha256": "%s"}' % digest)
    found = interpreters.find_or_obtain(THIS, say=lambda line: None)  # found: nothing obtained again
    assert found.origin == "obtained from Debian bullseye" and found.pip_wheels == str(folder / "usr/share/python-wheels")
    listing.write_text(listing.read_text() + "libssl1.1=2\n")  # another pin: obtained anew, not found
    assert interpreters.find(THIS) is None


def test_a_virtual_environment_on_an_interpreter_without_ensurepip_gets_the_hash_checked_pip(bare, tmp_path,
                                                                                            pinned_wheels):
    """Debian's pip wheels bootstrap pip in a venv made --without-pip; here the pinned pip wheel that `run_all.py test`
    obtained stands in for them, and the bootstrap file's pins install, hash-checked, from a folder holding its wheels
    (no index: setuptools, which the stand-in lacks, can only come from there)."""
    wheels, pins = tmp_path / "wheels", tmp_path / "pinned"
    for folder, packages in ((wheels, ["pip"]), (pins, ["pip", "setuptools"])):
        folder.mkdir()
        for package in packages:
            shutil.copy(str(pinned_wheels[package]), str(folder))
    python = interpreters.Interpreter(sys.executable, sys.version.split()[0], "test", pip_wheels=str(wheels))
    with open(str(tmp_path / "venv.log"), "w") as log:
        interpreters.create_venv(python, tmp_path / "venv", log, "demo", lambda line: None, 60,
                                 build_steps.wheel_source(str(pins)))
    out = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-m", "pip", "list", "--format=freeze",
                          "--disable-pip-version-check"], capture_output=True, text=True)
    assert set(out.stdout.split()) == {"pip==23.0.1", "setuptools==58.1.0"}, out.stdout + out.stderr
    log = (tmp_path / "venv.log").read_text()
    assert "--require-hashes" in log and "--no-index" in log


def test_an_environment_built_on_another_python_is_not_ready(bare, monkeypatch):
    monkeypatch.setattr(catalog, "REQUIREMENTS_DIR", bare)
    monkeypatch.setattr(catalog, "JUPYTER_DIR", bare / "jupyter")
    (bare / "demo.txt").write_text("six==1.17.0\n")
    env = catalog.Environment("demo", "Demo", python="3.9")
    env.python_path.parent.mkdir(parents=True)
    env.python_path.write_text("")
    stamp = {"build": "cpu", "requirements": "demo.txt", "python": "3.8.18", "requirements_sha256": __import__(
        "hashlib").sha256(environments.recipe(env, bare / "demo.txt")).hexdigest()}
    environments.write_stamp(env, stamp)
    environments.write_kernel_spec(env)
    assert not environments.is_ready(env)  # the catalog now asks for 3.9
    environments.write_stamp(env, dict(stamp, python="3.9.2", python_origin="obtained from Debian bullseye"))
    assert environments.is_ready(env)
    assert environments.installation(env).origin() == "Python 3.9.2 (obtained from Debian bullseye), no lock"
