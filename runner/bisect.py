"""`run_all.py bisect FRAMEWORK GOOD BAD -t TASK`: between which two releases a framework's speed on a task stepped.

The releases PyPI offers from GOOD to BAD (final releases only, the two ends as given) are tried in binary-search
order. Each step is one run of the run command (runner/pipeline.py): the two releases that bracket the step so far and
the one halfway between them, each in the environment `-f name@release` builds (its lock kept in envs/versions/), in
interleaved rounds (--repeat), compared as the report compares rows (runner/report/intervals.py, the rounds' medians
and the ratio's min–max interval). The bracket moves to the side whose difference is beyond the noise, or, where both or
neither are, to the larger one, until two adjacent releases hold it; where GOOD and BAD are within noise of each other,
the first step says so and the search ends. A release that cannot run (no environment, a notebook that fails) is
skipped with its reason and the halfway point is chosen again.

The search itself (`search`) takes the measuring as a function, so that it is tested without building anything.
"""

import dataclasses
import datetime
import json
import math
import os
import re
import shutil
from pathlib import Path
from typing import Optional

from common import tasks
from runner import catalog
from runner.report import intervals, table
from runner.run import environments, locks

DEFAULT_REPEAT = 3
DEFAULT_PROFILE = "quick"
FOLDER_PREFIX = "bisect"
SUMMARY_FILES = ("bisect.json", "bisect.md")
_FINAL = re.compile(r"^\d+(\.\d+)*$")  # a final release: no pre-, post- or development part


class BisectError(ValueError):
    """A bisect that cannot start or go on: bad releases, an end that cannot run; the message is one line."""


class Interrupted(Exception):
    """A step's run was stopped by a signal: the bisect stops too, with the run's exit status (128 + the signal)."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


@dataclasses.dataclass(frozen=True)
class Measured:
    """One release's figures in one step: its samples (the headline in each round), or why it has none."""

    release: str
    samples: Optional[tuple] = None
    kind: Optional[str] = None  # "rounds", or "epochs"/"passes" for a run of one round (table.comparison_samples)
    reason: Optional[str] = None

    def text(self, digits=1):
        """'21.2 [19.7–21.4] n=3', or why it has no figure."""
        if self.samples is None:
            return "no figure: {}".format(self.reason)
        return intervals.summary(self.samples).cell(digits=digits).replace(" (min–max)", "").replace(" (bootstrap)", "")


@dataclasses.dataclass
class Step:
    """One step of the search: the releases run together, what each measured, and the bracket it left."""

    number: int
    releases: list
    measured: dict
    comparisons: dict = dataclasses.field(default_factory=dict)  # "a→b": Comparison of b against a
    bracket: tuple = ()
    run_dir: Optional[str] = None


@dataclasses.dataclass
class Outcome:
    """The search's end: 'step' (two adjacent releases bracket a step beyond the noise), 'within noise' (GOOD and BAD
    cannot be told apart) or 'spread' (no adjacent pair is beyond the noise, though the ends are)."""

    kind: str
    good: str
    bad: str
    comparison: intervals.Comparison  # bad against good
    steps: list
    skipped: dict  # release: why it was skipped


def compare(a, b):
    """b's figures against a's: the report's comparison of two rows (table.compare_samples)."""
    return table.compare_samples((list(a.samples), a.kind), (list(b.samples), b.kind))


