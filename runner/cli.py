"""The command line of run_all.py: parse and check the arguments, then hand each command to the part it belongs to.

Arguments are checked before anything is built, so a typo costs a one-line error (exit 2), not a
setup. Everything except argument checking, setup and list runs inside the runner's own environment
(.envs/runner), which this module creates and then re-executes itself in. The commands live with their
parts: run in runner/run/batch.py; setup, list and test in runner/run/setup_commands.py; report,
rosetta and site in runner/report/commands.py.
"""

import argparse
import ast
import os
import re
import sys
from pathlib import Path

from common import hyperparams, results, tasks, variants
from runner import catalog, pipeline, run_folder
from runner.run import batch, environments, setup_commands
from runner.run.settings import RunSettings

COMMANDS = ("run", "setup", "test", "report", "rosetta", "site", "list", "lock", "prune", "node", "bisect")

DATA_SOURCES = ("auto", "real", "synthetic")  # common.datasets.SOURCES, which needs numpy: this runs before it exists

DEFAULT_TIMEOUT = {"smoke": 600, "quick": 1800, "full": 4 * 3600}

USAGE_ERROR = batch.USAGE_ERROR  # a bad command line, and a run refused before it starts


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


def _kernel_env(text):
    name, mark, value = text.partition("=")
    if not mark or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise argparse.ArgumentTypeError("expected NAME=VALUE, a variable of the kernel's environment, got {!r}".format(
            text))
    return (name, value)


