"""The steps every kind of environment's setup takes: find the Python it needs, say where packages come from, hold the
environment's build lock, and run each command into the setup's log while printing its progress."""

import contextlib
import fcntl
import glob
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from runner import catalog

WHEELS_VARIABLE = "ROSETTA_WHEELS"  # a folder of wheels to install from instead of a package index


class SetupError(RuntimeError):
    """An environment could not be built; the message says what to do."""


class MachineLacks(SetupError):
    """An environment needs something this machine does not have or cannot reach (a Python, a tool, a package
    source): its rows say `unavailable` with the reason, and the tests skip its notebooks with it."""


class PythonMissing(MachineLacks):
    """An environment needs a Python version that this machine does not have."""


def find_python(version, shared=False):
    """Return a Python interpreter of `version` ("3.6"): $ROSETTA_PYTHON36, on PATH, under pyenv or conda; else None.
    With `shared`, only one built with --enable-shared (whose libpythonX.Y.so other libraries can link)."""
    if version is None:
        return sys.executable
    check = "import sys, sysconfig; print('%d.%d' % sys.version_info[:2], sysconfig.get_config_var('Py_ENABLE_SHARED'))"
    candidates = [os.environ.get(python_variable(version)), shutil.which("python" + version)]
    roots = [os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")), os.environ.get("CONDA_PREFIX", "")]
    for root in filter(None, roots):
        candidates += sorted(glob.glob(os.path.join(root, "versions", version + ".*", "bin", "python" + version)))
        candidates += sorted(glob.glob(os.path.join(root, "envs", "*", "bin", "python" + version)))
    for candidate in filter(None, candidates):
        try:
            out = subprocess.run([candidate, "-c", check], capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        found, enable_shared = (out.stdout.split() + ["", ""])[:2]
        if out.returncode == 0 and found == version and (enable_shared == "1" or not shared):
            return candidate
    return None


def python_variable(version):
    """The environment variable that names an interpreter of `version` explicitly: ROSETTA_PYTHON36 for "3.6"."""
    return "ROSETTA_PYTHON" + version.replace(".", "")


def python_version(python):
    """The full version of an interpreter ('3.11.7'); raises SetupError if it does not run."""
    try:
        out = subprocess.run([str(python), "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        raise SetupError("{} does not run: {}".format(python, error)) from error
    if out.returncode != 0:
        raise SetupError("{} does not run: {}".format(python, (out.stderr.strip().splitlines() or ["exit status {}".format(
            out.returncode)])[-1]))
    return out.stdout.strip()


def wheel_source(wheels=None):
    """pip's options for where packages come from: a folder of wheels (--wheels or $ROSETTA_WHEELS) and no index."""
    wheels = wheels or os.environ.get(WHEELS_VARIABLE)
    if not wheels:
        return []
    if not Path(wheels).is_dir():
        raise SetupError("the wheel folder {} does not exist".format(wheels))
    return ["--no-index", "--find-links", str(Path(wheels).resolve())]


def check_venv_support(python):
    """Raise SetupError, naming the one command that fixes it, where `python` cannot create virtual environments."""
    out = subprocess.run([str(python), "-c", "import ensurepip, venv"], capture_output=True, text=True, timeout=60)
    if out.returncode == 0:
        return
    version = python_version(python).rsplit(".", 1)[0]
    raise SetupError("Python {} at {} cannot create virtual environments (no ensurepip module); on Debian and Ubuntu "
                     "add it with `sudo apt-get install python{}-venv`, or adopt an interpreter that has the framework "
                     "with `python3 run_all.py setup ENV --python PATH`".format(version, python, version))


@contextlib.contextmanager
def build_lock(env, say=print):
    """Hold .envs/<name>.lock while `env` is built or adopted: a second run or setup that wants the same environment
    waits for the first, saying so, instead of building it twice or using it half built."""
    catalog.ENVS_DIR.mkdir(parents=True, exist_ok=True)
    with open(str(catalog.ENVS_DIR / (env.name + ".lock")), "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            say("[setup] {}: {} is building it; waiting until it is done".format(env.name, holder))
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write("process {}".format(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_logged(command, log, env, say, heartbeat, cwd=None):
    """Run a setup command into the log, printing its latest line every `heartbeat` seconds."""
    log.write("$ " + " ".join(command) + "\n")
    log.flush()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
    latest = {"line": "", "start": time.time()}
    done = threading.Event()

    def report():
        while not done.wait(heartbeat):
            say("[setup] {}: {:.0f} s, {}".format(env.name, time.time() - latest["start"], latest["line"][:100]))

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    for line in process.stdout:
        log.write(line)
        if line.strip() and "is ignored: it is neither a file nor a directory" not in line:
            latest["line"] = line.strip()
    process.wait()
    done.set()
    if process.returncode != 0:
        raise SetupError("building environment {} failed at `{}` (exit {}); see {}".format(
            env.name, " ".join(command[-3:]), process.returncode, log.name))


def size(path):
    """The disk space of the files under `path`, as '5.9 GB' or '486 MB'."""
    total = 0
    for root, _, files in os.walk(str(path)):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return "{:.1f} GB".format(total / 1e9) if total > 1e9 else "{:.0f} MB".format(total / 1e6)
