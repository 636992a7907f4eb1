"""Run one notebook with papermill on its kernel, under a deadline, and always leave a result record.

The executed notebook is saved after every cell, so a failure or a timeout keeps what ran. A
notebook that writes no record of its own (it failed, timed out or its kernel died) gets one from
the runner with the status and the first line of the error.
"""

import concurrent.futures
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

import nbformat
import papermill
from jupyter_client import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from common import results
from runner import catalog, run_folder
from runner.run import environments

# Exceptions that mean a run did not fit in memory, by name as the kernel reports them (PyTorch, TensorFlow, JAX/XLA,
# Python), and words of their messages: such a run's row says 'out of memory', and a sweep goes on past it.
OUT_OF_MEMORY_ERRORS = ("OutOfMemoryError", "ResourceExhaustedError", "MemoryError", "XlaRuntimeError", "MXNetError",
                        "CUDARuntimeError", "OutOfMemory")
OUT_OF_MEMORY_WORDS = ("out of memory", "resource_exhausted", "resource exhausted", "cannot allocate memory",
                       "failed to allocate")


class _CellOutputToConsole(logging.Handler):
    """Shows the notebook's own output (papermill's log_output) indented under the runner's progress lines."""

    def emit(self, record):
        message = record.getMessage()
        if message.startswith(("Executing", "Ending Cell", "Input Notebook", "Output Notebook", "Working directory")):
            return
        for line in message.rstrip().splitlines():
            if line.strip():
                sys.stdout.write("    | " + line + "\n")
        sys.stdout.flush()


def _install_log_handler():
    logger = logging.getLogger("papermill")
    if not any(isinstance(h, _CellOutputToConsole) for h in logger.handlers):
        logger.addHandler(_CellOutputToConsole())
    logger.setLevel(logging.INFO)
    logger.propagate = False


KERNEL_LOG_START = "--- kernel start"  # begins each start's part of a kernel's log (run_folder.kernel_log_path)
# What a kernel does not inherit from the runner: a Ray cluster's token and address, which notebooks never need
HIDDEN_FROM_KERNELS = ("RAY_", "ROSETTA_RAY_")


def kernel_environ(environ):
    """`environ` less what a kernel must not see (HIDDEN_FROM_KERNELS: the cluster's token and address); where the code
    is not the environments' checkout (a Ray task's shipped code), that code first on PYTHONPATH, ahead of the
    checkout the environments' .pth files name."""
    kept = {name: value for name, value in environ.items() if not name.startswith(HIDDEN_FROM_KERNELS)}
    if catalog.REPO != catalog.INSTALL:
        kept["PYTHONPATH"] = os.pathsep.join(filter(None, [str(catalog.REPO), kept.get("PYTHONPATH", "")]))
    return kept


class WatchedKernelManager(AsyncKernelManager):
    """papermill's kernel manager, which starts its kernel without the cluster's secrets (kernel_environ), with its
    process's own stdout and stderr in a log file (`log_path`: what libraries print below Python, such as TensorFlow's
    C++ log, stays off the console), and watches its process: how it ended (exit status or signal) and the most memory
    it held (`watch`). run_notebook makes a subclass of it for each notebook (for_notebook), so that notebooks run at
    once from several threads (the machines of a data-parallel run) each watch their own kernel."""

    watch = None  # {"process", "exit", "peak_kb"} of this notebook's kernel
    log_path = None
    stop = None  # the running run's stop (kernels_ended_on), set once a signal stops it

    extra_env = {}  # variables set in this notebook's kernel's environment (run --kernel-env)

    @classmethod
    def for_notebook(cls, log_path, extra_env=None):
        """A subclass for one notebook, its kernel's output going to `log_path`, `extra_env` set in its environment."""
        return type(cls.__name__, (cls,), {"watch": {"process": None, "exit": None, "peak_kb": None},
                                           "log_path": log_path, "extra_env": dict(extra_env or {})})

    async def _async_pre_start_kernel(self, **kw):
        kw["env"] = dict(kernel_environ(kw.get("env", os.environ)), **self.extra_env)
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if self.log_path is None:
            await super()._async_launch_kernel(kernel_cmd, **kw)
        else:
            Path(self.log_path).parent.mkdir(parents=True, exist_ok=True)
            with open(str(self.log_path), "ab") as log:  # the kernel keeps its own copy of the descriptor
                log.write("{}, ports {} ---\n".format(KERNEL_LOG_START, ",".join(str(port) for port in (
                    self.shell_port, self.iopub_port, self.stdin_port, self.control_port, self.hb_port))).encode())
                log.flush()
                await super()._async_launch_kernel(kernel_cmd, **dict(kw, stdout=log, stderr=log))
        if self.watch is not None:  # a kernel that is still starting can be stopped too (_stopped_with)
            self.watch["process"] = getattr(self.provisioner, "process", None)

    async def _async_post_start_kernel(self, **kw):
        await super()._async_post_start_kernel(**kw)
        process = getattr(self.provisioner, "process", None)
        if process is not None and self.watch is not None:
            threading.Thread(target=_watch, args=(process, self.watch), daemon=True).start()