def _path(text):
    """A path option made absolute against the folder the command runs from, `~` expanded and symbolic links kept."""
    # once, here: the kernels and subprocesses start in other folders; a venv's python is a link that must stay one;
    # `setup --python NAME` was always a file in this folder (adopt and the check below), never a PATH lookup
    return Path(os.path.abspath(os.path.expanduser(text)))


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors become UsageError (one line, exit 2) instead of usage text."""

    def error(self, message):
        raise UsageError(message)


def build_parser():
    """The argument parser of run_all.py."""
    parser = _Parser(
        prog="run_all.py",
        description="Run the DL Rosetta Stone notebooks on their framework kernels and build the results table.",
        epilog="Commands: run (default), setup, test, report, rosetta, site, list, lock, prune, node, bisect. "
               "`run_all.py COMMAND -h` explains each.",
    )
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser("run", help="set up what is missing, run the notebooks, write table and plot")
    run.add_argument("-f", "--frameworks", type=_names, help="comma-separated, default all: " +
                     ", ".join(catalog.framework_keys()) + "; NAME@RELEASE runs a framework at an earlier release, in "
                     "an environment of its own, beside its own row (e.g. -f jax@0.8.1,jax)")
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
        "{} = {}".format(k, v) for k, v in variants.COMPILE_MODES.items()) + " (default: each task's own, common/tasks/: "
        "inference default and on, the others default; default alone with --precision or --sweep)")
    run.add_argument("--sweep", type=_sweep, metavar="KEY=V1,V2,...", help="run each notebook whose task has the "
                     "hyperparameter once per value, and plot throughput against it, e.g. --sweep batch_size=1,8,32")
    run.add_argument("--kernel-env", dest="kernel_envs", type=_kernel_env, action="append", default=[],
                     metavar="NAME=VALUE", help="run each notebook once more with this variable set in its kernel's "
                     "environment, a row of its own beside the notebook's as it stands (repeatable, each a row), e.g. "
                     "--kernel-env XLA_FLAGS=--xla_cpu_use_onednn=true")
    run.add_argument("--devices", type=int, metavar="N", help="data-parallel training on 1 and on N devices (GPUs, or "
                     "processes sharing the CPU), for the scaling efficiency: --sweep devices=1,N")
    run.add_argument("--repeat", type=int, metavar="N", help="run every notebook N times, in N rounds each in its own "
                     "seeded order; the table gives each row's median over the rounds with its interval (default 1)")
    run.add_argument("--timeout", type=float, help="seconds per notebook (default: smoke 600, quick 1800, full 14400)")
    run.add_argument("--results", type=_path, default=catalog.REPO / "results", help="folder for run folders")
    run.add_argument("--no-setup", action="store_true", help="fail instead of building missing environments")
    run.add_argument("--gpu", action="store_true", help="GPU builds even where nvidia-smi finds no GPU (the default "
                     "where it finds one)")
    run.add_argument("--cpu", action="store_true", help="CPU builds even where there is a GPU")
    run.add_argument("--wheels", type=_path, help="install from this folder of wheels, without a package index "
                     "(also $ROSETTA_WHEELS)")
    run.add_argument("-q", "--quiet", action="store_true", help="hide the notebooks' own output")
    run.add_argument("--resume", type=_path, metavar="RESULTS_DIR", help="finish an interrupted or failed run: run what "
                     "is missing, failed or interrupted in that folder, with the parameters it was started with")
    run.add_argument("--no-equivalence", action="store_true", help="skip the checks that every notebook computes "
                     "PyTorch's results from shared weights and, with --devices N, that a data-parallel step is the "
                     "single-device step (a few smoke-sized runs per framework)")
    run.add_argument("--recheck", action="store_true", help="check same weights anew: without it, a notebook whose "
                     "code, environment lock and CPU are as at an earlier check keeps that verdict, with its date")
    run.add_argument("--on", choices=["ray"], help="ray: every notebook a Ray task, one per GPU of this machine, "
                     "or on every node of the cluster at --address (docs/cluster.md)")
    run.add_argument("--address", metavar="HOST:PORT", help="with --on ray: join the running Ray cluster there "
                     "(its token in $ROSETTA_RAY_TOKEN) instead of starting one on this machine")
    run.add_argument("--each-gpu-kind", action="store_true", help="with --on ray: run every notebook once per GPU "
                     "kind of the cluster; a run folder per kind and their merged table, one column per kind")

    setup = sub.add_parser("setup", help="build the environments and kernels (all, or those named); GPU builds where "
                           "nvidia-smi finds a GPU they can use")
    setup.add_argument("envs", nargs="*", help="environment names, default all: " + ", ".join(catalog.ENVIRONMENTS) +
                       "; or a framework's at a release: jax@0.6.2 (envs/versions/)")
    setup.add_argument("--gpu", action="store_true", help="GPU builds even where nvidia-smi finds no GPU")
    setup.add_argument("--cpu", action="store_true", help="CPU builds, replacing GPU builds and adoptions")
    setup.add_argument("--python", type=_path, metavar="PATH", help="adopt this existing interpreter as the (one) "
                       "environment named, instead of building a virtual environment")
    setup.add_argument("--install-missing", action="store_true", help="with --python: pip-install the pinned packages "
                       "that interpreter lacks (ipykernel, keras, ...)")
    setup.add_argument("--wheels", type=_path, help="install from this folder of wheels, without a package index "
                       "(also $ROSETTA_WHEELS)")
    setup.add_argument("--on", choices=["ray"], help="ray: build them on every node of the Ray cluster at --address "
                       "(one task per node, in its checkout)")
    setup.add_argument("--address", metavar="HOST:PORT", help="with --on ray: the cluster's head (its token in "
                       "$ROSETTA_RAY_TOKEN)")

    node = sub.add_parser("node", help="start a Ray node of this machine for `run --on ray --address`: a cluster's "
                          "head, or a node joining one; it advertises the environments built here (docs/cluster.md)")
    node.add_argument("--address", metavar="HOST:PORT", help="join the cluster whose head is there (its token in "
                      "$ROSETTA_RAY_TOKEN); without it, start a head")
    node.add_argument("--ip", default=None, help="this node's address, the one the other nodes reach it at "
                      "(default 127.0.0.2: this machine only)")
    node.add_argument("--port", type=int, default=6379, help="a head's port (default 6379)")
    node.add_argument("--num-gpus", type=int, default=None, help="GPUs to declare (default: those nvidia-smi finds)")
    node.add_argument("--setup", action="store_true", help="first build the environments this machine lacks, so that "
                      "the node advertises them (Ray fixes a node's resources when it starts)")
    node.add_argument("--token-file", type=_path, default=None, help="a head writes the cluster's token to this file, "
                      "of mode 0600 (default ~/.rosetta/ray_token; removed when the head stops)")
    node.add_argument("--show-token", action="store_true", help="a head also prints the token itself")

    test = sub.add_parser("test", help="build the environments, then run ruff and pytest (arguments go to pytest)")
    test.add_argument("pytest_args", nargs=argparse.REMAINDER)

    report = sub.add_parser("report", help="rebuild a run's table, plot and HTML report; with several folders, "
                            "merge them into one table (one column per machine and profile)",
                            description="report RESULTS_DIR rebuilds a run's table, plot and HTML report. "
                            "report A B also compares two runs row by row: B's headline figure over A's, with a 95% "
                            "interval and a verdict (faster, slower, or within noise; docs/measurements.md). More "
                            "folders merge into one table, a column per machine and profile.")
    report.add_argument("run_dirs", type=_path, nargs="+", metavar="RESULTS_DIR")
    report.add_argument("--out", type=_path, help="where the merged table goes (default results/merged-<time>)")

    rosetta = sub.add_parser("rosetta", help="regenerate the side-by-side pages docs/rosetta/<task>.html and the "
                             "concept index docs/rosetta/index.html from notebooks/, and docs/scaling.png")
    rosetta.add_argument("--out", type=_path, help="folder to write them to (default docs/rosetta)")

    site = sub.add_parser("site", help="write the static site (front page, executed notebooks, Rosetta pages, results, "
                          "docs) into site/ from a run folder, by default the reference run docs/reference/",
                          description="site [RUN_FOLDER] writes into site/ a static site to read without running "
                          "anything (what GitHub Pages publishes): a front page with a grid of frameworks and tasks, every "
                          "executed notebook of the run folder with its outputs and where it ran, the concept index and "
                          "task pages, the run's results, and the docs. Relative links only, nothing fetched, the same "
                          "bytes from the same inputs. site --keep RUN_FOLDER first makes a finished run the reference "
                          "run, docs/reference/ (outputs kept small), then builds from it.")
    site.add_argument("run_dir", type=_path, nargs="?", metavar="RUN_FOLDER", help="the run folder to build from "
                      "(default docs/reference/, the reference run kept in the repository)")
    site.add_argument("--out", type=_path, help="folder to write the site to (default site/; a site written there "
                      "before is replaced)")
    site.add_argument("--keep", action="store_true", help="first replace docs/reference/ with RUN_FOLDER, a finished "
                      "run: its executed notebooks with small outputs, records, tables and PNG plots; prints its size")

    sub.add_parser("list", help="frameworks, tasks and environments, and which environments are built")

    lock = sub.add_parser("lock", help="regenerate the locks envs/<env>.lock (every package, exact version and "
                          "hashes) from the requirements files, with uv, and say what changed")
    lock.add_argument("envs", nargs="*", help="environment names, default all: " + ", ".join(catalog.ENVIRONMENTS) +
                      "; or a framework's at a release: jax@0.6.2 (writes envs/versions/jax@0.6.2.txt and its lock)")

    prune = sub.add_parser("prune", help="remove frameworks' release environments (.envs/jax@0.6.2, its log and "
                           "kernel); envs/versions/ keeps what rebuilds them")
    prune.add_argument("envs", nargs="*", help="release environments, default every one built")
    bisect = sub.add_parser(
        "bisect", help="find between which two releases a framework's speed on a task stepped",
        description="bisect FRAMEWORK GOOD BAD -t TASK tries the releases PyPI has from GOOD to BAD in binary-search "
        "order, each in the environment -f NAME@RELEASE builds (its lock kept in envs/versions/), three at a time in "
        "interleaved rounds, until two adjacent releases bracket a step beyond the noise, or GOOD and BAD are within "
        "noise of each other. It prints its plan first, a line per release as it goes, and ends with the step's ratio, "
        "its interval, and the packages that differ between the two releases' locks. Frameworks with releases: " +
        ", ".join(f.key for f in catalog.FRAMEWORKS if f.package) + ".")
    bisect.add_argument("framework", help="the framework, as -f names it (jax)")
    bisect.add_argument("good", metavar="GOOD", help="the older release (0.8.1)")
    bisect.add_argument("bad", metavar="BAD", help="the newer release (0.10.2)")
    bisect.add_argument("-t", "--task", required=True, choices=list(tasks.TASKS), help="the task timed")
    bisect.add_argument("-p", "--profile", default="quick", help="the run profile (default quick)")
    bisect.add_argument("--repeat", type=int, default=3, metavar="N", help="rounds per step (default 3)")
    bisect.add_argument("--results", type=_path, default=catalog.REPO / "results", help="where its folder goes "
                        "(results/bisect-<time>-<framework>-<good>-<bad>, a run folder per step inside)")
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
        if args.resume is None and args.compile_modes is None and (args.precisions or args.sweep):
            # --precision or --sweep is a comparison of its own: the default compile mode only, unless --compile says
            args.compile_modes = ["default"]
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
        args.threads_default = args.threads is None  # on Ray, each node then uses its own cores
        if args.threads is None:
            args.threads = usable_cores()
        if (args.address is not None or args.each_gpu_kind) and args.on != "ray":
            raise UsageError("--address and --each-gpu-kind go with --on ray")
        if args.each_gpu_kind and args.resume is not None:
            raise UsageError("--each-gpu-kind cannot resume a run yet: run it again")
        args.overrides = dict(args.overrides)
        selected_tasks = sorted({job.task for job in args.jobs})
        for key in args.overrides:
            if not any(key in hyperparams.for_task(task, args.profile) for task in selected_tasks):
                raise UsageError("--set {}: no selected task has that hyperparameter".format(key))
        for task in selected_tasks:  # every value checked against its rule before anything is built or run
            try:
                hyperparams.for_task(task, args.profile, catalog.task_overrides(task, args.overrides))
            except ValueError as error:
                raise UsageError(str(error)) from None
        if args.devices is not None:
            devices_as_sweep(args)
        if args.sweep:
            check_sweep(args, selected_tasks)
        args.kernel_envs = [tuple(setting) for setting in args.kernel_envs or []]  # a resumed run stored lists
        slugs = [catalog.kernel_env_slug(*setting) for setting in args.kernel_envs]
        if len(set(slugs)) < len(slugs):
            raise UsageError("--kernel-env: each setting once (and each with a name of its own in file names: {})"
                             .format(", ".join(slugs)))
        args.jobs = catalog.expand(args.jobs, args.precisions, args.compile_modes, args.sweep, args.kernel_envs)
        if args.resume is not None:
            check_resumable(args)  # the jobs as run.json stored them: with their variants and swept values
        if args.timeout is None:
            args.timeout = DEFAULT_TIMEOUT[args.profile]
        if args.timeout <= 0 or args.threads < 0:
            raise UsageError("--timeout must be positive and --threads not negative")
        if args.repeat < 1:
            raise UsageError("--repeat {}: must be 1 or more".format(args.repeat))
    if args.command in ("run", "setup") and args.gpu and args.cpu:
        raise UsageError("--gpu and --cpu exclude each other")
    if args.command in ("run", "setup") and args.wheels is not None and not args.wheels.is_dir():
        raise UsageError("--wheels: no such folder: {}".format(args.wheels))
    if args.command in ("setup", "lock", "prune"):
        for name in args.envs:  # a framework's release environment (jax@0.6.2) is made when named
            try:
                catalog.environment(name)
            except catalog.SelectionError as error:
                raise UsageError(str(error)) from None
    if args.command == "setup":
        if args.python is not None:
            if len(args.envs) != 1:
                raise UsageError("--python adopts an interpreter as one environment: name exactly one")
            if not args.python.exists():
                raise UsageError("--python: no such interpreter: {}".format(args.python))
            if args.gpu or args.cpu:
                raise UsageError("--python adopts an interpreter as it is; --gpu and --cpu choose what to build")
        elif args.install_missing:
            raise UsageError("--install-missing goes with --python")
        if (args.on is None) != (args.address is None):
            raise UsageError("setup --on ray needs the cluster's --address (without a cluster, plain setup builds here)")
        if args.on is not None and args.python is not None:
            raise UsageError("--python adopts an interpreter on this machine; leave out --on ray")
    if args.command == "node" and args.address is not None and (args.token_file or args.show_token):
        raise UsageError("--token-file and --show-token are a head's: a node joining --address has the token already")
    if args.command == "bisect":
        try:
            hyperparams.check_profile(args.profile)
            for end in (args.good, args.bad):
                catalog.framework(args.framework + catalog.RELEASE_MARK + end)
        except ValueError as error:
            raise UsageError(str(error)) from None
        if args.repeat < 1:
            raise UsageError("--repeat {}: must be 1 or more".format(args.repeat))
    if args.command == "report":
        for run_dir in args.run_dirs:
            if not run_dir.is_dir():
                raise UsageError("no such results folder: {}".format(run_dir))
    if args.command == "site":
        if args.keep and args.run_dir is None:
            raise UsageError("site --keep needs the finished run folder to keep: site --keep results/<run>")
        if args.run_dir is not None and not args.run_dir.is_dir():
            raise UsageError("no such run folder: {}".format(args.run_dir))
    return args

RUN_DEFAULTS = {"profile": "quick", "data": "auto", "device": "auto", "seed": 0, "precisions": ["auto"], "repeat": 1}


def build_choice(args):
    """'gpu' or 'cpu' where the command line forces a kind of build (--gpu, --cpu), else None (the machine decides)."""
    return "gpu" if getattr(args, "gpu", False) else ("cpu" if getattr(args, "cpu", False) else None)


def run_settings(args):
    """The run command's settings (runner/run/settings.py) from its checked arguments: past this module, nothing
    reads the command line's namespace."""
    return RunSettings(
        jobs=tuple(args.jobs), frameworks=args.frameworks, tasks=args.tasks, profile=args.profile, data=args.data,
        device=args.device, threads=args.threads, threads_default=args.threads_default, seed=args.seed,
        overrides=dict(args.overrides), timeout=args.timeout, no_equivalence=bool(args.no_equivalence),
        precisions=args.precisions, compile_modes=args.compile_modes, sweep=args.sweep, repeat=args.repeat,
        kernel_envs=[list(setting) for setting in args.kernel_envs],
        results=args.results, resume=args.resume, setup=not args.no_setup, build=build_choice(args),
        wheels=args.wheels, quiet=args.quiet, on=args.on, address=args.address, each_gpu_kind=args.each_gpu_kind,
        round_orders=getattr(args, "round_orders", None), recheck=args.recheck)


