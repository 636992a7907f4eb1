"""The run command's first stage: build what the selected notebooks need, run each on its kernel into a new results
folder (or finish an interrupted one), writing a record per notebook (execute). The checks and the report follow it
(runner/pipeline.py), reading what it wrote.

It writes records and the run file (runner/run_folder.py) and imports neither the checks nor the report. Importing it
needs the standard library only (run_all.py parses its arguments before the runner's environment exists); papermill
and the rest are imported where they are used.
"""

import contextlib
import dataclasses
import datetime
import errno
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from common import results, tasks
from runner import catalog, run_folder
from runner.run import build_steps, ceiling, compatibility, environments, setup_commands
from runner.run.on_ray import NotConnected, RayError

INTERRUPTED = 130  # the shell's status for a process stopped by Ctrl-C
# The errors of a write that found no room: a full disk, a full quota, a file past the process's size limit
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
# The signals that stop a run as Ctrl-C does: what its rows call each, and the exit status (128 + the signal's number)
STOP_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
USAGE_ERROR = 2  # a run refused before it starts (the command line's status for bad input)


def round_orders(jobs, repeat, seed):
    """The order of each round's jobs, as lists of stems: a run of one round keeps the catalog's order; with several,
    every round is its own permutation, drawn from `seed`, so that a slow spell of the machine falls on every row
    alike rather than on whichever ran during it."""
    import random

    stems = [job.stem for job in jobs]
    if repeat == 1:
        return [stems]
    generator = random.Random("round order {}".format(seed))
    return [generator.sample(stems, len(stems)) for _ in range(repeat)]


def write_run_file(settings, run_dir, orders):
    """Store the run's parameters, the order of its rounds and its notebooks' digests in the run file
    (runner/run_folder.py)."""
    stored = settings.stored()
    stored["frameworks"] = stored["frameworks"] or catalog.framework_keys()
    stored["tasks"] = stored["tasks"] or list(tasks.TASKS)
    stored["round_orders"] = orders
    stored["notebooks"] = {job.stem: run_folder.notebook_digest(job.notebook) for job in settings.jobs}
    stored["commit"] = run_folder.checkout_commit()  # the code it ran, for whoever reads its results (the site)
    run_folder.write_run_file(run_dir, stored)


def in_rounds(jobs, orders):
    """Every job once per round, each round in its stored order (stems): the list the executor runs."""
    by_stem = {job.stem: job for job in jobs}
    return [by_stem[stem].in_round(number) for number, order in enumerate(orders, 1) for stem in order
            if stem in by_stem]


def cannot_be_had_here(failed):
    """{environment: why} of the failed builds that failed for what this machine can never have (a Python no reachable
    source has, a tool it lacks: MachineLacks): their rows are like an absent framework's, and fail no run."""
    return {name: str(error) for name, error in failed.items() if isinstance(error, environments.MachineLacks)}


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


def run_on_ray(settings, jobs, run_dir, parameters_of, machine, stop_name, kind_runs, orders):
    """Run `jobs` as Ray tasks (runner/run/on_ray.py, through executors.OnRay): on a cluster started on this machine,
    or on the one at --address. With --each-gpu-kind every job runs once per GPU kind of the cluster, into a run folder
    of that kind's inside `run_dir` (appended to `kind_runs`)."""
    from runner.run import executors, on_ray

    with on_ray.Cluster(settings.address, gpus=on_ray.local_gpus(machine, settings.device),
                        wheels=settings.wheels) as cluster:
        kinds = None
        if settings.each_gpu_kind:
            found = on_ray.gpu_kinds(cluster.nodes())
            if not found:
                raise RayError("--each-gpu-kind: no node of the cluster declares a GPU (`run_all.py node` declares "
                               "those nvidia-smi finds)")
            kinds = {kind: run_dir / kind for kind in found}
            for folder in kinds.values():
                folder.mkdir(exist_ok=True)
                write_run_file(settings, folder, orders)
                kind_runs.append(folder)
            print("[ray] every notebook once per GPU kind: {}".format(", ".join(found)))
        executor = executors.OnRay(cluster, settings.profile, parameters_of, settings.timeout, settings.device,
                                   None if settings.threads_default else settings.threads, stop_name=stop_name,
                                   kinds=kinds)
        for job in jobs:  # the rounds' folders in each kind's (execute made the run folder's)
            for base in (kinds or {}).values():
                run_folder.round_folder(base, job.round).mkdir(exist_ok=True)
        executor.run(jobs, run_dir)