def halfway(candidates, low, high):
    """The release halfway between `low` and `high` among `candidates` (in release order), or None where they are
    adjacent."""
    inner = candidates[candidates.index(low) + 1:candidates.index(high)]
    return inner[(len(inner) - 1) // 2] if inner else None


def search(releases, measure, say=print):
    """Bisect `releases` (oldest first, at least two) with `measure(releases, step number)`, which returns {release:
    Measured}; the Outcome. BisectError where an end of the bracket has no figure."""
    candidates, skipped, steps = list(releases), {}, []
    low, high = candidates[0], candidates[-1]
    while True:
        middle = halfway(candidates, low, high)
        picked = [r for r in (low, middle, high) if r is not None]
        measured = measure(picked, len(steps) + 1)
        step = Step(len(steps) + 1, picked, measured)
        steps.append(step)
        for end in (low, high):
            if measured[end].samples is None:
                raise BisectError("{} cannot run, so nothing brackets the step: {}".format(end, measured[end].reason))
        whole = step.comparisons["{}→{}".format(low, high)] = compare(measured[low], measured[high])
        if len(steps) == 1 and whole.verdict == "within noise":
            say("[bisect] {} against {}: {}: every step between them is within noise, or steps cancel".format(
                high, low, whole.cell()))
            step.bracket = (low, high)
            return Outcome("within noise", low, high, whole, steps, skipped)
        if middle is None:  # adjacent from the start
            step.bracket = (low, high)
            return Outcome("step" if whole.verdict != "within noise" else "within noise", low, high, whole, steps,
                           skipped)
        if measured[middle].samples is None:
            skipped[middle] = measured[middle].reason
            candidates.remove(middle)
            say("[bisect]   {}: skipped, {}".format(middle, measured[middle].reason))
            step.bracket = (low, high)
            if halfway(candidates, low, high) is None:
                return Outcome("step" if whole.verdict != "within noise" else "spread", low, high, whole, steps,
                               skipped)
            continue
        left = step.comparisons["{}→{}".format(low, middle)] = compare(measured[low], measured[middle])
        right = step.comparisons["{}→{}".format(middle, high)] = compare(measured[middle], measured[high])
        say("[bisect]   {}: {}; against {}: {}; {} against it: {}".format(
            middle, measured[middle].text(), low, left.cell(), high, right.cell()))
        beyond_left, beyond_right = left.verdict != "within noise", right.verdict != "within noise"
        if beyond_left != beyond_right:
            go_left = beyond_left
        else:  # both beyond the noise (steps on both sides) or neither (a spread change): follow the larger
            go_left = abs(math.log(left.ratio)) >= abs(math.log(right.ratio))
            say("[bisect]   {} sides beyond the noise: following the larger difference".format(
                "both" if beyond_left else "neither of the"))
        low, high = (low, middle) if go_left else (middle, high)
        chosen = left if go_left else right
        step.bracket = (low, high)
        say("[bisect]   the step is between {} and {}".format(low, high))
        if halfway(candidates, low, high) is None:
            kind = "step" if chosen.verdict != "within noise" else "spread"
            return Outcome(kind, low, high, chosen, steps, skipped)


def most_steps(count):
    """The most steps a search of `count` releases takes when none is skipped: ceil(log2(count - 1)), 1 at least."""
    return max(1, math.ceil(math.log2(max(count - 1, 1))))


def releases_between(package, good, bad, offered):
    """The releases from `good` to `bad`, oldest first: the final releases among `offered` (what PyPI has) between them,
    and the two ends as given; BisectError (one line) where an end is not offered or `good` is not the older."""
    order = table.release_order
    for end in (good, bad):
        if end not in offered:
            near = sorted((r for r in offered if _FINAL.match(r)), key=order)[-8:]
            raise BisectError("{} {} is not on PyPI; its newest releases there: {}".format(package, end, ", ".join(near)))
    if order(good) >= order(bad):
        raise BisectError("GOOD must be the older release: {} is not older than {}".format(good, bad))
    inner = [r for r in offered if _FINAL.match(r) and order(good) < order(r) < order(bad)]
    return [good] + sorted(inner, key=order) + [bad]


def plan_lines(framework, task, releases, repeat, profile):
    """What the bisect will do, before it builds anything: the releases, which are built, how many steps and
    environments at most, and the disk they take."""
    built = {r for r in releases if catalog.framework(framework.key + catalog.RELEASE_MARK + r).environment.path.is_dir()}
    steps = most_steps(len(releases))
    to_build = max(0, min(len(releases), steps + 2) - len(built))
    size, measured_on = environment_size(framework)
    free = shutil.disk_usage(str(catalog.ENVS_DIR if catalog.ENVS_DIR.exists() else catalog.INSTALL)).free / 1e9
    lines = ["[bisect] {} ({} on PyPI) on {}, profile {}, {} round{} a release: {} releases from {} to {}".format(
                 framework.label, framework.package, task, profile, repeat, "s" if repeat > 1 else "", len(releases),
                 releases[0], releases[-1]),
             "[bisect]   " + ", ".join(r + (" (built)" if r in built else "") for r in releases),
             "[bisect] at most {} step{}, each one run of {} releases; up to {} environment{} to build".format(
                 steps, "s" if steps > 1 else "", "three" if len(releases) > 2 else "the two", to_build,
                 "" if to_build == 1 else "s")
             + (", about {:.1f} GB each ({}), {:.1f} GB in all; {:.0f} GB free".format(
                 size, measured_on, size * to_build, free) if size else "; {:.0f} GB free".format(free))]
    return lines


def environment_size(framework):
    """(GB, what it was measured on): the disk one release environment of `framework` takes, as its largest built
    release environment (or its base environment) takes it; (None, None) where none is built."""
    base = framework.environment or catalog.ENVIRONMENTS[framework.release_on]
    built = [env.path for env in catalog.release_environments() if env.base == base.name] + [base.path]
    sizes = [(environments.disk_size(path), path.name) for path in built if path.is_dir()]
    if not sizes:
        return None, None
    size, name = max(sizes)
    return size / 1e9, "as .envs/{}".format(name)


def measured_in(run_dir, framework, task, releases):
    """{release: Measured} of a finished run folder: each release's default row of `task` (Keras at a release is its
    jax variant alone), or why it has no figure."""
    records, _ = table.read_records(run_dir)
    found = {}
    for record in records:
        release = record.get("release")
        if record.get("task") != task or release not in releases or not table.is_default(table.row(record)):
            continue
        samples, kind = table.comparison_samples(record)
        if samples:
            found[release] = Measured(release, tuple(samples), kind)
        else:
            found[release] = Measured(release, reason="{}: {}".format(record.get("status"), record.get("error")))
    return {r: found.get(r) or Measured(r, reason="no record in {}".format(run_dir)) for r in releases}


def lock_differences(framework, good, bad):
    """Lines naming the packages whose versions differ between the locks of `framework` at `good` and at `bad`."""
    paths = [locks.lock_path(catalog.framework(framework.key + catalog.RELEASE_MARK + r).environment.requirements)
             for r in (good, bad)]
    missing = [str(locks.shown(p)) for p in paths if not p.exists()]
    if missing:
        return ["(no lock to compare: {})".format(", ".join(missing))]
    old, new = ({locks.normalized(name): version for name, version in locks.packages(path).items()} for path in paths)
    lines = ["{} {} → {}".format(name, old.get(name, "(none)"), new.get(name, "(none)"))
             for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
    return lines or ["(the two locks pin the same versions)"]


def outcome_lines(framework, task, outcome):
    """The bisect's last lines: the step with its ratio and interval, and what differs between the two releases."""
    label = tasks.get(task).headline[1]
    if outcome.kind == "within noise":
        head = "[bisect] No step beyond the noise: {} {} against {} on {} ({}): {}".format(
            framework.label, outcome.bad, outcome.good, task, label, outcome.comparison.cell())
    elif outcome.kind == "spread":
        head = ("[bisect] No single step beyond the noise: the change is spread over the releases up to {}; the "
                "last pair, {} against {}: {}").format(outcome.bad, outcome.bad, outcome.good, outcome.comparison.cell())
    else:
        head = "[bisect] The step: {} {} against {} on {} ({}): {}".format(
            framework.label, outcome.bad, outcome.good, task, label, outcome.comparison.cell())
    lines = [head]
    for release, why in outcome.skipped.items():
        lines.append("[bisect]   skipped {}: {}".format(release, why))
    if outcome.kind != "within noise" or len(outcome.steps[0].releases) == 2:
        lines.append("[bisect] Packages that differ between {}@{} and {}@{} (their locks in envs/versions/):".format(
            framework.key, outcome.good, framework.key, outcome.bad))
        lines += ["  " + line for line in lock_differences(framework, outcome.good, outcome.bad)]
    return lines


def summary(framework, task, releases, repeat, profile, outcome, lines):
    """The bisect's record, for bisect.json: what was asked, each step's figures and comparisons, and the end."""
    def comparison(c):
        return {"ratio": c.ratio, "low": c.low, "high": c.high, "verdict": c.verdict, "method": c.method}

    return {
        "framework": framework.key, "package": framework.package, "task": task, "profile": profile, "repeat": repeat,
        "releases": releases,
        "steps": [{"number": s.number, "releases": s.releases, "run_dir": s.run_dir, "bracket": list(s.bracket),
                   "measured": {r: {"samples": list(m.samples) if m.samples else None, "kind": m.kind,
                                    "reason": m.reason} for r, m in s.measured.items()},
                   "comparisons": {pair: comparison(c) for pair, c in s.comparisons.items()}} for s in outcome.steps],
        "outcome": {"kind": outcome.kind, "good": outcome.good, "bad": outcome.bad,
                    "comparison": comparison(outcome.comparison), "skipped": outcome.skipped},
        "lines": lines,
    }


def bisect(name, good, bad, task, run, repeat=DEFAULT_REPEAT, profile=DEFAULT_PROFILE, results=None, offered=None,
           extra_args=(), say=print):
    """Bisect framework `name` from release `good` to `bad` on `task`: `run(argv)` runs the run command's arguments
    and returns its exit status; `offered`: the releases PyPI has (asked where None). Writes bisect.json and bisect.md
    in a folder of its own under `results`; returns 0 when the search ends, 1 where it cannot, the run's status
    (128 + the signal) where a signal stopped it; BisectError on bad input."""
    try:
        framework = catalog.framework(name)
        for end in (good, bad):
            catalog.framework(name + catalog.RELEASE_MARK + end)
    except catalog.SelectionError as error:
        raise BisectError(str(error)) from None
    if framework.release:
        raise BisectError("name the framework without a release: {}".format(name.split(catalog.RELEASE_MARK)[0]))
    if task not in tasks.TASKS or task in framework.lacks:
        raise BisectError("{} has no {} task; its tasks: {}".format(framework.label, task, ", ".join(
            t for t in tasks.TASKS if t not in framework.lacks)))
    if repeat < 1:
        raise BisectError("--repeat {}: must be 1 or more".format(repeat))
    if offered is None:
        try:
            offered = locks.releases_on_index(framework.package)
        except locks.LockError as error:
            raise BisectError(str(error)) from None
    releases = releases_between(framework.package, good, bad, offered)
    for line in plan_lines(framework, task, releases, repeat, profile):
        say(line)
    own = [(name, value) for name, value in framework.own_defaults if name not in os.environ]
    if own:  # each release as it comes, not with this project's settings for it (the user's own variables stand)
        say("[bisect] each release with its own defaults: {} (set {} to choose otherwise)".format(
            " ".join("{}={}".format(name, value) for name, value in own), " or ".join(name for name, _ in own)))
    folder = Path(results or catalog.REPO / "results") / "{}-{}-{}-{}-{}".format(
        FOLDER_PREFIX, datetime.datetime.now().strftime("%Y%m%d-%H%M%S"), framework.key, good, bad)
    folder.mkdir(parents=True)
    step_dirs = {}

    def measure(picked, number):
        step_folder = folder / "step-{}".format(number)
        say("[bisect] step {}: {} ({} notebook run{})".format(number, ", ".join(picked), len(picked) * repeat,
                                                            "" if len(picked) * repeat == 1 else "s"))
        argv = ["run", "-f", ",".join(framework.key + catalog.RELEASE_MARK + r for r in picked), "-t", task, "-p",
                profile, "--repeat", str(repeat), "--no-equivalence", "-q", "--results", str(step_folder)]
        status = run(argv + list(extra_args))
        if status >= 128:  # stopped by a signal: its figures are partial, so no verdict is read from them
            raise Interrupted(status)
        runs = sorted(p for p in step_folder.iterdir() if p.is_dir()) if step_folder.is_dir() else []
        if not runs:
            return {r: Measured(r, reason="the run of step {} left no run folder".format(number)) for r in picked}
        step_dirs[number] = str(runs[-1])
        measured = measured_in(runs[-1], framework, task, picked)
        for release in (picked[0], picked[-1]):
            say("[bisect]   {}: {}".format(release, measured[release].text()))
        return measured

    try:
        os.environ.update(own)  # the steps' kernels inherit the runner's environment
        outcome = search(releases, measure, say)
    except Interrupted as stop:
        say("[bisect] interrupted in step {}: no verdict from a partial step; the run folders stay in {}".format(
            len(step_dirs) or 1, folder))
        return stop.status
    except BisectError as error:
        say("[bisect] stopped: {}".format(error))
        (folder / "bisect.md").write_text("# bisect {} {} {} -t {}\n\nStopped: {}\n".format(name, good, bad, task,
                                                                                          error))
        return 1
    finally:
        for variable, _ in own:
            os.environ.pop(variable, None)
    for step in outcome.steps:
        step.run_dir = step_dirs.get(step.number)
    lines = outcome_lines(framework, task, outcome)
    for line in lines:
        say(line)
    record = summary(framework, task, releases, repeat, profile, outcome, lines)
    record["own_defaults"] = dict(own)
    (folder / "bisect.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    (folder / "bisect.md").write_text(markdown(record))
    say("[bisect] bisect.json and bisect.md in {}".format(folder))
    return 0


def markdown(record):
    """bisect.md: the command, a line per step with each release's figure, and the end as the command printed it."""
    lines = ["# bisect {framework} {first} {last} -t {task} -p {profile} --repeat {repeat}".format(
        first=record["releases"][0], last=record["releases"][-1], **record), "",
        "Releases: " + ", ".join(record["releases"]), ""]
    for step in record["steps"]:
        lines.append("## Step {}: {}".format(step["number"], ", ".join(step["releases"])))
        lines.append("")
        for release, m in step["measured"].items():
            figure = Measured(release, tuple(m["samples"]) if m["samples"] else None, m["kind"], m["reason"]).text()
            lines.append("- {}: {}".format(release, figure))
        for pair, c in step["comparisons"].items():
            lines.append("- {}: {:.2f}× [{:.2f}–{:.2f}] {}".format(pair, c["ratio"], c["low"], c["high"], c["verdict"]))
        lines += ["- bracket after it: {} to {}".format(*step["bracket"]) if step["bracket"] else "",
                  "- run folder: {}".format(step["run_dir"]), ""]
    lines += ["## Outcome", "", "```"] + record["lines"] + ["```", ""]
    return "\n".join(lines)
