"""The command line of run_all.py: run notebooks, set up environments, run the tests, rebuild reports.

Arguments are checked before anything is built, so a typo costs a one-line error (exit 2), not a
setup. Everything except argument checking runs inside the runner's own environment (.envs/runner),
which this module creates and then re-executes itself in.
"""

import argparse
import ast
import dataclasses
import datetime
import hashlib
import json
import os
import sys
import textwrap
import time
from pathlib import Path

from common import hyperparams, results, tasks, variants
from runner import catalog, compatibility, environments

COMMANDS = ("run", "setup", "test", "report", "rosetta", "list")
DATA_SOURCES = ("auto", "real", "synthetic")  # common.datasets.SOURCES, which needs numpy: this runs before it exists
DEFAULT_TIMEOUT = {"smoke": 600, "quick": 1800, "full": 4 * 3600}
USAGE_ERROR = 2
INTERRUPTED = 130  # the shell's status for a process stopped by Ctrl-C


class UsageError(ValueError):
    """Bad input on the command line; reported in one line with exit status 2."""


def _names(text):
    return [name.strip() for name in text.split(",") if name.strip()]


def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _override(text):
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError("expected KEY=VALUE, got {!r}".format(text))
    return key.strip(), _literal(value)


def _sweep(text):
    key, sep, values = text.partition("=")
    if not sep or not key.strip() or not _names(values):
        raise argparse.ArgumentTypeError("expected KEY=VALUE,VALUE,..., got {!r}".format(text))
    return key.strip(), [_literal(value) for value in _names(values)]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors become UsageError (one line, exit 2) instead of usage text."""

    def error(self, message):
        raise UsageError(message)


def build_parser():
    """The argument parser of run_all.py."""
    parser = _Parser(
        prog="run_all.py",
        description="Run the DL Rosetta Stone notebooks on their framework kernels and build the results table.",
        epilog="Commands: run (default), setup, test, report, list. `run_all.py COMMAND -h` explains each.",
    )
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser("run", help="set up what is missing, run the notebooks, write table and plot")
    run.add_argument("-f", "--frameworks", type=_names, help="comma-separated, default all: " +
                     ", ".join(catalog.framework_keys()))
    run.add_argument("-t", "--tasks", type=_names, help="comma-separated, default all: " +
                     ", ".join(tasks.TASKS))
    run.add_argument("-p", "--profile", help="one of: {} (default quick)".format(
        "; ".join("{} = {}".format(k, v) for k, v in hyperparams.PROFILE_NOTES.items())))
    run.add_argument("--data", help="auto (default), real or synthetic")
    run.add_argument("--device", choices=("auto", "cpu", "cuda"), help="auto (default: the GPU where the "
                     "framework can use one), cpu or cuda")
    run.add_argument("--threads", type=int, help="CPU cores every framework may use (default: all of this "
                     "machine's, {}; 0 leaves it to each framework)".format(usable_cores()))
    run.add_argument("--seed", type=int, help="default 0")
    run.add_argument("--set", dest="overrides", type=_override, action="append", default=[], metavar="KEY=VALUE",
                     help="override a hyperparameter of the profile, e.g. --set epochs=2 (repeatable)")
    run.add_argument("--precision", dest="precisions", type=_names, help="comma-separated, each a row: " + "; ".join(
        "{} = {}".format(k, v) for k, v in variants.PRECISIONS.items()) + " (default auto)")
    run.add_argument("--compile", dest="compile_modes", type=_names, help="comma-separated, each a row: " + "; ".join(
        "{} = {}".format(k, v) for k, v in variants.COMPILE_MODES.items()) + " (default default)")
    run.add_argument("--sweep", type=_sweep, metavar="KEY=V1,V2,...", help="run each notebook whose task has the "
                     "hyperparameter once per value, and plot throughput against it, e.g. --sweep batch_size=1,8,32")
    run.add_argument("--devices", type=int, metavar="N", help="data-parallel training on 1 and on N devices (GPUs, or "
                     "processes sharing the CPU), for the scaling efficiency: --sweep devices=1,N")
    run.add_argument("--timeout", type=float, help="seconds per notebook (default: smoke 600, quick 1800, full 14400)")
    run.add_argument("--results", type=Path, default=catalog.REPO / "results", help="folder for run folders")
    run.add_argument("--no-setup", action="store_true", help="fail instead of building missing environments")
    run.add_argument("--gpu", action="store_true", help="GPU builds even where nvidia-smi finds no GPU (the default "
                     "where it finds one)")
    run.add_argument("--cpu", action="store_true", help="CPU builds even where there is a GPU")
    run.add_argument("--wheels", type=Path, help="install from this folder of wheels, without a package index "
                     "(also $ROSETTA_WHEELS)")
    run.add_argument("-q", "--quiet", action="store_true", help="hide the notebooks' own output")
    run.add_argument("--resume", type=Path, metavar="RESULTS_DIR", help="finish an interrupted or failed run: run what "
                     "is missing, failed or interrupted in that folder, with the parameters it was started with")
    run.add_argument("--no-equivalence", action="store_true", help="skip the checks that every notebook computes "
                     "PyTorch's results from shared weights and, with --devices N, that a data-parallel step is the "
                     "single-device step (a few smoke-sized runs per framework)")

    setup = sub.add_parser("setup", help="build the environments and kernels (all, or those named); GPU builds where "
                           "nvidia-smi finds a GPU they can use")
    setup.add_argument("envs", nargs="*", help="environment names, default all: " + ", ".join(catalog.ENVIRONMENTS))
    setup.add_argument("--gpu", action="store_true", help="GPU builds even where nvidia-smi finds no GPU")
    setup.add_argument("--cpu", action="store_true", help="CPU builds, replacing GPU builds and adoptions")
    setup.add_argument("--python", type=Path, metavar="PATH", help="adopt this existing interpreter as the (one) "
                       "environment named, instead of building a virtual environment")
    setup.add_argument("--install-missing", action="store_true", help="with --python: pip-install the pinned packages "
                       "that interpreter lacks (ipykernel, keras, ...)")
    setup.add_argument("--wheels", type=Path, help="install from this folder of wheels, without a package index "
                       "(also $ROSETTA_WHEELS)")

    test = sub.add_parser("test", help="build the environments, then run ruff and pytest (arguments go to pytest)")
    test.add_argument("pytest_args", nargs=argparse.REMAINDER)

    report = sub.add_parser("report", help="rebuild a run's table, plot and HTML report; with several folders, "
                            "merge them into one table (one column per machine and profile)")
    report.add_argument("run_dirs", type=Path, nargs="+", metavar="RESULTS_DIR")
    report.add_argument("--out", type=Path, help="where the merged table goes (default results/merged-<time>)")

    rosetta = sub.add_parser("rosetta", help="regenerate the side-by-side pages docs/rosetta/<task>.html from "
                             "notebooks/, and docs/scaling.png")
    rosetta.add_argument("--out", type=Path, help="folder to write them to (default docs/rosetta)")

    sub.add_parser("list", help="frameworks, tasks and environments, and which environments are built")
    return parser


def parse(argv):
    """Parse and check arguments; `run` is the default command. Raises UsageError on bad input."""
    argv = list(argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help")):
        argv.insert(0, "run")
    if argv[0] == "test":  # everything after `test` belongs to pytest, options included
        args = build_parser().parse_args(["test"])
        args.pytest_args = argv[1:]
        return args
    args = build_parser().parse_args(argv)
    if args.command == "run":
        if args.resume is not None:
            resume_parameters(args)
        for name, default in RUN_DEFAULTS.items():
            if getattr(args, name) is None:
                setattr(args, name, default)
        try:
            hyperparams.check_profile(args.profile)
            args.jobs = catalog.select(args.frameworks, args.tasks)
        except ValueError as error:
            raise UsageError(str(error)) from None
        check_variants(args)
        if args.data not in DATA_SOURCES:
            raise UsageError("unknown data source {!r}; use one of: {}".format(args.data, ", ".join(DATA_SOURCES)))
        if args.threads is None:
            args.threads = usable_cores()
        args.overrides = dict(args.overrides)
        selected_tasks = sorted({job.task for job in args.jobs})
        for key in args.overrides:
            if not any(key in hyperparams.for_task(task, args.profile) for task in selected_tasks):
                raise UsageError("--set {}: no selected task has that hyperparameter".format(key))
        for task in selected_tasks:  # every value checked against its rule before anything is built or run
            try:
                hyperparams.for_task(task, args.profile, task_overrides(args.overrides, task, args.profile))
            except ValueError as error:
                raise UsageError(str(error)) from None
        if args.devices is not None:
            devices_as_sweep(args)
        if args.sweep:
            check_sweep(args, selected_tasks)
        args.jobs = catalog.expand(args.jobs, args.precisions, args.compile_modes, args.sweep)
        if args.resume is not None:
            check_resumable(args)  # the jobs as run.json stored them: with their variants and swept values
        if args.timeout is None:
            args.timeout = DEFAULT_TIMEOUT[args.profile]
        if args.timeout <= 0 or args.threads < 0:
            raise UsageError("--timeout must be positive and --threads not negative")
    if args.command in ("run", "setup") and args.gpu and args.cpu:
        raise UsageError("--gpu and --cpu exclude each other")
    if args.command in ("run", "setup") and args.wheels is not None and not args.wheels.is_dir():
        raise UsageError("--wheels: no such folder: {}".format(args.wheels))
    if args.command == "setup":
        unknown = [name for name in args.envs if name not in catalog.ENVIRONMENTS]
        if unknown:
            raise UsageError("unknown environment {}; known environments: {}".format(
                ", ".join(unknown), ", ".join(catalog.ENVIRONMENTS)))
        if args.python is not None:
            if len(args.envs) != 1:
                raise UsageError("--python adopts an interpreter as one environment: name exactly one")
            if not args.python.exists():
                raise UsageError("--python: no such interpreter: {}".format(args.python))
            if args.gpu or args.cpu:
                raise UsageError("--python adopts an interpreter as it is; --gpu and --cpu choose what to build")
        elif args.install_missing:
            raise UsageError("--install-missing goes with --python")
    if args.command == "report":
        for run_dir in args.run_dirs:
            if not run_dir.is_dir():
                raise UsageError("no such results folder: {}".format(run_dir))
    return args


RUN_DEFAULTS = {"profile": "quick", "data": "auto", "device": "auto", "seed": 0, "precisions": ["auto"],
                "compile_modes": ["default"]}
RUN_FILE = "run.json"  # in a results folder: what the run was started with, for --resume
# The options a run is started with: stored in RUN_FILE, taken from there by --resume, refused beside it.
RUN_PARAMETERS = ("frameworks", "tasks", "profile", "data", "device", "threads", "seed", "overrides", "timeout",
                  "no_equivalence", "precisions", "compile_modes", "sweep")


def check_variants(args):
    """Refuse (UsageError) a precision or compile mode that common/variants.py does not know, or one named twice."""
    for option, names, known in (("--precision", args.precisions, variants.PRECISIONS),
                                 ("--compile", args.compile_modes, variants.COMPILE_MODES)):
        unknown = [name for name in names if name not in known]
        if unknown:
            raise UsageError("{} {}: use one or more of {}".format(option, ", ".join(unknown), ", ".join(known)))
        if len(set(names)) < len(names):
            raise UsageError("{}: each value once, got {}".format(option, ",".join(names)))


def devices_as_sweep(args):
    """--devices N: the sweep devices=1,N (devices=1 alone for N=1); refused (UsageError) beside another sweep, or
    below 1."""
    if args.resume is not None:
        raise UsageError("--resume runs with the parameters stored in its folder; leave out --devices")
    if args.devices < 1:
        raise UsageError("--devices {}: must be 1 or more".format(args.devices))
    if args.sweep:
        raise UsageError("--devices and --sweep exclude each other (--devices N is --sweep devices=1,N)")
    args.sweep = ("devices", (1, args.devices) if args.devices > 1 else (1,))


def check_sweep(args, selected_tasks):
    """Refuse (UsageError) a sweep of a hyperparameter no selected task has, one also set with --set, a value its
    rule refuses, or a value given twice; the sweep becomes a (key, values) tuple."""
    key, values = args.sweep
    swept = [task for task in selected_tasks if key in hyperparams.for_task(task, args.profile)]
    if not swept:
        raise UsageError("--sweep {}: no selected task has that hyperparameter".format(key))
    if key in args.overrides:
        raise UsageError("--sweep {} and --set {} exclude each other".format(key, key))
    if len({repr(value) for value in values}) < len(values):
        raise UsageError("--sweep {}: each value once".format(key))
    for task in swept:
        for value in values:
            try:
                hyperparams.for_task(task, args.profile, dict(task_overrides(args.overrides, task, args.profile),
                                                              **{key: value}))
            except ValueError as error:
                raise UsageError("--sweep: {}".format(error)) from None
    args.sweep = (key, tuple(values))


def notebook_digest(job):
    """sha256 of a job's stored notebook, so that --resume can tell a notebook changed since the run began."""
    return hashlib.sha256(job.notebook.read_bytes()).hexdigest()


