"""The environments a framework's notebooks run in, and their Jupyter kernels.

Each environment is made one of three ways, each a class with the same few methods (`build`, `ready`, `python`,
`describe`, and what its kernel needs): a virtual environment of PyPI packages under .envs/ (VirtualEnvironment), one
that also gets libraries extracted from Debian packages (VirtualEnvironmentWithLibraries, runner/run/debian.py), or
an existing interpreter adopted with `setup ENV --python PATH` (AdoptedInterpreter). `installation(env)` says which
an environment has; nothing outside these classes asks which kind it is. A stamp file in the environment records
what it was made from, so it is rebuilt only when its requirements or its Python changed. Kernel specs go to the
project-local Jupyter path .jupyter/ (never the user's home); `jupyter_path_env()` is what a Jupyter server needs to
see them.
"""

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from runner import catalog
from runner.run import build_steps, debian, interpreters, locks
from runner.run.build_steps import MachineLacks, PythonMissing, SetupError, SourceUnreachable
from runner.run.interpreters import find_python, python_variable

STAMP = "rosetta-stamp.json"
PTH_FILE = "rosetta-repo.pth"  # puts the repository on sys.path, so notebooks import `common` and `frameworks`
DEBIAN_PTH_FILE = "rosetta-debian.pth"  # puts the extracted Debian packages' Python modules on sys.path
UNAVAILABLE_VARIABLE = "ROSETTA_UNAVAILABLE"  # for pytest: {environment: why this machine cannot build it}, JSON
BUILD_VARIABLE = "ROSETTA_BUILD"  # common.environment.BUILD_VARIABLE: the kernel tells the record how it was built
LOCK_VARIABLE = "ROSETTA_LOCK"  # common.environment.LOCK_VARIABLE: and the lock it was built from
PROBE_PREFIX = "ROSETTA-PROBE "  # frameworks.probe.PREFIX
# What the runner's own environment needs to run notebooks and write reports (its probe)
RUNNER_IMPORTS = "import papermill, nbformat, nbclient, nbconvert, jupyter_client, ipykernel, matplotlib, pygments"
# The errors of a setup, and where an environment's interpreter is looked for: build_steps' own, named here too
__all__ = ["MachineLacks", "PythonMissing", "SetupError", "SourceUnreachable", "find_python", "python_variable"]


def recipe(env, requirements):
    """The bytes an environment is built from: its build tools, the requirements file, its Debian packages, and the
    library links and stand-ins (with their sources) the setup makes."""
    parts = [env.build_requirements, requirements, env.debian_packages]
    parts += [locks.lock_path(path) for path in (env.build_requirements, requirements) if path is not None and
              locks.lock_path(path).exists()]
    parts += [catalog.REQUIREMENTS_DIR / source for _, source in env.stand_in_libraries]
    built = b"".join(path.read_bytes() for path in parts if path)
    if debian.needs_libraries(env):  # what the setup links and compiles is part of what it built
        built += repr((env.library_aliases, env.stand_in_libraries)).encode()
    return built


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


class Installation:
    """How one environment is made. Every kind answers the same questions; `installation(env)` gives the kind an
    environment has (a new one is a virtual environment until an interpreter is adopted for it)."""

    chosen_by_hand = False  # setup keeps it as it is, unless a kind of build is forced

    def __init__(self, env):
        self.env = env

    def stamp(self):
        """What the environment was made from (its stamp file), {} where it was never completed."""
        return read_stamp(self.env) or {}

    def python(self):
        """The interpreter its kernel runs."""
        raise NotImplementedError

    def ready(self, requirements=None):
        """True when it can run notebooks as it is: made from `requirements` (None: from any of its files) and
        unchanged since."""
        raise NotImplementedError

    def label(self):
        """How it was made, for its kernel and every record ('venv gpu envs/pytorch.txt', 'adopted /usr/bin/python3'),
        None where it was not."""
        raise NotImplementedError

    def describe(self):
        """What it is, in a few words for `list` ('envs/pytorch.txt, GPU build'); '' where it was not made."""
        raise NotImplementedError

    def requirements(self):
        """The requirements file it was built from, None where it was not built from one."""
        return None

    def origin(self):
        """Where what it runs came from, for `list`: its Python and where that was found, and the lock it was built
        from ('Python 3.9.2 (obtained from Debian bullseye), lock envs/caffe.lock@9ef36f2b2825'); '' where not built."""
        return ""

    def kernel_variables(self):
        """The variables its kernel needs besides the catalog's `kernel_env` (where to find the repository, libraries)."""
        return {}

    def missing(self, packages):
        """Those of `packages` (distribution names) it lacks."""
        return []

    def runs_this_process(self):
        """True when this process runs on its interpreter."""
        raise NotImplementedError

    def build(self, requirements=None, say=print, wheels=None, **options):
        """Make it from `requirements` (default: the environment's CPU requirements); return its stamp."""
        raise NotImplementedError


