"""The results tables, declared once: the flat rows of result records, and the table model every output renders.

FIELDS declares each field of the flat rows once: the columns of results.csv and the keys of results.json, in order,
each with how a record gives its value. COLUMNS declares each column of the per-task tables once: heading, cell text
(from the flat row), alignment, which tasks have it. `build()` turns a run's records into a `Results`: one `Table` per
task with a row of cell texts per record, and the notes under the tables; `merged()` builds the multi-machine tables in
the same shape. runner/report/run_report.py writes the model as Markdown and the flat rows as CSV and JSON,
runner/report/html_pages.py the model as HTML. Like all of runner/report/, this module reads only the records and
verdict files of a results folder (runner/run_folder.py).
"""

import dataclasses
import re
import statistics
from pathlib import Path
from typing import Callable, Optional

from common import environment, flops, results, tasks, variants
from runner import catalog, run_folder
from runner.report import intervals

# ---------------------------------------------------------------------------------------------------------------------
# Records in table order

def catalog_rank(framework, variant):
    """A framework variant's place in the catalog, for table order; ones the catalog does not know come last."""
    rows = [(f.label, v.name) for f in catalog.FRAMEWORKS for v in f.variants]
    name, _, release = framework.rpartition(" ")  # a framework at a release, 'JAX 0.6.2', next to its framework's row
    if (framework, variant) not in rows and catalog.is_release(release):
        framework = name
    return rows.index((framework, variant)) if (framework, variant) in rows else len(rows)


def read_records(run_dir):
    """(records in table order, problems): a results folder's records as runner/run_folder.py reads them, with a
    stand-in row for each unreadable one, and a line per unreadable file; in a run of several rounds (--repeat), the
    first round's records, each with the headline figure of every round it finished in (with_rounds)."""
    records, problems = run_folder.read_records(run_dir)
    later = {}
    for number, folder in run_folder.round_folders(run_dir).items():
        if number > 1:
            later[number], found = run_folder.read_records(folder)
            problems += found
    return order_records(with_rounds(records, later) if later else records), problems


def row_identity(record):
    """What names a row across rounds: its task, framework, variant, precision, compile mode, swept value and kernel
    variables (--kernel-env)."""
    return (record["task"], record["framework"], record.get("variant"), record.get("precision") or "auto",
            record.get("compile") or "default", tuple(sorted((record.get("sweep") or {}).items())),
            tuple(sorted((record.get("kernel_env") or {}).items())))


def headline_of(record):
    """The task's headline figure of a finished record (common/tasks/: lower is better), None otherwise."""
    if record.get("status") != "ok" or record.get("task") not in tasks.TASKS:
        return None
    return (record.get("metrics") or {}).get(tasks.get(record["task"]).headline[0])


def with_rounds(records, later):
    """The first round's records, each given 'rounds' (how many rounds the run had), 'round_headlines' (its
    headline figure in each round it finished in, in round order) and 'round_probes' (its machine probe in each round
    that has one); `later`: {round number: that round's records}."""
    by_round = {number: {row_identity(r): r for r in found} for number, found in later.items()}
    rounds = 1 + len(later)
    kept = []
    for record in records:
        figures = [headline_of(record)] + [headline_of(by_round[number].get(row_identity(record), {}))
                                          for number in sorted(by_round)]
        probes = [record.get("machine_probe")] + [by_round[number].get(row_identity(record), {}).get("machine_probe")
                                                  for number in sorted(by_round)]
        found = [record] + [by_round[number].get(row_identity(record)) for number in sorted(by_round)]
        kept.append(dict(record, rounds=rounds, round_headlines=[f for f in figures if f is not None],
                         round_probes=[p for p in probes if p],
                         round_watch=[round_watch(number, r) for number, r in zip([1] + sorted(by_round), found) if r]))
    return kept


def round_watch(number, record):
    """What the table names of round `number`'s record: its machine probe, headline figure and takes (a round the
    machine watch found disturbed and the run ran again: runner/run/batch.py run_disturbed_again)."""
    return {"round": number, "probe": record.get("machine_probe"), "figure": headline_of(record),
            "takes": record.get("takes")}


def load_records(run_dir):
    """Every readable result record of a run folder, with stand-ins for unreadable ones, in table order."""
    return read_records(run_dir)[0]


def order_records(records):
    """Records in table order: task, then the framework's place in the catalog."""
    task_order = list(tasks.TASKS)

    def key(record):
        rank = catalog_rank(record["framework"], record.get("variant"))
        precision, mode = record.get("precision") or "auto", record.get("compile") or "default"
        sweep = sorted((record.get("sweep") or {}).items())
        return (task_order.index(record["task"]), rank, record["framework"], record.get("variant") or "",
                list(variants.PRECISIONS).index(precision) if precision in variants.PRECISIONS else 99,
                list(variants.COMPILE_MODES).index(mode) if mode in variants.COMPILE_MODES else 99,
                [(name, str(type(value)), value) for name, value in sweep],
                sorted((record.get("kernel_env") or {}).items()))

    return sorted(records, key=key)


# ---------------------------------------------------------------------------------------------------------------------
# Derived figures

def throughput(record):
    """(achieved GFLOP/s, peak GFLOP/s of the device) of a finished record, each None where unknown."""
    return achieved_gflops(record), device_peak(record.get("environment") or {})[0]


def achieved_gflops(record):
    """A finished record's achieved GFLOP/s, None where unknown: its task's analytic FLOPs over the time it measured
    (common/tasks/<key>.py Task.achieved_flops: a training step's FLOPs times the samples of an epoch over the median
    epoch, or a forward pass's or a training step's FLOPs per image over the median time per image)."""
    try:
        achieved = tasks.get(record["task"]).achieved_flops(record)
    except KeyError:  # a record without the hyperparameters the count needs
        return None
    return achieved / 1e9 if achieved else None


def device_peak(env):
    """(fp32 peak GFLOP/s of the device a record ran on, estimated?): the GPU's row in common/flops.py, else an
    estimate from the multiprocessors and clock its driver reported; for a CPU run, the CPU estimate."""
    gpu = environment.gpu_used(env)
    if not gpu:
        cores = env.get("threads") or env.get("cpu_count")
        return flops.cpu_peak_gflops(cores, env.get("cpu_mhz"), env.get("cpu_simd")), False
    peaks = flops.gpu_peak_tflops(gpu)
    if peaks:
        return peaks["fp32"] * 1000, False
    details = (env.get("gpu_details") or [{}])[0]
    estimate = flops.gpu_peak_estimate(details.get("compute_capability"), details.get("multiprocessors"),
                                       details.get("max_clock_mhz"))
    return (None, False) if estimate is None else (estimate * 1000, True)