def write_run_file(args, run_dir):
    """Store the run's parameters and its notebooks' digests in run_dir/run.json."""
    stored = {name: getattr(args, name) for name in RUN_PARAMETERS}
    stored["frameworks"] = stored["frameworks"] or catalog.framework_keys()
    stored["tasks"] = stored["tasks"] or list(tasks.TASKS)
    stored["notebooks"] = {job.stem: notebook_digest(job) for job in args.jobs}
    (run_dir / RUN_FILE).write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")


def resume_parameters(args):
    """Take a resumed run's parameters from its folder; refuse options that would change them (UsageError)."""
    path = args.resume / RUN_FILE
    if not args.resume.is_dir():
        raise UsageError("--resume: no such results folder: {}".format(args.resume))
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise UsageError("--resume: {} cannot be read ({}): only runs that stored it can be resumed".format(
            path, results.first_line(str(error)))) from None
    given = [name for name in RUN_PARAMETERS if getattr(args, name) not in (None, [], False)]
    if given:
        raise UsageError("--resume runs with the parameters stored in {}; leave out {}".format(
            path, ", ".join("--" + name.replace("_", "-") for name in given)))
    for name in RUN_PARAMETERS:
        setattr(args, name, stored.get(name))
    args.overrides = list((args.overrides or {}).items())
    args.sweep = tuple(args.sweep) if args.sweep else None  # stored as a list
    args.stored_notebooks = stored.get("notebooks") or {}