class VirtualEnvironment(Installation):
    """A virtual environment under .envs/<name> with the pinned PyPI packages of one requirements file: the CPU build
    or one of the GPU builds; the repository is on its sys.path through a .pth file."""

    def python(self):
        return self.env.python_path

    def requirements(self):
        stamp = self.stamp()
        return catalog.REQUIREMENTS_DIR / stamp["requirements"] if stamp.get("build") in ("cpu", "gpu") else None

    def ready(self, requirements=None):
        built = self.requirements()
        if built is None or not built.exists() or (requirements is not None and Path(requirements).name != built.name):
            return False
        digest = hashlib.sha256(recipe(self.env, built)).hexdigest()
        python = self.env.python is None or self.stamp().get("python", "").startswith(self.env.python + ".")
        return python and self.env.python_path.exists() and self.stamp().get("requirements_sha256") == digest

    def label(self):
        stamp = self.stamp()
        return "venv {} envs/{}".format(stamp["build"], stamp["requirements"]) if self.requirements() else None

    def describe(self):
        built = self.requirements()
        if built is None:
            return ""
        return "{}, {} build".format(locks.shown(built), "GPU" if built in self.env.gpu_requirements else "CPU")

    def origin(self):
        stamp = self.stamp()
        if self.requirements() is None:
            return ""
        python = "Python {} ({})".format(stamp.get("python"), stamp["python_origin"]) if stamp.get("python_origin") else (
            "Python {}".format(stamp.get("python")))
        return "{}, {}".format(python, "lock " + stamp["lock"] if stamp.get("lock") else "no lock")

    def for_gpu(self):
        """True for a GPU build, False for a CPU build, None where nothing was built."""
        return {"gpu": True, "cpu": False}.get(self.stamp().get("build"))

    def runs_this_process(self):
        return Path(sys.prefix).resolve() == self.env.path.resolve()

    def build(self, requirements=None, say=print, wheels=None, heartbeat=20.0):
        env = self.env
        requirements = Path(requirements) if requirements is not None else env.requirements
        if not requirements.exists():
            raise SetupError("environment {} has no requirements file {}".format(env.name, requirements))
        source = build_steps.wheel_source(wheels)
        steps = [path for path in (env.build_requirements, requirements) if path is not None]
        for path in steps:  # a lock older than its requirements file is refused; a file without one installs as it is
            why = locks.stale(path) if locks.lock_path(path).exists() else None
            if why:
                raise locks.LockError(why)
        python = interpreters.find_or_obtain(env.python, env.python_shared, say, heartbeat)
        stamp = {"build": "gpu" if requirements in env.gpu_requirements else "cpu",
                 "requirements": locks.requirements_name(requirements),
                 "requirements_sha256": hashlib.sha256(recipe(env, requirements)).hexdigest(),
                 "python": python.version, "python_path": python.path, "python_origin": python.origin}
        lock = locks.lock_path(requirements)
        if lock.exists():
            stamp["lock"] = locks.label(lock)
        if env.path.exists():
            say("[setup] {}: requirements changed, another build asked for, or build incomplete; rebuilding".format(
                env.name))
            shutil.rmtree(str(env.path))
        log_path = catalog.ENVS_DIR / (env.name + ".log")
        catalog.ENVS_DIR.mkdir(exist_ok=True)
        say("[setup] {}: creating with {} from {}{} (log: {})".format(
            env.name, python.describe(), build_steps.shown(requirements), " and the wheels in {}".format(source[-1])
            if source else "", build_steps.shown(log_path)))
        started = time.time()
        with open(str(log_path), "w") as log:
            interpreters.create_venv(python, env.path, log, env.name, say, heartbeat, source)
            for path in steps:  # build tools first, then used as they are to build the packages
                install(env, path, source, log, say, heartbeat, no_build_isolation=path != steps[0])
            self.add_libraries(log, say, heartbeat)
        site = subprocess.run([str(env.python_path), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        with open(os.path.join(site, PTH_FILE), "w") as f:
            f.write(str(catalog.REPO) + "\n")
        self.add_to_path(site)
        write_stamp(env, stamp)
        write_kernel_spec(env)
        say("[setup] {}: done in {:.0f} s, {}".format(env.name, time.time() - started, build_steps.size(env.path)))
        return stamp

    def add_libraries(self, log, say, heartbeat):
        """Make the libraries its kernel needs beyond its packages loadable (none for a plain virtual environment)."""

    def add_to_path(self, site):
        """Put what else its kernel imports on sys.path through .pth files in `site` (nothing else here)."""


def install(env, requirements, source, log, say, heartbeat, no_build_isolation=False):
    """pip-install a requirements file into `env`'s virtual environment: from its lock where it has one (exactly its
    packages, every file checked against its hashes), else as it is. A file whose hash the lock lacks is refused in
    one line naming the package."""
    lock = locks.lock_path(requirements)
    if not lock.exists():
        build_steps.run_logged(build_steps.pip_install(env.python_path, requirements, source,
                                                       no_build_isolation=no_build_isolation), log, env.name, say, heartbeat)
        return
    try:
        build_steps.run_logged(build_steps.pip_install(env.python_path, lock, source, hashed=True,
                                                       no_build_isolation=no_build_isolation), log, env.name, say, heartbeat)
    except SetupError as error:
        log.flush()
        mismatch = locks.hash_mismatch(Path(log.name).read_text())
        if mismatch is None:
            raise
        raise SetupError("{}: {} does not match the hashes of envs/{} (a file changed on the index, or a stale lock: "
                         "`{} {}`)".format(env.name, mismatch, lock.name, locks.REGENERATE, env.name)) from error


class VirtualEnvironmentWithLibraries(VirtualEnvironment):
    """A virtual environment whose kernel also loads libraries its packages lack: links under the names the framework
    was linked with, Debian packages extracted into the environment and stand-ins compiled at setup
    (runner/run/debian.py); their folders come first on its LD_LIBRARY_PATH."""

    def add_libraries(self, log, say, heartbeat):
        debian.provide_libraries(self.env, log, say, heartbeat)

    def add_to_path(self, site):
        extracted = self.env.path / debian.DEBIAN_DIR / "usr" / "lib" / "python3" / "dist-packages"
        if extracted.is_dir():  # Python packages of the extracted Debian ones (python3-caffe), after the venv's own
            with open(os.path.join(site, DEBIAN_PTH_FILE), "w") as f:
                f.write(str(extracted) + "\n")

    def kernel_variables(self):
        folders = [str(path) for path in debian.library_folders(self.env)] + [os.environ.get("LD_LIBRARY_PATH", "")]
        return {"LD_LIBRARY_PATH": os.pathsep.join(filter(None, folders))}


class AdoptedInterpreter(Installation):
    """An existing interpreter registered as the environment (`setup ENV --python PATH`), with the packages it has:
    nothing is built, the repository reaches its kernel through PYTHONPATH, and its stamp keeps the versions found."""

    chosen_by_hand = True

    def __init__(self, env, path):
        super().__init__(env)
        self.path = Path(path)

    def python(self):
        return self.path

    def ready(self, requirements=None):
        return requirements is None and self.path.exists()

    def label(self):
        return "adopted {}".format(self.path)

    def describe(self):
        return "adopted {} (Python {})".format(self.path, self.stamp().get("python"))

    def kernel_variables(self):  # no .pth file in someone else's interpreter: the repository goes on PYTHONPATH
        return {"PYTHONPATH": os.pathsep.join(filter(None, [str(catalog.REPO), os.environ.get("PYTHONPATH", "")]))}

    def missing(self, packages):
        versions = self.stamp().get("versions") or {}
        return [name for name in packages if not versions.get(name)]

    def runs_this_process(self):
        return os.path.realpath(sys.executable) == os.path.realpath(str(self.path))

    def build(self, requirements=None, say=print, wheels=None, install_missing=False):
        """Check the interpreter and register it: that it runs the environment's Python, that the framework imports
        (the probe, which also says whether it computes on the GPU), and that ipykernel is there; print the versions
        found beside the pinned ones. Installs nothing unless `install_missing`, which adds the missing pinned
        packages (from `wheels` where given), leaving out those only the tests need."""
        env, python = self.env, self.path
        version = build_steps.python_version(python)
        if env.python and not version.startswith(env.python + "."):
            raise SetupError("{} needs Python {}; {} is Python {}".format(env.name, env.python, python, version))
        requirements = Path(requirements or env.requirements)
        pinned = pins(requirements)
        pinned.setdefault("ipykernel", pins(env.requirements).get("ipykernel", ""))
        found = installed_versions(python, pinned)
        missing = [name for name in pinned if found[name] is None and name not in env.test_packages]
        if missing and install_missing:
            say("[setup] {}: installing into {}: {}".format(env.name, python, ", ".join(missing)))
            command = [str(python), "-m", "pip", "install", "--progress-bar", "off"] + build_steps.wheel_source(
                wheels) + ["{}=={}".format(name, pinned[name]) for name in missing]
            out = subprocess.run(command, capture_output=True, text=True)
            if out.returncode != 0:
                raise SetupError("`{}` failed: {}".format(" ".join(command[:4] + ["..."]),
                                                           (out.stderr.strip().splitlines() or [""])[-1]))
            found = installed_versions(python, pinned)
            missing = [name for name in pinned if found[name] is None and name not in env.test_packages]
        say("[setup] {}: adopting {} (Python {}); packages found beside the pins of {}:".format(
            env.name, python, version, build_steps.shown(requirements)))
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
        if env.path.exists() and not installation(env).chosen_by_hand:
            say("[setup] {}: replacing the virtual environment {}".format(env.name, build_steps.shown(env.path)))
            shutil.rmtree(str(env.path))
        write_stamp(env, stamp)
        write_kernel_spec(env)
        say("[setup] {}: adopted; kernel {} runs {}".format(env.name, env.kernel_name, python))
        return stamp


def installation(env):
    """The kind of environment `env` is now: the interpreter its stamp says was adopted, else a virtual environment
    (with libraries where the catalog gives it some to provide)."""
    stamp = read_stamp(env) or {}
    if stamp.get("build") == "adopted":
        return AdoptedInterpreter(env, stamp["python_path"])
    return installation_to_build(env)


def interpreter(env):
    """The Python of `env`: the virtual environment's, or the adopted interpreter."""
    return installation(env).python()


def is_ready(env, requirements=None):
    """True when `env` can run notebooks as it is: its kernel registered, and made from `requirements` and unchanged
    since, or, when no requirements are asked for, made from any of its files or adopted."""
    return read_stamp(env) is not None and kernel_spec_path(env).exists() and installation(env).ready(requirements)


def build_label(env):
    """How `env` was made, for the kernel and every record: 'venv gpu envs/pytorch.txt', 'adopted /usr/bin/python3'."""
    return installation(env).label() if read_stamp(env) is not None else None


def missing_packages(env, packages):
    """Those of `packages` that `env` lacks (an adopted interpreter may; a built environment has all its pins)."""
    return installation(env).missing(packages)


def disk_size(folder):
    """Bytes that `folder` takes on disk (allocated blocks, links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(str(folder)):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def kernel_spec_path(env):
    """Where the kernel spec of `env` lives in the project-local Jupyter path."""
    return catalog.JUPYTER_DIR / "kernels" / env.kernel_name / "kernel.json"


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
    """The variables a kernel (or probe) of `env` runs with: the catalog's, how it was made, and what its kind needs
    to find (the repository, libraries)."""
    environ = {name: value.replace("{env}", str(env.path)).replace("{cache}", str(catalog.cache_dir()))
               for name, value in env.kernel_env}
    label = build_label(env)
    if label:
        environ[BUILD_VARIABLE] = label
    lock = (read_stamp(env) or {}).get("lock")
    if lock:
        environ[LOCK_VARIABLE] = lock
    environ.update(installation(env).kernel_variables())
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


def ensure(env, requirements=None, say=print, heartbeat=20.0, wheels=None):
    """Build `env` from `requirements` unless it is ready; print progress while pip works. Raise SetupError on failure.

    requirements=None keeps whichever build (or adoption) is there and builds the CPU one when there is none.
    Holds the environment's build lock throughout. Returns True when it built something.
    """
    with build_steps.build_lock(env.name, say):
        made = installation(env)
        if is_ready(env, requirements):
            write_kernel_spec(env)  # cheap, and keeps the spec current when this code changes it
            say("[setup] {}: ready ({})".format(env.name, made.label()))
            return False
        if made.chosen_by_hand:  # a build is asked for instead of the adopted interpreter
            made = installation_to_build(env)
        try:
            made.build(requirements, say=say, wheels=wheels, heartbeat=heartbeat)
        except OSError as error:  # a write of the setup's own (a stamp, a kernel spec, a link) found no room
            if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise build_steps.no_space(env.name, catalog.ENVS_DIR) from None
        return True


def installation_to_build(env):
    """The virtual environment to build for `env` (with libraries where the catalog gives it some to provide)."""
    return VirtualEnvironmentWithLibraries(env) if debian.needs_libraries(env) else VirtualEnvironment(env)


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
    """Register an existing interpreter as `env` (kernel rosetta-<name>) instead of building a virtual environment
    (AdoptedInterpreter.build says what is checked). Returns the stamp."""
    python = Path(python).expanduser()
    python = python if python.is_absolute() else Path(os.path.abspath(str(python)))
    with build_steps.build_lock(env.name, say):
        return AdoptedInterpreter(env, python).build(requirements, say=say, wheels=wheels,
                                                     install_missing=install_missing)


def ensure_extra(env, extra, module, say=print, wheels=None):
    """Make the optional part `extra` of `env` (envs/<env>-<extra>.txt, e.g. Ray in the runner's environment)
    importable as `module`: nothing where it is, else install its lock into a virtual environment the setup built;
    SetupError (one line) where it cannot, naming the command that would."""
    python = interpreter(env)
    requirements = env.extra_requirements(extra)
    wanted = pins(requirements)
    if installed_versions(python, [extra]).get(extra) == wanted[extra]:
        return
    if installation(env).stamp().get("build") == "adopted":
        raise SetupError("{} needs {}=={} in the adopted interpreter {}: `{} -m pip install {}=={}` adds it".format(
            module, extra, wanted[extra], python, python, extra, wanted[extra]))
    problem = locks.stale(requirements)
    if problem:
        raise SetupError(problem)
    say("[setup] {}: adding {} {} (envs/{}; log .envs/{}-{}.log)".format(
        env.name, extra, wanted[extra], locks.lock_path(requirements).name, env.name, extra))
    with build_steps.build_lock(env.name, say), open(str(catalog.ENVS_DIR / "{}-{}.log".format(env.name, extra)), "w") as log:
        build_steps.run_logged(build_steps.pip_install(python, locks.lock_path(requirements),
                                                       build_steps.wheel_source(wheels), hashed=True),
                               log, env.name, say, heartbeat=30)