@contextlib.contextmanager
def stopped_by_signals():
    """While a run runs, SIGTERM and SIGHUP end it as Ctrl-C does, raising KeyboardInterrupt (a scheduler's end of
    a job's time, a closed ssh session); a second signal while the first is being handled ends the process at once,
    leaving the records on disk as they are. A signal the process ignores (`nohup`'s SIGHUP) stays ignored. Yields
    the signals received, the first one the run's.

    The stop does not hang on the KeyboardInterrupt alone, which Python raises only where the main thread next runs
    Python code: every signal also wakes a thread of its own (signal.set_wakeup_fd), which sets the run's stop at once
    whatever the main thread is doing; from then on no kernel of this process lives (execution.kernels_ended_on) and
    a notebook returning raises KeyboardInterrupt, so the run stops also where its KeyboardInterrupt was lost or
    late."""
    from runner.run import execution

    stopping, handled, stop = [], [], threading.Event()

    def on_signal(signal_number, frame):
        if handled:
            os._exit(128 + signal_number)
        handled.append(signal_number)
        if not stopping:
            stopping.append(signal_number)
        raise KeyboardInterrupt

    readable, writable = os.pipe()
    os.set_blocking(writable, False)

    def watch_signals():  # the numbers of the signals received, one byte each; 0: the run is over
        while True:
            number = os.read(readable, 1)[0]
            if number == 0:
                return
            if number in STOP_SIGNALS:
                if not stopping:
                    stopping.append(number)
                stop.set()
                return

    watcher = threading.Thread(target=watch_signals, name="signal watcher", daemon=True)
    watcher.start()
    with execution.kernels_ended_on(stop):
        # a signal this process was started ignoring stays ignored: `nohup` ignores SIGHUP so that a run outlives
        # its session
        previous = {number: signal.signal(number, on_signal) for number in STOP_SIGNALS
                    if signal.getsignal(number) != signal.SIG_IGN}
        previous_fd = signal.set_wakeup_fd(writable, warn_on_full_buffer=False)
        try:
            yield stopping
        finally:
            signal.set_wakeup_fd(previous_fd)
            for number, handler in previous.items():
                signal.signal(number, handler)
            os.write(writable, b"\0")
            watcher.join()
            os.close(readable)
            os.close(writable)


def no_space(error, run_dir, what):
    """Say in one line that a write failed for want of space (`error`, an OSError of NO_SPACE): which folder, how much
    is free, what was not written, that the records already written are whole, and the command that writes the rest
    once there is room; return the exit status, 1."""
    folder = Path(error.filename).parent if error.filename else run_dir
    free = build_steps.free_space(folder)
    print("run_all.py: error: no space left to write in {} ({}, {}): {} not written; the records written before are "
          "whole (each is written then renamed); once there is room, `python3 run_all.py report {}` writes the table "
          "and `python3 run_all.py run --resume {}` runs what is missing".format(
              folder, free, os.strerror(error.errno), what, run_dir, run_dir), file=sys.stderr)
    return 1


@dataclasses.dataclass
class Executed:
    """What execute() leaves for the stages after it: where the records are, the run's jobs (round 1), those whose
    environment was there (the checks'), the environments this machine can never have, the folders of
    --each-gpu-kind, how the notebooks' stage ended (0, or 128 + the signal that stopped it), when the run started,
    and its rounds."""

    run_dir: Path
    jobs: list
    runnable: list
    lacked: dict
    kind_runs: list
    interrupted: int
    started: float
    repeat: int = 1