def check_resumable(args):
    """Refuse (UsageError) to resume a run whose notebooks changed since it began."""
    for job in args.jobs:
        if args.stored_notebooks.get(job.stem) != notebook_digest(job):
            raise UsageError("--resume: notebook {} changed since {} was started; start a new run rather than "
                             "mix them".format(job.notebook.name, args.resume))


def task_overrides(overrides, task, profile):
    """The --set values that apply to `task` (those naming one of its hyperparameters)."""
    known = hyperparams.for_task(task, profile)
    return {key: value for key, value in overrides.items() if key in known}


def usable_cores():
    """CPU cores this process may use (same rule as common.environment.usable_cores, without numpy)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def in_runner_env():
    """True when this process runs on the runner environment's interpreter (its venv, or the adopted one)."""
    runner = catalog.ENVIRONMENTS["runner"]
    if environments.is_adopted(runner):
        return os.path.realpath(sys.executable) == os.path.realpath(str(environments.interpreter(runner)))
    return Path(sys.prefix).resolve() == runner.path.resolve()


def main(argv=None):
    """Entry point of run_all.py; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
    except UsageError as error:
        print("run_all.py: error: {}".format(error), file=sys.stderr)
        return USAGE_ERROR
    if args.command in ("list", "setup"):  # the standard library is enough: no runner environment needed
        try:
            return list_catalog() if args.command == "list" else setup(args)
        except environments.SetupError as error:
            print("run_all.py: error: {}".format(error), file=sys.stderr)
            return 1
    if not in_runner_env():
        runner = catalog.ENVIRONMENTS["runner"]
        try:
            environments.ensure(runner, wheels=getattr(args, "wheels", None))
        except environments.SetupError as error:
            print("run_all.py: error: {}".format(error), file=sys.stderr)
            return 1
        python = str(environments.interpreter(runner))
        sys.stdout.flush()
        os.execv(python, [python, str(catalog.REPO / "run_all.py")] + list(argv))
    environments.use_project_kernels()
    return {"run": run, "test": test, "report": report, "rosetta": rosetta}[args.command](args)


def build_choice(args):
    """'gpu' or 'cpu' where the command line forces a kind of build, else None (decided from the machine)."""
    return "gpu" if getattr(args, "gpu", False) else ("cpu" if getattr(args, "cpu", False) else None)


def list_catalog():
    """Print the GPU found, frameworks with their variants and environments, tasks, and every environment's state."""
    machine = compatibility.detect()
    print("GPU: " + machine.describe())
    print("Frameworks:")
    for framework in catalog.FRAMEWORKS:
        for variant in framework.variants:
            print("  {:12s} {:20s} env {}".format(framework.key, results.label(framework.label, variant.name),
                                                  variant.env))
    for absent in catalog.ABSENT:
        print("  {:12s} {:20s} {}".format(absent.key, absent.label, textwrap.shorten(absent.reason, 90)))
    print("Tasks: " + ", ".join(tasks.TASKS))
    print("Profiles: " + ", ".join(hyperparams.PROFILES))
    print("Environments (.envs/; `setup ENV --python PATH` adopts an existing interpreter instead):")
    for env in catalog.ENVIRONMENTS.values():
        print("  {:10s} {:8s} {}".format(env.name, "ready" if environments.is_ready(env) else "missing",
                                         environment_state(env, machine)))
    return 0


