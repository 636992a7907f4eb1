"""The steps every kind of environment's setup takes: say where packages come from, hold the environment's build
lock, and run each command into the setup's log while printing its progress (runner/run/interpreters.py finds or
obtains the Python it needs)."""

import contextlib
import fcntl
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from runner import catalog

WHEELS_VARIABLE = "ROSETTA_WHEELS"  # a folder of wheels to install from instead of a package index


class SetupError(RuntimeError):
    """An environment could not be built; the message says what to do."""


class MachineLacks(SetupError):
    """An environment needs something this machine does not have (a Python no known source has, a tool): its rows
    say `unavailable` with the reason, and the tests skip its notebooks with it."""


class PythonMissing(MachineLacks):
    """An environment needs a Python version that this machine does not have."""


class SourceUnreachable(SetupError):
    """A package source (a Debian mirror, and with it the Python obtained from Debian) did not serve what an
    environment needs: a failure of the moment, not something the machine lacks, so `run_all.py test` fails on it."""


def shown(path):
    """`path` as messages show it: relative to the repository where it is inside it, else as it is."""
    try:
        return Path(path).relative_to(catalog.REPO)
    except ValueError:
        return Path(path)


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


def pip_install(python, requirements, source=(), hashed=False, no_build_isolation=False):
    """pip's command that installs a requirements file (or lock) into `python`'s environment; `hashed`: exactly the
    packages it lists, each file checked against its hashes (--require-hashes --no-deps)."""
    command = [str(python), "-m", "pip", "install", "--progress-bar", "off"]
    command += (["--require-hashes", "--no-deps"] if hashed else []) + list(source)
    return command + (["--no-build-isolation"] if no_build_isolation else []) + ["-r", str(requirements)]


@contextlib.contextmanager
def build_lock(name, say=print):
    """Hold .envs/<name>.lock while environment (or interpreter) `name` is built, obtained or adopted: a second run or
    setup that wants the same one waits for the first, saying so, instead of building it twice or using it half built."""
    catalog.ENVS_DIR.mkdir(parents=True, exist_ok=True)
    with open(str(catalog.ENVS_DIR / (name + ".lock")), "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            say("[setup] {}: {} is building it; waiting until it is done".format(name, holder))
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


def run_logged(command, log, name, say, heartbeat, cwd=None, environ=None):
    """Run a setup command for `name` (an environment or interpreter) into the log, printing its latest line every
    `heartbeat` seconds; `environ`: its variables, where not this process's."""
    log.write("$ " + " ".join(command) + "\n")
    log.flush()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                               env=environ)
    latest = {"line": "", "start": time.time()}
    done = threading.Event()

    def report():
        while not done.wait(heartbeat):
            say("[setup] {}: {:.0f} s, {}".format(name, time.time() - latest["start"], latest["line"][:100]))

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    full = False
    for line in process.stdout:
        log.write(line)
        full = full or NO_SPACE_WORDS in line
        if line.strip() and "is ignored: it is neither a file nor a directory" not in line:
            latest["line"] = line.strip()
    process.wait()
    done.set()
    if process.returncode != 0 and (full or nearly_full(Path(log.name).parent)):
        raise no_space(name, Path(log.name).parent)
    if process.returncode != 0:
        raise SetupError("building {} failed at `{}` (exit {}); see {}".format(
            name, " ".join(command[-3:]), process.returncode, log.name))


NO_SPACE_WORDS = "No space left on device"  # how the system's error reads in a tool's output (strerror(ENOSPC))


def nearly_full(folder, below_mb=10):
    """True where the filesystem of `folder` has less than `below_mb` MB free (a tool that failed for want of room
    does not always say so: venv hides ensurepip's error)."""
    try:
        return shutil.disk_usage(str(folder)).free < below_mb * 1e6
    except OSError:
        return False


def free_space(folder):
    """'12.3 MB free': the room left on the filesystem of `folder`, for a line that says a write found none."""
    try:
        return "{:.1f} MB free".format(shutil.disk_usage(str(folder)).free / 1e6)
    except OSError:
        return "free space unknown"


def no_space(name, folder):
    """The SetupError of a build of `name` stopped for want of room in `folder`: one line with its free space."""
    free = free_space(folder)
    return SetupError("building {} stopped: no space left in {} ({}); the environment was not finished: make room, "
                      "then `python3 run_all.py setup {}` builds it again".format(name, folder, free, name))


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