def check_variants(args):
    """Refuse (UsageError) a precision or compile mode that common/variants.py does not know, or one named twice."""
    for option, names, known in (("--precision", args.precisions, variants.PRECISIONS),
                                 ("--compile", args.compile_modes or [], variants.COMPILE_MODES)):
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
                hyperparams.for_task(task, args.profile, dict(catalog.task_overrides(task, args.overrides),
                                                              **{key: value}))
            except ValueError as error:
                raise UsageError("--sweep: {}".format(error)) from None
    args.sweep = (key, tuple(values))


def resume_parameters(args):
    """Take a resumed run's parameters from its folder; refuse options that would change them (UsageError)."""
    path = args.resume / run_folder.RUN_FILE
    if not args.resume.is_dir():
        raise UsageError("--resume: no such results folder: {}".format(args.resume))
    try:
        stored = run_folder.read_run_file(args.resume)
    except (OSError, ValueError) as error:
        raise UsageError("--resume: {} cannot be read ({}): only runs that stored it can be resumed".format(
            path, results.first_line(str(error)))) from None
    given = [name for name in RunSettings.STORED if getattr(args, name) not in (None, [], False)]
    if given:
        raise UsageError("--resume runs with the parameters stored in {}; leave out {}".format(
            path, ", ".join("--" + name.replace("_", "-") for name in given)))
    for name in RunSettings.STORED:
        setattr(args, name, stored.get(name))
    args.repeat = args.repeat or 1  # a run stored before --repeat existed ran one round
    args.round_orders = stored.get("round_orders")
    args.overrides = list((args.overrides or {}).items())
    args.sweep = tuple(args.sweep) if args.sweep else None  # stored as a list
    args.stored_notebooks = stored.get("notebooks") or {}