def environment_state(env, machine):
    """What `env` is and whether its framework can use this machine's GPU, in one line for `list`."""
    variant = compatibility.variant_text(env)
    if not machine.gpus or env.framework_module is None:  # nothing to compute on, or nothing that computes
        return variant
    planned = compatibility.plan(env, machine)
    if planned.unavailable:
        return "; ".join(filter(None, [variant, planned.unavailable]))
    if not environments.is_ready(env, planned.requirements):
        return "; ".join(filter(None, [variant, "for this GPU, setup builds envs/{}".format(planned.requirements.name)]))
    answer = (environments.read_stamp(env) or {}).get("probe")
    if not answer:
        return variant + "; GPU: not checked (`setup {}` checks it)".format(env.name)
    if answer.get("gpu_ok"):
        return variant + "; GPU: yes, {} computes on {}".format(answer.get("framework"), ", ".join(answer["gpus"]))
    return variant + "; GPU: no: {}".format(answer.get("error"))


def setup(args):
    """Build the named environments (all by default), or adopt an interpreter as one; exit 1 if any failed."""
    machine = compatibility.detect()
    print("[gpu] " + machine.describe())
    if args.python is not None:
        env = catalog.ENVIRONMENTS[args.envs[0]]
        planned = compatibility.plan(env, machine, build=None) if not environments.is_adopted(env) else None
        requirements = (planned.requirements if planned and planned.requirements else None) or (
            env.gpu_requirements[0] if machine.gpus and env.gpu_requirements else env.requirements)
        stamp = environments.adopt(env, args.python, requirements, install_missing=args.install_missing,
                                   wheels=args.wheels)
        if machine.gpus and env.framework_module:
            report_probe(env, stamp["probe"])
        return 0
    failed, _ = build_environments(args.envs, machine, build=build_choice(args), wheels=args.wheels)
    return 1 if failed else 0


