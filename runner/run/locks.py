"""Locks: every package an environment's build installs, with its exact version and hashes.

envs/<name>.txt says what the project asks for (the packages it names, with their GPU facts); envs/<name>.lock,
generated from it by uv (`python3 run_all.py lock [ENV]`), holds everything that resolves to for the environment's
Python on Linux x86_64, each package with the sha256 of every file PyPI has of that version. The setup installs a
lock with --require-hashes and --no-deps: exactly its packages, and a file whose hash is not in it is refused. A
lock's first lines name its requirements file and the digest of that file's pins, so a stale lock is seen without a
package index.
"""

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

from runner import catalog
from runner.run.build_steps import SetupError

SUFFIX = ".lock"
# the Python each lock is resolved for: the environment's own, else the one CI runs (a patch release that every
# requirement accepts: jupyter-client 7.1 wants 3.6.1 or newer)
LOCKED_PYTHON = {None: "3.11.2", "3.6": "3.6.15", "3.9": "3.9.2"}
PLATFORM = "x86_64-manylinux_2_28"  # Linux x86_64 with glibc 2.28 or newer (Debian 10, Ubuntu 20.04 and later)
PINS_LINE = "# pins-sha256: "
PYTHON_LINE = "# python: "
REGENERATE = "python3 run_all.py lock"


class LockError(SetupError):
    """A lock is missing, stale or cannot be made; the message names the command that makes it."""


def lock_path(requirements):
    """envs/<name>.lock for the requirements file envs/<name>.txt."""
    return Path(requirements).with_suffix(SUFFIX)


def requirement_files(env):
    """The requirements files of `env` that are installed from locks: its build tools, its CPU build, its GPU builds."""
    files = [env.build_requirements, env.requirements] + list(env.gpu_requirements)
    files += [env.extra_requirements(extra) for extra in env.extras]
    return [path for index, path in enumerate(files) if path is not None and path not in files[:index]]


def python_for(env):
    """The Python version `env`'s locks are resolved for ('3.9.2')."""
    return LOCKED_PYTHON[env.python]


def pins_digest(requirements):
    """The sha256 of a requirements file's pins (its lines without comments, blank lines or spaces): a change in its
    comments leaves its lock current."""
    return hashlib.sha256("\n".join(_pin_lines(Path(requirements))).encode()).hexdigest()


def _pin_lines(requirements):
    """The pin lines of a requirements file, those of the files it includes (`-r other.txt`) in their place."""
    found = []
    for line in requirements.read_text().splitlines():
        line = re.sub(r"\s+", "", line.split("#")[0])
        if line.startswith("-r"):
            found += _pin_lines(requirements.parent / line[2:])
        elif line:
            found.append(line)
    return found


def header_value(lock, prefix):
    """The value of the header line starting with `prefix` in a lock, None where it has none."""
    for line in Path(lock).read_text().splitlines():
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    return None


def stale(requirements):
    """Why the lock of `requirements` cannot be installed as the build of that file, None where it can."""
    lock = lock_path(requirements)
    if not lock.exists():
        return "envs/{} has no lock: `{}` makes it".format(Path(requirements).name, REGENERATE)
    if header_value(lock, PINS_LINE) != pins_digest(requirements):
        return "envs/{} is older than the pins of envs/{}: `{}` regenerates it".format(
            lock.name, Path(requirements).name, REGENERATE)
    return None


def packages(lock):
    """{name: version} of every package a lock file holds, names as written there."""
    return packages_of_text(Path(lock).read_text())


def normalized(name):
    """A distribution name as pip and PyPI compare them (PEP 503): 'Keras_Preprocessing' -> 'keras-preprocessing'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def digest(lock):
    """The first 12 hex digits of the lock file's sha256: what records and `list` name it by."""
    return hashlib.sha256(Path(lock).read_bytes()).hexdigest()[:12]


def label(lock):
    """'envs/pytorch.lock@1a2b3c4d5e6f': the lock an environment was built from, for its kernel and records."""
    return "envs/{}@{}".format(Path(lock).name, digest(lock))


