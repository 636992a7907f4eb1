"""The fault suite: faults a user or a bad day plants, each injected for real, and what each one costs.

Every test injects one fault into a run (or a setup, or a report) on the fixture notebooks, which run on the
runner's own kernel, and checks two things: the fault gets its one-line reason where people look (the table,
stderr, the exit status), and no other result is lost. FAULTS names them all; the README's Reliability
section says what each gets, and a test keeps the two in step.
"""

import datetime
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import pytest
from conftest import FIXTURES

from runner import catalog, cli, run_folder
from runner.report import table
from runner.run import batch, environments, execution

# fault: what it gets. One test below per entry, named test_<fault>.
FAULTS = {
    "kernel_death": "a `failed: kernel died` row; the other rows intact; exit 1",
    "kernel_sigkill": "a `failed: kernel killed (SIGKILL), most likely out of memory` row with the kernel's peak "
                      "resident memory (`killed by the out-of-memory killer` where the cgroup counted it)",
    "hang": "stopped at --timeout, a `timeout` row; the other rows intact; exit 1",
    "ctrl_c": "the running notebook's row says `interrupted`, its kernel is stopped, the table of what finished is "
              "written; exit 130; `run --resume` finishes the run",
    "sigterm": "SIGTERM to the runner alone (a scheduler's end of a job's time): the same, the row says "
               "`interrupted (SIGTERM)`; exit 143",
    "sighup": "SIGHUP (a closed ssh session): the same, `interrupted (SIGHUP)`; exit 129; a run under `nohup` goes on",
    "disk_full": "one line naming the folder, its free space and what was not written; the records written before "
                 "stay whole; exit 1; `report` writes the table once there is room",
    "killed_build": "a half-built environment is seen as missing and rebuilt by the next setup",
    "bad_value": "a one-line error naming the parameter, its value and what is allowed; exit 2; nothing started",
    "truncated_record": "`report` names the file on stderr and in the table, reports the rest; exit 1",
    "runs_at_once": "runs started in the same second get folders of their own (-2, -3, ...)",
    "setups_at_once": "a second setup of the same environment waits for the first and builds nothing",
    "port_taken": "the kernel is started again with fresh ports: an `ok` row with `kernel_starts: 2` and the first "
                  "start's reason; a third failed start fails the row naming each start's reason",
    "machine_dies": "the other machines are stopped within seconds; the row of the one that failed says so first, "
                    "theirs `stopped because machine 1 failed first`",
}
FIXTURE_RUN = str(catalog.REPO / "tests" / "fixture_run.py")  # run_all.py on the fixture notebooks
BUILD = """
import sys
import tempfile
from pathlib import Path
from runner import catalog
from runner.run import environments
root = Path(sys.argv[1])
catalog.REPO, catalog.ENVS_DIR, catalog.JUPYTER_DIR, catalog.REQUIREMENTS_DIR = root, root / "envs", root / "jupyter", root
environments.ensure(catalog.Environment("tiny", "Tiny"), say=lambda line: print(line, flush=True), heartbeat=60)
"""
RUN_DIRS = """
import sys
import tempfile
from pathlib import Path
from runner.run import batch
for _ in range(5):
    print(batch.new_run_dir(Path(sys.argv[1]), "smoke").name)
"""


@pytest.fixture(autouse=True)
def runner_environment():
    if not environments.is_ready(catalog.ENVIRONMENTS["runner"]):
        pytest.fail("the runner environment is not built: run `python3 run_all.py setup runner`")