def check_resumable(args):
    """Refuse (UsageError) to resume a run whose notebooks changed since it began."""
    for job in args.jobs:
        if args.stored_notebooks.get(job.stem) != run_folder.notebook_digest(job.notebook):
            raise UsageError("--resume: notebook {} changed since {} was started; start a new run rather than "
                             "mix them".format(job.notebook.name, args.resume))


def usable_cores():
    """CPU cores this process may use (same rule as common.environment.usable_cores, without numpy)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def in_runner_env():
    """True when this process runs on the runner environment's interpreter (its venv, or the adopted one)."""
    return environments.installation(catalog.ENVIRONMENTS["runner"]).runs_this_process()


def bisect_command(args):
    """The bisect command (runner/bisect.py), each of its steps a run of the run command; its exit status."""
    from runner import bisect

    def run(argv):
        return pipeline.run(run_settings(parse(argv)))

    try:
        return bisect.bisect(args.framework, args.good, args.bad, args.task, run, repeat=args.repeat,
                             profile=args.profile, results=args.results)
    except (bisect.BisectError, UsageError) as error:
        print("run_all.py: error: {}".format(error), file=sys.stderr)
        return USAGE_ERROR


def main(argv=None):
    """Entry point of run_all.py; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
    except UsageError as error:
        print("run_all.py: error: {}".format(error), file=sys.stderr)
        return USAGE_ERROR
    if args.command in ("list", "setup", "lock", "prune") and getattr(args, "on", None) is None:  # the standard library is enough
        try:
            if args.command == "setup":
                return setup_commands.setup(args.envs, python=args.python, install_missing=args.install_missing,
                                            wheels=args.wheels, build=build_choice(args))
            if args.command == "prune":
                return setup_commands.prune(args.envs)
            return setup_commands.lock(args.envs) if args.command == "lock" else setup_commands.list_catalog()
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
    from runner.report import commands as report_commands
    from runner.run import on_ray

    if args.command == "run":
        return pipeline.run(run_settings(args))
    if args.command == "test":
        return setup_commands.test(args.pytest_args)
    if args.command == "report":
        return report_commands.report(args.run_dirs, out=args.out)
    if args.command == "rosetta":
        return report_commands.rosetta(out=args.out)
    if args.command == "site":
        return report_commands.site(args.run_dir, out=args.out, keep=args.keep)
    if args.command == "bisect":
        return bisect_command(args)
    if args.command == "node":
        return on_ray.node_command(args.address, ip=args.ip, port=args.port, num_gpus=args.num_gpus, setup=args.setup,
                                   token_file=args.token_file, show_token=args.show_token)
    return on_ray.setup_on_nodes(args.address, args.envs, build=build_choice(args), wheels=args.wheels)  # setup --on ray
