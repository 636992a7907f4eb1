"""Create the per-framework virtual environments under .envs/ and register their Jupyter kernels.

An environment is rebuilt only when its requirements file or its Python changed: a stamp file in
the environment records what it was built from. Kernel specs go to the project-local Jupyter path
.jupyter/ (never the user's home); `jupyter_path_env()` is what a Jupyter server needs to see them.
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time

from runner import catalog

STAMP = "rosetta-stamp.json"
PTH_FILE = "rosetta-repo.pth"  # puts the repository on sys.path, so notebooks import `common`


class SetupError(RuntimeError):
    """An environment could not be built; the message says what to do."""


def find_python(version):
    """Return the path of a Python interpreter of `version` ("3.6"): on PATH, under pyenv or conda; else None."""
    if version is None:
        return sys.executable
    candidates = [shutil.which("python" + version)]
    roots = [os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")), os.environ.get("CONDA_PREFIX", "")]
    for root in filter(None, roots):
        candidates += sorted(glob.glob(os.path.join(root, "versions", version + ".*", "bin", "python" + version)))
        candidates += sorted(glob.glob(os.path.join(root, "envs", "*", "bin", "python" + version)))
    for candidate in filter(None, candidates):
        try:
            out = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.strip() == version:
            return candidate
    return None


def stamp_for(env, python, gpu):
    """What an environment is built from: CPU or GPU build, its requirements' hash, its interpreter's version."""
    requirements = env.requirements_for(gpu).read_bytes()
    if env.build_requirements:
        requirements = env.build_requirements.read_bytes() + requirements
    version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return {"build": "gpu" if gpu else "cpu", "requirements_sha256": hashlib.sha256(requirements).hexdigest(),
            "python": version}


def built_for_gpu(env):
    """True if `env` was built from its GPU requirements, False if from the CPU ones, None if not built."""
    try:
        return json.loads((env.path / STAMP).read_text())["build"] == "gpu"
    except (OSError, ValueError, KeyError):
        return None


def kernel_spec_path(env):
    """Where the kernel spec of `env` lives in the project-local Jupyter path."""
    return catalog.JUPYTER_DIR / "kernels" / env.kernel_name / "kernel.json"


def is_ready(env, gpu=None):
    """True when `env` exists, matches its requirements file, and its kernel is registered.

    gpu=None accepts whichever build is there; True or False asks for the GPU or the CPU build.
    """
    built_gpu = built_for_gpu(env)
    if built_gpu is None or (gpu is not None and gpu != built_gpu):
        return False
    if not (env.python_path.exists() and kernel_spec_path(env).exists()):
        return False
    recorded = json.loads((env.path / STAMP).read_text())
    requirements = env.requirements_for(built_gpu).read_bytes()
    if env.build_requirements:
        requirements = env.build_requirements.read_bytes() + requirements
    expected = hashlib.sha256(requirements).hexdigest()
    return recorded.get("requirements_sha256") == expected


def write_kernel_spec(env):
    """Register `env`'s interpreter as the Jupyter kernel rosetta-<name> in .jupyter/."""
    spec = {
        # log level ERROR: the kernel's own start-up chatter (e.g. the plain-TCP notice) stays out of run logs
        "argv": [str(env.python_path), "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 "--IPKernelApp.log_level=ERROR"],
        "display_name": env.display_name,
        "language": "python",
        "metadata": {"debugger": False},
    }
    if env.kernel_env:
        spec["env"] = dict(env.kernel_env)
    path = kernel_spec_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec, indent=1) + "\n")


def jupyter_path_env(environ=None):
    """A copy of the environment with .jupyter/ first on JUPYTER_PATH, so Jupyter finds the rosetta kernels."""
    environ = dict(os.environ if environ is None else environ)
    rest = [p for p in environ.get("JUPYTER_PATH", "").split(os.pathsep) if p and p != str(catalog.JUPYTER_DIR)]
    environ["JUPYTER_PATH"] = os.pathsep.join([str(catalog.JUPYTER_DIR)] + rest)
    return environ


def use_project_kernels():
    """Put .jupyter/ first on this process's JUPYTER_PATH (idempotent), so papermill finds the rosetta kernels."""
    os.environ["JUPYTER_PATH"] = jupyter_path_env()["JUPYTER_PATH"]


