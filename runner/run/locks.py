"""Locks: every package an environment's build installs, with its exact version and hashes.

envs/<name>.txt says what the project asks for (the packages it names, with their GPU facts); envs/<name>.lock,
generated from it by uv (`python3 run_all.py lock [ENV]`), holds everything that resolves to for the environment's
Python on Linux x86_64, each package with the sha256 of every file PyPI has of that version. The setup installs a
lock with --require-hashes and --no-deps: exactly its packages, and a file whose hash is not in it is refused. A
lock's first lines name its requirements file and the digest of that file's pins, so a stale lock is seen without a
package index.
"""

import datetime
import hashlib
import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
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
EXCLUDE_NEWER_LINE = "# exclude-newer: "  # a release environment's requirements: resolve as PyPI was at that time
REGENERATE = "python3 run_all.py lock"
PYPI_SIMPLE = "https://pypi.org/simple/{package}/"
# a release environment takes the other packages as PyPI had them this long after the framework's release: the
# companions published with it (torchvision, jaxlib) come a few hours to days later
RELEASE_GRACE = datetime.timedelta(days=3)


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
    if not Path(requirements).exists() or not lock.exists():
        return "{} has no lock: `{}` makes it".format(shown(requirements), REGENERATE)
    if header_value(lock, PINS_LINE) != pins_digest(requirements):
        return "{} is older than the pins of {}: `{}` regenerates it".format(shown(lock), shown(requirements), REGENERATE)
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
    """'envs/pytorch.lock@1a2b3c4d5e6f' ('envs/versions/jax@0.6.2.lock@...'): the lock an environment was built from,
    for its kernel and records."""
    return "{}@{}".format(shown(lock), digest(lock))


def uv():
    """The uv that resolves locks: the runner environment's, else one on PATH; LockError where there is none."""
    beside = [catalog.ENVIRONMENTS["runner"].path / "bin" / "uv", Path(sys.executable).parent / "uv"]
    found = next((str(path) for path in beside if path.exists()), None) or shutil.which("uv")
    if found is None:
        raise LockError("resolving locks needs uv, which the runner environment has (envs/runner.txt): build it "
                        "with `python3 run_all.py setup runner`, or put uv on PATH")
    return found


def simple_index(package, what, timeout=30):
    """`package`'s page of PyPI's simple index in its JSON form (PEP 691, with the upload times and versions of PEP
    700); None where PyPI has no such package; LockError, saying `what` was asked, where PyPI cannot be asked."""
    url = PYPI_SIMPLE.format(package=normalized(package))
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise LockError("PyPI answered {} for {}".format(error.code, url)) from None
    except (OSError, ValueError) as error:
        raise LockError("could not ask PyPI {} ({}): {}".format(what, url, error)) from None


def released_at(package, release, timeout=30):
    """When PyPI received the last file of `package` `release` (UTC); None where PyPI has no such release; LockError
    where PyPI cannot be asked."""
    index = simple_index(package, "when {} {} was released".format(package, release), timeout) or {}
    times = [f["upload-time"][:19] for f in index.get("files", []) if f.get("upload-time") and
             file_release(f["filename"]) == release]
    if not times:
        return None
    return datetime.datetime.strptime(max(times), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)


def releases_on_index(package, timeout=30):
    """The releases of `package` that PyPI offers, each with a file not yanked, in no set order; [] where PyPI has no
    such package; LockError where PyPI cannot be asked."""
    index = simple_index(package, "for the releases of {}".format(package), timeout) or {}
    return sorted({file_release(f["filename"]) for f in index.get("files", []) if not f.get("yanked")})


def file_release(filename):
    """The release a distribution file belongs to: '0.6.2' for jax-0.6.2-py3-none-any.whl and jax-0.6.2.tar.gz."""
    if filename.endswith(".whl"):
        return filename.split("-")[1]
    stem = re.sub(r"\.(tar\.gz|zip|tar\.bz2)$", "", filename)
    return stem.rsplit("-", 1)[-1]


def release_pins(env, package):
    """The pins of release environment `env` (jax@0.6.2): its base environment's packages by name, `package` pinned to
    the release."""
    names = [re.split(r"[=<>!~;\[]", line, maxsplit=1)[0]
             for line in _pin_lines(catalog.REQUIREMENTS_DIR / (env.base + ".txt"))]
    pinned = package + "==" + env.release
    pins = [pinned if normalized(name) == normalized(package) else name for name in names]
    return pins if pinned in pins else [pinned] + pins