def report_probe(env, answer):
    """Print what the probe found: the framework computes on the GPU, or its own first error line."""
    if answer.get("gpu_ok"):
        print("[setup] {}: GPU check: {} {} computes on {}".format(env.name, answer.get("framework"),
                                                                   answer.get("version"), ", ".join(answer["gpus"])))
    else:
        print("[setup] {}: GPU check FAILED: {}".format(env.name, answer.get("error")))


def build_environments(names, machine, build=None, device="auto", wheels=None):
    """Build the named environments (all when empty) for this machine; return ({name: error}, {name: unavailable}).

    An environment with no build that fits the GPU is not built (its rows will say why); a GPU build is
    probed after it is built, and the probe's answer kept in its stamp.
    """
    failed, unavailable = {}, {}
    for name in names or list(catalog.ENVIRONMENTS):
        env = catalog.ENVIRONMENTS[name]
        planned = compatibility.plan(env, machine, device=device, build=build)
        if planned.unavailable:
            print("[setup] {}: not built: {}; with --device cpu its notebooks run on the CPU".format(
                name, planned.unavailable))
            unavailable[name] = planned.unavailable
            continue
        if planned.note:
            print("[setup] {}: using envs/{}, since {}".format(name, planned.requirements.name, planned.note))
        try:
            environments.ensure(env, planned.requirements, wheels=wheels)
        except environments.SetupError as error:
            print("[setup] {}: FAILED: {}".format(name, error))
            failed[name] = error
            continue
        if planned.gpu and machine.gpus and env.framework_module:
            answer = environments.probe(env)
            stamp = environments.read_stamp(env)
            stamp["probe"] = answer
            environments.write_stamp(env, stamp)
            report_probe(env, answer)
            if not answer.get("gpu_ok"):
                unavailable[name] = compatibility.UNAVAILABLE_ON_GPU + (answer.get("error") or "the GPU check failed")
    return failed, unavailable


# pytest-xdist's workers for `run_all.py test`: most tests wait on a notebook's kernel, which keeps about one core
# busy, so two workers fill the 2-core CI machine (tests/conftest.py keeps tests that share runs on one worker)
TEST_WORKERS = ["-n", "2"]