@dataclasses.dataclass(frozen=True)
class Facts:
    """What a record's flat row is read from: the record, its parts, and the figures derived from them once."""

    record: dict
    metrics: dict
    timings: dict
    env: dict
    params: dict
    gflops: Optional[float]
    peak: Optional[float]
    estimated: bool
    ceiling: Optional[dict]  # the measured ceiling of the row's device and precision (runner/run_folder.py ceiling_for)

    @classmethod
    def of(cls, record):
        """The facts of one record (its derived figures only where it finished)."""
        finished = record["status"] == "ok"
        env = record.get("environment") or {}
        peak, estimated = device_peak(env) if finished else (None, False)
        return cls(record, record.get("metrics") or {}, record.get("timings") or {}, env, record.get("params") or {},
                   achieved_gflops(record) if finished else None, peak, estimated, record.get("ceiling"))

    def share(self, bound):
        """The achieved GFLOP/s over `bound`, None where either is unknown."""
        return self.gflops / bound if self.gflops is not None and bound else None

    def timing(self, name, statistic):
        """A statistic ('median', 'min', ...) of one of the record's timings, None where it has none."""
        return (self.timings.get(name) or {}).get(statistic)

    def steady_epochs(self, statistic):
        """A statistic of the epochs after the first, None where there are no such epochs (one epoch: all warm-up)."""
        return self.timing("epoch_s", statistic) if len(self.timings.get("epochs_s") or ()) > 1 else None

    def over_rounds(self, part):
        """A part ('median', 'low', 'high', 'n', 'method') of the row's headline over the rounds of a repeated run
        (intervals.summary), None in a run of one round or where the row finished in no round."""
        figures = self.record.get("round_headlines")
        return getattr(intervals.summary(figures), part) if figures and self.record.get("rounds", 1) > 1 else None

    def sweep(self, part):
        """The swept hyperparameter's name (part 0) or value (part 1), None outside a sweep."""
        return next(iter((self.record.get("sweep") or {None: None}).items()))[part]


def computed_precision(env):
    """What a run computed in, as its environment facts say: 'fp32', 'tf32', 'bf16' or 'fp16' (records from before the
    name computed_precision have it as 'precision')."""
    return env.get("computed_precision", env.get("precision"))


def _megabytes(value):
    return value / 2.0 ** 20 if value else None


def _milliseconds(value):
    return 1000 * value if value is not None else None


def setting_text(value):
    """One value of a record's ledger for a table: True and False as on and off, the rest as it is."""
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else str(value)


def settings_text(settings):
    """A record's ledger (common/results.py SETTINGS) on one line, the settings that apply, e.g. 'layout: NCHW;
    compiler: hybridize(); threads: 2'; None for a record without one."""
    if not settings:
        return None
    return "; ".join("{}: {}".format(name, setting_text(settings[name])) for name in results.SETTINGS
                     if settings.get(name) is not None)  # in SETTINGS' order (a record stores its keys sorted)


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of the flat rows, declared once: its name (a results.csv column and a results.json key, in FIELDS'
    order) and its value from a record's Facts; None for a field judged over the whole run (flat_rows fills it)."""

    name: str
    value: Optional[Callable] = None


FIELDS = (
    Field("framework", lambda f: f.record["framework"]),
    Field("variant", lambda f: f.record.get("variant")),
    Field("task", lambda f: f.record["task"]),
    Field("profile", lambda f: f.record["profile"]),
    Field("status", lambda f: f.record["status"]),
    Field("error", lambda f: f.record.get("error")),
    Field("data", lambda f: (f.record.get("data") or {}).get("source")),
    Field("weights", lambda f: f.record.get("weights")),
    Field("model", lambda f: f.record.get("model")),
    Field("device", lambda f: f.record.get("device")),
    Field("hardware", lambda f: environment.hardware_label(f.env) if f.env else None),
    Field("release", lambda f: f.record.get("release")),  # asked for, `-f jax@0.6.2`; framework_version: what ran
    Field("framework_version", lambda f: f.env.get("framework_version")),
    Field("threads", lambda f: f.env.get("threads")),
    Field("compile_s", lambda f: f.timings.get("compile_s")),
    Field("train_s", lambda f: f.metrics.get("train_s")),
    Field("first_epoch_s", lambda f: f.timings.get("first_epoch_s")),
    Field("epoch_s_median", lambda f: f.timing("epoch_s", "median")),
    Field("epoch_s_min", lambda f: f.steady_epochs("min")),
    Field("epoch_s_max", lambda f: f.steady_epochs("max")),
    Field("peak_rss_mb", lambda f: _megabytes(f.timings.get("peak_rss_bytes"))),
    Field("accuracy", lambda f: f.metrics.get("accuracy")),
    Field("s_per_1000_images", lambda f: f.metrics.get("s_per_1000_images")),
    Field("s_per_1000_images_min", lambda f: f.timing("s_per_1000_images", "min")),
    Field("s_per_1000_images_max", lambda f: f.timing("s_per_1000_images", "max")),
    Field("images_per_s", lambda f: f.metrics.get("images_per_s")),
    Field("warmup_s", lambda f: f.timings.get("warmup_s")),
    Field("duration_s", lambda f: f.record.get("duration_s")),
    Field("notebook", lambda f: f.record.get("notebook")),
    Field("gflop_per_s", lambda f: f.gflops),
    Field("ceiling_gflop_per_s", lambda f: (f.ceiling or {}).get("gflops")),  # measured: runner/run/ceiling.py
    Field("ceiling_path", lambda f: (f.ceiling or {}).get("path")),
    Field("ceiling_library", lambda f: (f.ceiling or {}).get("library")),
    Field("ceiling_threads", lambda f: (f.ceiling or {}).get("threads")),
    Field("ceiling_spread", lambda f: run_folder.ceiling_spread(f.ceiling) or None),
    Field("kernel_variables", lambda f: f.env.get("kernel_variables") or None),  # set where the notebook ran
    Field("utilisation", lambda f: f.share((f.ceiling or {}).get("gflops"))),  # against the measured ceiling
    Field("peak_gflop_per_s", lambda f: f.peak),  # the datasheet's or per-cycle figure, shown beside it
    Field("utilisation_of_peak", lambda f: f.share(f.peak)),
    Field("num_classes", lambda f: f.params.get("num_classes")),
    Field("test_samples", lambda f: f.params.get("test_samples")),
    Field("same_as_pytorch"),  # the same-weights check's verdict (flat_rows, from the run's checks)
    Field("accuracy_flag"),  # judged against the task's other rows (flat_rows)
    Field("computed_precision", lambda f: computed_precision(f.env)),
    Field("gpu_unused", lambda f: f.env.get("gpu_unused")),
    Field("build", lambda f: f.env.get("build")),
    Field("lock", lambda f: f.env.get("lock")),  # the lock the environment was built from, 'envs/x.lock@digest'
    Field("peak_estimated", lambda f: f.estimated if f.peak else None),
    Field("precision", lambda f: f.record.get("precision") or "auto"),  # asked for: --precision, the notebook's
    Field("compile_mode", lambda f: f.record.get("compile") or "default"),  # asked for: --compile, the notebook's
    Field("settings", lambda f: settings_text(f.record.get("settings"))),  # what decides its speed: its ledger
    Field("kernel_env", lambda f: f.record.get("kernel_env") or None),  # --kernel-env: set by the runner
    Field("sweep_key", lambda f: f.sweep(0)),
    Field("sweep_value", lambda f: f.sweep(1)),
    Field("samples_per_s", lambda f: samples_per_s(f.record)),
    Field("latency_ms_median", lambda f: _milliseconds(f.timing("batch_s", "median"))),
    Field("latency_ms_p99", lambda f: _milliseconds(f.timing("batch_s", "p99"))),
    Field("device_peak_mb", lambda f: _megabytes(f.timings.get("device_peak_bytes"))),
    Field("device_peak_source", lambda f: f.timings.get("device_peak_source")),
    Field("rounds", lambda f: f.record.get("rounds")),  # with --repeat: the run's rounds, and the row's figures
    Field("headline_n", lambda f: f.over_rounds("n")),
    Field("headline_median", lambda f: f.over_rounds("median")),
    Field("headline_low", lambda f: f.over_rounds("low")),
    Field("headline_high", lambda f: f.over_rounds("high")),
    Field("headline_interval", lambda f: f.over_rounds("method")),
    Field("vs_best"),  # the row's median over the task's best row's, its interval and verdict (judge_rounds)
    Field("vs_best_low"),
    Field("vs_best_high"),
    Field("vs_best_verdict"),
    Field("machine_slowdown"),  # how much slower the machine probe ran around this row than at its run's fastest
    Field("others_cores"),  # how many cores other programs kept busy while this row ran (judge_machine)
    Field("disturbed_rounds"),  # with rounds: each round the machine watch found disturbed, and its take again
)