def _watch(process, watch, every_s=0.25):
    """Until `process` ends, note its peak resident memory (VmHWM); then its exit status (-N: killed by signal N)."""
    while True:
        status = process.poll()
        if status is not None:
            watch["exit"] = status
            return
        try:
            with open("/proc/{}/status".format(process.pid)) as lines:
                for line in lines:
                    if line.startswith("VmHWM:"):
                        watch["peak_kb"] = max(watch["peak_kb"] or 0, int(line.split()[1]))
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(every_s)


def kernels():
    """The ids of the kernels this process started that still run: its children running ipykernel."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"ipykernel_launcher" in command:
            found.append(int(proc.name))
    return found


def kernels_ended():
    """Whether every kernel this process started has exited (what the machine probe waits for after a notebook)."""
    return not kernels()


def end_kernels():
    """Kill every kernel this process started that still runs, each with its process group (a kernel leads a session
    of its own: what it started goes with it); return their ids. A run stopped by a signal calls it, so that no kernel
    outlives the run, whatever the moment the signal came (a kernel still starting is one papermill cannot yet
    stop)."""
    ended = []
    for pid in kernels():
        if _kill_group(pid):
            ended.append(pid)
    return ended


@contextlib.contextmanager
def kernels_ended_on(stop, every_s=0.2):
    """While it lasts: once `stop` is set (a threading.Event: the run's signal watcher sets it on a stop signal,
    runner/run/batch.py stopped_by_signals), a thread ends every kernel this process runs or starts, every `every_s`
    seconds, and run_notebook raises KeyboardInterrupt when papermill returns. So a signal stops the run whatever its
    moment: also where its KeyboardInterrupt was raised inside code that lost it, or came late, or while a kernel was
    still starting. Leaving sets `stop` to free the thread."""
    finished = threading.Event()

    def reap():
        stop.wait()
        while not finished.is_set():
            end_kernels()
            finished.wait(every_s)

    reaper = threading.Thread(target=reap, name="kernel reaper", daemon=True)
    reaper.start()
    WatchedKernelManager.stop = stop
    try:
        yield
    finally:
        WatchedKernelManager.stop = None
        finished.set()
        stop.set()
        reaper.join()


def oom_kills():
    """How many processes the out-of-memory killer has ended in this process's cgroup (cgroup v2's memory.events, or
    v1's memory.oom_control), None where neither can be read."""
    try:
        with open("/proc/self/cgroup") as lines:
            groups = dict(line.strip().split(":", 2)[1:] for line in lines if line.count(":") >= 2)
    except OSError:
        return None
    for controller, template in (("", "/sys/fs/cgroup{}/memory.events"),
                                 ("memory", "/sys/fs/cgroup/memory{}/memory.oom_control")):
        try:
            with open(template.format(groups[controller].rstrip("/"))) as lines:
                return next(int(line.split()[1]) for line in lines if line.startswith("oom_kill "))
        except (KeyError, OSError, StopIteration, ValueError, IndexError):
            continue
    return None


