"""What a results folder holds, the one contract between running and reporting.

The run (runner/run/) writes one result record per notebook (common/results.py's schema) and RUN_FILE, the
parameters it was started with; the checks (runner/checks/) write their verdict files into CHECKS_DIR; the report
(runner/report/) reads only these files. This module names them, reads them, and says how a verdict reads, for the
checks' progress lines and the report's cells alike. It uses the standard library, common/ and the catalog only.
"""

import hashlib
import json
import subprocess
from pathlib import Path

from common import results, tasks
from runner import catalog

RECORD_SUFFIX = ".result.json"  # a notebook's record: <notebook stem>[-<variant>][...].result.json
RUN_FILE = "run.json"  # the parameters the run was started with and its notebooks' digests, for --resume
CHECKS_DIR = "equivalence"  # the checks' notebooks, weight files and verdict files
EQUIVALENCE_FILE = "equivalence.json"  # the same-weights check's verdicts (runner/checks/equivalence.py)
EQUIVALENCE_INTERRUPTED_FILE = "equivalence.interrupted.json"  # the rows a stopped same-weights check had still to give
DATA_PARALLEL_FILE = "data_parallel.json"  # the data-parallel check's verdicts (runner/checks/data_parallel.py)
# the task whose rows the data-parallel check judges (the one a task module declares data-parallel), or None
DATA_PARALLEL_TASK = next((key for key, task in tasks.TASKS.items() if task.data_parallel), None)
CEILING_FILE = "ceiling.json"  # what this machine's device reached on large matrix products (runner/run/ceiling.py)
EQUIVALENCE_TASKS = tuple(key for key, task in tasks.TASKS.items() if task.same_weights is not None)
EQUIVALENCE_REFERENCE = "pytorch"  # the framework the same-weights check compares every other one with
FINISHED = ("ok", "unsupported")  # statuses --resume leaves alone and the exit status accepts
UNREADABLE = "unreadable"  # the status of a stand-in row for a record that cannot be read


ROUND_PREFIX = "round-"  # with --repeat N, rounds 2 to N of a run write into <run folder>/round-<k>/
KERNEL_LOGS = "kernel-logs"  # in a round's folder: each kernel's own output (<notebook stem>.log), its C++ logs included


def round_folder(run_dir, number):
    """Where round `number` of a run writes its notebooks and records: the run folder itself for the first round
    (so a run of one round is laid out as ever), <run folder>/round-<number> for the others."""
    return Path(run_dir) if number == 1 else Path(run_dir) / "{}{}".format(ROUND_PREFIX, number)


def round_folders(run_dir):
    """{round number: its folder} of the rounds a results folder holds, the first round's always."""
    found = {1: Path(run_dir)}
    for folder in Path(run_dir).glob(ROUND_PREFIX + "*"):
        number = folder.name[len(ROUND_PREFIX):]
        if folder.is_dir() and number.isdigit() and int(number) > 1:
            found[int(number)] = folder
    return dict(sorted(found.items()))


def record_path(run_dir, stem):
    """The path of the record of the job or row named `stem` in a results folder."""
    return Path(run_dir) / (stem + RECORD_SUFFIX)


# The machine watch's thresholds (runner/run/machine_probe.py's readings): a round whose probe ran MACHINE_NOISE slower
# than the run's fastest at both ends of the notebook, or during which other programs kept more than OTHERS_BUSY_CORES
# cores busy on average, is disturbed: named under its table, and in a repeated run run once more at its end
MACHINE_NOISE = 0.25  # on this project's 2-core VM a quiet run's notebooks read at most 11% slower, 60 quiet probes 19%
OTHERS_BUSY_CORES = 0.25
PROBE_KEYS = ("python_s", "numpy_s")
DISTURBED_DIR = "disturbed"  # in a round's folder: the executed notebook of a take that was not used


def fastest_probe(probes):
    """{key: the fastest reading of PROBE_KEYS} over the before and after readings of `probes` (machine_probe fields,
    None skipped); None where there is none."""
    readings = [reading for probe in probes if probe for reading in (probe.get("before"), probe.get("after")) if reading]
    if not readings:
        return None
    return {key: min(reading[key] for reading in readings) for key in PROBE_KEYS}


def probe_slowdown(probe, fastest):
    """How much slower than `fastest` the probe ran at both ends of the notebook (the lesser of before and after: a
    machine slowed throughout, not a moment), the worse of PROBE_KEYS; None where either end is missing."""
    if not probe or not fastest or not probe.get("before") or not probe.get("after"):
        return None
    return max(min(probe["before"][key], probe["after"][key]) / fastest[key] - 1.0 for key in PROBE_KEYS)


