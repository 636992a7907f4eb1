"""The run command as one piece: its notebooks (runner/run/batch.py execute), then the checks, which read what the
notebooks wrote (runner/checks/stage.py), then the report, which reads records and verdicts (runner/report/). Each
stage writes into the run folder and the next reads it there; a signal (Ctrl-C, SIGTERM, SIGHUP) stops the stage it
arrives in, and the report is written of what finished, with `--resume` to finish the rest."""

import signal
import sys
import time

from runner.run import batch, executors


def run(settings):
    """Set up missing environments, run every selected notebook, check them, write the report; exit 1 if any notebook
    or check failed, 130 when interrupted by Ctrl-C, 143 by SIGTERM, 129 by SIGHUP (the running notebook's row, or
    the same-weights rows still to check, say so; --resume finishes the run)."""
    with batch.stopped_by_signals() as stopping:
        def stopped_by():
            return stopping[0] if stopping else signal.SIGINT  # SIGINT: a KeyboardInterrupt of another kind (Ray's)

        executed = batch.execute(settings, stopped_by)
        if isinstance(executed, int):  # stopped before its report: bad setup, data or cluster, or a full disk
            return executed
        if not executed.interrupted and not settings.no_equivalence:
            try:
                executed.interrupted = checked(settings, executed, stopped_by)
            except OSError as error:
                if error.errno not in batch.NO_SPACE:
                    raise
                return batch.no_space(error, executed.run_dir, "the checks' verdicts and the run's table")
        return reported(executed)


def checked(settings, executed, stopped_by):
    """Run the checks of `executed`'s notebooks (runner/checks/stage.py); 0, or 128 + the signal that stopped them."""
    from runner.checks import stage

    try:
        stage.run_checks(executed.runnable, executed.run_dir, settings.overrides, recheck=settings.recheck)
    except KeyboardInterrupt:
        number = stopped_by()
        print("\nInterrupted ({}) during the checks: writing the table, its unchecked rows saying `check interrupted`; "
              "`python3 run_all.py run --resume {}` finishes them.".format(batch.STOP_SIGNALS[number], executed.run_dir))
        return 128 + number
    return 0


def kind_report(executed):
    """The report of a run --each-gpu-kind: each kind's folder its own report, and merged.md/.html in the run folder,
    one column per GPU kind; the exit status of the run."""
    from runner import run_folder
    from runner.report import html_pages, run_report

    for folder in executed.kind_runs:
        run_report.write_report(folder)
    text = html_pages.merged_markdown(executed.kind_runs)
    (executed.run_dir / "merged.md").write_text(text)
    (executed.run_dir / "merged.html").write_text(html_pages.merged_page(executed.kind_runs))
    print()
    print(text)
    print("One run folder per GPU kind in {} ({}), their merged table in merged.md and merged.html ({} in all)".format(
        executed.run_dir, ", ".join(folder.name for folder in executed.kind_runs),
        executors.clock(time.time() - executed.started)))
    if executed.interrupted:
        return executed.interrupted
    finished = all(run_folder.finished(folder, job.stem) for folder in executed.kind_runs for job in executed.jobs)
    return 0 if finished else 1


def reported(executed):
    """Write the run's report (table, plots, report.html, Rosetta pages) of what its folder holds, say where it is and
    which rows this machine can never run; return the run's exit status (batch.exit_status)."""
    from runner.report import rosetta_pages, run_report

    run_dir = executed.run_dir
    try:
        if executed.kind_runs:  # --each-gpu-kind: a run folder per GPU kind, and their merged table
            return kind_report(executed)
        text = run_report.write_report(run_dir)
        try:
            rosetta_pages.write_pages(run_dir / "rosetta")
        except rosetta_pages.RosettaError as error:  # the run's results stand; the side-by-side pages cannot
            print("Rosetta pages not written: {}".format(error))
    except OSError as error:
        if error.errno not in batch.NO_SPACE:
            raise
        return batch.no_space(error, run_dir, "the run's table, plots, report or Rosetta pages")
    print()
    print(text)
    print("Executed notebooks, records, results.md/.csv/.json, results.png and rosetta/ are in {} ({} in all)".format(
        run_dir, executors.clock(time.time() - executed.started)))
    skipped = batch.not_run_here(executed)
    for name, why in sorted(executed.lacked.items()):
        rows = [job.stem for job in skipped if job.variant.env == name]
        if rows:
            print("Not run here, as for an absent framework (this machine cannot have what environment {} needs: {}): "
                  "{}".format(name, why, ", ".join(rows)))
    sys.stdout.flush()
    return batch.exit_status(executed)