def dead_kernel_reason(watch, oom_kills_before, error):
    """The row's words for a kernel that died: killed by the OOM killer (the cgroup counted one more), by SIGKILL
    (most likely out of memory), by another signal, or its exit status; with its peak resident memory where known."""
    deadline = time.monotonic() + 2
    while watch.get("exit") is None and time.monotonic() < deadline:  # the watcher notes the exit within 0.25 s
        time.sleep(0.05)
    status = watch.get("exit")
    peak = ", peak resident memory {:.0f} MB".format(watch["peak_kb"] / 1024.0) if watch.get("peak_kb") else ""
    after = oom_kills()
    if status == -signal.SIGKILL and oom_kills_before is not None and after is not None and after > oom_kills_before:
        return "kernel killed by the out-of-memory killer (its cgroup counted an oom_kill){}".format(peak)
    if status == -signal.SIGKILL:
        return "kernel killed (SIGKILL), most likely out of memory{}".format(peak)
    if status is not None and status < 0:
        return "kernel died: killed by {}{}".format(signal.Signals(-status).name, peak)
    if status is not None:
        return "kernel died (exit status {}){}".format(status, peak)
    return "kernel died: {}".format(results.first_line(str(error)))


PARTIAL_DIR = ".partial"  # where an executed notebook is written while it runs, beside the folder it lands in
KERNEL_STARTS = 3  # a kernel that dies before it replies to kernel_info ran nothing of the notebook: it is started
# again, with fresh ports, until this many starts in all (another process can take a port that jupyter_client chose
# before the kernel binds it: zmq's "Address already in use")
START_DIED = "Kernel died before replying to kernel_info"  # jupyter_client's words for such a start
START_FAILED = "start failed"  # _execute's status for it


class Outcome:
    """How one notebook's run ended: its status ('ok', 'failed', 'timeout', 'unsupported'), the first line of its
    error (None where it ran), and the reasons of the kernel starts that failed (an ok row may have some: they were
    started again)."""

    def __init__(self, status, error=None, failed_starts=(), kernel_starts=1):
        self.status, self.error, self.failed_starts = status, error, tuple(failed_starts)
        self.kernel_starts = kernel_starts  # how many kernels were started for the notebook

    def record_fields(self):
        """What the record says of the starts where there were several: kernel_starts and each failed start's
        reason ({} after one start)."""
        if self.kernel_starts == 1:
            return {}
        return {"kernel_starts": self.kernel_starts, "kernel_start_errors": list(self.failed_starts)}


def starts_note(record):
    """The progress line's words for a record whose kernel was started several times ('' after one start)."""
    starts = record.get("kernel_starts") or 1
    if starts == 1:
        return ""
    return "; kernel started {} times (the first died: {})".format(starts, record["kernel_start_errors"][0])


class Together:
    """Notebooks run at once as the machines of one run (a data-parallel notebook on several machines): the first whose
    notebook fails or is refused stops the others at once, which would otherwise wait for it until their time limit.
    Each run_notebook of the group gets it with its own name ('machine 1')."""

    def __init__(self):
        self.failed = threading.Event()
        self.first = None  # (name, error) of the first notebook that did not finish
        self._lock = threading.Lock()

    def fail(self, name, error):
        """Say that notebook `name` ended without finishing, with `error`; the first one said is kept."""
        with self._lock:
            if self.first is None:
                self.first = (name, error)
        self.failed.set()

    def outcome(self, name, status, error):
        """(status, error) of notebook `name`, which ended with `status` and `error`: a notebook that did not finish
        says it failed first, or that another did and stopped it."""
        if status == "ok":
            return status, error
        self.fail(name, error)
        first, why = self.first
        if first == name:
            return status, "{} ({} failed first)".format(error, name)
        return "failed", "stopped because {} failed first ({})".format(first, why)


def run_together(calls):
    """Call each of `calls` (call(together)) at once, each in a thread of its own, with one Together: the machines of
    one notebook, each running its notebook with it, so that the first that does not finish stops the others. Return
    what each returned or raised, in order."""
    together = Together()
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        running = [pool.submit(call, together) for call in calls]
        concurrent.futures.wait(running)
    return [future.exception() or future.result() for future in running]


