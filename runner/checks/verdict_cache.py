"""Same-weights verdicts kept between runs, by what decides them: a notebook's verdict is reused, with the date it was
checked, while its notebook, the reference's notebook, the code they and the check run (common/, frameworks/,
runner/checks/), both environments' locks and the CPU model are what they were; `run --recheck` checks anew.

Only definite verdicts are kept (equivalent or not, the check having run): a check that failed or was interrupted
runs again next time."""

import datetime
import hashlib
import json
import os
from pathlib import Path

from runner import catalog, run_folder
from runner.run import environments

CACHE_FILE = catalog.ENVS_DIR / "equivalence-verdicts.json"
# Where the verdicts are kept instead (a file), or '' to keep none: the tests' runs plant faults the key cannot see
PATH_VARIABLE = "ROSETTA_VERDICTS"
CODE_FOLDERS = ("common", "frameworks", "runner/checks")  # the code a notebook and the check run


def cpu_model():
    """The CPU's model name as /proc/cpuinfo gives it ('' where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as lines:
            return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    except OSError:
        return ""


def _code_digest():
    """sha256 over the Python files of CODE_FOLDERS, names and contents, in a fixed order."""
    digest = hashlib.sha256()
    for folder in CODE_FOLDERS:
        for path in sorted((catalog.REPO / folder).rglob("*.py")):
            digest.update(str(path.relative_to(catalog.REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def decided_by(job, code=None):
    """The key of `job`'s verdict: a digest of everything that decides it (see the module's docstring); `code`: the
    code's digest where the caller has it already."""
    reference = catalog.select([run_folder.EQUIVALENCE_REFERENCE], [job.task])[0]
    digest = hashlib.sha256()
    for part in (job.stem, job.notebook.read_bytes(), reference.notebook.read_bytes(), code or _code_digest(),
                 (environments.read_stamp(job.environment) or {}).get("lock") or "",
                 (environments.read_stamp(reference.environment) or {}).get("lock") or "", cpu_model()):
        digest.update(part if isinstance(part, bytes) else str(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()


class VerdictCache:
    """The kept verdicts (CACHE_FILE), read once; `lookup` gives a kept one with its date, `keep` adds one."""

    def __init__(self, path=None, reuse=True):
        self.path = Path(os.environ.get(PATH_VARIABLE, CACHE_FILE)) if path is None else path
        self.reuse = reuse  # False (run --recheck): check anew, and keep what it finds
        try:
            self.entries = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        self.code = _code_digest()

    @staticmethod
    def wanted():
        """False where $ROSETTA_VERDICTS is set empty: no verdict kept or reused (the tests' runs)."""
        return os.environ.get(PATH_VARIABLE) != ""

    def lookup(self, job):
        """The verdict kept for `job` as it stands now, marked reused with the date it was checked; None if none (or
        where this cache does not reuse)."""
        entry = self.entries.get(decided_by(job, self.code)) if self.reuse else None
        if entry is None:
            return None
        return dict(entry["result"], reused=True, checked=entry["checked"])

    def keep(self, job, result):
        """Keep a definite verdict of `job` (one without an error or an interruption), dated today."""
        if result.get("error") or result.get("interrupted") or result.get("failures") or result.get("unsupported"):
            return
        self.entries[decided_by(job, self.code)] = {"result": result, "checked": datetime.date.today().isoformat()}
        self.path.parent.mkdir(exist_ok=True)
        partial = self.path.with_name(self.path.name + ".part-{}".format(os.getpid()))
        partial.write_text(json.dumps(self.entries, indent=1) + "\n")
        os.replace(str(partial), str(self.path))
