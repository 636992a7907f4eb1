"""Create the per-framework virtual environments under .envs/ and register their Jupyter kernels.

An environment is rebuilt only when its requirements file or its Python changed: a stamp file in
the environment records what it was built from. Kernel specs go to the project-local Jupyter path
.jupyter/ (never the user's home); `jupyter_path_env()` is what a Jupyter server needs to see them.
"""

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from runner import catalog

STAMP = "rosetta-stamp.json"
PTH_FILE = "rosetta-repo.pth"  # puts the repository on sys.path, so notebooks import `common` and `frameworks`
DEBIAN_PTH_FILE = "rosetta-debian.pth"  # puts the extracted Debian packages' Python modules on sys.path
UNAVAILABLE_VARIABLE = "ROSETTA_UNAVAILABLE"  # for pytest: {environment: why this machine cannot build it}, JSON
BUILD_VARIABLE = "ROSETTA_BUILD"  # common.environment.BUILD_VARIABLE: the kernel tells the record how it was built
WHEELS_VARIABLE = "ROSETTA_WHEELS"  # a folder of wheels to install from instead of a package index
PROBE_PREFIX = "ROSETTA-PROBE "  # frameworks.probe.PREFIX
# What the runner's own environment needs to run notebooks and write reports (its probe)
RUNNER_IMPORTS = "import papermill, nbformat, nbclient, nbconvert, jupyter_client, ipykernel, matplotlib, pygments"


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


def recipe(env, requirements):
    """The bytes an environment is built from: its build tools, the requirements file, its Debian packages, and the
    library links and stand-ins (with their sources) the setup makes."""
    parts = [env.build_requirements, requirements, env.debian_packages]
    parts += [catalog.REQUIREMENTS_DIR / source for _, source in env.stand_in_libraries]
    built = b"".join(path.read_bytes() for path in parts if path)
    if needs_libraries(env):  # what the setup links and compiles is part of what it built
        built += repr((env.library_aliases, env.stand_in_libraries)).encode()
    return built


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