@contextlib.contextmanager
def _stopped_with(together, watching, every_s=0.1):
    """While it lasts: once `together` fails (another machine's notebook ended without finishing), kill the kernel
    that `watching()` names ({"process"}), with its process group, and any kernel started after it. Nothing to do
    without `together`."""
    if together is None:
        yield
        return
    finished = threading.Event()

    def stop():
        while not finished.wait(every_s):
            process = (watching() or {}).get("process")
            if together.failed.is_set() and process is not None and process.poll() is None:
                _kill_group(process.pid)

    stopper = threading.Thread(target=stop, name="partner stop", daemon=True)
    stopper.start()
    try:
        yield
    finally:
        finished.set()
        stopper.join()


def _kill_group(pid):
    """SIGKILL process `pid`, with its process group where it leads one (a kernel does: what it started goes too);
    False where it had ended."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except OSError:  # it ended meanwhile
        return False


def run_notebook(input_path, output_path, kernel_name, parameters, cwd, timeout, show_output=True, together=None,
                 name=None, say=None, extra_env=None):
    """Execute a notebook; return its Outcome, whose status is 'ok', 'failed', 'timeout' or 'unsupported'.

    `timeout` bounds the whole notebook: each cell may use only what is left of it. The executed notebook is saved
    after every cell into PARTIAL_DIR beside `output_path`, and moved to `output_path` at the end if it is whole (a
    notebook cut short by a full disk is dropped, never left half-written among the results). The kernel's own
    output goes to its log (run_folder.kernel_log_path); a kernel that dies before it replies to kernel_info is
    started again, up to KERNEL_STARTS starts, each said by `say`. With `together` (a Together), the notebook is one
    machine of several, named `name`: the first of them that does not finish stops the others. `extra_env`: variables
    set in the kernel's environment.
    """
    environments.use_project_kernels()
    if show_output:
        _install_log_handler()
    deadline = time.monotonic() + timeout
    kills_before = oom_kills()
    partial = Path(output_path).parent / PARTIAL_DIR / Path(output_path).name
    partial.parent.mkdir(exist_ok=True)
    log_path = run_folder.kernel_log_path(Path(output_path).parent, Path(output_path).stem)
    failed_starts, current, starts = [], {"manager": None}, 0
    try:
        with _stopped_with(together, lambda: current["manager"] and current["manager"].watch):
            while True:
                current["manager"] = manager = WatchedKernelManager.for_notebook(log_path, extra_env)
                starts += 1
                status, error = _execute(input_path, partial, kernel_name, parameters, cwd, timeout, show_output,
                                         deadline, kills_before, manager)
                stopped = together is not None and together.failed.is_set()
                if status != START_FAILED or stopped or starts == KERNEL_STARTS:
                    break
                failed_starts.append(error)
                if say:
                    say("{}'s kernel died as it started ({}): starting it again".format(name or Path(output_path).stem,
                                                                                     error))
        if status == START_FAILED:
            failed_starts.append(error)
            status, error = "failed", "kernel failed to start {} times: {}".format(len(failed_starts), "; ".join(
                "{}) {}".format(number, why) for number, why in enumerate(failed_starts, 1)))
        if together is not None:
            status, error = together.outcome(name, status, error)
        stop = WatchedKernelManager.stop
        if stop is not None and stop.is_set():  # a signal came; its KeyboardInterrupt did not reach this far
            raise KeyboardInterrupt
    finally:
        _land(partial, Path(output_path))
    if status == "timeout":
        _note_in_notebook(output_path, "The runner stopped this notebook: it ran past its {} s limit.".format(timeout))
    return Outcome(status, error, failed_starts, starts)


def kernel_log_error(log_path):
    """The last line of the latest start's part of a kernel's log that names an error ('' where none does)."""
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        return ""
    latest = text.rsplit(KERNEL_LOG_START, 1)[-1].splitlines()[1:]
    errors = [line.strip() for line in latest if "Error" in line or "error:" in line]
    return errors[-1] if errors else ""


def _execute(input_path, output_path, kernel_name, parameters, cwd, timeout, show_output, deadline, kills_before,
             manager):
    """papermill's run of one notebook on a kernel of `manager` (a WatchedKernelManager.for_notebook), its outcome as
    (status, error); START_FAILED where the kernel died before it replied to kernel_info."""
    try:
        papermill.execute_notebook(  # the kernel starts in `cwd` (nbclient's resources), this process stays where it is:
            # papermill's own cwd= would chdir the whole process, and two notebooks started at once from two threads
            # (the machines of a data-parallel test) would leave it in one of their folders
            str(input_path), str(output_path), parameters=parameters, kernel_name=kernel_name,
            resources={"metadata": {"path": str(Path(cwd).resolve())}},
            log_output=show_output, progress_bar=False, start_timeout=120, request_save_on_cell_execute=True,
            execution_timeout=timeout, timeout_func=lambda cell: max(1, int(deadline - time.monotonic())),
            kernel_manager_class=manager,
        )
        return "ok", None
    except papermill.PapermillExecutionError as error:
        message = "{}: {}".format(error.ename, results.first_line(error.evalue) or "")
        if error.ename == "Unsupported":  # common.variants.Unsupported: the framework or device has no such variant
            return "unsupported", results.first_line(error.evalue)
        if out_of_memory(error.ename, error.evalue):
            return "failed", "out of memory: " + message
        return "failed", message
    except CellTimeoutError:
        return "timeout", "stopped after {} s (the notebook's time limit)".format(timeout)
    except DeadKernelError as error:
        reason = dead_kernel_reason(manager.watch, kills_before, error)
        said = kernel_log_error(manager.log_path)
        return "failed", reason + ("; its log: " + said if said else "")
    except Exception as error:  # noqa: BLE001 - any other failure becomes this notebook's row, the run goes on
        if isinstance(error, RuntimeError) and START_DIED in str(error):
            return START_FAILED, kernel_log_error(manager.log_path) or results.first_line(str(error))
        return "failed", "{}: {}".format(type(error).__name__, results.first_line(str(error)))


def _land(partial, output_path):
    """Move the executed notebook from its partial place to `output_path` if it reads as a notebook; else drop it."""
    if not partial.exists():
        return
    try:
        json.loads(partial.read_text())
        os.replace(str(partial), str(output_path))
    except (OSError, ValueError):
        partial.unlink()
    try:
        partial.parent.rmdir()
    except OSError:
        pass  # another notebook's is there, or it is gone


def out_of_memory(name, message):
    """True for an error that says the run did not fit in memory (OUT_OF_MEMORY_ERRORS with such words, or
    PyTorch's OutOfMemoryError and Python's MemoryError, whatever their words)."""
    if name in ("OutOfMemoryError", "MemoryError"):
        return True
    text = (message or "").lower()
    return name in OUT_OF_MEMORY_ERRORS and any(words in text for words in OUT_OF_MEMORY_WORDS)


# the errors of a notebook calling what a framework's older release does not have (a module, a function, an argument):
# on a release row (`-f jax@0.6.2`) its row is 'unsupported' with that error, not a failure of the run
RELEASE_LACKS = ("AttributeError", "ImportError", "ModuleNotFoundError", "TypeError")
# the same in words where the error's type says less: Keras 3's for a layer's argument its release does not take
# (Keras 3.0's GRU has no use_cudnn)
RELEASE_LACKS_WORDS = ("ValueError: Unrecognized keyword arguments passed to ",)


def release_lacks(error):
    """Whether a release row's error (`Name: message`) is its notebook calling what that release does not have."""
    error = error or ""
    return error.split(":")[0] in RELEASE_LACKS or error.startswith(RELEASE_LACKS_WORDS)