def uv():
    """The uv that resolves locks: the runner environment's, else one on PATH; LockError where there is none."""
    beside = [catalog.ENVIRONMENTS["runner"].path / "bin" / "uv", Path(sys.executable).parent / "uv"]
    found = next((str(path) for path in beside if path.exists()), None) or shutil.which("uv")
    if found is None:
        raise LockError("resolving locks needs uv, which the runner environment has (envs/runner.txt): build it "
                        "with `python3 run_all.py setup runner`, or put uv on PATH")
    return found


def resolve(requirements, python, build_tools=None, env_name=None):
    """The text of a new lock for `requirements` (of environment `env_name`), resolved by uv for Python `python` on
    PLATFORM; a package that comes as source only is built for its metadata with `build_tools` (the environment's
    build requirements)."""
    requirements = Path(requirements)
    command = [uv(), "pip", "compile", "--generate-hashes", "--no-header", "--python-version", python,
               "--python-platform", PLATFORM, "--no-config", "--index-url", "https://pypi.org/simple",
               str(requirements.relative_to(catalog.REPO))]
    if build_tools is not None and Path(build_tools) != requirements:
        command += ["--build-constraints", str(Path(build_tools).relative_to(catalog.REPO))]
    out = subprocess.run(command, capture_output=True, text=True, cwd=str(catalog.REPO), timeout=900)
    if out.returncode != 0:
        raise LockError("uv could not resolve envs/{}: {}".format(requirements.name, " ".join(
            line.strip() for line in out.stderr.strip().splitlines()[-3:])))
    header = ["# Every package of envs/{} with its exact version and hashes: installed by `run_all.py setup` with "
              "--require-hashes --no-deps.".format(requirements.name),
              "# Generated by `{} {}` (uv pip compile); edit envs/{}, never this file.".format(
                  REGENERATE, env_name or requirements.stem, requirements.name),
              PYTHON_LINE + "{} on {}".format(python, PLATFORM),
              PINS_LINE + pins_digest(requirements)]
    return "\n".join(header) + "\n" + out.stdout


def changes(old, new):
    """Lines saying what differs between two {name: version} maps: '+ name 1.0', '- name 1.0', 'name 1.0 -> 1.1'."""
    old = {normalized(name): (name, version) for name, version in old.items()}
    new = {normalized(name): (name, version) for name, version in new.items()}
    lines = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            lines.append("+ {} {}".format(*new[key]))
        elif key not in new:
            lines.append("- {} {}".format(*old[key]))
        elif old[key][1] != new[key][1]:
            lines.append("  {} {} -> {}".format(new[key][0], old[key][1], new[key][1]))
    return lines


def regenerate(names=None, say=print):
    """Resolve the lock of every requirements file of the named environments (all by default), write those that
    changed and say what changed in each; returns the number of locks written."""
    written = 0
    for name in names or list(catalog.ENVIRONMENTS):
        env = catalog.ENVIRONMENTS[name]
        for requirements in requirement_files(env):
            lock = lock_path(requirements)
            text = resolve(requirements, python_for(env), env.build_requirements, env.name)
            before = lock.read_text() if lock.exists() else None
            if before == text:
                say("[lock] envs/{}: unchanged ({})".format(lock.name, counted(packages(lock))))
                continue
            lock.write_text(text)
            written += 1
            difference = changes(packages_of_text(before) if before else {}, packages(lock))
            say("[lock] envs/{}: {} ({}){}".format(
                lock.name, "written" if before is None else "updated", counted(packages(lock)),
                "" if before is None or difference else ": the same versions, other hashes or order"))
            for line in difference if before is not None else []:
                say("    " + line)
    return written


def counted(found):
    """'1 package', '43 packages'."""
    return "{} package{}".format(len(found), "" if len(found) == 1 else "s")


def packages_of_text(text):
    """packages() of a lock's text rather than its file."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)", line)
        if match:
            found[match.group(1)] = match.group(3)
    return found


def hash_mismatch(log_text):
    """'six==1.17.0' where pip's output says a file of that package does not match the lock's hashes, else None."""
    lines = log_text.splitlines()
    for index, line in enumerate(lines):
        if "DO NOT MATCH THE HASHES" in line:
            for following in lines[index + 1:]:
                match = re.match(r"^\s+([A-Za-z0-9][A-Za-z0-9._-]*==\S+)", following)
                if match:
                    return match.group(1)
    return None