def read_stamp(env):
    """What `env` was built from (its stamp file), or None where it was never completed."""
    try:
        stamp = json.loads((env.path / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if "requirements" not in stamp and stamp.get("build") in ("cpu", "gpu"):  # stamps before GPU builds had choices
        gpu = catalog.REQUIREMENTS_DIR / (env.name + "-gpu.txt")
        stamp["requirements"] = (gpu if stamp["build"] == "gpu" and gpu.exists() else env.requirements).name
    return stamp


def write_stamp(env, stamp):
    """Record what `env` is; the last step of a build or an adoption."""
    env.path.mkdir(parents=True, exist_ok=True)
    (env.path / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")


def is_adopted(env):
    """True when `env` is an existing interpreter registered with `setup ENV --python PATH`."""
    return (read_stamp(env) or {}).get("build") == "adopted"


def interpreter(env):
    """The Python of `env`: the adopted interpreter, or the virtual environment's."""
    stamp = read_stamp(env) or {}
    return Path(stamp["python_path"]) if stamp.get("build") == "adopted" else env.python_path


def built_requirements(env):
    """The requirements file `env` was built from, or None (not built, or adopted)."""
    stamp = read_stamp(env) or {}
    return catalog.REQUIREMENTS_DIR / stamp["requirements"] if stamp.get("build") in ("cpu", "gpu") else None


def built_for_gpu(env):
    """True if `env` was built as a GPU build, False if as a CPU build, None if it was not built (or is adopted)."""
    stamp = read_stamp(env) or {}
    return {"gpu": True, "cpu": False}.get(stamp.get("build"))


def kernel_spec_path(env):
    """Where the kernel spec of `env` lives in the project-local Jupyter path."""
    return catalog.JUPYTER_DIR / "kernels" / env.kernel_name / "kernel.json"


def is_ready(env, requirements=None):
    """True when `env` can run notebooks as it is: built from `requirements` and unchanged since, or, when no
    requirements are asked for, built from any of its files or adopted."""
    stamp = read_stamp(env)
    if stamp is None or not kernel_spec_path(env).exists():
        return False
    if stamp.get("build") == "adopted":
        return requirements is None and interpreter(env).exists()
    built = built_requirements(env)
    if built is None or not built.exists() or (requirements is not None and Path(requirements).name != built.name):
        return False
    return env.python_path.exists() and stamp.get("requirements_sha256") == hashlib.sha256(recipe(env, built)).hexdigest()


def build_label(env):
    """How `env` was made, for the kernel and every record: 'venv gpu envs/pytorch.txt', 'adopted /usr/bin/python3'."""
    stamp = read_stamp(env) or {}
    if stamp.get("build") == "adopted":
        return "adopted " + stamp["python_path"]
    if stamp.get("build") in ("cpu", "gpu"):
        return "venv {} envs/{}".format(stamp["build"], stamp["requirements"])
    return None


def write_kernel_spec(env):
    """Register `env`'s interpreter as the Jupyter kernel rosetta-<name> in .jupyter/."""
    spec = {
        # log level ERROR: the kernel's own start-up chatter (e.g. the plain-TCP notice) stays out of run logs
        "argv": [str(interpreter(env)), "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 "--IPKernelApp.log_level=ERROR"],
        "display_name": env.display_name,
        "language": "python",
        "metadata": {"debugger": False},
    }
    spec["env"] = kernel_environment(env)
    path = kernel_spec_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec, indent=1) + "\n")


def kernel_environment(env):
    """The variables a kernel (or probe) of `env` runs with: how it was built, and what it needs to find."""
    environ = {name: value.replace("{env}", str(env.path)) for name, value in env.kernel_env}
    label = build_label(env)
    if label:
        environ[BUILD_VARIABLE] = label
    if is_adopted(env):  # no .pth file in someone else's interpreter: the repository goes on PYTHONPATH
        environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(catalog.REPO), os.environ.get("PYTHONPATH", "")]))
    if needs_libraries(env):  # the aliases' folder, then extracted Debian libraries, then what the setup saw
        folders = [str(path) for path in library_folders(env)] + [os.environ.get("LD_LIBRARY_PATH", "")]
        environ["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, folders))
    return environ


def jupyter_path_env(environ=None):
    """A copy of the environment with .jupyter/ first on JUPYTER_PATH, so Jupyter finds the rosetta kernels."""
    environ = dict(os.environ if environ is None else environ)
    rest = [p for p in environ.get("JUPYTER_PATH", "").split(os.pathsep) if p and p != str(catalog.JUPYTER_DIR)]
    environ["JUPYTER_PATH"] = os.pathsep.join([str(catalog.JUPYTER_DIR)] + rest)
    return environ


def use_project_kernels():
    """Put .jupyter/ first on this process's JUPYTER_PATH (idempotent), so papermill finds the rosetta kernels."""
    os.environ["JUPYTER_PATH"] = jupyter_path_env()["JUPYTER_PATH"]


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


def ensure(env, requirements=None, say=print, heartbeat=20.0, wheels=None):
    """Build `env` from `requirements` unless it is ready; print progress while pip works. Raise SetupError on failure.

    requirements=None keeps whichever build (or adoption) is there and builds the CPU one when there is none.
    Holds the environment's build lock (build_lock) throughout. Returns True when it built something.
    """
    with build_lock(env, say):
        return _ensure(env, requirements, say, heartbeat, wheels)


def _ensure(env, requirements, say, heartbeat, wheels):
    if is_ready(env, requirements):
        write_kernel_spec(env)  # cheap, and keeps the spec current when this code changes it
        what = "adopted {}".format(interpreter(env)) if is_adopted(env) else env.path.relative_to(catalog.REPO)
        say("[setup] {}: ready ({})".format(env.name, what))
        return False
    requirements = Path(requirements) if requirements is not None else env.requirements
    python = find_python(env.python, env.python_shared)
    if python is None:
        raise PythonMissing("needs Python {}{}: none found on PATH, under pyenv or conda (or set {} to one)".format(
            env.python, " built with --enable-shared" if env.python_shared else "", python_variable(env.python)))
    if not requirements.exists():
        raise SetupError("environment {} has no requirements file {}".format(env.name, requirements))
    source = wheel_source(wheels)
    check_venv_support(python)
    stamp = {"build": "gpu" if requirements in env.gpu_requirements else "cpu", "requirements": requirements.name,
             "requirements_sha256": hashlib.sha256(recipe(env, requirements)).hexdigest(),
             "python": python_version(python)}
    if env.path.exists():
        say("[setup] {}: requirements changed, another build asked for, or build incomplete; rebuilding".format(env.name))
        shutil.rmtree(str(env.path))
    log_path = catalog.ENVS_DIR / (env.name + ".log")
    catalog.ENVS_DIR.mkdir(exist_ok=True)
    say("[setup] {}: creating with Python {} from {}{} (log: {})".format(
        env.name, stamp["python"], requirements.relative_to(catalog.REPO), " and the wheels in {}".format(source[-1])
        if source else "", log_path.relative_to(catalog.REPO)))
    started = time.time()
    with open(str(log_path), "w") as log:
        _run_logged([python, "-m", "venv", str(env.path)], log, env, say, heartbeat)
        pip = [str(env.python_path), "-m", "pip", "install", "--progress-bar", "off"] + source
        if env.build_requirements:  # build tools pinned first, then used as they are to build the packages
            _run_logged(pip + ["-r", str(env.build_requirements)], log, env, say, heartbeat)
            pip.append("--no-build-isolation")
        _run_logged(pip + ["-r", str(requirements)], log, env, say, heartbeat)
        if needs_libraries(env):
            provide_libraries(env, log, say, heartbeat)
    site = subprocess.run([str(env.python_path), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, PTH_FILE), "w") as f:
        f.write(str(catalog.REPO) + "\n")
    debian_python = env.path / DEBIAN_DIR / "usr" / "lib" / "python3" / "dist-packages"
    if debian_python.is_dir():  # Python packages of the extracted Debian ones (python3-caffe), after the venv's own
        with open(os.path.join(site, DEBIAN_PTH_FILE), "w") as f:
            f.write(str(debian_python) + "\n")
    write_stamp(env, stamp)
    write_kernel_spec(env)
    say("[setup] {}: done in {:.0f} s, {}".format(env.name, time.time() - started, _size(env.path)))
    return True


def pins(requirements):
    """{distribution name: pinned version} of a requirements file (extras dropped: jax[cuda12]==0.10.2 -> jax)."""
    found = {}
    for line in Path(requirements).read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line and not line.startswith("-"):
            name, version = line.split("==", 1)
            found[name.split("[")[0].strip()] = version.strip()
    return found


_VERSIONS_SCRIPT = """
import json, sys
try:
    from importlib.metadata import version, PackageNotFoundError
except ImportError:  # Python 3.6 and 3.7
    import pkg_resources
    def version(name):
        return pkg_resources.get_distribution(name).version
    PackageNotFoundError = pkg_resources.DistributionNotFound
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = version(name)
    except PackageNotFoundError:
        found[name] = None
print(json.dumps(found))
"""


def installed_versions(python, names):
    """{name: installed version or None} of the distributions `names` in interpreter `python`."""
    out = subprocess.run([str(python), "-c", _VERSIONS_SCRIPT] + list(names), capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        raise SetupError("could not list the packages of {}: {}".format(python, (out.stderr.strip().splitlines() or [""])[-1]))
    return json.loads(out.stdout.strip().splitlines()[-1])


def script_environment(env):
    """The variables a script of the repository runs with in `env`'s interpreter: the kernel's, and the repository
    on PYTHONPATH."""
    environ = dict(os.environ, **kernel_environment(env))
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(catalog.REPO), environ.get("PYTHONPATH", "")]))
    return environ