def row(record):
    """Flatten a record into its flat row: every field of FIELDS, in order (the run's judgements left None)."""
    facts = Facts.of(record)
    return {field.name: field.value(facts) if field.value else None for field in FIELDS}


def samples_per_s(record):
    """Throughput of a finished record: images/s (median) for inference, training samples per second over the median
    epoch for the trained tasks; None where unknown."""
    task = tasks.get(record["task"])
    params, metrics, timings = record.get("params") or {}, record.get("metrics") or {}, record.get("timings") or {}
    if record["status"] != "ok":
        return None
    if not task.trains:
        return metrics.get("images_per_s")
    median = (timings.get("epoch_s") or {}).get("median")
    if not median or "batch_size" not in params:
        return None
    return task.epoch_samples(params) / median


def judge_rounds(rows):
    """Fill each repeated row's vs_best fields: its median over the best row's of its task (the lowest median among
    the rows of the same sweep value), with the ratio's interval and the verdict, 'within noise' where the interval
    holds 1 (runner/report/intervals.py), judged on the samples row_with_samples put under '_samples'."""
    groups = {}
    for r in rows:
        if r["headline_n"]:
            groups.setdefault((r["task"], r["sweep_key"], repr(r["sweep_value"])), []).append(r)
    for group in groups.values():
        judged = intervals.indistinguishable_from_best({id(r): r["_samples"] for r in group})
        for r in group:
            comparison = judged.comparisons[id(r)]
            r.update(vs_best=comparison.ratio, vs_best_low=comparison.low, vs_best_high=comparison.high,
                     vs_best_verdict="best" if id(r) == judged.best else comparison.verdict)
    return rows


def probes_of(record_or_row):
    """The machine probes of a record over its rounds (round_probes), or its own alone; [] where it has none."""
    found = record_or_row.get("round_probes") or [record_or_row.get("machine_probe")]
    return [probe for probe in found if probe]


def judge_machine(rows):
    """Fill each finished row's machine_slowdown and others_cores (runner/run/machine_probe.py), each the median over
    its rounds: the slowdown of a round is how much slower than the same machine's fastest probe in the run the probe
    ran at both ends of the notebook (the lesser of before and after: a machine slowed throughout, not a moment),
    the worse of the loop and the products; others_cores, how many cores other programs kept busy meanwhile."""
    fastest = {hardware: run_folder.fastest_probe([p for r in rows if r["hardware"] == hardware for p in r["_probes"]])
               for hardware in {r["hardware"] for r in rows}}
    for r in rows:
        if r["status"] != "ok":  # a row without figures has no timing to doubt
            continue
        slowdowns = [run_folder.probe_slowdown(probe, fastest[r["hardware"]]) for probe in r["_probes"]]
        slowdowns = [slowdown for slowdown in slowdowns if slowdown is not None]
        busy = [probe["others_cores"] for probe in r["_probes"] if probe.get("others_cores") is not None]
        r["machine_slowdown"] = statistics.median(slowdowns) if slowdowns else None
        r["others_cores"] = statistics.median(busy) if busy else None
        r["disturbed_rounds"] = disturbed_rounds_text(r["_rounds"], fastest[r["hardware"]], tasks.get(r["task"]))
    return rows


def disturbed_rounds_text(rounds, fastest, task):
    """The rounds of a repeated row that the machine watch found disturbed (run_folder.disturbance), each with its
    figure and, where the run ran it again, the take's; None where there is none."""
    def figure(metrics):
        return number((metrics or {}).get(task.headline[0]), task.digits)

    said = []
    for entry in rounds:
        takes = entry["takes"]
        if takes:
            said.append("round {}: {}, {}; run again at the end of the run: {}, {}; take {} used".format(
                entry["round"], takes[0]["disturbed"] or "undisturbed", figure(takes[0]["metrics"]),
                takes[1]["disturbed"] or "undisturbed", figure(takes[1]["metrics"]) or takes[1]["status"],
                1 if takes[0]["used"] else 2))
            continue
        words = run_folder.disturbance(entry["probe"], fastest)[1]
        if words:
            said.append("round {}: {}, {}".format(entry["round"], words, number(entry["figure"], task.digits)))
    return "; ".join(said) or None


def machine_note(records):
    """The machine's readings over a run (the probe's fastest and slowest timings, the most cores other programs
    kept busy during a notebook), None where no row has them."""
    probes = [probe for record in records for probe in probes_of(record)] + [  # and those of takes not used
        take["machine_probe"] for record in records for entry in record.get("round_watch") or []
        for take in entry["takes"] or [] if not take["used"] and take["machine_probe"]]
    readings = [reading for probe in probes for reading in (probe.get("before"), probe.get("after")) if reading]
    if not readings:
        return None
    python, numpy = [[reading[key] * 1000 for reading in readings] for key in run_folder.PROBE_KEYS]
    busy = [probe["others_cores"] for probe in probes if probe.get("others_cores") is not None]
    return ("Machine watch (runner/run/machine_probe.py): a fixed pure-Python loop and NumPy products on one core "
            "before and after every notebook, {} probes, the loop {:.1f} to {:.1f} ms, the products {:.1f} to {:.1f} "
            "ms{}. A row is named under its table where, as the median over its rounds, the probe ran more than {:.0f}% "
            "slower than the run's fastest at both ends of the notebook, or other programs kept more than {} cores "
            "busy while it ran.".format(
                len(readings), min(python), max(python), min(numpy), max(numpy),
                "; other programs kept up to {:.2f} cores busy during a notebook".format(max(busy)) if busy else "",
                100 * run_folder.MACHINE_NOISE, run_folder.OTHERS_BUSY_CORES))


def row_with_samples(record):
    """row() of a record, holding under '_samples' its headline figures over rounds (judge_rounds) and under
    '_probes' its machine probes over rounds (judge_machine)."""
    r = row(record)
    r["_samples"] = record.get("round_headlines") if r["headline_n"] else None
    r["_probes"] = probes_of(record)
    r["_rounds"] = record.get("round_watch") or []  # a run of one round names its row (machine_slowdown) instead
    return r


def judged_rows(records):
    """The flat rows of records with the judgements made over the whole run: rounds against the best, the machine."""
    rows = judge_machine(judge_rounds([row_with_samples(r) for r in records]))
    for r in rows:
        for key in ("_samples", "_probes", "_rounds"):
            r.pop(key, None)
    return rows


def flat_rows(records, checks=None):
    """The flat rows of a run (results.csv and results.json): row() of each record with its equivalence verdict,
    accuracy flag and, over rounds, its comparison with its task's best row."""
    rows = judged_rows(records)
    for r in rows:
        r["same_as_pytorch"] = same_as_pytorch(r, checks) if checks else None
        r["accuracy_flag"] = accuracy_flag(r, [x for x in rows if x["task"] == r["task"]])
    return rows


