"""The Python each environment is built on: found on this machine, or obtained by the setup where none is.

Found first, in this order: the interpreter named by $ROSETTA_PYTHONxy, python<X.Y> on PATH, one under pyenv, one
under conda, then one this setup obtained before. Where none is found and envs/python<X.Y>-debian.txt pins a Debian
build, the setup obtains it: those packages, checked against Debian's keys (runner/run/debian.py), extracted into
.envs/python<X.Y>-debian and made to run from there (an rpath to its own libraries, its build paths and headers
pointing into its folder). Nothing is installed into the system. Where no source is known, the error names the
command that adds the interpreter on a machine that can reach one.
"""

import dataclasses
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from runner import catalog
from runner.run import build_steps, debian
from runner.run.build_steps import PythonMissing, SetupError

BOOTSTRAP = "python-bootstrap.txt"  # envs/: pip and setuptools, with hashes, for environments of obtained ones
OBTAINED_STAMP = "rosetta-python.json"  # in an obtained interpreter's folder: what it was made from
MULTIARCH = "x86_64-linux-gnu"  # Debian's folder name for this architecture's libraries and headers
# the build paths of Debian's Python that name its own folders (in its _sysconfigdata module): moved into the
# folder it was extracted to, so that what compiles against it (Theano) finds its headers and libpython
RELOCATED_PATHS = ("prefix", "exec_prefix", "BINDIR", "LIBDIR", "LIBPL", "LIBDEST", "BINLIBDEST", "DESTSHARED",
                   "INCLUDEDIR", "CONFINCLUDEDIR", "INCLUDEPY", "CONFINCLUDEPY")
# what an obtained interpreter must import before it is used: its standard modules that load the libraries it brings
OBTAINED_CHECK = "import ssl, ctypes, decimal, sqlite3, lzma, bz2, zlib, pyexpat, uuid, readline, venv, distutils.sysconfig"
_VERSION_CHECK = ("import sys, sysconfig; print('%d.%d' % sys.version_info[:2], sysconfig.get_config_var('Py_ENABLE_SHARED'),"
                  " sys.version.split()[0])")


@dataclasses.dataclass(frozen=True)
class Interpreter:
    """A Python an environment is built on, and where it came from."""

    path: str
    version: str  # the full version, '3.9.2'
    origin: str  # 'ROSETTA_PYTHON39', 'PATH', 'pyenv', 'conda', or 'obtained from Debian bullseye'
    pip_wheels: Optional[str] = None  # where it has no ensurepip: the folder of the wheels that bring pip

    def describe(self):
        """'Python 3.9.2, /path/to/python3.9 (pyenv)'."""
        return "Python {}, {} ({})".format(self.version, self.path, self.origin)


def python_variable(version):
    """The environment variable that names an interpreter of `version` explicitly: ROSETTA_PYTHON36 for "3.6"."""
    return "ROSETTA_PYTHON" + version.replace(".", "")


def source(version):
    """envs/python<version>-debian.txt, the Debian build the setup obtains where no Python `version` is found; None
    where the project knows no source for it."""
    path = catalog.REQUIREMENTS_DIR / "python{}-debian.txt".format(version)
    return path if path.exists() else None


def obtained_folder(version):
    """Where an obtained Python `version` lives: .envs/python<version>-debian."""
    return catalog.ENVS_DIR / "python{}-debian".format(version)