def unfinished(settings, orders):
    """(run folder or None, the jobs still to run in their rounds' order): all of them for a new run; for --resume,
    those of every round without a finished record in their round's folder."""
    planned = in_rounds(settings.jobs, orders)
    if settings.resume is None:
        return None, planned
    return settings.resume, [job for job in planned if not run_folder.finished(
        run_folder.round_folder(settings.resume, job.round), job.stem)]


def execute(settings, stopped_by):
    """The run's notebooks: set up missing environments, fetch the data, measure the ceiling, run every selected
    notebook (here, or on Ray; once per round with --repeat) into a new results folder (or the one --resume names),
    writing a record each, and the rows of absent frameworks and of tasks a framework lacks. An Executed, or the exit
    status where the run stops before its report (bad setup, data or cluster; a full disk). A signal (`stopped_by()`
    names it) marks the running notebooks interrupted and ends the stage."""
    from runner.run import execution, executors, machine_probe

    if settings.on == "ray":
        from runner.run import on_ray
        try:
            on_ray.import_ray(wheels=settings.wheels)
            if settings.address is not None:  # a missing or refused token: one line, before anything is set up or made
                on_ray.check_cluster(settings.address)
        except on_ray.RayError as error:
            print("run_all.py: error: {}".format(error), file=sys.stderr)
            return 1
    machine = compatibility.detect()
    print("[gpu] " + machine.describe())
    orders = settings.round_orders or round_orders(settings.jobs, settings.repeat, settings.seed)
    run_dir, jobs = unfinished(settings, orders)
    names = [env.name for env in catalog.environments_for(jobs)]
    if not settings.setup or not names:  # without a notebook to run there is nothing to build (setup's empty list is all)
        missing = [name for name in names if not environments.is_ready(catalog.environment(name))]
        if missing:
            print("run_all.py: error: environment {} is missing; build it with `python3 run_all.py setup {}`".format(
                missing[0], missing[0]), file=sys.stderr)
            return USAGE_ERROR
        unavailable, lacked = {}, {}
    else:
        failed, unavailable = setup_commands.build_environments(names, machine, build=settings.build,
                                                                device=settings.device, wheels=settings.wheels)
        unavailable.update({name: str(error) for name, error in failed.items()})
        lacked = cannot_be_had_here(failed)

    from common import datasets

    try:
        data_sources = fetch_data(sorted({job.task for job in jobs if job.variant.env not in unavailable}),
                                  settings.data)
    except (datasets.DownloadError, datasets.ChecksumError) as error:
        print("run_all.py: error: --data {}: {}".format(settings.data, results.first_line(str(error))), file=sys.stderr)
        return 1
    rounds = " in {} rounds".format(settings.repeat) if settings.repeat > 1 else ""
    made = run_dir is None  # this run's own folder, removed where it never reached its cluster
    if run_dir is None:
        run_dir = new_run_dir(settings.results, settings.profile)
        write_run_file(settings, run_dir, orders)
        print("Running {} notebooks{}, profile {}, data {}, into {}".format(
            len(settings.jobs), rounds, settings.profile, settings.data, run_dir))
    else:
        print("Resuming {}: {} of its {} notebooks{} to run (missing, failed or interrupted), profile {}, data "
              "{}".format(run_dir, len(jobs), len(settings.jobs) * settings.repeat, rounds, settings.profile,
                          settings.data))
    parameters = {"device": settings.device, "threads": settings.threads, "seed": settings.seed}

    def parameters_of(job):
        return dict(parameters, data_source=data_sources[job.task], overrides=job.overrides(settings.overrides))

    def stop_name():
        return STOP_SIGNALS[stopped_by()]

    local = settings.on != "ray" or settings.address is None  # a cluster's nodes have environments of their own
    runnable = []
    for job in jobs:
        folder = run_folder.round_folder(run_dir, job.round)
        folder.mkdir(exist_ok=True)
        reason = (unavailable.get(job.variant.env) or missing_packages_reason(job)) if local else None
        if reason:
            execution.write_not_run(folder, job, settings.profile, "unavailable", reason)
            print("{}: UNAVAILABLE; {}".format(job.progress_name, reason))
        elif job.refused:  # its framework's refusal, known without starting its kernel
            execution.write_not_run(folder, job, settings.profile, "unsupported", job.refused)
            print("{}: UNSUPPORTED; {}".format(job.progress_name, job.refused))
        else:
            runnable.append(job)
    started, interrupted, kind_runs = time.time(), 0, []
    executor = None
    try:
        if runnable and not os.environ.get(ceiling.SKIP_VARIABLE) and not (run_dir / run_folder.CEILING_FILE).exists():
            ceiling.for_run(run_dir, settings.threads, machine.gpu if settings.device != "cpu" else None)  # Util.'s bound
        if settings.on == "ray":
            run_on_ray(settings, runnable, run_dir, parameters_of, machine, stop_name, kind_runs, orders)
        else:
            executor = executors.Sequential(settings.profile, parameters_of, settings.timeout,
                                            show_output=not settings.quiet, started=started, stop_name=stop_name,
                                            watch=machine_probe.watching)
            executor.run(runnable, run_dir)
            if settings.repeat > 1:
                run_disturbed_again(executor, runnable, run_dir)
        write_rows_not_run(settings, run_dir)
    except NotConnected as error:  # nothing ran: a new run leaves no folder (a resumed one stays)
        if made:
            shutil.rmtree(str(run_dir), ignore_errors=True)
        print("run_all.py: error: {}".format(error), file=sys.stderr)
        return 1
    except RayError as error:
        print("run_all.py: error: {}; `python3 run_all.py run --resume {}` runs the rest".format(error, run_dir),
              file=sys.stderr)
        return 1
    except OSError as error:
        if error.errno not in NO_SPACE:
            raise
        running = executor.running if executor is not None else None
        what = "the record of {} and the run's table".format(running.stem) if running else "the run's table"
        return no_space(error, run_dir, what)
    except KeyboardInterrupt:
        interrupted = 128 + stopped_by()
        print("\nInterrupted ({}): writing the table of what finished; `python3 run_all.py run --resume {}` finishes "
              "the run.".format(stop_name(), run_dir))
    runnable = [job for job in settings.jobs if job.variant.env not in unavailable]
    return Executed(run_dir, list(settings.jobs), runnable, lacked, kind_runs, interrupted, started, settings.repeat)