# ---------------------------------------------------------------------------------------------------------------------
# Cell texts

def label(r):
    """A row's name: the framework with its variant, precision, compile mode, swept value and kernel variables where
    they are not the default, e.g. 'Keras (jax)', 'PyTorch · bf16 · compiled' (common.results.label of the row)."""
    sweep = {r["sweep_key"]: r["sweep_value"]} if r.get("sweep_key") else None
    return results.label(r["framework"], r.get("variant"), r.get("precision"), r.get("compile_mode"), sweep,
                         r.get("kernel_env"))


def is_default(r):
    """True for a row of the notebook as it stands: default precision and compile mode, no sweep, no kernel variable."""
    return ((r.get("precision") or "auto", r.get("compile_mode") or "default") == variants.DEFAULT
            and not r.get("sweep_key") and not r.get("kernel_env"))


def number(value, digits=1):
    """A figure for a table cell ('' for None)."""
    return "" if value is None else "{:.{}f}".format(value, digits)


def status_text(r):
    """'ok', or the status with the first line of the error ('|' made safe for Markdown tables).

    An error that starts with its status ('unavailable on this GPU: ...') is shown as it is."""
    if r["status"] == "ok":
        return "ok"
    error = (r["error"] or "").replace("|", "/")
    return error if error.startswith(r["status"]) else "{}: {}".format(r["status"], error)


def device_text(r):
    """The Device cell: the framework's device name, its float32 precision on a GPU ('cuda:0 tf32'), and
    'GPU not used' for a CPU run on a machine whose GPU the framework could not use (the notes say why)."""
    text = r["device"] or ""
    if r["computed_precision"] and r["computed_precision"] != "fp32":
        text += " " + r["computed_precision"]
    if r["gpu_unused"]:
        text += " (GPU not used)"
    return text


def version_text(r):
    """The Version cell: the framework's version, marked where it ran on an adopted interpreter."""
    adopted = (r["build"] or "").startswith("adopted")
    return (r["framework_version"] or "") + (" (adopted)" if adopted else "")


# How far above the measured ceiling a row may read before its cell is flagged: the ceiling's repeats and a row's
# epochs each move by a few percent
CEILING_NOISE = 0.05


def utilisation_text(r):
    """The utilisation cell against the measured ceiling, e.g. '12%'; '112%!' where it is above the ceiling by more
    than CEILING_NOISE (UTILISATION_NOTE says why that can be); '' where the row or its ceiling is unknown."""
    if r["utilisation"] is None:
        return ""
    return "{:.0f}%{}".format(100 * r["utilisation"], "!" if r["utilisation"] > 1 + CEILING_NOISE else "")


def accuracy_flag(r, task_rows):
    """A warning about a trained row's accuracy, or None: no better than chance, or (full, real data) off the median."""
    task = tasks.get(r["task"])
    if r["accuracy"] is None or not task.trains:
        return None
    chance = 1.0 / (r["num_classes"] or 2)
    samples = r["test_samples"] or task.test_split
    margin = max(0.05, 3 * (chance * (1 - chance) / samples) ** 0.5)
    if r["accuracy"] < chance + margin:
        return "not above chance"
    if r["profile"] == "full" and r["data"] == "real":
        peers = sorted(x["accuracy"] for x in task_rows
                       if x["accuracy"] is not None and x["profile"] == "full" and x["data"] == "real")
        middle = len(peers) // 2
        median = peers[middle] if len(peers) % 2 else (peers[middle - 1] + peers[middle]) / 2
        if abs(r["accuracy"] - median) > 0.02:
            return "{:.1f} points from median".format(100 * abs(r["accuracy"] - median))
    return None


def accuracy_text(r, task_rows):
    """The accuracy cell: the figure, and its flag in parentheses when there is one."""
    flag = accuracy_flag(r, task_rows)
    return number(r["accuracy"], 3) + (" ({})".format(flag) if flag else "")


def same_as_pytorch(r, checks):
    """The table cell saying whether a row computes PyTorch's function from shared weights."""
    if r["task"] not in run_folder.EQUIVALENCE_TASKS or not is_default(r):  # the check runs the notebooks as they stand
        return None
    if r["framework"] == "PyTorch":
        return "reference"
    result = checks.get((r["task"], label(r)))
    return run_folder.equivalence_verdict(result).replace("|", "/") if result else "not checked"


def data_parallel_text(r, checks):
    """The cell saying whether a train row's framework takes the single-device step on several devices
    (runner/checks/data_parallel.py); '' for a variant's row, which the check does not run, or where it was not checked."""
    if not tasks.get(r["task"]).data_parallel or not is_default(dict(r, sweep_key=None)):  # a devices sweep's rows count
        return ""
    result = checks.get((r["task"], base_label(r)))
    return run_folder.data_parallel_verdict(result).replace("|", "/") if result else ""


def headline_text(r, task):
    """The task's headline figure of a row, with the task's decimals; over rounds, the median with its interval and n."""
    if r.get("headline_n"):
        if r["headline_interval"] == "single":
            return "{} (n=1)".format(number(r["headline_median"], task.digits))
        return "{} [{}–{}] n={}".format(number(r["headline_median"], task.digits), number(r["headline_low"], task.digits),
                                        number(r["headline_high"], task.digits), r["headline_n"])
    return number(r[task.headline[0]], task.digits)


def vs_best_text(r):
    """A repeated row against its task's best: 'best', or the ratio with its interval and 'within noise' where the
    rows cannot be told apart; '' outside repeated runs."""
    if r.get("vs_best_verdict") is None:
        return ""
    if r["vs_best_verdict"] == "best":
        return "best"
    text = "{:.2f}× [{:.2f}–{:.2f}]".format(r["vs_best"], r["vs_best_low"], r["vs_best_high"])
    return text + (" within noise" if r["vs_best_verdict"] == "within noise" else "")


def merged_cell(r):
    """A row's cell in the merged table: its status, or the headline figure with accuracy and what was not real."""
    if r["status"] != "ok":
        return status_text(r)
    task = tasks.get(r["task"])
    text = headline_text(r, task)
    if r["accuracy"] is not None:
        text += " (acc {})".format(number(r["accuracy"], 3))
    if r["data"] == "synthetic" and task.trains:
        text += " [synthetic data]"
    if r["weights"] == "random":
        text += " [random weights]"
    return text


# ---------------------------------------------------------------------------------------------------------------------
# Notes under the tables

TIMING_NOTE = ("Training time is the sum of the timed epochs, the device synchronised before each clock stop; "
               "min - max: the range of the epochs after the first (of the passes, for inference). "
               "Compile: seconds spent tracing and compiling the training step before the first epoch, where the "
               "framework does that ahead; '-' where it runs eagerly or compiles inside its first epoch (Keras), "
               "which is then slower than the median epoch.")
ACCURACY_NOTE = ("Accuracy flags: 'not above chance' where a run does not beat chance by a clear margin (5 points, "
                 "or 3 standard errors of a chance-level score on its test samples if more); with the full profile "
                 "on real data, 'N points from median' where it lies more than 2 points from its task's median.")