def failure_record(job, profile, status, error, notebook=None, duration_s=None):
    """The runner's record for a job that produced none itself: its framework, variant, precision, compile mode and
    swept value, with the status and the first line of the error."""
    record = results.failure_record(job.framework.label, job.task, profile, status, error, variant=job.variant.name,
                                    notebook=notebook, duration_s=duration_s, precision=job.precision,
                                    compile_mode=job.compile_mode)
    record["sweep"] = job.swept or None
    record["kernel_env"] = dict(job.kernel_env) or None
    record["release"] = job.framework.release
    return record


def write_not_run(folder, job, profile, status, why, notebook=None, duration_s=None):
    """Write into `folder` and return the runner's record of a job that did not run to its end: 'unavailable' (its
    environment or a node that can run it missing), 'interrupted' (a signal), 'failed' (its node lost). The one place
    such records are written, whatever ran the job (runner/run/executors.py)."""
    record = failure_record(job, profile, status, why, notebook=notebook, duration_s=duration_s)
    record["round"] = job.round
    results.write_result(str(run_folder.record_path(folder, job.stem)), record, status)
    return record


def _note_in_notebook(path, text):
    """Append a markdown cell saying why the notebook stopped, so the saved copy explains itself."""
    try:
        notebook = nbformat.read(str(path), as_version=4)
        notebook.cells.append(nbformat.v4.new_markdown_cell("**Runner:** " + text))
        nbformat.write(notebook, str(path))
    except (OSError, ValueError):
        pass