def disturbed_rounds(jobs, run_dir):
    """The machine probes of every finished round of `jobs` (each job in its round), and [(job, its record, words)]
    of those that finished while the machine watch crossed a threshold (run_folder.disturbance, against the run's
    fastest probe) and were not already run again."""
    found = {}
    for job in jobs:
        try:
            found[job] = results.read_result(str(run_folder.record_path(run_folder.round_folder(run_dir, job.round),
                                                                        job.stem)))
        except (OSError, ValueError):
            continue
    probes = [record.get("machine_probe") for record in found.values()]
    fastest = run_folder.fastest_probe(probes)
    disturbed = []
    for job, record in found.items():
        words = run_folder.disturbance(record.get("machine_probe"), fastest)[1]
        if words and record.get("status") == "ok" and not record.get("takes"):
            disturbed.append((job, record, words))
    return probes, disturbed


def run_disturbed_again(executor, jobs, run_dir, say=print):
    """At the end of a repeated run, run once more each round of `jobs` that the machine watch found disturbed, and
    keep the take that was disturbed less (run_folder.disturbance): its record and notebook where the round's are,
    both takes' watch and figures in its record's 'takes', the other take's notebook in the round's DISTURBED_DIR."""
    probes, again = disturbed_rounds(jobs, run_dir)
    if not again:
        return
    say("[again] {} round{} the machine watch found disturbed, run once more: {}".format(
        len(again), "" if len(again) == 1 else "s", "; ".join("{} ({})".format(job.progress_name, words)
                                                              for job, _, words in again)))
    for job, first, _ in again:
        folder = run_folder.round_folder(run_dir, job.round)
        notebook, aside = folder / (job.stem + ".ipynb"), folder / run_folder.DISTURBED_DIR / (job.stem + ".ipynb")
        aside.parent.mkdir(exist_ok=True)
        if notebook.exists():
            os.replace(str(notebook), str(aside))
        try:
            (second,) = executor.run([job], run_dir)
        except KeyboardInterrupt:  # the first take stays the round's
            if aside.exists():
                os.replace(str(aside), str(notebook))
            results.write_result(str(run_folder.record_path(folder, job.stem)), first, first["status"])
            raise
        probes.append(second.get("machine_probe"))
        fastest = run_folder.fastest_probe(probes)
        takes = []
        for record in (first, second):
            score, words = run_folder.disturbance(record.get("machine_probe"), fastest)
            takes.append({"status": record["status"], "disturbed": words, "score": score,
                          "metrics": record.get("metrics"), "machine_probe": record.get("machine_probe")})
        used = 2 if second["status"] == "ok" and takes[1]["score"] < takes[0]["score"] else 1
        for number, take in enumerate(takes, 1):
            take["used"] = number == used
            del take["score"]
        if used == 1:  # the first take stays: its notebook back, the second's aside
            if notebook.exists():
                os.replace(str(notebook), str(aside.with_name(job.stem + ".again.ipynb")))
            if aside.exists():
                os.replace(str(aside), str(notebook))
        kept = dict(first if used == 1 else second, takes=takes)
        results.write_result(str(run_folder.record_path(folder, job.stem)), kept, kept["status"])
        say("[again] {}: take {} used ({})".format(job.progress_name, used,
                                                   takes[used - 1]["disturbed"] or "undisturbed"))