def disturbance(probe, fastest):
    """How far past the thresholds a notebook's machine watch went, the larger of its multiples of the thresholds it
    crossed (2.0: twice one of them), with its words ('other programs kept 0.74 cores busy'); (0.0, None) where it
    crossed none."""
    slowdown, busy = probe_slowdown(probe, fastest), (probe or {}).get("others_cores")
    found = []
    if (busy or 0) > OTHERS_BUSY_CORES:
        found.append((busy / OTHERS_BUSY_CORES, "other programs kept {:.2f} cores busy".format(busy)))
    if (slowdown or 0) > MACHINE_NOISE:
        found.append((slowdown / MACHINE_NOISE, "machine {:.0f}% slower at both ends".format(100 * slowdown)))
    if not found:
        return 0.0, None
    return max(score for score, _ in found), ", ".join(words for _, words in found)


def kernel_log_path(folder, stem):
    """Where the kernel of notebook `stem` run into `folder` writes its process's own stdout and stderr (what the
    libraries print below Python, which a quiet run keeps off the console)."""
    return Path(folder) / KERNEL_LOGS / (stem + ".log")


def finished(run_dir, stem):
    """True when a results folder holds an 'ok' or 'unsupported' record named `stem` (--resume leaves it alone; an
    unsupported variant is an answer, not a failure)."""
    try:
        return results.read_result(str(record_path(run_dir, stem)))["status"] in FINISHED
    except (OSError, ValueError, KeyError, TypeError):
        return False


def unreadable_record(path, reason):
    """A stand-in for a record file that cannot be read or is not a valid record: the framework, variant and task
    its name says (PyTorch_CNN, Keras_RNN-jax), status 'unreadable' and the error 'unreadable record: FILE: why'.
    None where the name says no task."""
    stem = Path(path).name[:-len(RECORD_SUFFIX)]
    name, _, variant = stem.partition("-")
    prefix, _, suffix = name.rpartition("_")
    task = next((key for key, spec in tasks.TASKS.items() if spec.notebook == suffix), None)
    if task is None:
        return None
    framework = next((f.label for f in catalog.FRAMEWORKS if f.notebook_prefix == prefix), prefix)
    record = dict.fromkeys(results.FIELDS + results.OPTIONAL_FIELDS)
    record.update(schema_version=results.SCHEMA_VERSION, framework=framework, variant=variant or None, task=task,
                  profile="?", status=UNREADABLE, params={}, metrics={},
                  error="unreadable record: {}: {}".format(Path(path).name, reason), notebook=stem + ".ipynb")
    return record


def read_records(run_dir):
    """(records in file-name order, problems): every record of a results folder that reads and checks; for one that
    does not, a stand-in row (unreadable_record) and a line naming the file and why."""
    records, problems, ceiling = [], [], load_ceiling(run_dir)
    for path in sorted(Path(run_dir).glob("*" + RECORD_SUFFIX)):
        try:
            record = results.read_result(str(path))
            record.setdefault("ceiling", ceiling_for(ceiling, record))  # the bound of its Util. (runner/report/table.py)
            records.append(record)
        except (OSError, ValueError, KeyError, TypeError) as error:  # cut short, not JSON, or not a valid record
            reason = results.first_line(str(error)) or type(error).__name__
            problems.append("unreadable record: {}: {}".format(path, reason))
            stand_in = unreadable_record(path, reason)
            if stand_in is not None:
                records.append(stand_in)
    return records, problems


def load_ceiling(run_dir):
    """The measured ceiling of a results folder (CEILING_FILE), or None where the run measured none (older runs)."""
    try:
        return json.loads((Path(run_dir) / CEILING_FILE).read_text())
    except (OSError, ValueError):
        return None


def ceiling_for(ceiling, record):
    """The measured ceiling (CEILING_FILE's contents) that bounds `record`: of its device (the CPU, or the GPU it ran
    on) and the precision it computed in, measured on its host (a record run on a Ray node carries its node's, which
    comes first); with the threads it was measured with. None where there is none (another host without its own, a
    precision not measured, an unfinished row)."""
    from common import environment  # NumPy with it: not at the command line's start (tests/test_runner.py)

    ceiling = record.get("node_ceiling") or ceiling  # its Ray node's, runner/run/on_ray.py
    env = record.get("environment") or {}
    host = (record.get("placement") or {}).get("host")
    if not ceiling or record.get("status") != "ok" or (host and host != ceiling.get("host")):
        return None
    device = environment.gpu_used(env) or "cpu"
    precision = env.get("computed_precision", env.get("precision")) or "fp32"
    for measured in ceiling.get("measured") or []:
        best = (measured.get("ceilings") or {}).get(precision)
        if measured.get("device") == device and best:
            return dict(best, precision=precision, threads=measured.get("threads"))
    return None