def probe(env, python=None, timeout=600):
    """Ask `env`'s framework, in its own interpreter, whether it computes on the GPU (frameworks/probe.py).

    Returns {"framework", "version", "gpus", "gpu_ok", "error"}; for the runner, whether papermill and the
    report's packages import.
    """
    python = str(python or interpreter(env))
    environ = script_environment(env)
    if env.framework_module is None:
        command = [python, "-c", RUNNER_IMPORTS]
    else:
        command = [python, "-m", "frameworks.probe", env.framework_module]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=str(catalog.REPO), env=environ)
    except subprocess.TimeoutExpired:
        return {"gpu_ok": False, "error": "the probe took more than {} s".format(timeout), "gpus": []}
    if env.framework_module is None:
        error = None if out.returncode == 0 else (out.stderr.strip().splitlines() or ["exit {}".format(out.returncode)])[-1]
        return {"framework": "runner", "imports_ok": error is None, "gpu_ok": False, "gpus": [], "error": error}
    for line in out.stdout.splitlines():
        if line.startswith(PROBE_PREFIX):
            return json.loads(line[len(PROBE_PREFIX):])
    last = (out.stderr.strip().splitlines() or ["exit status {}".format(out.returncode)])[-1]
    return {"gpu_ok": False, "gpus": [], "error": "the probe did not answer: " + last}