def write_rows_not_run(settings, run_dir):
    """The rows of the selected frameworks that have no notebook to run: an absent framework's for every task, and a
    task a framework lacks, each saying why."""
    for absent in catalog.absent_selected(settings.frameworks):
        for task in settings.tasks or list(tasks.TASKS):
            record = results.failure_record(absent.label, task, settings.profile, "unavailable", absent.reason)
            stem = "{}_{}".format(absent.label, tasks.TASKS[task].notebook)
            results.write_result(str(run_folder.record_path(run_dir, stem)), record, "unavailable")
    for framework, task, why in catalog.lacking(settings.frameworks, settings.tasks):
        for variant in framework.variants:
            record = results.failure_record(framework.label, task, settings.profile, "unavailable", why,
                                            variant=variant.name)
            stem = catalog.notebook_path(framework, task).stem + ("-" + variant.name if variant.name else "")
            results.write_result(str(run_folder.record_path(run_dir, stem)), record, "unavailable")


def finished_in_every_round(executed, job):
    """True when `job` has a finished record in the folder of each of the run's rounds."""
    return all(run_folder.finished(run_folder.round_folder(executed.run_dir, number), job.stem)
               for number in range(1, executed.repeat + 1))


def not_run_here(executed):
    """The jobs of `executed` that this machine can never run (their environment's build failed for what it lacks)
    and that have no finished record: like an absent framework's rows, they fail no run."""
    return [job for job in executed.jobs if job.variant.env in executed.lacked
            and not finished_in_every_round(executed, job)]


def exit_status(executed):
    """The run's exit status: the signal's where one stopped it, else 0 when every notebook has a finished record in
    every round but those this machine can never run (not_run_here), 1 otherwise."""
    if executed.interrupted:
        return executed.interrupted
    skipped = not_run_here(executed)
    return 0 if all(finished_in_every_round(executed, job) for job in executed.jobs if job not in skipped) else 1
