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


class PythonMissing(SetupError):
    """An environment needs a Python version that this machine does not have."""


def find_python(version):
    """Return a Python interpreter of `version` ("3.6"): $ROSETTA_PYTHON36, on PATH, under pyenv or conda; else None."""
    if version is None:
        return sys.executable
    candidates = [os.environ.get(python_variable(version)), shutil.which("python" + version)]
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


def python_variable(version):
    """The environment variable that names an interpreter of `version` explicitly: ROSETTA_PYTHON36 for "3.6"."""
    return "ROSETTA_PYTHON" + version.replace(".", "")


def recipe(env, gpu):
    """The bytes an environment is built from: its build tools, requirements and Debian packages."""
    parts = [env.build_requirements, env.requirements_for(gpu), env.debian_packages]
    return b"".join(path.read_bytes() for path in parts if path)


def stamp_for(env, python, gpu):
    """What an environment is built from: CPU or GPU build, its requirements' hash, its interpreter's version."""
    version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return {"build": "gpu" if gpu else "cpu", "requirements_sha256": hashlib.sha256(recipe(env, gpu)).hexdigest(),
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
    return recorded.get("requirements_sha256") == hashlib.sha256(recipe(env, built_gpu)).hexdigest()


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
    environ = dict(env.kernel_env)
    if env.library_aliases:  # the aliases' folder, then extracted Debian libraries, then what the setup saw
        folders = [str(path) for path in library_folders(env)] + [os.environ.get("LD_LIBRARY_PATH", "")]
        environ["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, folders))
    if environ:
        spec["env"] = environ
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
        raise PythonMissing("needs Python {}: none found on PATH, under pyenv or conda (or set {} to one)".format(
            env.python, python_variable(env.python)))
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
        if env.library_aliases:
            provide_libraries(env, log, say, heartbeat)
    site = subprocess.run([str(env.python_path), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, PTH_FILE), "w") as f:
        f.write(str(catalog.REPO) + "\n")
    write_kernel_spec(env)
    (env.path / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    say("[setup] {}: done in {:.0f} s, {}".format(env.name, time.time() - started, _size(env.path)))
    return True


LIBRARY_ALIASES_DIR = "library-aliases"  # in the environment: links named as the framework wants them
DEBIAN_DIR = "debian"  # in the environment: the Debian packages of envs/<name>-debian.txt, extracted


def library_folders(env):
    """The folders the kernel of `env` loads shared libraries from, before the system's."""
    folders = [env.path / LIBRARY_ALIASES_DIR]
    folders += sorted(env.path.glob(DEBIAN_DIR + "/usr/lib/*-linux-gnu")) + sorted(env.path.glob(DEBIAN_DIR + "/lib/*-linux-gnu"))
    return folders


def system_library(name):
    """The path of shared library `name` as the system's loader cache (`ldconfig -p`) knows it, else None."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if line.strip().startswith(name + " ") and "=>" in line and "x86-64" in line:
            return line.split("=>")[-1].strip()
    return None


def debian_packages(env):
    """The name=version lines of envs/<name>-debian.txt, comments left out."""
    lines = (line.split("#")[0].strip() for line in env.debian_packages.read_text().splitlines())
    return [line for line in lines if line]


def provide_libraries(env, log, say, heartbeat):
    """Make the libraries of env.library_aliases loadable under their wanted names, in the environment's own folder.

    The system's copies are used where its loader cache has them; otherwise the pinned Debian packages of
    envs/<name>-debian.txt are fetched with apt-get download and extracted with dpkg -x (nothing installed).
    """
    aliases = env.path / LIBRARY_ALIASES_DIR
    aliases.mkdir(parents=True, exist_ok=True)
    provided = {name: system_library(name) for _, name in env.library_aliases}
    if not all(provided.values()):
        missing = ", ".join(name for name, path in provided.items() if not path)
        if not (env.debian_packages and shutil.which("apt-get") and shutil.which("dpkg")):
            raise SetupError("needs {}, which this system lacks and cannot fetch without apt-get; install OpenMPI 4 "
                             "(Debian/Ubuntu: libopenmpi3) and rerun the setup".format(missing))
        say("[setup] {}: {} not on this system; extracting the Debian packages of {}".format(
            env.name, missing, env.debian_packages.relative_to(catalog.REPO)))
        downloads = env.path / "debian-downloads"
        downloads.mkdir(exist_ok=True)
        os.chmod(str(downloads), 0o777)  # apt-get download drops root to the _apt user where it can
        command = ["apt-get", "download"] + debian_packages(env)
        try:
            _run_logged(command, log, env, say, heartbeat, cwd=str(downloads))
        except SetupError as error:
            if not (hasattr(os, "geteuid") and os.geteuid() == 0):
                raise SetupError("`apt-get download` of {} failed (see {}); install OpenMPI 4 (Debian/Ubuntu: "
                                 "libopenmpi3) and rerun the setup".format(env.debian_packages.name, log.name)) from error
            _run_logged(["apt-get", "update"], log, env, say, heartbeat)  # a fresh machine may have no package lists
            _run_logged(command, log, env, say, heartbeat, cwd=str(downloads))
        for deb in sorted(downloads.glob("*.deb")):
            _run_logged(["dpkg", "-x", str(deb), str(env.path / DEBIAN_DIR)], log, env, say, heartbeat)
        shutil.rmtree(str(downloads))
        found = {path.name: path for folder in library_folders(env)[1:] for path in folder.glob("*.so*")}
        provided = {name: provided[name] or found.get(name) for name in provided}
        if not all(provided.values()):
            raise SetupError("the Debian packages of {} lack {}".format(
                env.debian_packages.name, ", ".join(name for name, path in provided.items() if not path)))
    for wanted, name in env.library_aliases:
        link = aliases / wanted
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(provided[name])
        log.write("linked {} -> {}\n".format(link, provided[name]))


def _run_logged(command, log, env, say, heartbeat, cwd=None):
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