def imports_ok(answer):
    """True when a probe's answer says the framework (or the runner's packages) imported."""
    return answer.get("version") is not None or bool(answer.get("imports_ok"))


def adopt(env, python, requirements=None, say=print, install_missing=False, wheels=None):
    """Register an existing interpreter as `env` (kernel rosetta-<name>) instead of building a virtual environment.

    Checks that it runs, that the framework imports (the probe, which also says whether it computes on the
    GPU), and that ipykernel is there; prints the versions found beside the pinned ones. Installs nothing
    unless `install_missing`, which adds the missing pinned packages (from `wheels` where given), leaving out
    those only the tests need. Returns the stamp.
    """
    with build_lock(env, say):
        return _adopt(env, python, requirements, say, install_missing, wheels)


def _adopt(env, python, requirements, say, install_missing, wheels):
    python = Path(python).expanduser()
    python = python if python.is_absolute() else Path(os.path.abspath(str(python)))
    version = python_version(python)
    if env.python and not version.startswith(env.python + "."):
        raise SetupError("{} needs Python {}; {} is Python {}".format(env.name, env.python, python, version))
    requirements = Path(requirements or env.requirements)
    pinned = pins(requirements)
    pinned.setdefault("ipykernel", pins(env.requirements).get("ipykernel", ""))
    found = installed_versions(python, pinned)
    missing = [name for name in pinned if found[name] is None and name not in env.test_packages]
    if missing and install_missing:
        say("[setup] {}: installing into {}: {}".format(env.name, python, ", ".join(missing)))
        command = [str(python), "-m", "pip", "install", "--progress-bar", "off"] + wheel_source(wheels) + [
            "{}=={}".format(name, pinned[name]) for name in missing]
        out = subprocess.run(command, capture_output=True, text=True)
        if out.returncode != 0:
            raise SetupError("`{}` failed: {}".format(" ".join(command[:4] + ["..."]),
                                                       (out.stderr.strip().splitlines() or [""])[-1]))
        found = installed_versions(python, pinned)
        missing = [name for name in pinned if found[name] is None and name not in env.test_packages]
    say("[setup] {}: adopting {} (Python {}); packages found beside the pins of {}:".format(
        env.name, python, version, requirements.relative_to(catalog.REPO)))
    for name in pinned:
        say("    {:24s} {:20s} pinned {}{}".format(name, found[name] or "-", pinned[name],
                                                 " (for the tests only)" if name in env.test_packages else ""))
    answer = probe(env, python)
    if not imports_ok(answer):
        raise SetupError("{} cannot serve as {}: {}".format(python, env.name, answer.get("error")))
    if found.get("ipykernel") is None:
        raise SetupError("{} lacks ipykernel, which a Jupyter kernel needs: add it with `{} -m pip install "
                         "ipykernel=={}`, or rerun with --install-missing".format(python, python, pinned["ipykernel"]))
    if missing:
        say("[setup] {}: missing {}; `{} -m pip install {}` adds them (or rerun with --install-missing)".format(
            env.name, ", ".join(missing), python, " ".join("{}=={}".format(n, pinned[n]) for n in missing)))
    stamp = {"build": "adopted", "python_path": str(python), "python": version, "requirements": requirements.name,
             "versions": found, "probe": answer}
    if env.path.exists() and not is_adopted(env):
        say("[setup] {}: replacing the virtual environment {}".format(env.name, env.path.relative_to(catalog.REPO)))
        shutil.rmtree(str(env.path))
    write_stamp(env, stamp)
    write_kernel_spec(env)
    say("[setup] {}: adopted; kernel {} runs {}".format(env.name, env.kernel_name, python))
    return stamp