FLOPS_NOTE = ("GFLOP/s: analytic FLOPs (common/tasks/: convolutions, dense layers, GRU products and attention; a training "
              "step counted as three forward passes; ResNet-50 v1 or v1.5 as the row's model) over the median "
              "epoch, or per image for inference. Util.: that over the measured ceiling of the row's device and "
              "precision, the fastest large matrix product this machine's libraries reached before the notebooks "
              "ran (runner/run/ceiling.py; the run folder's ceiling.json says which path, library and threads). A "
              "cell marked ! is above the ceiling by more than its noise (5%): the framework computes fewer "
              "multiply-adds than the count (Winograd or FFT convolutions) or the count does not match its model. "
              "The vendor's or per-cycle peak, which no kernel reaches, is in the CSV and JSON beside it "
              "(peak_gflop_per_s, utilisation_of_peak), never in this column.")
PRECISION_NOTE = ("Precision: rows without a variant in their name compute in float32; on GPUs with TF32 tensor cores "
                  "(compute capability 8.0 and newer) every framework is set to allow TF32 for float32 matrix products "
                  "and convolutions, as TensorFlow and JAX do by default (frameworks/<name>.py, set_variant); such rows "
                  "say tf32 beside their device. A row named with a variant (run_all.py --precision, --compile: "
                  "fp32 strict float32, bf16 and fp16 mixed precision, 'compiled' the framework's compiler) ran the "
                  "framework's own way of it, or says 'unsupported' with the reason; the same-weights check runs the "
                  "notebooks as they stand.")
MEMORY_NOTE = ("Peak RSS: the notebook process's largest resident memory inside its timed blocks (Linux's "
               "high-water mark, lowered to the current size as each block starts: common/memory.py), measured the "
               "same way for every framework; it counts the framework's arenas, threads and batches, and on a GPU "
               "only host memory.")
HOST_TO_DEVICE_NOTE = ("Inference: every framework's timed loop starts from batches in host memory (NumPy) and "
                       "includes their copy to the device.")
DATA_PARALLEL_NOTE = ("Data-parallel step: from one weight file, do two SGD-momentum steps on 2 devices (on a CPU: its "
                      "logical devices or worker processes) give the weights of two steps on one device with the same 16 "
                      "images, split in 2 micro-batches so that batch norm sees each device's statistics (whole, "
                      "where the framework's batch norm normalises over the whole batch)? (`runner/checks/data_parallel.py`, "
                      "on the CPU with 8 images of the smoke size per device, at lr 0.001.)")
EQUIVALENCE_NOTE = ("Same as PyTorch: from one shared weight file, does the notebook compute PyTorch's logits and "
                    "training step, or ResNet-50's features? (`runner/checks/equivalence.py`, on the CPU with smoke-sized "
                    "data).")
MERGED_NOTE = ("Each column is one results folder: its hardware and profile. Cells: the task's headline figure "
               "(training time in s, or s per 1000 images) with accuracy; data or weights that were not the real ones are "
               "flagged in the cell, so runs that differ are shown, not mixed silently.")


ROUNDS_NOTE = ("Rounds (--repeat N): every notebook ran once per round, each round in its own seeded order (run.json "
               "keeps it), so that a slow spell of the machine falls on every row alike. A row's headline is its "
               "median over the rounds it finished, with a 95% bootstrap interval of the median from 5 rounds on, the "
               "min–max range below that, and n. 'vs best': the row's median over the best row's of its table, with "
               "the ratio's interval; 'within noise' where that interval holds 1, so the two cannot be told apart "
               "(docs/measurements.md).")


def notes(checks=None, repeated=False):
    """The notes that explain a run's tables, in order; a check's note only where it ran, the rounds' where the run
    had several."""
    checked_tasks = {task for task, _ in checks or {}}
    return [TIMING_NOTE] + ([ROUNDS_NOTE] if repeated else []) + [
        ACCURACY_NOTE, FLOPS_NOTE, MEMORY_NOTE, PRECISION_NOTE, HOST_TO_DEVICE_NOTE] + (
        [EQUIVALENCE_NOTE] if checked_tasks - {run_folder.DATA_PARALLEL_TASK} else []) + (
        [DATA_PARALLEL_NOTE] if run_folder.DATA_PARALLEL_TASK in checked_tasks else [])


def row_notes(rows):
    """Lines naming what a row's cells cannot hold: why a GPU went unused, which interpreter was adopted, that the
    machine was slower while it ran."""
    lines = []
    for r in rows:
        if (r.get("machine_slowdown") or 0) > run_folder.MACHINE_NOISE:
            lines.append("{}: machine {:.0f}% slower during this row (its probe before and after the notebook, against "
                         "the run's fastest).".format(label(r), 100 * r["machine_slowdown"]))
        if (r.get("others_cores") or 0) > run_folder.OTHERS_BUSY_CORES:
            lines.append("{}: other programs kept {:.1f} cores busy during this row.".format(label(r), r["others_cores"]))
        if r.get("disturbed_rounds"):
            lines.append("{}, rounds the machine watch found disturbed ({}): {}.".format(
                label(r), tasks.get(r["task"]).headline[1], r["disturbed_rounds"]))
        if r["gpu_unused"]:
            lines.append("{}: {}.".format(label(r), r["gpu_unused"]))
        if (r["build"] or "").startswith("adopted"):
            lines.append("{}: ran on an {} interpreter, with the versions it has.".format(label(r), r["build"]))
    ceilings = sorted({(r["computed_precision"] or "fp32", r["ceiling_gflop_per_s"], r["ceiling_path"], r["ceiling_library"],
                        r["ceiling_threads"], r["ceiling_spread"] or "") for r in rows if r["ceiling_gflop_per_s"]})
    for precision, gflops, path, library, threads, spread in ceilings:
        lines.append("Util.'s ceiling, {}: {:.0f} GFLOP/s by {} ({}, {} threads{}).".format(
            precision, gflops, path, library, threads, "; " + spread if spread else ""))
    variables = sorted({item for r in rows for item in (r["kernel_variables"] or {}).items()})
    if variables:
        lines.append("Set where the notebooks ran, choosing which kernels a library runs (recorded, not changed): {}.".format(
            ", ".join("{}={}".format(name, value) for name, value in variables)))
    return lines


# ---------------------------------------------------------------------------------------------------------------------
# The table model

@dataclasses.dataclass(frozen=True)
class Context:
    """What a cell's text may depend on besides its row: the task, the task's rows and the equivalence checks."""

    task: tasks.Task
    rows: list
    checks: dict


def _everywhere(task):
    return True


@dataclasses.dataclass(frozen=True)
class Column:
    """One column, declared once: heading, how a row's cell text is made, alignment and which tasks have it."""

    key: str  # a name renderers can hook on: "framework" (the link to the notebook), "status" (failures in red)
    heading: str
    text: Callable = None  # (flat row, Context) -> cell text; None for the merged table's run columns
    numeric: bool = False  # right-aligned
    applies: Callable = _everywhere  # (common.tasks.Task) -> whether the task's table has the column
    headline: bool = False  # the task's headline figure (report.html draws a bar beside it)
    needs_checks: bool = False  # only where the run checked the task (runner/checks/)
    needs_values: bool = False  # only where a row has a value under `key` (GPU counters, single-batch latency)


def _trains(task):
    return task.trains


def _infers(task):
    return not task.trains


def _headline_is(metric):
    def applies(task):
        return task.headline[0] == metric

    return applies


def _checked(task):
    return task.same_weights is not None


def _data_parallel(task):
    return task.data_parallel


def _spread_text(r, context):
    """The headline's spread over repeats: inference passes, or the epochs after the first ('' for one epoch)."""
    key = "s_per_1000_images" if context.task.headline[0] == "s_per_1000_images" else "epoch_s"
    if r[key + "_min"] is None:
        return ""
    return "{} - {}".format(number(r[key + "_min"], context.task.digits), number(r[key + "_max"], context.task.digits))


