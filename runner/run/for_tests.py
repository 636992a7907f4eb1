"""What the tests need from a package index, obtained by `run_all.py test` before pytest starts, so that pytest itself
never uses the network: wheels whose files are checked against the hashes that a lock of envs/ (or the bootstrap file)
pins, in .envs/test-wheels, and a virtual environment with only numpy on each of the oldest and newest Python that
`common` promises to run on, .envs/compat-<version>, built from those hashes too. The tests read them from there and
fail, naming PREPARE, where they are missing.
"""

import dataclasses
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

from runner import catalog
from runner.run import build_steps, interpreters, locks
from runner.run.build_steps import SetupError

PREPARE = "python3 run_all.py test"  # the command whose set-up obtains all of this (arguments after it go to pytest)
WHEELS_FOLDER = "test-wheels"  # in .envs/
COMPAT_STAMP = "rosetta-stamp.json"  # in a compatibility environment: what it was built from


@dataclasses.dataclass(frozen=True)
class Pin:
    """A package at one version, whose files' hashes a lock of envs/ (or envs/python-bootstrap.txt) holds."""

    package: str
    version: str

    def __str__(self):
        return "{}=={}".format(self.package, self.version)


# The wheels the tests install without an index: six for the lock tests (tests/test_locks.py), the bootstrap file's
# pip and setuptools for a venv made on an interpreter without ensurepip (tests/test_interpreters.py)
WHEELS = (Pin("six", "1.17.0"), Pin("pip", "23.0.1"), Pin("setuptools", "58.1.0"))
# The Pythons tests/test_compatibility.py runs `common` on, each with the numpy it promises there
COMPAT = {"3.6": Pin("numpy", "1.19.5"), "3.12": Pin("numpy", "2.4.6")}


class MissingForTests(SetupError):
    """Something the tests read was not obtained (or no longer matches its pins): the message names PREPARE."""


def pinned_files():
    """The files of envs/ that pin packages with their hashes: the bootstrap file, then every lock."""
    return [catalog.REQUIREMENTS_DIR / interpreters.BOOTSTRAP] + sorted(catalog.REQUIREMENTS_DIR.glob("*" + locks.SUFFIX))


def hashed_requirement(pin):
    """`pin` as a requirement line with the sha256 of every file the first of `pinned_files` that pins it holds
    ('six==1.17.0 --hash=sha256:... --hash=sha256:...'); SetupError where none pins it."""
    for path in pinned_files():
        for line in path.read_text().replace("\\\n", " ").splitlines():  # a lock goes on with a backslash
            name, _, version = (line.split() or [""])[0].partition("==")
            digests = sha256s(line)
            if digests and version == pin.version and locks.normalized(name.split("[")[0]) == locks.normalized(pin.package):
                return "{} {}".format(pin, " ".join("--hash=sha256:" + digest for digest in sorted(digests)))
    raise SetupError("no lock of envs/ pins {} with its hashes any more: change runner/run/for_tests.py (and the "
                     "tests that use it) to a version a lock pins".format(pin))


def sha256s(requirement):
    """The sha256 digests a hashed requirement line allows."""
    return set(re.findall(r"--hash=sha256:([0-9a-f]{64})", requirement))