def missing_packages(env, packages):
    """Those of `packages` that an adopted `env` lacks (a built environment has all its pins)."""
    stamp = read_stamp(env) or {}
    if stamp.get("build") != "adopted":
        return []
    versions = stamp.get("versions") or {}
    return [name for name in packages if not versions.get(name)]


LIBRARY_ALIASES_DIR = "library-aliases"  # in the environment: links named as the framework wants them, and stand-ins
DEBIAN_DIR = "debian"  # in the environment: the Debian packages of envs/<name>-debian.txt, extracted
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"  # Debian's signing keys, for another suite's lists


def needs_libraries(env):
    """True when `env`'s kernel loads libraries the setup provides: aliases, Debian packages or stand-ins."""
    return bool(env.library_aliases or env.debian_packages or env.stand_in_libraries)


def library_folders(env):
    """The folders the kernel of `env` loads shared libraries from, before the system's."""
    folders = [env.path / LIBRARY_ALIASES_DIR]
    folders += sorted(env.path.glob(DEBIAN_DIR + "/usr/lib/*-linux-gnu")) + sorted(env.path.glob(DEBIAN_DIR + "/lib/*-linux-gnu"))
    return folders


def system_library(name):
    """Where the system has shared library `name`: in a folder of LD_LIBRARY_PATH, else in the loader's cache
    (`ldconfig -p`); None where it has none."""
    for folder in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
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


def debian_suite(env):
    """(suite, [mirrors]) from the `# debian-suite:` and `# debian-mirror:` lines of envs/<name>-debian.txt, for
    packages of another Debian release than the system's; None where it names none (the system's apt serves)."""
    found = {"suite": [], "mirror": []}
    for line in env.debian_packages.read_text().splitlines():
        key, _, value = line.lstrip("# ").partition(":")
        if line.startswith("#") and key in ("debian-suite", "debian-mirror"):
            found[key[len("debian-"):]].append(value.strip())
    if not found["suite"]:
        return None
    return found["suite"][0], found["mirror"] or ["http://deb.debian.org/debian"]


def private_apt(env, suite, mirror):
    """apt-get options that read `suite`'s package lists from `mirror` and keep them, and everything apt writes,
    in the environment's apt/ folder: the system's sources, lists and installed packages are neither read nor
    changed, and no root is needed."""
    root = env.path / "apt"
    for folder in ("lists/partial", "archives/partial", "preferences.d"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "sources.list").write_text("deb [signed-by={}] {} {} main\n".format(DEBIAN_KEYRING, mirror, suite))
    (root / "status").touch()
    options = {"Dir::Etc::SourceList": root / "sources.list", "Dir::Etc::SourceParts": root / "preferences.d",
               "Dir::Etc::Preferences": root / "preferences", "Dir::Etc::PreferencesParts": root / "preferences.d",
               "Dir::State": root, "Dir::State::Lists": root / "lists", "Dir::State::status": root / "status",
               "Dir::Cache": root, "Dir::Cache::Archives": root / "archives", "APT::Architecture": "amd64"}
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        options["APT::Sandbox::User"] = "root"  # the _apt user could not write into the environment's folder
    return [word for name, value in options.items() for word in ("-o", "{}={}".format(name, value))]