def _latency_text(r):
    """'median / p99' of a row's single-batch times in milliseconds, '' where it has none."""
    if r["latency_ms_median"] is None:
        return ""
    return "{} / {}".format(number(r["latency_ms_median"], 1), number(r["latency_ms_p99"], 1))


def _compile_text(r, context):
    """Seconds compiling ahead; '-' for a finished run that compiled nothing ahead, '' for an unfinished one."""
    return (number(r["compile_s"], 2) or "-") if r["status"] == "ok" else ""


COLUMNS = (
    Column("framework", "Framework", lambda r, c: label(r)),
    Column("version", "Version", lambda r, c: version_text(r)),
    Column("device", "Device", lambda r, c: device_text(r)),
    Column("data", "Data", lambda r, c: r["data"] or "", applies=_trains),
    Column("model", "Model", lambda r, c: r["model"] or "", applies=_infers),
    Column("weights", "Weights", lambda r, c: r["weights"] or "", applies=_infers),
    Column("train_s", "Training (s)", lambda r, c: headline_text(r, c.task), numeric=True,
           applies=_headline_is("train_s"), headline=True),
    Column("s_per_1000_images", "s / 1000 images (median)", lambda r, c: headline_text(r, c.task), numeric=True,
           applies=_headline_is("s_per_1000_images"), headline=True),
    Column("vs_best", "vs best (interval)", lambda r, c: vs_best_text(r), numeric=True, needs_values=True),
    Column("first_epoch_s", "First epoch (s)", lambda r, c: number(r["first_epoch_s"]), numeric=True, applies=_trains),
    Column("epoch_s_median", "Epoch (s, median)", lambda r, c: number(r["epoch_s_median"]), numeric=True,
           applies=_trains),
    Column("spread", "min - max", _spread_text, numeric=True),  # of the median before it
    Column("images_per_s", "images/s", lambda r, c: number(r["images_per_s"]), numeric=True, applies=_infers),
    Column("compile_s", "Compile (s)", _compile_text, numeric=True, applies=_trains),
    Column("gflop_per_s", "GFLOP/s", lambda r, c: number(r["gflop_per_s"]), numeric=True),
    Column("utilisation", "Util.", lambda r, c: utilisation_text(r), numeric=True),
    Column("latency_ms_median", "Batch latency (ms, median / p99)", lambda r, c: _latency_text(r), numeric=True,
           applies=_infers, needs_values=True),
    Column("peak_rss_mb", "Peak RSS (MB)", lambda r, c: number(r["peak_rss_mb"], 0), numeric=True),
    Column("device_peak_mb", "GPU peak (MB)", lambda r, c: number(r["device_peak_mb"], 0), numeric=True,
           needs_values=True),
    Column("accuracy", "Accuracy", lambda r, c: accuracy_text(r, c.rows), numeric=True, applies=_trains),
    Column("status", "Status", lambda r, c: status_text(r)),
    Column("same_as_pytorch", "Same as PyTorch", lambda r, c: same_as_pytorch(r, c.checks) or "", applies=_checked,
           needs_checks=True),
    Column("data_parallel", "Data-parallel step = one device's", lambda r, c: data_parallel_text(r, c.checks),
           applies=_data_parallel, needs_checks=True),
)


@dataclasses.dataclass
class Row:
    """One row of a table: its cell texts, one per column, and the flat row they came from (None if merged)."""

    cells: list
    source: Optional[dict] = None


@dataclasses.dataclass
class Table:
    """One table: its title, columns, rows and the notes under it; `task` is the task whose results it holds."""

    title: str
    columns: list
    rows: list
    notes: list
    task: tasks.Task


@dataclasses.dataclass
class Results:
    """A run's tables: the profiles and hardware they ran with, the notes that explain them, one table per task."""

    profiles: list
    hardware: list
    notes: list
    tables: list


def columns_for(task, checks=None):
    """The columns of a task's table, in order; a check's column ('Same as PyTorch', the data-parallel step) only
    where `checks` has results of the task."""
    checked = any(key == task.key for key, _ in checks or {})
    return [c for c in COLUMNS if c.applies(task) and (checked or not c.needs_checks)]


def refused_variant(r):
    """True for a variant row its framework refused (status 'unsupported': no such mode there), which a table names in
    a note under it rather than as an empty row."""
    return r["status"] == "unsupported" and not is_default(r)


def task_table(task, rows, checks=None):
    """The table of one task from its flat rows (row()), in the order given; refused variant rows go to its notes, one
    line each with the framework's reason."""
    refused = [r for r in rows if refused_variant(r)]
    rows = [r for r in rows if not refused_variant(r)]
    context = Context(task, rows, checks or {})
    columns = [c for c in columns_for(task, checks) if not c.needs_values or any(r[c.key] is not None for r in rows)]
    return Table(task.title, columns, [Row([column.text(r, context) for column in columns], r) for r in rows],
                 row_notes(rows) + ["{}: not run, {}.".format(label(r), status_text(r).rstrip(".")) for r in refused],
                 task)


def build(records, checks=None):
    """The tables of a run's records (in load_records order); `checks` ({(task, label): result} from
    runner.run_folder.load_checks) adds the 'Same as PyTorch' column."""
    rows = judged_rows(records)
    tables = [task_table(task, [r for r in rows if r["task"] == key], checks)
              for key, task in tasks.TASKS.items() if any(r["task"] == key for r in rows)]
    machine = machine_note(records)
    return Results(sorted({r["profile"] for r in rows}), sorted({r["hardware"] for r in rows if r["hardware"]}),
                   notes(checks, repeated=any(r["headline_n"] for r in rows)) + ([machine] if machine else []), tables)


def base_label(r):
    """A sweep row's line: its label without the swept value, e.g. 'PyTorch · bf16'."""
    return label(dict(r, sweep_key=None))


def sweep_tables(records, checks=None):
    """The sweep's tables, one per task with swept rows: a row per framework variant (base_label), a column per
    value with the throughput (images or samples per second) or the run's status; for a batch-size sweep of
    inference with batch 1, the single-batch latency; for a sweep of `devices` from 1, the scaling efficiency at
    each other value, and with `checks` (runner.run_folder.load_checks) the data-parallel check's verdict. [] for a run
    without a sweep."""
    rows = [row(r) for r in records]
    tables = []
    for key, task in tasks.TASKS.items():
        swept = [r for r in rows if r["task"] == key and r["sweep_key"]]
        if not swept:
            continue
        name = swept[0]["sweep_key"]
        values = sorted({r["sweep_value"] for r in swept}, key=lambda v: (str(type(v)), v))
        lines = []
        for r in swept:
            if base_label(r) not in lines:
                lines.append(base_label(r))
        cells = {(base_label(r), r["sweep_value"]): r for r in swept}
        unit = "images/s" if not task.trains else "samples/s"
        columns = [COLUMNS[0]] + [Column("sweep", "{}={}".format(name, value), numeric=True) for value in values]
        latency = name == "batch_size" and 1 in values and not task.trains
        if latency:
            columns.append(Column("latency", "Latency at batch 1 (ms, median / p99)", numeric=True))
        scaled = [value for value in values if value != 1] if name == "devices" and 1 in values else []
        columns += [Column("efficiency", "Efficiency at devices={}".format(value), numeric=True) for value in scaled]
        verdicts = name == "devices" and any(checked == key for checked, _ in checks or {})
        if verdicts:
            columns.append(next(column for column in COLUMNS if column.key == "data_parallel"))
        table_rows = []
        for line in lines:
            texts = [line] + [_sweep_cell(cells.get((line, value))) for value in values]
            if latency:
                texts.append(_latency_text(cells[(line, 1)]) if (line, 1) in cells else "")
            texts += [_efficiency_text(cells.get((line, 1)), cells.get((line, value)), value) for value in scaled]
            if verdicts:
                texts.append(data_parallel_text(next(r for r in swept if base_label(r) == line), checks))
            table_rows.append(Row(texts))
        tables.append(Table("{}: {} against {}".format(task.title, unit, name), columns, table_rows, [], task))
        memory = _sweep_memory_table(task, name, values, lines, cells)
        if memory:
            tables.append(memory)
    return tables