def release_requirements_text(env, package, uploaded):
    """The requirements file of release environment `env`: release_pins, and the time up to which the resolver takes
    the others, RELEASE_GRACE after `uploaded` (None: PyPI has no such release, and the resolver says so in its own
    words)."""
    base = shown(catalog.REQUIREMENTS_DIR / (env.base + ".txt"))
    header = ["# {}: the packages of {}, {} pinned to {} and the others as PyPI had them {} days after its release".format(
                  env.display_name, base, package, env.release, RELEASE_GRACE.days),
              "# Generated by `{} {}`, with the lock beside it; never edit it: it follows {}".format(
                  REGENERATE, env.name, base)]
    if uploaded is not None:
        header.append(EXCLUDE_NEWER_LINE + (uploaded + RELEASE_GRACE).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return "\n".join(header + release_pins(env, package)) + "\n"


def release_current(env, package):
    """True where release environment `env`'s requirements follow its base's pins and its lock follows them."""
    return (env.requirements.exists() and _pin_lines(env.requirements) == release_pins(env, package)
            and stale(env.requirements) is None)


def write_release_requirements(env, package):
    """Write envs/versions/<name>.txt for release environment `env` (release_requirements_text); returns its path."""
    path = env.requirements
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(release_requirements_text(env, package, released_at(package, env.release)))
    return path


def resolve(requirements, python, build_tools=None, env_name=None):
    """The text of a new lock for `requirements` (of environment `env_name`), resolved by uv for Python `python` on
    PLATFORM; a package that comes as source only is built for its metadata with `build_tools` (the environment's
    build requirements); requirements with an exclude-newer line are resolved as PyPI was at that time."""
    requirements = Path(requirements)
    command = [uv(), "pip", "compile", "--generate-hashes", "--no-header", "--python-version", python,
               "--python-platform", PLATFORM, "--no-config", "--index-url", "https://pypi.org/simple",
               str(requirements.relative_to(catalog.REPO))]
    if build_tools is not None and Path(build_tools) != requirements:
        command += ["--build-constraints", str(Path(build_tools).relative_to(catalog.REPO))]
    cutoff = header_value(requirements, EXCLUDE_NEWER_LINE)
    if cutoff:
        command += ["--exclude-newer", cutoff]
    out = subprocess.run(command, capture_output=True, text=True, cwd=str(catalog.REPO), timeout=900)
    if out.returncode != 0:
        raise LockError("uv could not resolve {}: {}".format(shown(requirements), " ".join(
            line.strip() for line in out.stderr.strip().splitlines()[-3:])))
    header = ["# Every package of {} with its exact version and hashes: installed by `run_all.py setup` with "
              "--require-hashes --no-deps.".format(shown(requirements)),
              "# Generated by `{} {}` (uv pip compile); edit {}, never this file.".format(
                  REGENERATE, env_name or requirements.stem, shown(requirements)),
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


def requirements_name(path):
    """A requirements file or lock relative to envs/, as stamps name it: 'jax.txt', 'versions/jax@0.6.2.lock' (its own
    name where it lies elsewhere)."""
    try:
        return str(Path(path).relative_to(catalog.REQUIREMENTS_DIR))
    except ValueError:
        return Path(path).name


def shown(path):
    """A requirements file or lock as messages name it: envs/jax.txt, envs/versions/jax@0.6.2.lock."""
    return "envs/" + requirements_name(path)


def regenerate(names=None, say=print):
    """Resolve the lock of every requirements file of the named environments (all by default; a release environment,
    jax@0.6.2, first gets its requirements written), write those that changed and say what changed in each; returns
    the number of locks written."""
    written = 0
    for name in names or list(catalog.ENVIRONMENTS):
        env = catalog.environment(name)
        if env.release:
            package = catalog.framework(name).package
            written_to = write_release_requirements(env, package)
            cutoff = header_value(written_to, EXCLUDE_NEWER_LINE)
            say("[lock] {}: {} {}, {}".format(shown(written_to), package, env.release, "the other packages as PyPI "
                                              "had them on " + cutoff if cutoff else "a release PyPI does not have"))
        for requirements in requirement_files(env):
            lock = lock_path(requirements)
            text = resolve(requirements, python_for(env), env.build_requirements, env.name)
            before = lock.read_text() if lock.exists() else None
            if before == text:
                say("[lock] {}: unchanged ({})".format(shown(lock), counted(packages(lock))))
                continue
            lock.write_text(text)
            written += 1
            difference = changes(packages_of_text(before) if before else {}, packages(lock))
            say("[lock] {}: {} ({}){}".format(
                shown(lock), "written" if before is None else "updated", counted(packages(lock)),
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