def download_debian_packages(env, downloads, log, say, heartbeat):
    """Fetch the pinned packages of envs/<name>-debian.txt into `downloads` with apt-get download: from the
    system's apt, or from the suite its `# debian-suite:` line names, trying its mirrors in turn."""
    suite = debian_suite(env)
    command = ["apt-get", "download"] + debian_packages(env)
    if suite is None:
        try:
            _run_logged(command, log, env, say, heartbeat, cwd=str(downloads))
        except SetupError as error:
            if not (hasattr(os, "geteuid") and os.geteuid() == 0):
                raise SetupError("`apt-get download` of {} failed (see {}); install OpenMPI 4 (Debian/Ubuntu: "
                                 "libopenmpi3) and rerun the setup".format(env.debian_packages.name, log.name)) from error
            _run_logged(["apt-get", "update"], log, env, say, heartbeat)  # a fresh machine may have no package lists
            _run_logged(command, log, env, say, heartbeat, cwd=str(downloads))
        return
    name, mirrors = suite
    if not os.path.exists(DEBIAN_KEYRING):
        raise MachineLacks("needs Debian's archive keyring {} (package debian-archive-keyring) to check {}'s "
                         "packages".format(DEBIAN_KEYRING, name))
    failures = []
    for mirror in mirrors:
        apt = private_apt(env, name, mirror)
        try:
            _run_logged(["apt-get"] + apt + ["update"], log, env, say, heartbeat)
            _run_logged(["apt-get"] + apt + command[1:], log, env, say, heartbeat, cwd=str(downloads))
            break
        except SetupError:
            failures.append(mirror)
            say("[setup] {}: Debian {} not available from {}".format(env.name, name, mirror))
        finally:
            shutil.rmtree(str(env.path / "apt"), ignore_errors=True)  # the suite's package lists: tens of MB
    else:
        raise MachineLacks("needs Debian's {} packages, which none of {} served (see {})".format(
            name, ", ".join(failures), log.name))


def provide_libraries(env, log, say, heartbeat):
    """Make the libraries `env`'s kernel needs loadable, in the environment's own folders.

    Aliases (env.library_aliases) link to the system's copies where its loader cache has them; otherwise, and
    always for packages of another Debian suite than the system's, the pinned Debian packages of
    envs/<name>-debian.txt are fetched with apt-get download and extracted with dpkg -x (nothing installed).
    Stand-in libraries (env.stand_in_libraries) are then compiled with the C compiler.
    """
    aliases = env.path / LIBRARY_ALIASES_DIR
    aliases.mkdir(parents=True, exist_ok=True)
    other_suite = env.debian_packages is not None and debian_suite(env) is not None
    provided = {name: None if other_suite else system_library(name) for _, name in env.library_aliases}
    if other_suite or not all(provided.values()):
        missing = ", ".join(name for name, path in provided.items() if not path)
        if not (env.debian_packages and shutil.which("apt-get") and shutil.which("dpkg")):
            raise MachineLacks("needs {}, which this system lacks and cannot fetch without apt-get; install OpenMPI 4 "
                             "(Debian/Ubuntu: libopenmpi3) and rerun the setup".format(missing or "Debian's packages"))
        say("[setup] {}: {}; extracting the Debian packages of {}".format(
            env.name, "packages of Debian {}".format(debian_suite(env)[0]) if other_suite else missing + " not on this system",
            env.debian_packages.relative_to(catalog.REPO)))
        downloads = env.path / "debian-downloads"
        downloads.mkdir(exist_ok=True)
        os.chmod(str(downloads), 0o777)  # apt-get download drops root to the _apt user where it can
        download_debian_packages(env, downloads, log, say, heartbeat)
        for deb in sorted(downloads.glob("*.deb")):
            _run_logged(["dpkg", "-x", str(deb), str(env.path / DEBIAN_DIR)], log, env, say, heartbeat)
        shutil.rmtree(str(downloads))
        found = {}  # each library's first copy, outer folders first (Debian keeps alternatives in subfolders)
        for folder in library_folders(env)[1:]:
            for path in sorted(folder.rglob("*.so*"), key=lambda path: (len(path.parts), path.name)):
                found.setdefault(path.name, path)
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
    for name, source in env.stand_in_libraries:
        compiler = shutil.which(os.environ.get("CC", "cc"))
        if compiler is None:
            raise MachineLacks("needs a C compiler (cc, or $CC) to build its stand-in {}".format(name))
        _run_logged([compiler, "-shared", "-fPIC", "-O2", "-Wl,-soname," + name, "-o", str(aliases / name),
                     str(catalog.REQUIREMENTS_DIR / source)], log, env, say, heartbeat)


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