def ceiling_spread(best):
    """'best of 3 takes, 120 to 133 GFLOP/s' for a ceiling measured more than once (runner/run/ceiling.py), else ''."""
    takes = (best or {}).get("takes") or []
    if len(takes) < 2:
        return ""
    return "best of {} takes, {:.0f} to {:.0f} GFLOP/s".format(len(takes), min(takes), max(takes))


def load_checks(run_dir):
    """The checks' verdicts in a results folder as {(task, row label): result}: the same-weights check's, and the
    data-parallel check's under DATA_PARALLEL_TASK; empty where neither ran."""
    folder = Path(run_dir) / CHECKS_DIR
    checks = {}
    path = folder / DATA_PARALLEL_FILE
    if path.exists():
        checks.update({(DATA_PARALLEL_TASK, result["framework"]): result
                       for result in json.loads(path.read_text())["results"]})
    path = folder / EQUIVALENCE_FILE
    if not path.exists():  # a check a signal stopped: its rows say so until --resume completes it
        path = folder / EQUIVALENCE_INTERRUPTED_FILE
    if path.exists():
        checks.update({(task, result["framework"]): result for task, doc in json.loads(path.read_text()).items()
                       for result in doc["results"]})
    return checks


def equivalence_verdict(result):
    """A same-weights result in one short cell: 'yes (...)', 'no: reason', 'same function; ...', 'check failed: ...',
    or 'check interrupted' (a signal stopped the check before it; --resume completes it)."""
    if result.get("interrupted"):
        return "check interrupted"
    if result.get("reused"):  # a verdict kept from an earlier check of the same code, locks and CPU
        return "{}, checked {}".format(equivalence_verdict(dict(result, reused=False)), result["checked"])
    if result.get("error"):
        return "check failed: " + result["error"]
    if result.get("unsupported"):  # the notebook does not run on this release: its row says why
        return "not checked: the notebook does not run here"
    if result["failures"]:
        return "check failed: " + "; ".join(result["failures"])
    if not result["equivalent"]:
        return "no: " + result["reason"]
    if result.get("model"):  # a zoo's v1, against that function computed in PyTorch
        return "yes, as {} (features within {:.1e} of the largest)".format(result["model"], result["features_max_relative"])
    if "features_max_relative" in result:
        return "yes (features within {:.1e} of the largest)".format(result["features_max_relative"])
    logits = "logits within {:.1e}".format(result["logits_max_abs"]) if "logits_max_abs" in result else ""
    if result["step_differences"]:
        name, why = next(iter(result["step_differences"].items()))
        return "same function; one step differs in {}: {}".format(name, why)
    return "yes ({})".format(logits)


def data_parallel_verdict(result):
    """A data-parallel result in one short cell: 'yes (...)', 'as exact as one device (...)' for a framework held to
    the float64 step, 'not checked: ...' where the notebook refuses several devices (or the reference cannot run), or
    'check failed: ...'."""
    if result.get("status") in ("unsupported", "unavailable"):
        return "not checked: " + result["error"].split(": ", 1)[-1]
    if result.get("error"):
        return "check failed: " + result["error"]
    if result.get("unsupported"):  # the notebook does not run on this release: its row says why
        return "not checked: the notebook does not run here"
    if result["failures"]:
        return "check failed: " + "; ".join(result["failures"])
    batch_norm = "; batch norm over the whole batch" if result.get("synchronised") else ""
    if result.get("reference"):
        return "as exact as one device ({:.1e} from the float64 step, one device {:.1e}, of a {:.2g} step{}; {})".format(
            result["parallel_error"], result["single_error"], result["moved"], batch_norm, result["reference"])
    return "yes ({:.1e} of a {:.2g} step{})".format(result["max_abs"], result["moved"], batch_norm)


def notebook_digest(path):
    """sha256 of a stored notebook, so that --resume can tell a notebook changed since the run began."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def checkout_commit():
    """The checkout's commit (12 hex digits), with '+ local changes' where its tracked files differ from it; None
    where git cannot say."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=str(catalog.REPO), capture_output=True,
                              text=True, timeout=30)
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=str(catalog.REPO),
                                 capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + (" + local changes" if changed.returncode == 0 and changed.stdout.strip() else "")


def write_run_file(run_dir, parameters):
    """Store a run's parameters (and its notebooks' digests, under 'notebooks') in run_dir/RUN_FILE."""
    (Path(run_dir) / RUN_FILE).write_text(json.dumps(parameters, indent=1, sort_keys=True) + "\n")


def read_run_file(run_dir):
    """The parameters a run was started with, from run_dir/RUN_FILE; OSError or ValueError where it cannot be read."""
    return json.loads((Path(run_dir) / RUN_FILE).read_text())