def candidates(version):
    """(path, origin) of every interpreter that may be Python `version`, in the order they are preferred."""
    found = [(os.environ.get(python_variable(version)), python_variable(version)),
             (shutil.which("python" + version), "PATH")]
    for root, origin in ((os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")), "pyenv"),
                         (os.environ.get("CONDA_PREFIX", ""), "conda")):
        if root:
            found += [(path, origin) for path in sorted(glob.glob(os.path.join(root, "versions", version + ".*", "bin",
                                                                               "python" + version)))]
            found += [(path, origin) for path in sorted(glob.glob(os.path.join(root, "envs", "*", "bin", "python" + version)))]
    listing = source(version)
    if listing is not None and obtained_is_current(version, listing):
        found.append((str(obtained_folder(version) / "usr" / "bin" / ("python" + version)),
                      "obtained from Debian {}".format(debian.debian_suite(listing)[0])))
    return [(path, origin) for path, origin in found if path]


def find(version, shared=False):
    """The first Interpreter of `version` ("3.6") this machine has (candidates' order), None where it has none; the
    running one for None. With `shared`, only one whose libpythonX.Y.so other libraries can link."""
    if version is None:
        return Interpreter(sys.executable, sys.version.split()[0], "the setup's own")
    for path, origin in candidates(version):
        try:
            out = subprocess.run([path, "-c", _VERSION_CHECK], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        found, enable_shared, full = (out.stdout.split() + ["", "", ""])[:3]
        if out.returncode == 0 and found == version and (enable_shared == "1" or not shared):
            wheels = obtained_folder(version) / "usr" / "share" / "python-wheels"
            return Interpreter(path, full, origin, str(wheels) if origin.startswith("obtained") else None)
    return None


def find_python(version, shared=False):
    """The path of the first interpreter of `version` this machine has (`find`), None where it has none."""
    found = find(version, shared)
    return found.path if found else None


def missing_message(version, shared=False):
    """Why an environment cannot have Python `version` here, naming the command that adds it where it can be had."""
    return ("needs Python {}{}: none found (ROSETTA_PYTHON{}, PATH, pyenv, conda) and no source of it is reachable from "
            "here (no Debian release has it); `pyenv install {}` adds it where python.org is reachable (or `conda "
            "create -p ~/python{} python={}`, then set {} to its python{})".format(
                version, " built with --enable-shared" if shared else "", version.replace(".", ""), version, version,
                version, python_variable(version), version))


def plan(version, shared=False):
    """Which Python `version` a new environment would be built on, in a few words for `list`."""
    if version is None:
        return "Python {} (the setup's own)".format(sys.version.split()[0])
    found = find(version, shared)
    if found is not None:
        return "Python {} ({})".format(found.version, found.origin)
    listing = source(version)
    if listing is not None:
        return "Python {}: none here; setup obtains Debian {}'s ({})".format(
            version, debian.debian_suite(listing)[0], build_steps.shown(listing))
    return "Python {}: none here; `pyenv install {}` adds it, or set {}".format(version, version, python_variable(version))


def find_or_obtain(version, shared=False, say=print, heartbeat=20.0):
    """The Interpreter an environment needing Python `version` is built on: the one found (`find`), else the Debian
    build of envs/python<version>-debian.txt, obtained now. Raises PythonMissing where there is neither, and
    SourceUnreachable where the source does not serve it."""
    found = find(version, shared)
    if found is not None:
        return found
    listing = source(version)
    if listing is None:
        raise PythonMissing(missing_message(version, shared))
    with build_steps.build_lock("python" + version, say):
        found = find(version, shared)  # another setup may have obtained it meanwhile
        return found if found is not None else obtain(version, listing, say, heartbeat)


def obtained_is_current(version, listing):
    """True when the obtained Python `version` was made from `listing` as it is now."""
    try:
        stamp = json.loads((obtained_folder(version) / OBTAINED_STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("listing_sha256") == hashlib.sha256(Path(listing).read_bytes()).hexdigest()


def obtain(version, listing, say=print, heartbeat=20.0):
    """Extract the Debian packages of `listing` into .envs/python<version>-debian, make the interpreter run from
    there (`relocate`), check that its standard modules load, and return it."""
    folder, name = obtained_folder(version), "python" + version
    partial = folder.with_name(folder.name + ".partial")
    log_path = catalog.ENVS_DIR / (name + ".log")
    suite = debian.debian_suite(listing)[0]
    say("[setup] {}: none found on this machine; obtaining Debian {}'s from {} (log: {})".format(
        name, suite, build_steps.shown(listing), build_steps.shown(log_path)))
    started = time.time()
    for stale in (partial, folder):
        shutil.rmtree(str(stale), ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        with open(str(log_path), "w") as log:
            debian.extract_debian_packages(listing, partial, partial, log, name, say, heartbeat)
            relocate(partial, version, log, name, say, heartbeat)
    except BaseException:
        shutil.rmtree(str(partial), ignore_errors=True)  # nothing half made stays behind
        raise
    partial.rename(folder)  # complete, or not there at all
    relocate_paths(folder, version)  # its recorded paths name the folder it now has
    python = folder / "usr" / "bin" / name
    out = subprocess.run([str(python), "-c", OBTAINED_CHECK], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise SetupError("the Python {} obtained from Debian {} does not run its standard modules: {}".format(
            version, suite, (out.stderr.strip().splitlines() or ["exit {}".format(out.returncode)])[-1]))
    full = build_steps.python_version(python)
    (folder / OBTAINED_STAMP).write_text(json.dumps({
        "python": full, "suite": suite, "listing": listing.name,
        "listing_sha256": hashlib.sha256(listing.read_bytes()).hexdigest()}, indent=1) + "\n")
    say("[setup] {}: Python {} obtained in {:.0f} s, {}, at {}".format(
        name, full, time.time() - started, build_steps.size(folder), build_steps.shown(folder)))
    return find(version)


def relocate(root, version, log, name, say, heartbeat):
    """Make a /usr-built Debian Python extracted into `root` run from there: its executable looks for libraries in
    the folders it came with first (an rpath, through the patchelf extracted with it), and its headers need no
    system include folder (pyconfig.h is Debian's wrapper of the multiarch one, replaced by that one)."""
    executable = root / "usr" / "bin" / ("python" + version)
    patchelf = root / "usr" / "bin" / "patchelf"
    rpath = "$ORIGIN/../lib/{0}:$ORIGIN/../../lib/{0}".format(MULTIARCH)
    build_steps.run_logged([str(patchelf), "--force-rpath", "--set-rpath", rpath, str(executable)], log, name, say,
                           heartbeat)
    headers = root / "usr" / "include" / ("python" + version)
    shutil.copyfile(str(root / "usr" / "include" / MULTIARCH / ("python" + version) / "pyconfig.h"),
                    str(headers / "pyconfig.h"))


def relocate_paths(root, version):
    """Point the build paths that Debian's Python recorded under /usr (RELOCATED_PATHS in its _sysconfigdata module)
    into `root`; LIBDIR to the multiarch folder that holds libpython. Returns the names changed."""
    module = next((root / "usr" / "lib" / ("python" + version)).glob("_sysconfigdata_*{}.py".format(MULTIARCH)))
    if module.is_symlink():
        module = module.resolve()
    changed = []

    def move(match):
        key, value = match.group(1), match.group(2)
        if key not in RELOCATED_PATHS:
            return match.group(0)
        changed.append(key)
        if key == "LIBDIR":
            value = "/usr/lib/" + MULTIARCH
        return "'{}': '{}{}'".format(key, root, value)

    text = re.sub(r"'(\w+)': '(/usr[^']*)'", move, module.read_text())
    module.write_text(text)
    for cache in module.parent.glob("__pycache__/{}*".format(module.stem)):
        cache.unlink()
    return changed


def create_venv(interpreter, path, log, name, say, heartbeat, wheel_source=()):
    """Create a virtual environment at `path` on `interpreter`, with pip: through its ensurepip, or where it has
    none (an obtained one) through the pip wheels it came with, upgraded to envs/python-bootstrap.txt with hash
    checking (from `wheel_source`'s folder where one is given)."""
    if interpreter.pip_wheels is None:
        check_venv_support(interpreter.path)
        build_steps.run_logged([interpreter.path, "-m", "venv", str(path)], log, name, say, heartbeat)
        return
    build_steps.run_logged([interpreter.path, "-m", "venv", "--without-pip", str(path)], log, name, say, heartbeat)
    wheels = sorted(glob.glob(os.path.join(interpreter.pip_wheels, "*.whl")))
    command = build_steps.pip_install(Path(path) / "bin" / "python", catalog.REQUIREMENTS_DIR / BOOTSTRAP, wheel_source,
                                      hashed=True)
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join(wheels))  # Debian's pip imports what it needs from its wheels
    build_steps.run_logged(command, log, name, say, heartbeat, environ=environ)


def check_venv_support(python):
    """Raise SetupError, naming the one command that fixes it, where `python` cannot create virtual environments."""
    out = subprocess.run([str(python), "-c", "import ensurepip, venv"], capture_output=True, text=True, timeout=60)
    if out.returncode == 0:
        return
    version = build_steps.python_version(python).rsplit(".", 1)[0]
    raise SetupError("Python {} at {} cannot create virtual environments (no ensurepip module); on Debian and Ubuntu "
                     "add it with `sudo apt-get install python{}-venv`, or adopt an interpreter that has the framework "
                     "with `python3 run_all.py setup ENV --python PATH`".format(version, python, version))