def _sweep_memory_table(task, name, values, lines, cells):
    """The sweep's peak memory against the swept value, one row per framework variant: the GPU's peak where the runs
    recorded one (the device's memory is what a longer sequence or a larger batch runs out of), else the process's
    peak RSS; None where no run recorded either."""
    swept = [r for r in cells.values() if r["status"] == "ok"]
    key = "device_peak_mb" if any(r.get("device_peak_mb") for r in swept) else "peak_rss_mb"
    if not any(r.get(key) for r in swept):
        return None
    heading = "GPU peak" if key == "device_peak_mb" else "peak RSS"
    columns = [COLUMNS[0]] + [Column("sweep", "{}={}".format(name, value), numeric=True) for value in values]
    table_rows = [Row([line] + [_memory_cell(cells.get((line, value)), key) for value in values]) for line in lines]
    return Table("{}: {} (MB) against {}".format(task.title, heading, name), columns, table_rows, [], task)


def _memory_cell(r, key):
    """A memory sweep cell: the run's peak in MB, or what _sweep_cell says of a run that did not finish."""
    if r is None or r["status"] != "ok":
        return _sweep_cell(r)
    return number(r.get(key), 0)


def _efficiency_text(one, many, devices):
    """Scaling efficiency from the same run: throughput on `devices` over `devices` times that on one, e.g. '87%';
    '' unless both ran."""
    if not one or not many or one["status"] != "ok" or many["status"] != "ok" or not one["samples_per_s"]:
        return ""
    return "{:.0f}%".format(100.0 * many["samples_per_s"] / (devices * one["samples_per_s"]))


def _sweep_cell(r):
    """A sweep cell: the throughput of a finished run, 'out of memory', another status, or 'not run'."""
    if r is None:
        return "not run"
    if r["status"] == "ok":
        return number(r["samples_per_s"], 1)
    return "out of memory" if "out of memory" in (r["error"] or "") else status_text(r)


def release_of(r):
    """(the framework, the release it ran) of a flat row: ('JAX', '0.6.2') for the row of `-f jax@0.6.2`, ('JAX',
    '0.10.2') for JAX's own (the version its environment pins, as the record says)."""
    base = r["framework"][:-len(r["release"]) - 1] if r.get("release") else r["framework"]
    return base, r.get("framework_version") or r.get("release") or ""


def release_order(version):
    """A sort key for release numbers: 0.10.2 after 0.6.2, a pre-release (2.16.0rc1) before its release."""
    parts = re.match(r"^[0-9.]*", version).group(0).strip(".")
    numbers = tuple(int(part) for part in parts.split(".") if part)
    return numbers, version == parts, version


def compare_samples(a, b):
    """b against a, each the (samples, what they are) of comparison_samples: intervals.compare, its interval widened
    by intervals.RUN_TO_RUN where a side's samples come from one kernel (epochs, passes), which agree more closely
    than two runs of the notebook do; rounds, each a run of its own, are compared as they are."""
    widened = 0.0 if a[1] == b[1] == "rounds" else intervals.RUN_TO_RUN
    return intervals.compare(a[0], b[0], widened=widened)


CHANCE_NOTE = ("Where a side has one round, its samples (epochs, passes) come from one kernel and agree more closely "
               "than two runs do, so the interval is widened by {:.0%} at both ends: the 95th percentile of how far "
               "a row moved between single runs of the same code on this project's machine. With rounds, identical "
               "rows are still called apart now and then: 1 comparison in 10 at 3 rounds a side (their min–max "
               "ranges miss each other), 3 in 100 at 4, about 4 in 100 with the bootstrap from 5; a verdict of 10 "
               "to 20% from 3 rounds is a lead to run again (docs/measurements.md).").format(intervals.RUN_TO_RUN)
VERSIONS_NOTE = ("Releases (`-f jax@0.6.2,jax`): each framework's rows at the releases the run held, oldest first, "
                 "the same notebook on each. 'vs newest': the release's headline over the newest release's, the ratio "
                 "of the medians of the samples that stand for each (the rounds of a repeated run, else the epochs "
                 "after the first or the inference passes) with its 95% interval, and the verdict faster, slower or "
                 "within noise (runner/report/intervals.py); a release whose notebook calls what it lacks says "
                 "'unsupported' with the framework's own error. " + CHANCE_NOTE)


def version_tables(records, checks=None):
    """Per task, one table per framework that the run held at two releases or more (`-f jax@0.6.2,jax`): a row per
    release, oldest first, with its headline, its ratio to the newest release's with the interval and verdict,
    accuracy, same-weights verdict, peak memory and first-epoch and compile time. [] for a run without releases."""
    rows = flat_rows(records, checks)
    groups = {}
    for record, r in zip(records, rows):
        identity = (r["task"], release_of(r)[0], r["variant"], r["precision"], r["compile_mode"], r["sweep_key"],
                    repr(r["sweep_value"]), repr(r["kernel_env"]))
        groups.setdefault(identity, []).append((record, r))
    tables = []
    for identity, members in groups.items():
        if len(members) < 2 or not any(r.get("release") for _, r in members) or all(
                refused_variant(r) for _, r in members):  # a variant the framework refuses at every release: no table
            continue
        task = tasks.get(identity[0])
        members.sort(key=lambda member: release_order(release_of(member[1])[1]))
        finished = [member for member in members if member[1]["status"] == "ok"]
        newest = finished[-1] if finished else None
        columns = [Column("version", "Release"), Column(task.headline[0], task.headline[1], numeric=True,
                                                        headline=True),
                   Column("vs_newest", "vs newest (interval)", numeric=True), Column("verdict", "Verdict")]
        if task.trains:
            columns.append(Column("accuracy", "Accuracy", numeric=True))
        checked = any(key == task.key for key, _ in checks or {})
        if checked:
            columns.append(Column("same_as_pytorch", "Same as PyTorch"))
        columns += [Column("peak_rss_mb", "Peak RSS (MB)", numeric=True)]
        if task.trains:
            columns += [Column("first_epoch_s", "First epoch (s)", numeric=True),
                        Column("compile_s", "Compile (s)", numeric=True)]
        columns.append(Column("status", "Status"))
        table_rows = []
        for record, r in members:
            cells = [" ".join(filter(None, [release_of(r)[1], on_backend(record),
                                            "" if r.get("release") else "(its environment's)"])),
                     headline_text(r, task) if r["status"] == "ok" else ""]
            cells += _vs_newest_cells(record, newest[0] if newest else None)
            if task.trains:
                cells.append(number(r["accuracy"], 3) if r["status"] == "ok" else "")
            if checked:
                cells.append(r["same_as_pytorch"] or "")
            cells.append(number(r["peak_rss_mb"], 0))
            if task.trains:
                cells += [number(r["first_epoch_s"]), _compile_text(r, None)]
            cells.append(status_text(r))
            table_rows.append(Row(cells, r))
        label_text = results.label(identity[1], identity[2], identity[3], identity[4],
                                   {identity[5]: members[0][1]["sweep_value"]} if identity[5] else None)
        tables.append(Table("{}: {} by release".format(task.title, label_text), columns, table_rows, [], task))
    return sorted(tables, key=lambda t: (list(tasks.TASKS).index(t.task.key), t.title))