def file_sha256(path):
    """The sha256 of a file, in hex."""
    digest = hashlib.sha256()
    with open(str(path), "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheels_folder():
    """.envs/test-wheels: the wheels the tests install without an index."""
    return catalog.ENVS_DIR / WHEELS_FOLDER


def cached_wheel(pin, folder=None):
    """The wheel of `pin` in the folder of test wheels whose sha256 its pins allow, None where there is none."""
    folder = Path(folder) if folder is not None else wheels_folder()
    allowed = sha256s(hashed_requirement(pin))
    stem = "{}-{}-".format(re.sub(r"[-_.]+", "_", pin.package), pin.version)
    for path in sorted(folder.glob(stem + "*.whl")):
        if file_sha256(path) in allowed:
            return path
    return None


def wheels():
    """{package: path} of every wheel of WHEELS in .envs/test-wheels; MissingForTests where one is missing."""
    found = {pin.package: cached_wheel(pin) for pin in WHEELS}
    missing = [str(pin) for pin in WHEELS if found[pin.package] is None]
    if missing:
        raise MissingForTests("the tests install {} without an index, from {}, which holds none of them with its "
                              "pinned hashes: `{}` obtains them before pytest starts".format(
                                  ", ".join(missing), build_steps.shown(wheels_folder()), PREPARE))
    return found


def ensure_wheels(say=print):
    """Download the wheels of WHEELS that .envs/test-wheels lacks, each file checked against its pinned hashes (from
    $ROSETTA_WHEELS' folder where it is set, else the package index); SetupError where one cannot be had."""
    folder, log_path = wheels_folder(), catalog.ENVS_DIR / (WHEELS_FOLDER + ".log")
    with build_steps.build_lock(WHEELS_FOLDER, say):
        missing = [pin for pin in WHEELS if cached_wheel(pin, folder) is None]
        if not missing:
            say("[setup] {}: ready ({})".format(WHEELS_FOLDER, ", ".join(str(pin) for pin in WHEELS)))
            return
        folder.mkdir(parents=True, exist_ok=True)
        requirements = folder / "requirements.txt"
        requirements.write_text("".join(hashed_requirement(pin) + "\n" for pin in missing))
        say("[setup] {}: downloading {} for the tests (log: {})".format(
            WHEELS_FOLDER, ", ".join(str(pin) for pin in missing), build_steps.shown(log_path)))
        source = build_steps.wheel_source()
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
                   "--progress-bar", "off", "--dest", str(folder)] + source + ["-r", str(requirements)]
        with open(str(log_path), "w") as log:
            try:
                build_steps.run_logged(command, log, WHEELS_FOLDER, say, heartbeat=30)
            except SetupError as error:
                log.flush()
                mismatch = locks.hash_mismatch(log_path.read_text())
                raise SetupError("pip could not download {} from {}{}; see {}".format(
                    ", ".join(str(pin) for pin in missing), source[-1] if source else "the package index",
                    ": {} does not match its pinned hashes".format(mismatch) if mismatch else "", log_path)) from error
    still = [str(pin) for pin in missing if cached_wheel(pin, folder) is None]
    if still:
        raise SetupError("pip downloaded no wheel of {} that matches its pinned hashes; see {}".format(
            ", ".join(still), log_path))


def compat_folder(version):
    """.envs/compat-<version>: the virtual environment with only numpy on Python `version`."""
    return catalog.ENVS_DIR / ("compat-" + version)


def compat_recipe(version, python):
    """What the compatibility environment of `version` is built from on the Interpreter `python`, as its stamp
    holds it."""
    return {"python": python.version, "python_path": python.path, "requirement": hashed_requirement(COMPAT[version])}


def compat_built(version, python):
    """True where the compatibility environment of `version` was built, and finished, from its pin on the Interpreter
    `python`."""
    folder = compat_folder(version)
    try:
        stamp = json.loads((folder / COMPAT_STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp == compat_recipe(version, python) and (folder / "bin" / "python").exists()


def compat_python(version):
    """The interpreter of the compatibility environment of `version`; None where this machine has no Python `version`;
    MissingForTests where the environment is not built from its pin on the Python this machine has now."""
    python = interpreters.find(version)
    if python is None:
        return None
    if not compat_built(version, python):
        raise MissingForTests("{} is not built with {} on {}: `{}` builds it before pytest starts".format(
            build_steps.shown(compat_folder(version)), COMPAT[version], python.describe(), PREPARE))
    return compat_folder(version) / "bin" / "python"


def ensure_compat(version, say=print):
    """Build the compatibility environment of `version` unless it is current: a venv on this machine's Python
    `version` with only its numpy, every file checked against the pinned hashes. Nothing where the machine has no
    Python `version` (its test is skipped with that reason)."""
    python, name = interpreters.find(version), "compat-" + version
    if python is None:
        say("[setup] {}: not built: this machine has no Python {} (its test is skipped)".format(name, version))
        return
    if compat_built(version, python):
        say("[setup] {}: ready ({} on Python {})".format(name, COMPAT[version], python.version))
        return
    folder, recipe = compat_folder(version), compat_recipe(version, python)
    log_path = catalog.ENVS_DIR / (name + ".log")
    say("[setup] {}: creating with {} and {} (log: {})".format(name, python.describe(), COMPAT[version],
                                                                build_steps.shown(log_path)))
    with build_steps.build_lock(name, say), open(str(log_path), "w") as log:
        shutil.rmtree(str(folder), ignore_errors=True)
        interpreters.create_venv(python, folder, log, name, say, 30)
        requirements = folder / "requirements.txt"
        requirements.write_text(recipe["requirement"] + "\n")
        build_steps.run_logged(build_steps.pip_install(folder / "bin" / "python", requirements, build_steps.wheel_source(),
                                                       hashed=True), log, name, say, heartbeat=30)
        (folder / COMPAT_STAMP).write_text(json.dumps(recipe, indent=1) + "\n")  # last: a build cut short is not current


def prepare(say=print):
    """Obtain everything the tests read instead of the network: the test wheels and the compatibility environments."""
    ensure_wheels(say)
    for version in COMPAT:
        ensure_compat(version, say)