def start(code, *args, **options):
    """A Python process running `code` (or the script of that path) with `args`, in the repository, its output
    captured unbuffered (so that a test that times out shows the last line the process wrote)."""
    program = [code] if code.endswith(".py") else ["-c", code]
    options.setdefault("env", dict(os.environ, PYTHONUNBUFFERED="1"))
    return subprocess.Popen([sys.executable] + program + [str(a) for a in args], cwd=str(catalog.REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **options)


def fixture_run(tmp_path, *argv):
    """Run the runner on fixture notebooks in a process of its own; return (exit status, output, run folder)."""
    process = start(FIXTURE_RUN, *(list(argv) + ["-t", "cnn", "-p", "smoke", "--data", "synthetic", "--results", tmp_path, "-q"]))
    out = process.communicate(timeout=300)[0]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return process.returncode, out, run_dir


def statuses(run_dir):
    return {r["framework"]: r["status"] for r in table.load_records(run_dir)}


def wait_for(condition, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "waited {} s for {}".format(timeout, what)
        time.sleep(0.05)


def test_every_fault_has_its_test_and_its_line_in_the_readme():
    tests = {name[len("test_"):] for name in globals() if name.startswith("test_")}
    assert set(FAULTS) <= tests
    readme = (catalog.REPO / "README.md").read_text()
    section = readme[readme.index("## Reliability"):readme.index("## ", readme.index("## Reliability") + 3)]
    assert "injects {} faults".format(len(FAULTS)) in section
    for what in FAULTS.values():
        assert what in section, what


def test_kernel_death(tmp_path):
    status, out, run_dir = fixture_run(tmp_path, "-f", "ok,dies,raises")
    assert status == 1, out
    assert statuses(run_dir) == {"OK": "ok", "Dies": "failed", "Raises": "failed"}
    assert "failed: kernel died" in (run_dir / "results.md").read_text()


def test_kernel_sigkill(tmp_path):
    status, out, run_dir = fixture_run(tmp_path, "-f", "killed,ok")
    assert status == 1, out
    assert statuses(run_dir) == {"Killed": "failed", "OK": "ok"}
    error = {r["framework"]: r["error"] for r in table.load_records(run_dir)}["Killed"]
    assert error.startswith(("kernel killed (SIGKILL), most likely out of memory, peak resident memory ",
                             "kernel killed by the out-of-memory killer")), error
    assert 300 <= float(error.rsplit(" ", 2)[1]) < 2000  # the 300 MB it held, seen before it was killed


def memory_cgroup(path, limit_mb):
    """A cgroup v1 memory group below this process's, limited to `limit_mb` MB of memory (and swap); None where this
    machine does not let the test make one."""
    try:
        with open("/proc/self/cgroup") as lines:
            mine = next(line.strip().split(":", 2)[2] for line in lines if line.split(":")[1] == "memory")
        group = Path("/sys/fs/cgroup/memory{}".format(mine.rstrip("/"))) / path
        group.mkdir()
    except (OSError, StopIteration, IndexError):
        return None
    for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
        try:
            (group / name).write_text(str(limit_mb << 20))
        except OSError:
            pass
    return group


def test_kernel_oom_killed(tmp_path):
    group = memory_cgroup("rosetta-oom-{}".format(os.getpid()), 600)  # the runner, and a kernel that takes all it can
    if group is None:
        pytest.skip("this machine does not let the test make a memory cgroup (cgroup v1, writable) to fill")
    try:
        process = start(FIXTURE_RUN, "-f", "bloats", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--results",
                        tmp_path, "-q", preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
        out = process.communicate(timeout=300)[0]
    finally:
        group.rmdir()
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    error = {r["framework"]: r["error"] for r in table.load_records(run_dir)}["Bloats"]
    assert process.returncode == 1 and error.startswith("kernel killed by the out-of-memory killer"), out[-2000:]


def test_the_words_for_a_kernel_that_died(monkeypatch):
    from runner.run import execution

    monkeypatch.setattr(execution, "oom_kills", lambda: 3)
    reason = execution.dead_kernel_reason
    assert reason({"exit": -9, "peak_kb": 2048 * 1024}, 2, None) == ("kernel killed by the out-of-memory killer (its "
                                                                     "cgroup counted an oom_kill), peak resident memory 2048 MB")
    assert reason({"exit": -9, "peak_kb": None}, 3, None) == "kernel killed (SIGKILL), most likely out of memory"
    assert reason({"exit": -9, "peak_kb": 10240}, None, None).endswith("most likely out of memory, peak resident memory 10 MB")
    assert reason({"exit": -11, "peak_kb": None}, 3, None) == "kernel died: killed by SIGSEGV"
    assert reason({"exit": 9, "peak_kb": None}, 3, None) == "kernel died (exit status 9)"
    assert reason({}, 3, RuntimeError("Kernel died\nmore")) == "kernel died: Kernel died"  # the watcher saw no exit


def test_hang(tmp_path):
    status, out, run_dir = fixture_run(tmp_path, "-f", "hangs,ok", "--timeout", "5")
    assert status == 1, out
    assert statuses(run_dir) == {"Hangs": "timeout", "OK": "ok"}
    assert "timeout: stopped after 5" in (run_dir / "results.md").read_text()


def kernels_in(run_dir):
    """Processes whose working folder is the run folder: the kernels papermill started there."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.path.realpath(str(proc / "cwd")) == os.path.realpath(str(run_dir)):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def resumed_with_a_timeout(run_dir):
    """`run --resume` of a fixture run, its notebooks now stopped after 5 s (the hanging one would hang again);
    returns its exit status and output."""
    stored = json.loads((run_dir / run_folder.RUN_FILE).read_text())
    stored["timeout"] = 5
    (run_dir / run_folder.RUN_FILE).write_text(json.dumps(stored))
    resumed = start(FIXTURE_RUN, "run", "--resume", run_dir, "-q")
    out = resumed.communicate(timeout=300)[0]
    return resumed.returncode, out


def test_ctrl_c(tmp_path):
    results = tmp_path / "results"
    process = start(FIXTURE_RUN, "-f", "ok,hangs,raises", "-t", "cnn", "-p", "smoke", "--data", "synthetic",
                    "--results", results, "-q",
                    start_new_session=True)  # a process group of its own, as a terminal's job is
    wait_for(lambda: any(results.glob("*/hanging")), "the hanging cell to run")  # its kernel is up and busy
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    assert kernels_in(run_dir)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in a terminal signals the whole group
    out = process.communicate(timeout=120)[0]
    assert process.returncode == batch.INTERRUPTED, out
    assert statuses(run_dir) == {"OK": "ok", "Hangs": "interrupted"}  # Raises never started: no row yet
    assert "| interrupted (Ctrl-C) after" in (run_dir / "results.md").read_text()
    wait_for(lambda: not kernels_in(run_dir), "the kernel to stop", timeout=30)
    # finishing it: what is missing or interrupted runs again (Hangs, bounded by a timeout this time, and Raises)
    status, out = resumed_with_a_timeout(run_dir)
    assert status == 1 and "2 of its 3 notebooks to run" in out, out
    assert statuses(run_dir) == {"OK": "ok", "Hangs": "timeout", "Raises": "failed"}


def communicate_or_show_stacks(process, timeout):
    """The output of a fixture run once it ends; where it has not ended after `timeout` seconds, fail with the end of
    its output and the stack of each of its threads (tests/fixture_run.py writes them on SIGUSR1), then kill it."""
    try:
        return process.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGUSR1)
        time.sleep(2)
        process.kill()
        pytest.fail("the run did not end {} s after the signal; its last output and its threads' stacks:\n{}".format(
            timeout, process.communicate()[0][-6000:]))


def stopped_by(signal_number, tmp_path):
    """A fixture run sent `signal_number` (the runner's process alone) while a notebook hangs: check its rows, exit
    status and kernel, then that --resume finishes it. The run starts with the signal's default disposition, as from a
    terminal, also where the tests themselves run with it ignored (under `nohup`, which a child inherits: the run
    would then rightly go on, as test_sighup's second half asks, and this test wait in vain)."""
    results = tmp_path / "results"
    process = start(FIXTURE_RUN, "-f", "ok,hangs", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--results",
                    results, "-q", preexec_fn=lambda: signal.signal(signal_number, signal.SIG_DFL))
    wait_for(lambda: any(results.glob("*/hanging")), "the hanging cell to run")
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    process.send_signal(signal_number)
    out = communicate_or_show_stacks(process, 120)
    name = signal.Signals(signal_number).name
    assert process.returncode == 128 + signal_number, out
    assert "Interrupted ({})".format(name) in out and "--resume {}".format(run_dir) in out
    assert statuses(run_dir) == {"OK": "ok", "Hangs": "interrupted"}
    assert "| interrupted ({}) after".format(name) in (run_dir / "results.md").read_text()
    wait_for(lambda: not kernels_in(run_dir), "the kernel to stop", timeout=30)
    status, out = resumed_with_a_timeout(run_dir)
    assert status == 1 and "1 of its 2 notebooks to run" in out, out
    assert statuses(run_dir) == {"OK": "ok", "Hangs": "timeout"}


def test_a_stop_whose_keyboard_interrupt_was_lost(tmp_path):
    """The run's stop set while a notebook hangs, with no KeyboardInterrupt reaching papermill (one raised where code
    lost it, or not yet raised): the kernel is ended all the same and run_notebook raises KeyboardInterrupt, so the
    run stops as the signal asked."""
    stop = threading.Event()

    def stop_once_hanging():
        wait_for(lambda: (tmp_path / "hanging").exists(), "the hanging cell to run")
        stop.set()

    kernel = catalog.ENVIRONMENTS["runner"].kernel_name
    with execution.kernels_ended_on(stop):
        threading.Thread(target=stop_once_hanging, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            execution.run_notebook(FIXTURES / "Hangs_CNN.ipynb", tmp_path / "Hangs_CNN.ipynb", kernel,
                                   {"profile": "smoke"}, tmp_path, timeout=600, show_output=False)
    assert time.monotonic() - started < 300  # not the notebook's 600 s limit: its hour-long cell was cut short
    assert not execution.kernels() and not kernels_in(tmp_path)
    assert (tmp_path / "Hangs_CNN.ipynb").exists()  # what ran is kept, as for any notebook cut short


def test_a_stop_signal_sets_the_stop_whichever_thread_it_reaches():
    """A stop signal delivered to a thread other than the main one, while the main thread sleeps in a system call
    where Python's handler cannot run: the run's stop is set all the same, by the signal watcher, which reads the
    signal from the wakeup pipe (the handler itself never sets it), and the handler's KeyboardInterrupt follows."""
    interrupted = False
    ignored = signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as in a terminal, also where the tests run under nohup
    try:
        with batch.stopped_by_signals() as stopping:
            stop = execution.WatchedKernelManager.stop
            sleeper = threading.Thread(target=time.sleep, args=(60,), daemon=True)
            sleeper.start()
            try:
                signal.pthread_kill(sleeper.ident, signal.SIGHUP)
                time.sleep(5)  # not cut short: the signal went to the sleeper
            except KeyboardInterrupt:
                interrupted = True
            assert stop.wait(30) and stopping[:1] == [signal.SIGHUP] and interrupted
    finally:
        signal.signal(signal.SIGHUP, ignored)
    assert execution.WatchedKernelManager.stop is None


def test_sigterm(tmp_path):
    stopped_by(signal.SIGTERM, tmp_path)


def test_sighup(tmp_path):
    stopped_by(signal.SIGHUP, tmp_path)
    # under nohup (SIGHUP ignored from the start) the same signal changes nothing
    results = tmp_path / "nohup"
    process = start(FIXTURE_RUN, "-f", "ok,hangs", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--results",
                    results, "-q", "--timeout", "8", preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    wait_for(lambda: any(results.glob("*/hanging")), "the hanging cell to run")
    process.send_signal(signal.SIGHUP)
    out = process.communicate(timeout=120)[0]
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    assert process.returncode == 1 and statuses(run_dir) == {"OK": "ok", "Hangs": "timeout"}, out


def test_disk_full(tmp_path):
    small = tmp_path / "small"  # a 3 MB filesystem for the results, which the Fills notebook fills
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(small)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip("this machine does not let the test mount a small tmpfs: {}".format(mounted.stderr.strip()))
    try:
        process = start(FIXTURE_RUN, "-f", "ok,fills,raises", "-t", "cnn", "-p", "smoke", "--data", "synthetic",
                        "--results", small, "-q")
        out = process.communicate(timeout=300)[0]
        (run_dir,) = [p for p in small.iterdir() if p.is_dir()]
        assert process.returncode == 1, out
        line = [text for text in out.splitlines() if text.startswith("run_all.py: error: no space left")]
        assert len(line) == 1 and "to write in {}".format(run_dir) in line[0] and " MB free, " in line[0], out[-3000:]
        assert "the record of " in line[0] and "and the run's table not written" in line[0], line[0]
        assert statuses(run_dir)["OK"] == "ok"  # written before the disk filled
        assert run_folder.read_records(run_dir)[1] == []  # and every record there is whole
        assert not list(run_dir.glob("*.part-*"))  # no half-written record
        (run_dir / "filler.bin").unlink()  # room again: the report writes the table of what is there
        assert cli.main(["report", str(run_dir)]) == 0
        assert "| OK |" in (run_dir / "results.md").read_text()
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_build_on_a_full_disk(tmp_path):
    (tmp_path / "tiny.txt").write_text("# no packages: the venv and its kernel are the whole build\n")
    (tmp_path / "envs").mkdir()  # 3 MB: far less than a virtual environment takes
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(tmp_path / "envs")],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip("this machine does not let the test mount a small tmpfs: {}".format(mounted.stderr.strip()))
    try:
        build = start(BUILD, tmp_path)
        out = build.communicate(timeout=300)[0]
    finally:
        subprocess.run(["umount", str(tmp_path / "envs")], capture_output=True)
    assert build.returncode != 0
    assert "SetupError: building tiny stopped: no space left in {} (".format(tmp_path / "envs") in out, out[-2000:]
    assert "`python3 run_all.py setup tiny` builds it again" in out


def test_killed_build(tmp_path):
    (tmp_path / "tiny.txt").write_text("# no packages: the venv and its kernel are the whole build\n")
    build = start(BUILD, tmp_path)
    wait_for(lambda: (tmp_path / "envs" / "tiny" / "bin").exists(), "the build to start")
    build.kill()  # kill -9 halfway
    build.communicate(timeout=60)
    env_root = tmp_path / "envs" / "tiny"
    assert env_root.exists()
    again = start(BUILD, tmp_path)
    out = again.communicate(timeout=300)[0]
    assert again.returncode == 0, out
    assert "build incomplete; rebuilding" in out and "tiny: done in" in out


def test_bad_value(tmp_path, capsys):
    assert cli.main(["-t", "cnn", "--set", "batch_size=0", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "run_all.py: error: hyperparameter batch_size=0 for task cnn: must be an integer >= 1"
    assert not list(tmp_path.iterdir())  # nothing was started


def test_truncated_record(tmp_path, capsys):
    status, out, run_dir = fixture_run(tmp_path, "-f", "ok,raises")
    record = run_dir / "OK_CNN.result.json"
    record.write_text(record.read_text()[:40])  # a copy that broke off
    assert cli.main(["report", str(run_dir)]) == 1
    assert "warning: unreadable record: {}".format(record) in capsys.readouterr().err
    markdown = (run_dir / "results.md").read_text()
    assert "| unreadable record: OK_CNN.result.json: " in markdown and "failed: ValueError: planted failure" in markdown


def test_runs_at_once(tmp_path):
    first, second = start(RUN_DIRS, tmp_path), start(RUN_DIRS, tmp_path)
    names = first.communicate(timeout=60)[0].split() + second.communicate(timeout=60)[0].split()
    assert first.returncode == second.returncode == 0, names
    assert len(names) == 10 and len(set(names)) == 10 and sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
    assert any(name.endswith("-smoke-2") for name in names)  # the same second: numbered, not a FileExistsError


def test_runs_at_once_making_their_folder_at_the_same_moment(tmp_path, monkeypatch):
    """Four runs in one second (the clock frozen), held at a barrier until each is about to make its first folder
    in the results folder, ten times over: every run gets a folder of its own. A check-then-create (`exists()`,
    then `mkdir(exist_ok=True)`) hands all four the same one."""
    class OneSecond(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2025, 1, 2, 3, 4, 5)

    monkeypatch.setattr(batch, "datetime", types.SimpleNamespace(datetime=OneSecond))
    results, real_mkdir, runs, rounds = tmp_path / "results", os.mkdir, 4, 10

    def runs_together():
        barrier, waited, names = threading.Barrier(runs), set(), []

        def mkdir_together(path, *args, **kwargs):  # each run's first folder in results/ waits for all the others
            if Path(path).parent == results and threading.get_ident() not in waited:
                waited.add(threading.get_ident())
                barrier.wait(timeout=10)
            return real_mkdir(path, *args, **kwargs)

        def start_run():
            try:
                names.append(batch.new_run_dir(results, "smoke").name)
            except (OSError, RuntimeError) as error:  # a broken barrier too: reported below, not lost in the thread
                names.append(repr(error))

        monkeypatch.setattr(os, "mkdir", mkdir_together)
        threads = [threading.Thread(target=start_run) for _ in range(runs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        return names

    names = [name for _ in range(rounds) for name in runs_together()]
    base = "20250102-030405-smoke"
    expected = [base] + ["{}-{}".format(base, number) for number in range(2, runs * rounds + 1)]
    assert sorted(names) == sorted(expected) == sorted(p.name for p in results.iterdir()), sorted(names)


def test_setups_at_once(tmp_path):
    (tmp_path / "tiny.txt").write_text("# no packages: the venv and its kernel are the whole build\n")
    lock = tmp_path / "envs" / "tiny.lock"
    first = start(BUILD, tmp_path)
    wait_for(lambda: lock.exists() and lock.read_text().startswith("process"), "the first to hold the lock")
    second = start(BUILD, tmp_path)
    first_out, second_out = first.communicate(timeout=300)[0], second.communicate(timeout=300)[0]
    assert first.returncode == 0 and second.returncode == 0, first_out + second_out
    assert "tiny: creating with Python" in first_out and "tiny: done in" in first_out
    assert "tiny: process {} is building it; waiting until it is done".format(first.pid) in second_out
    assert "creating" not in second_out and "tiny: ready (" in second_out  # it used the first one's build
    assert lock.read_text() == ""  # released


def test_a_stopped_run_ends_its_kernels_with_what_they_started():
    """execution.end_kernels: this process's ipykernel children die with their process groups (what a kernel started,
    torchrun's workers say); any other child is left alone."""
    code = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    kernel = subprocess.Popen([sys.executable, "-c", code, "ipykernel_launcher"], start_new_session=True)
    other = subprocess.Popen(["sleep", "60"])
    try:
        wait_for(lambda: len(os.popen("pgrep -g {}".format(kernel.pid)).read().split()) == 2, "the kernel's child")
        assert execution.end_kernels() == [kernel.pid]
        assert kernel.wait(timeout=10) == -signal.SIGKILL and other.poll() is None
        wait_for(lambda: not os.popen("pgrep -g {}".format(kernel.pid)).read().split(), "its group to end")
    finally:
        other.kill()
        other.wait()


def test_a_node_s_folder_left_by_a_killed_runner_goes_when_the_next_one_starts():
    from runner.run import on_ray

    gone = subprocess.Popen(["true"])
    gone.wait()  # a process id that no longer runs: a runner SIGKILLed with its node's folder left behind
    left = Path(tempfile.mkdtemp(prefix="{}{}-".format(on_ray.FOLDER_PREFIX, gone.pid)))
    mine = Path(tempfile.mkdtemp(prefix="{}{}-".format(on_ray.FOLDER_PREFIX, os.getpid())))
    try:
        new = on_ray.node_folder()
        assert not left.exists() and mine.exists() and new.name.startswith("{}{}-".format(on_ray.FOLDER_PREFIX,
                                                                                          os.getpid()))
        new.rmdir()
    finally:
        shutil.rmtree(str(mine), ignore_errors=True)
        shutil.rmtree(str(left), ignore_errors=True)


def take_ports(monkeypatch, starts):
    """Plant a port collision in the next `starts` kernel starts: just before the kernel is launched, this process
    binds the shell port that jupyter_client chose for it, as another process can between that choice and the
    kernel's own bind. Returns the sockets holding the ports."""
    taken, launch = [], execution.WatchedKernelManager._async_launch_kernel

    async def launch_on_a_taken_port(manager, kernel_cmd, **kw):
        if len(taken) < starts:
            holder = socket.socket()
            holder.bind((manager.ip, manager.shell_port))
            holder.listen()
            taken.append(holder)
        return await launch(manager, kernel_cmd, **kw)

    monkeypatch.setattr(execution.WatchedKernelManager, "_async_launch_kernel", launch_on_a_taken_port)
    return taken


@pytest.mark.parametrize("collisions", [1, 3])
def test_port_taken(collisions, tmp_path, monkeypatch, fixture_catalog):
    taken, said = take_ports(monkeypatch, collisions), []
    (job,) = catalog.select(["ok"], ["cnn"])
    try:
        record = execution.run_job(job, tmp_path, "smoke", {"data_source": "synthetic"}, timeout=120,
                                   show_output=False, say=said.append)
        ports = [holder.getsockname()[1] for holder in taken]
    finally:
        for holder in taken:
            holder.close()
    log = run_folder.kernel_log_path(tmp_path, job.stem).read_text()
    assert log.count("--- kernel start") == min(collisions + 1, execution.KERNEL_STARTS)
    assert "Address already in use (addr='tcp://127.0.0.1:{}')".format(ports[0]) in log  # the kernel's own words
    if collisions == 1:
        assert record["status"] == "ok" and record["kernel_starts"] == 2
        assert record["kernel_start_errors"] == [
            "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:{}')".format(ports[0])]
        assert len(said) == 1 and "starting it again" in said[0]
        assert "kernel started 2 times (the first died: zmq.error.ZMQError: Address already in use" in \
            execution.starts_note(record)
    else:
        assert record["status"] == "failed" and record["kernel_starts"] == 3
        assert record["error"].startswith("kernel failed to start 3 times: 1) zmq.error.ZMQError: Address already in use")
        for number, port in enumerate(ports, 1):
            assert "{}) zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:{}')".format(number, port) \
                in record["error"]


def test_machine_dies(tmp_path):
    """Two machines of one notebook (tests/fixtures/Machines_CNN.ipynb): machine 1 dies as it starts, machine 0
    waits for it as a framework's rendezvous would, for ever; the run ends within seconds, not at the 600 s limit,
    with both outcomes and their reasons."""
    kernel = catalog.ENVIRONMENTS["runner"].kernel_name

    def machine(rank):
        def run(together):
            folder = tmp_path / "machine-{}".format(rank)
            folder.mkdir()
            return execution.run_notebook(FIXTURES / "Machines_CNN.ipynb", folder / "Machines_CNN.ipynb", kernel,
                                          {"profile": "smoke", "machine_rank": rank}, folder, timeout=600,
                                          show_output=False, together=together, name="machine {}".format(rank))
        return run

    started = time.monotonic()
    first, second = execution.run_together([machine(0), machine(1)])
    assert time.monotonic() - started < 30
    assert (second.status, first.status) == ("failed", "failed")
    assert second.error.startswith("kernel died (exit status 9)") and second.error.endswith("(machine 1 failed first)")
    assert first.error.startswith("stopped because machine 1 failed first (kernel died (exit status 9)")
    assert not execution.kernels()
    assert "machine 0 waits for machine 1" in (tmp_path / "machine-0" / "Machines_CNN.ipynb").read_text()
