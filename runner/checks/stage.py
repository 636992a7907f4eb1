"""The checks as a stage of a run, after its notebooks: the same-weights check and, where the run trains on several
devices, the data-parallel check, each into the run's checks folder (runner/run_folder.py CHECKS_DIR) unless its
verdicts are there already (--resume runs what is missing). A stage stopped by a signal leaves the same-weights
rows it had still to give saying `check interrupted`, which --resume completes."""

import dataclasses
import time

from common import tasks
from runner import catalog, run_folder
from runner.checks import data_parallel, equivalence, verdict_cache
from runner.run import environments
from runner.run.executors import clock


def as_written(job):
    """`job` as its notebook stands, which is what the checks compare: default precision and compile mode, no sweep."""
    return dataclasses.replace(job, precision="auto", compile_mode="default", sweep=())


def check_equivalence(jobs, run_dir, say=print, recheck=False):
    """Compare the selected notebooks with PyTorch's from shared weights, into the run's checks folder, reusing a
    verdict kept for what decides it unless `recheck` (runner/checks/verdict_cache.py); where a signal stops it, write
    what it had still to give as interrupted (equivalence.write_interrupted) and stop."""
    defaults = {(job.framework.key, job.variant.name, job.task): as_written(job) for job in jobs}
    checked = [job for job in defaults.values()
               if job.task in equivalence.TASKS and job.framework.key != equivalence.REFERENCE]
    if not checked or equivalence.REFERENCE not in catalog.framework_keys():
        return
    reference_env = catalog.ENVIRONMENTS[catalog.select([equivalence.REFERENCE])[0].variant.env]
    if not environments.is_ready(reference_env):
        say("[equivalence] skipped: the reference, PyTorch, has no environment here")
        return
    started, folder = time.time(), run_dir / run_folder.CHECKS_DIR
    try:
        cache = verdict_cache.VerdictCache(reuse=not recheck) if verdict_cache.VerdictCache.wanted() else None
        equivalence.check(checked, folder, say=say, cache=cache)
    except KeyboardInterrupt:
        equivalence.write_interrupted(checked, folder)
        raise
    (folder / run_folder.EQUIVALENCE_INTERRUPTED_FILE).unlink(missing_ok=True)  # a stopped check's, now complete
    say("[equivalence] done in {}".format(clock(time.time() - started)))


def check_data_parallel(jobs, run_dir, overrides, say=print):
    """Where the run trains on several devices (--devices N, or devices set above 1), check each framework's
    data-parallel step against its single-device step, into the run's checks folder."""
    parallel = [job for job in jobs if tasks.get(job.task).devices(job.overrides(overrides)) > 1]
    if not parallel:
        return
    started = time.time()
    data_parallel.check([as_written(job) for job in parallel], run_dir / run_folder.CHECKS_DIR)
    say("[data parallel] done in {}".format(clock(time.time() - started)))


def run_checks(jobs, run_dir, overrides, say=print, recheck=False):
    """The checks of a run whose notebooks ran (`jobs`, those whose environment was there; `overrides` its --set
    values): each that has no verdict file in the run folder yet; `recheck`: no kept same-weights verdict reused."""
    checks = run_dir / run_folder.CHECKS_DIR
    if not (checks / run_folder.EQUIVALENCE_FILE).exists():
        check_equivalence(jobs, run_dir, say, recheck)
    if not (checks / run_folder.DATA_PARALLEL_FILE).exists():
        check_data_parallel(jobs, run_dir, overrides, say)