def ensure(env, gpu=None, say=print, heartbeat=20.0):
    """Build `env` unless it is ready; print progress while pip works. Raise SetupError on failure.

    gpu=True builds from envs/<name>-gpu.txt where that exists; None keeps whichever build is there
    and builds the CPU one when there is none.
    """
    if is_ready(env, gpu):
        write_kernel_spec(env)  # cheap, and keeps the spec current when this code changes it
        say("[setup] {}: ready ({})".format(env.name, env.path.relative_to(catalog.REPO)))
        return False
    python = find_python(env.python)
    if python is None:
        raise SetupError("environment {} needs Python {}, which was not found on PATH, under pyenv or conda"
                         .format(env.name, env.python))
    gpu = bool(gpu)
    requirements = env.requirements_for(gpu)
    if not requirements.exists():
        raise SetupError("environment {} has no requirements file {}".format(env.name, requirements))
    stamp = stamp_for(env, python, gpu)
    if env.path.exists():
        say("[setup] {}: requirements changed or build incomplete; rebuilding".format(env.name))
        shutil.rmtree(str(env.path))
    log_path = catalog.ENVS_DIR / (env.name + ".log")
    catalog.ENVS_DIR.mkdir(exist_ok=True)
    say("[setup] {}: creating with Python {} from {} (log: {})".format(
        env.name, stamp["python"], requirements.relative_to(catalog.REPO), log_path.relative_to(catalog.REPO)))
    started = time.time()
    with open(str(log_path), "w") as log:
        _run_logged([python, "-m", "venv", str(env.path)], log, env, say, heartbeat)
        pip = [str(env.python_path), "-m", "pip", "install", "--progress-bar", "off"]
        if env.build_requirements:  # build tools pinned first, then used as they are to build the packages
            _run_logged(pip + ["-r", str(env.build_requirements)], log, env, say, heartbeat)
            pip.append("--no-build-isolation")
        _run_logged(pip + ["-r", str(requirements)], log, env, say, heartbeat)
    site = subprocess.run([str(env.python_path), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, PTH_FILE), "w") as f:
        f.write(str(catalog.REPO) + "\n")
    write_kernel_spec(env)
    (env.path / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    say("[setup] {}: done in {:.0f} s, {}".format(env.name, time.time() - started, _size(env.path)))
    return True


def _run_logged(command, log, env, say, heartbeat):
    """Run a setup command into the log, printing its latest line every `heartbeat` seconds."""
    log.write("$ " + " ".join(command) + "\n")
    log.flush()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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


def _size(path):
    total = 0
    for root, _, files in os.walk(str(path)):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return "{:.1f} GB".format(total / 1e9) if total > 1e9 else "{:.0f} MB".format(total / 1e6)


def status_line(env):
    """One line saying whether `env` is ready, for `run_all.py list`."""
    build = {True: "GPU build", False: "CPU build", None: ""}[built_for_gpu(env)]
    return "{:10s} {:8s} {}".format(env.name, "ready" if is_ready(env) else "missing", build)


def find_browser():
    """The path of a Chromium for the browser test: $ROSETTA_CHROMIUM, or chromium on PATH; None if there is none."""
    return os.environ.get("ROSETTA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def ensure_browser(say=print):
    """Return a Chromium for the browser test, installing Debian's package when this runs as root with apt-get."""
    found = find_browser()
    if found:
        return found
    if not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get")):
        raise SetupError("the browser test needs Chromium: install your system's chromium package "
                         "or set ROSETTA_CHROMIUM to its path")
    log_path = catalog.ENVS_DIR / "browser.log"
    catalog.ENVS_DIR.mkdir(exist_ok=True)
    say("[setup] browser: installing Debian's chromium for the browser test (log: {})".format(
        log_path.relative_to(catalog.REPO)))
    environ = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with open(str(log_path), "w") as log:
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]):
            if subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=environ).returncode != 0:
                raise SetupError("`{}` failed; see {}".format(" ".join(command), log_path))
    found = find_browser()
    if not found:
        raise SetupError("chromium was installed but is not on PATH; see {}".format(log_path))
    return found