def notebook_parameters(job, profile, parameters, record_path):
    """The papermill parameters of one catalog job: the run's, its profile, variant, precision and compile mode, and
    where its record goes."""
    params = dict(parameters, profile=profile, result_path=str(record_path), precision=job.precision,
                  compile_mode=job.compile_mode)
    params.update(dict(job.variant.parameters))
    return params


def run_job(job, run_dir, profile, parameters, timeout, show_output=True, watch=None, together=None, name=None,
            say=None):
    """Run one catalog job into `run_dir`; return its result record (the notebook's own, or a failure record).
    `watch`: what starts the machine's watch over the notebook (runner/run/machine_probe.py watching), its readings
    kept in the record; `together`, `name`, `say`: as run_notebook's."""
    output = run_dir / (job.stem + ".ipynb")
    record_path = run_folder.record_path(run_dir, job.stem)
    watched = watch() if watch else None
    started = time.time()
    outcome = run_notebook(job.notebook, output, job.environment.kernel_name,
                           notebook_parameters(job, profile, parameters, record_path), run_dir, timeout, show_output,
                           together=together, name=name, say=say, extra_env=dict(job.kernel_env))
    elapsed = round(time.time() - started, 3)
    extra = dict(outcome.record_fields())
    if watched:
        extra["machine_probe"] = watched.ended(kernels_ended)
    return finish_record(job, run_dir, profile, outcome.status, outcome.error, elapsed, extra=extra)


def finish_record(job, run_dir, profile, status, error, elapsed, extra=None):
    """Write and return the record of a job that ran into `run_dir`: the notebook's own where it ran to the end and
    left a valid one, else the runner's failure record; `extra`: fields added to either (where it ran, on Ray)."""
    output = run_dir / (job.stem + ".ipynb")
    record_path = run_folder.record_path(run_dir, job.stem)
    record = None
    if status == "ok":
        try:
            record = results.read_result(str(record_path))
        except (OSError, ValueError) as problem:
            status, error = "failed", "the notebook ran but left no valid result record ({})".format(
                results.first_line(str(problem)))
    if record is None:
        if job.framework.release and status == "failed" and release_lacks(error):
            status = "unsupported"  # the notebook runs on the framework's own pins: this release lacks what it calls
        record = failure_record(job, profile, status, error, duration_s=elapsed)
    if job.framework.release:  # its notebook wrote the framework's name: its row is the release's ('JAX 0.6.2')
        record.update(framework=job.framework.label, release=job.framework.release)
    record["notebook"] = output.name
    record["sweep"] = job.swept or None
    record["kernel_env"] = dict(job.kernel_env) or None
    record["round"] = job.round
    record.update(extra or {})
    results.write_result(str(record_path), record, status=record["status"])
    return record