def test(args):
    """Build every environment the tests use, then run pytest (which also runs ruff) in the runner environment, on
    TEST_WORKERS unless the arguments choose (-n, or -p no:xdist).

    Tests keep whatever builds are there (GPU builds run their smoke tests on the GPU) and build CPU ones
    where none is. An environment needing what this machine lacks (a Python, a tool, a package source:
    MachineLacks) does not stop the tests: its smoke tests are skipped with that reason. Any other build
    failure does.
    """
    failed, _ = build_environments([], compatibility.detect(), device="cpu")
    os.environ[environments.UNAVAILABLE_VARIABLE] = json.dumps({name: str(error) for name, error in failed.items()})
    if any(not isinstance(error, environments.MachineLacks) for error in failed.values()):
        print("run_all.py: error: an environment could not be built; the tests need all of them", file=sys.stderr)
        return 1
    try:
        print("[setup] browser: {}".format(environments.ensure_browser()))
    except environments.SetupError as error:
        print("[setup] browser: {} (the browser test will fail)".format(error))
    os.chdir(str(catalog.REPO))
    sys.stdout.flush()
    pytest_args = [a for a in args.pytest_args if a != "--"]
    chosen = any(a.startswith(("-n", "--numprocesses", "no:xdist")) for a in pytest_args)  # -n N, -p no:xdist
    pytest_args = pytest_args if chosen else TEST_WORKERS + pytest_args
    os.execv(sys.executable, [sys.executable, "-m", "pytest"] + pytest_args)