def on_backend(record):
    """'on jax 0.4.31' for a record of Keras 3, whose release runs on its backend's release of the same time; ''
    for a framework that computes on its own."""
    facts = record.get("environment") or {}
    return "on {} {}".format(facts["backend"], facts["backend_version"]) if facts.get("backend_version") else ""


def _vs_newest_cells(record, newest):
    """The 'vs newest' and verdict cells of one release's row against the newest release's record."""
    if newest is None or record.get("status") != "ok":
        return ["", ""]
    if record is newest:
        return ["newest", ""]
    mine, theirs = comparison_samples(record), comparison_samples(newest)
    if not mine[0] or not theirs[0]:
        return ["", "no samples"]
    comparison = compare_samples(theirs, mine)
    return ["{:.2f}× [{:.2f}–{:.2f}]".format(comparison.ratio, comparison.low, comparison.high), comparison.verdict]


def machine_column(run_dir, records):
    """The heading of a run's column in the merged table: its hardware, device kind and profile; and the folder name."""
    rows = [row(r) for r in records]
    hardware = sorted({r["hardware"] for r in rows if r["hardware"]}) or ["unknown hardware"]
    profiles = sorted({r["profile"] for r in rows}) or ["?"]
    return "{} | {}".format(" + ".join(hardware), "/".join(profiles)), Path(run_dir).name


def lock_differences(run_dirs):
    """Lines naming each lock whose digest differs between the runs being merged: their rows ran on other packages."""
    seen = {}  # lock file -> {digest: [run folder names]}
    for run_dir in run_dirs:
        for r in (row(record) for record in load_records(run_dir)):
            if r["lock"]:
                name, _, digest = r["lock"].partition("@")
                runs = seen.setdefault(name, {}).setdefault(digest, [])
                if Path(run_dir).name not in runs:
                    runs.append(Path(run_dir).name)
    lines = []
    for name, digests in sorted(seen.items()):
        if len(digests) > 1:
            found = "; ".join("{} in {}".format(digest, ", ".join(runs)) for digest, runs in sorted(digests.items()))
            lines.append("Built from different locks: {}: {}; the rows of its environment ran on other package "
                         "versions.".format(name, found))
    return lines


def merged(run_dirs):
    """The merged tables of several results folders: per task with results, one row per framework (catalog order)
    and one column per folder, each cell the folder's merged_cell() or 'not run'."""
    runs, cells, ranks = [], {task: {} for task in tasks.TASKS}, {}
    for run_dir in run_dirs:
        records = load_records(run_dir)
        heading, name = machine_column(run_dir, records)
        runs.append(Column("run", "{} ({})".format(heading, name)))
        for r in (row(record) for record in records):
            cells[r["task"]].setdefault(label(r), {})[len(runs) - 1] = merged_cell(r)
            ranks[label(r)] = catalog_rank(r["framework"], r["variant"])
    tables = []
    for key, task in tasks.TASKS.items():
        if not cells[key]:
            continue
        names = sorted(cells[key], key=lambda name: ranks[name])  # catalog order, frameworks it does not know last
        rows = [Row([name] + [cells[key][name].get(i, "not run") for i in range(len(runs))]) for name in names]
        tables.append(Table(task.title, [COLUMNS[0]] + runs, rows, [], task))
    return tables


def comparison_samples(record):
    """(samples, what they are) that stand for a finished record's headline when two runs are compared: its headline
    in each round of a repeated run; in a run of one round, the timed epochs after the first (all, for one epoch) of a
    trained task, the timed passes' seconds per 1000 images of inference. (None, None) where there are none."""
    if record.get("status") != "ok":
        return None, None
    if record.get("rounds", 1) > 1 and record.get("round_headlines"):
        return record["round_headlines"], "rounds"
    timings = record.get("timings") or {}
    if tasks.get(record["task"]).trains:
        epochs = timings.get("epochs_s") or []
        return (epochs[1:] or epochs) or None, "epochs"
    passes, images = timings.get("passes_s"), timings.get("images_per_pass")
    return ([1000.0 * s / images for s in passes] if passes and images else None), "passes"


COMPARISON_NOTE = ("Each row: B's headline over A's, the ratio of the medians of the samples that stand for it (the "
                   "rounds of a repeated run, else the epochs after the first or the inference passes) with a 95% "
                   "interval (bootstrap from 5 samples a side, min–max ranges below that), and a verdict: faster or "
                   "slower where the interval excludes 1, within noise where it holds it (runner/report/intervals.py). "
                   + CHANCE_NOTE)


def compared(run_a, run_b):
    """Per task, the rows of run B against the same rows of run A: both headlines, the ratio B/A with its interval and
    the verdict (faster, slower, within noise); a row that is in one run only, or unfinished, says so."""
    heading = ("Framework", "A", "B", "B / A", "Verdict", "Samples (A, B)")
    found = {}
    for side, run_dir in enumerate((run_a, run_b)):
        for record in load_records(run_dir):
            r = row(record)
            found.setdefault(r["task"], {}).setdefault(label(r), [None, None])[side] = (record, r)
    tables = []
    for key, task in tasks.TASKS.items():
        if key not in found:
            continue
        rows = []
        for name, sides in sorted(found[key].items(), key=lambda item: catalog_rank(
                *[(pair[1]["framework"], pair[1]["variant"]) for pair in item[1] if pair][0])):
            cells = [name] + [merged_cell(pair[1]) if pair else "not run" for pair in sides]
            samples = [comparison_samples(pair[0]) if pair else (None, None) for pair in sides]
            if all(values for values, _ in samples):
                comparison = compare_samples(samples[0], samples[1])
                cells += ["{:.3f} [{:.3f}–{:.3f}]".format(comparison.ratio, comparison.low, comparison.high),
                          comparison.verdict, "{} {}, {} {}{}".format(
                              len(samples[0][0]), samples[0][1], len(samples[1][0]), samples[1][1],
                              "; widened {:.0%}".format(comparison.widened) if comparison.widened else "")]
            else:
                cells += ["", "not compared: not finished in both runs", ""]
            rows.append(Row(cells))
        columns = [Column("framework", heading[0])] + [Column("run", text, numeric=index in (1, 2, 3))
                                                       for index, text in enumerate(heading[1:], 1)]
        tables.append(Table(task.title, columns, rows, [COMPARISON_NOTE], task))
    return tables


def markdown_lines(table):
    """A table as Markdown lines: heading row, alignment row, one line per row ('|' in a text made '/')."""

    def line(texts):
        return "| " + " | ".join(str(text).replace("|", "/") for text in texts) + " |"

    return ([line(column.heading for column in table.columns),
             "|" + "".join("---:|" if column.numeric else "---|" for column in table.columns)]
            + [line(r.cells) for r in table.rows])