def report(args):
    """Rebuild one results folder's report, or merge several folders' results into one table; exit 1 if a record
    could not be read (it is named on stderr and in the table, the rest is reported)."""
    from runner import html_report, table
    from runner import report as reporting

    if len(args.run_dirs) == 1:
        print(reporting.write_report(args.run_dirs[0]))
        print("report: {}".format(args.run_dirs[0] / "report.html"))
    else:
        out = args.out or catalog.REPO / "results" / "merged-{}".format(
            datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
        out.mkdir(parents=True, exist_ok=True)
        text = html_report.merged_markdown(args.run_dirs)
        (out / "merged.md").write_text(text)
        (out / "merged.html").write_text(html_report.merged_page(args.run_dirs))
        print(text)
        print("merged table: {} and {}".format(out / "merged.md", out / "merged.html"))
    return warn_unreadable(problem for run_dir in args.run_dirs for problem in table.read_records(run_dir)[1])


def warn_unreadable(problems):
    """Print each unreadable record on stderr; return 1 if there was one, else 0."""
    problems = list(problems)
    for problem in problems:
        print("run_all.py: warning: {}".format(problem), file=sys.stderr)
    return 1 if problems else 0


def rosetta(args):
    """Write the Rosetta pages (one per task) from the stored notebooks, and the predicted-scaling plot of docs/."""
    from runner import report as reporting
    from runner import rosetta as rosetta_view

    for path in rosetta_view.write_pages(args.out or rosetta_view.DOCS_DIR):
        print("wrote", path)
    if args.out is None:
        print("wrote", reporting.plot_scaling(reporting.SCALING_PLOT))
    return 0


def check_equivalence(jobs, run_dir):
    """Compare the selected notebooks with PyTorch's from shared weights, into run_dir/equivalence/."""
    from runner import equivalence

    defaults = {(job.framework.key, job.variant.name, job.task): dataclasses.replace(
        job, precision="auto", compile_mode="default", sweep=()) for job in jobs}  # checked as the notebooks stand
    checked = [job for job in defaults.values()
               if job.task in equivalence.TASKS and job.framework.key != equivalence.REFERENCE]
    if not checked or equivalence.REFERENCE not in catalog.framework_keys():
        return
    reference_env = catalog.ENVIRONMENTS[catalog.select([equivalence.REFERENCE])[0].variant.env]
    if not environments.is_ready(reference_env):
        print("[equivalence] skipped: the reference, PyTorch, has no environment here")
        return
    started = time.time()
    equivalence.check(checked, run_dir / equivalence.EQUIVALENCE_DIR)
    print("[equivalence] done in {}".format(_clock(time.time() - started)))


def check_data_parallel(jobs, run_dir, overrides):
    """Where the run trains on several devices (--devices N, or devices set above 1), check each framework's
    data-parallel step against its single-device step, into run_dir/equivalence/."""
    from runner import data_parallel, equivalence

    def devices(job):
        return dict([job.sweep] if job.sweep else []).get("devices", overrides.get("devices", 1))

    parallel = [job for job in jobs if job.task == data_parallel.TASK and devices(job) > 1]
    if not parallel:
        return
    started = time.time()
    data_parallel.check([dataclasses.replace(job, precision="auto", compile_mode="default", sweep=())
                         for job in parallel], run_dir / equivalence.EQUIVALENCE_DIR)
    print("[data parallel] done in {}".format(_clock(time.time() - started)))


def missing_packages_reason(job):
    """Why a job cannot run on its adopted interpreter (it lacks a package its variant needs), or None."""
    missing = environments.missing_packages(job.environment, job.variant.packages)
    if not missing:
        return None
    python = environments.interpreter(job.environment)
    pinned = environments.pins(job.environment.requirements)
    return "the adopted interpreter {} lacks {}; `{} -m pip install {}` adds it".format(
        python, ", ".join(missing), python, " ".join("{}=={}".format(name, pinned.get(name, "")).rstrip("=")
                                                     for name in missing))


def new_run_dir(results_dir, profile):
    """Create and return a new folder results/<date>-<time>-<profile>, with -2, -3, ... after it for runs started
    in the same second (mkdir decides, so two processes never get the same one)."""
    base = "{}-{}".format(datetime.datetime.now().strftime("%Y%m%d-%H%M%S"), profile)
    results_dir.mkdir(parents=True, exist_ok=True)
    for number in range(1, 1000):
        run_dir = results_dir / (base if number == 1 else "{}-{}".format(base, number))
        try:
            run_dir.mkdir()
            return run_dir
        except FileExistsError:
            continue
    raise RuntimeError("999 results folders named {} already exist in {}".format(base, results_dir))


def _clock(seconds):
    return "{:d}:{:02d}".format(int(seconds // 60), int(seconds % 60))


FINISHED = ("ok", "unsupported")  # statuses --resume leaves alone and the exit status accepts


def finished(run_dir, job):
    """True when a run folder holds an 'ok' or 'unsupported' record of `job` (--resume leaves it alone; an
    unsupported variant is an answer, not a failure)."""
    from runner import execution

    try:
        return results.read_result(str(run_dir / (job.stem + execution.RECORD_SUFFIX)))["status"] in FINISHED
    except (OSError, ValueError, KeyError, TypeError):
        return False


def fetch_data(task_keys, source, say=print):
    """Fetch each task's dataset once, before any notebook starts; return {task: the data source its notebooks get}.

    A dataset already in the cache is verified, one that is not is downloaded (with its checksum). With 'auto', a
    dataset that cannot be had sends its notebooks straight to the synthetic stand-in instead of each one trying
    the network again (their records say 'synthetic'); with 'real' the DownloadError or ChecksumError is raised.
    """
    from common import datasets

    sources = {}
    for key in task_keys:
        name = tasks.TASKS[key].dataset
        sources[key] = source
        if name is None or source == "synthetic":
            continue
        try:
            path = datasets.download(datasets.REMOTE_FILES[name])
            say("[data] {}: {} (checksum verified)".format(name, path))
        except datasets.DownloadError as error:
            if source == "real":
                raise
            sources[key] = "synthetic"
            say("[data] {}: {}; its notebooks use the synthetic stand-in".format(name, results.first_line(str(error))))
    return sources


def run(args):
    """Set up missing environments, run every selected notebook, write the report; exit 1 if any notebook failed,
    130 when interrupted (the running notebook's row says so; --resume finishes the run)."""
    from runner import data_parallel, equivalence, execution
    from runner import report as reporting

    machine = compatibility.detect()
    print("[gpu] " + machine.describe())
    if args.resume is not None:
        run_dir, jobs = args.resume, [job for job in args.jobs if not finished(args.resume, job)]
    else:
        run_dir, jobs = None, args.jobs
    names = [env.name for env in catalog.environments_for(jobs)]
    if args.no_setup:
        missing = [name for name in names if not environments.is_ready(catalog.ENVIRONMENTS[name])]
        if missing:
            print("run_all.py: error: environment {} is missing; build it with `python3 run_all.py setup {}`".format(
                missing[0], missing[0]), file=sys.stderr)
            return USAGE_ERROR
        unavailable = {}
    else:
        failed, unavailable = build_environments(names, machine, build=build_choice(args), device=args.device,
                                                 wheels=args.wheels)
        unavailable.update({name: str(error) for name, error in failed.items()})

    from common import datasets

    try:
        data_sources = fetch_data(sorted({job.task for job in jobs if job.variant.env not in unavailable}), args.data)
    except (datasets.DownloadError, datasets.ChecksumError) as error:
        print("run_all.py: error: --data {}: {}".format(args.data, results.first_line(str(error))), file=sys.stderr)
        return 1
    if run_dir is None:
        run_dir = new_run_dir(args.results, args.profile)
        write_run_file(args, run_dir)
        print("Running {} notebooks, profile {}, data {}, into {}".format(len(jobs), args.profile, args.data, run_dir))
    else:
        print("Resuming {}: {} of its {} notebooks to run (missing, failed or interrupted), profile {}, data {}".format(
            run_dir, len(jobs), len(args.jobs), args.profile, args.data))
    parameters = {"device": args.device, "threads": args.threads, "seed": args.seed}
    started, interrupted, running, job_started = time.time(), False, None, None
    try:
        for number, job in enumerate(jobs, 1):
            prefix = "[{}/{} {}]".format(number, len(jobs), _clock(time.time() - started))
            reason = unavailable.get(job.variant.env) or missing_packages_reason(job)
            if reason:
                record = execution.failure_record(job, args.profile, "unavailable", reason)
                results.write_result(str(run_dir / (job.stem + execution.RECORD_SUFFIX)), record, "unavailable")
            else:
                print("{} {} on kernel {} ...".format(prefix, job.stem, job.environment.kernel_name))
                sys.stdout.flush()
                overrides = dict(task_overrides(args.overrides, job.task, args.profile), **dict([job.sweep] if job.sweep else []))
                running, job_started = job, time.time()
                record = execution.run_job(job, run_dir, args.profile,
                                           dict(parameters, data_source=data_sources[job.task], overrides=overrides),
                                           args.timeout, show_output=not args.quiet)
                running = None
            outcome = results.summary_line(record) if record["status"] == "ok" else record["error"]
            print("[{}/{} {}] {}: {} after {:.0f} s; {}".format(
                number, len(jobs), _clock(time.time() - started), job.stem, record["status"].upper(),
                record.get("duration_s") or 0, outcome))
        for absent in catalog.absent_selected(args.frameworks):  # a row per task that says why it cannot run
            for task in args.tasks or list(tasks.TASKS):
                record = results.failure_record(absent.label, task, args.profile, "unavailable", absent.reason)
                results.write_result(str(run_dir / "{}_{}{}".format(absent.label, tasks.TASKS[task].notebook,
                                                                    execution.RECORD_SUFFIX)), record, "unavailable")
        for framework, task, why in catalog.lacking(args.frameworks, args.tasks):  # tasks without a notebook: why
            for variant in framework.variants:
                record = results.failure_record(framework.label, task, args.profile, "unavailable", why,
                                                variant=variant.name)
                stem = catalog.notebook_path(framework, task).stem + ("-" + variant.name if variant.name else "")
                results.write_result(str(run_dir / (stem + execution.RECORD_SUFFIX)), record, "unavailable")
        checked = run_dir / equivalence.EQUIVALENCE_DIR / equivalence.RESULT_FILE
        runnable = [job for job in args.jobs if job.variant.env not in unavailable]
        if not args.no_equivalence and not checked.exists():
            check_equivalence(runnable, run_dir)  # default runs
        if not args.no_equivalence and not (checked.parent / data_parallel.DATA_PARALLEL_FILE).exists():
            check_data_parallel(runnable, run_dir, args.overrides)
    except KeyboardInterrupt:
        interrupted = True
        print("\nInterrupted: writing the table of what finished; `python3 run_all.py run --resume {}` finishes "
              "the run.".format(run_dir))
        if running is not None:
            record = execution.failure_record(running, args.profile, "interrupted", "interrupted (Ctrl-C) after {:.0f} "
                                              "s".format(time.time() - job_started), notebook=running.stem + ".ipynb")
            results.write_result(str(run_dir / (running.stem + execution.RECORD_SUFFIX)), record, "interrupted")
    text = reporting.write_report(run_dir)
    from runner import rosetta as rosetta_view

    try:
        rosetta_view.write_pages(run_dir / "rosetta")
    except rosetta_view.RosettaError as error:  # the run's results stand; the side-by-side pages cannot
        print("Rosetta pages not written: {}".format(error))
    print()
    print(text)
    print("Executed notebooks, records, results.md/.csv/.json, results.png and rosetta/ are in {} ({} in all)".format(
        run_dir, _clock(time.time() - started)))
    if interrupted:
        return INTERRUPTED
    return 0 if all(finished(run_dir, job) for job in args.jobs) else 1  # every notebook has an "ok" record
