"""The batch on Ray (`run --on ray`, runner/run/on_ray.py): the same rows as a sequential run, every record saying where
it ran, a lost worker's notebook run again, one notebook per (logical) GPU at once. Each test starts Ray on loopback for
its run and stops it; the unit tests of the scheduling rules need no Ray."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from conftest import require_environment
from test_runner import run_dirs

from runner import catalog, cli
from runner.report import table
from runner.run import on_ray

RUN = ["-t", "cnn", "-p", "smoke", "--data", "synthetic", "--set", "epochs=2", "--no-equivalence", "-q"]


def node(resources, alive=True):
    return {"NodeID": "n" * 56, "NodeManagerAddress": "127.0.0.3", "Alive": alive, "Resources": resources}


def job_in(env):
    return catalog.Job(catalog.Framework("ok", "OK", "OK", (catalog.Variant(None, env),)),
                       catalog.Variant(None, env), "cnn")


def test_a_job_asks_for_a_gpu_where_its_environment_computes_on_one_else_a_whole_node():
    gpu_node = node({"GPU": 2, "CPU": 8, "rosetta_gpu_env_pytorch": 1000, "rosetta_env_pytorch": 1000, "rosetta_node": 1})
    cpu_node = node({"CPU": 2, "rosetta_env_theano": 1000, "rosetta_env_pytorch": 1000, "rosetta_node": 1})
    assert on_ray.demand(job_in("pytorch"), [cpu_node, gpu_node], "auto") == (
        {"num_gpus": 1, "num_cpus": 0, "resources": {"rosetta_gpu_env_pytorch": 1}}, None)
    assert on_ray.demand(job_in("pytorch"), [cpu_node, gpu_node], "auto", devices=2)[0]["num_gpus"] == 2
    # three GPUs on no node: the CPU slot of a node that has the environment
    assert on_ray.demand(job_in("pytorch"), [cpu_node, gpu_node], "auto", devices=3)[0] == {
        "num_cpus": 0, "resources": {"rosetta_env_pytorch": 1, "rosetta_node": 1}}
    assert on_ray.demand(job_in("pytorch"), [cpu_node, gpu_node], "cpu")[0]["resources"]["rosetta_node"] == 1
    assert on_ray.demand(job_in("theano"), [cpu_node, gpu_node], "cuda") == (
        None, "no node of the cluster has 1 GPU on which environment theano computes")
    assert on_ray.demand(job_in("caffe"), [cpu_node, gpu_node], "auto") == (
        None, "no node of the cluster has environment caffe")


def test_placements_count_attempts_and_notebooks_at_once_per_node():
    placements = on_ray.Placements()
    assert placements.start("A", "n1") == 1
    assert placements.start("B", "n1") == 1
    assert placements.start("C", "n2") == 1
    assert placements.now() == ["A", "B", "C"]
    assert placements.end("A", "n1") == 2  # B ran beside it
    assert placements.start("B", "n2") == 2  # B's worker was lost on n1: its second attempt, on n2
    assert placements.end("B", "n2") == 2 and placements.end("C", "n2") == 2
    assert placements.now() == []


def test_address_needs_on_ray():
    assert cli.main(["run", "--address", "127.0.0.1:6379", "-f", "pytorch"]) == 2


def records_by_stem(run_dir):
    return {path.name[:-len(".result.json")]: json.loads(path.read_text()) for path in run_dir.glob("*.result.json")}


def test_the_fixture_batch_on_ray_gives_the_rows_of_a_sequential_run(fixture_catalog, tmp_path):
    sequential, on_cluster = tmp_path / "sequential", tmp_path / "ray"
    argv = ["run", "-f", "raises,silent,ok,dies"] + RUN
    assert cli.main(argv + ["--results", str(sequential)]) == 1
    assert cli.main(argv + ["--results", str(on_cluster), "--on", "ray"]) == 1
    (first,), (second,) = run_dirs(sequential), run_dirs(on_cluster)
    one, other = records_by_stem(first), records_by_stem(second)
    assert sorted(one) == sorted(other) == ["Dies_CNN", "OK_CNN", "Raises_CNN", "Silent_CNN"]
    for stem in one:
        for field in ("status", "metrics", "params", "framework", "task"):
            assert one[stem].get(field) == other[stem].get(field), (stem, field)
        assert same_error(one[stem].get("error"), first) == same_error(other[stem].get("error"), second), stem
        placement = other[stem]["placement"]
        assert placement["node_ip"] == on_ray.LOCAL_ADDRESS and placement["engine"] == "ray " + on_ray.RAY_VERSION
        assert placement["attempt"] == 1  # a notebook's own error (Raises, Dies) is a row, never retried
        assert placement["concurrent"] == 1  # CPU notebooks take the node whole: one at a time
        assert placement["gpu_ids"] == [] and "placement" not in one[stem]
        assert (second / (stem + ".ipynb")).exists()
    assert "planted failure" in json.dumps(json.loads((second / "Raises_CNN.ipynb").read_text())["cells"][-1]["outputs"])
    assert not list(second.glob("*.part-*"))  # every file landed whole
    assert [r["status"] for r in table.load_records(second)] == [r["status"] for r in table.load_records(first)]


def same_error(error, run_dir):
    """A row's error as two runs must share it: without its run folder and the kernel's measured peak memory."""
    return re.sub(r", peak resident memory \d+ MB", "", (error or "").replace(str(run_dir), "<run>"))


CRASHES = (catalog.Framework("crashes", "Crashes", "Crashes", (catalog.Variant(None, "runner"),)),)


def test_a_notebook_whose_worker_is_killed_runs_again_and_says_attempt_2(fixture_catalog, tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "FRAMEWORKS", CRASHES)
    marker = tmp_path / "crashed-once"
    monkeypatch.setenv("ROSETTA_TEST_CRASH_MARKER", str(marker))
    assert cli.main(["run", "-f", "crashes", "--results", str(tmp_path), "--on", "ray"] + RUN) == 0
    (run_dir,) = run_dirs(tmp_path)
    record = records_by_stem(run_dir)["Crashes_CNN"]
    assert marker.read_text() == "first attempt"  # the first attempt ran, and killed its worker
    assert record["status"] == "ok" and record["placement"]["attempt"] == 2


TWO_GPU_RUNS = (catalog.Framework("gpus", "Gpus", "Gpus", (catalog.Variant("a", "runner"), catalog.Variant("b", "runner"))),)


def test_notebooks_on_two_gpus_run_at_once_each_seeing_its_own(fixture_catalog, tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "FRAMEWORKS", TWO_GPU_RUNS)
    monkeypatch.setattr(on_ray, "local_gpus", lambda machine, device: 2)  # two logical GPUs: Ray only counts them
    monkeypatch.setattr(on_ray, "gpu_ok", lambda env: env.name == "runner")
    assert cli.main(["run", "-f", "gpus", "--results", str(tmp_path), "--on", "ray"] + RUN) == 0
    (run_dir,) = run_dirs(tmp_path)
    records = records_by_stem(run_dir)
    seen = sorted(record["visible_devices"] for record in records.values())
    assert seen == ["0", "1"]  # each kernel saw only its own GPU
    for record in records.values():
        assert record["placement"]["gpu_ids"] == [int(record["visible_devices"])]
        assert record["placement"]["concurrent"] == 2  # both ran at once on the node


def test_without_ray_and_no_way_to_add_it_the_run_says_so_in_one_line(fixture_catalog, tmp_path, monkeypatch, capsys):
    def no_ray(say=print, wheels=None):
        raise on_ray.RayError("--on ray needs ray==2.60.0 in the adopted interpreter /x: `/x -m pip install ray==2.60.0` adds it")

    monkeypatch.setattr(on_ray, "import_ray", no_ray)
    assert cli.main(["run", "-f", "ok", "--results", str(tmp_path), "--on", "ray"] + RUN) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install ray==2.60.0" in err
    assert not list(tmp_path.iterdir())  # refused before a run folder was made


def ray_processes_of_this_test():
    """Ray's processes (the head, GCS, raylet, workers) started from this test process, directly or not."""

    parents = {}
    for entry in os.listdir("/proc"):
        try:
            with open("/proc/{}/stat".format(entry)) as stat:
                parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found = []
    for pid in parents:
        ancestor, seen = parents.get(pid), 0
        while ancestor and ancestor != os.getpid() and seen < 64:
            ancestor, seen = parents.get(ancestor), seen + 1
        if ancestor == os.getpid():
            try:
                with open("/proc/{}/cmdline".format(pid), "rb") as cmdline:
                    if b"ray" in cmdline.read():
                        found.append(pid)
            except OSError:
                pass
    return found


@pytest.fixture(autouse=True)
def no_ray_left():
    """After each test: nothing it started of Ray is left running."""
    yield
    deadline = time.time() + 10
    while ray_processes_of_this_test() and time.time() < deadline:
        time.sleep(0.5)
    assert not ray_processes_of_this_test()


def test_sigterm_cancels_the_tasks_ends_their_kernels_and_resume_finishes(fixture_catalog, tmp_path):
    argv = [sys.executable, str(catalog.REPO / "tests" / "fixture_run.py"), "run", "-f", "ok,sleeps", "--results",
            str(tmp_path), "--on", "ray", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--set", "epochs=8",
            "--no-equivalence", "-q"]
    runner = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(catalog.REPO))
    lines = []
    for line in runner.stdout:
        lines.append(line)
        if "OK_CNN: OK" in line:  # the sleeping notebook starts now
            deadline = time.time() + 60
            while not kernels_in_ray_folders() and time.time() < deadline:
                time.sleep(0.2)
            assert kernels_in_ray_folders()  # its kernel, found where the check below looks
            runner.send_signal(signal.SIGTERM)  # what a scheduler sends at the end of a job's time (Ctrl-C: the same)
            break
    out = "".join(lines) + runner.communicate(timeout=120)[0]
    assert runner.returncode == 143, out[-3000:]
    (run_dir,) = run_dirs(tmp_path)
    records = records_by_stem(run_dir)
    assert records["Sleeps_CNN"]["status"] == "interrupted" and records["OK_CNN"]["status"] == "ok"
    assert records["Sleeps_CNN"]["error"].startswith("interrupted (SIGTERM) after ")
    assert "--resume {}".format(run_dir) in out
    assert not kernels_in_ray_folders()  # the cancelled task's kernel ended with its worker

    resumed = subprocess.run(argv[:3] + ["--resume", str(run_dir), "--on", "ray", "-q"], capture_output=True, text=True,
                             cwd=str(catalog.REPO), timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    assert "1 of its 2 notebooks to run" in resumed.stdout
    again = records_by_stem(run_dir)
    assert again["Sleeps_CNN"]["status"] == "ok" and again["OK_CNN"] == records["OK_CNN"]


def kernels_in_ray_folders():
    """The kernel processes running in a Ray task's private folder (their working directory)."""
    found = []
    for pid in subprocess.run(["pgrep", "-f", "ipykernel_launcher"], capture_output=True, text=True).stdout.split():
        try:
            if os.readlink("/proc/{}/cwd".format(pid)).startswith(os.path.join(tempfile.gettempdir(), "rosetta-ray-")):
                found.append(pid)
        except OSError:
            pass  # it ended meanwhile
    return found


# A cluster of three nodes on this machine's loopback addresses: a head that runs nothing (it coordinates), a node
# with two logical GPUs on which the runner's environment computes, and a CPU node.
HEAD, GPU_NODE, CPU_NODE = "127.0.0.3", "127.0.0.4", "127.0.0.5"
RUNNER_ENV = {"rosetta_node": 1, "rosetta_env_runner": 1000}


@pytest.fixture
def loopback_cluster(monkeypatch):
    """Start the three nodes one at a time (two `ray start` at once can take the same socket name), each with its own
    worker ports; yield {"head", "gpu", "cpu"} Nodes; stop them all."""
    on_ray.import_ray()
    monkeypatch.setenv(on_ray.TOKEN_VARIABLE, on_ray.token())
    nodes = {}
    try:
        nodes["head"] = on_ray.start_node(HEAD, cpus=1, resources={}, options=["--min-worker-port", "21000",
                                                                              "--max-worker-port", "21099"])
        nodes["gpu"] = on_ray.start_node(GPU_NODE, head=nodes["head"].address, cpus=1, gpus=2, resources=dict(
            RUNNER_ENV, rosetta_gpu_env_runner=1000), options=["--min-worker-port", "21100", "--max-worker-port", "21199"])
        nodes["cpu"] = on_ray.start_node(CPU_NODE, head=nodes["head"].address, cpus=1, resources=RUNNER_ENV,
                                         options=["--min-worker-port", "21200", "--max-worker-port", "21299"])
        yield nodes
    finally:
        for name in ("cpu", "gpu", "head"):
            if name in nodes:
                nodes[name].stop()


SLEEPS = (catalog.Framework("sleeps", "Sleeps", "Sleeps", tuple(catalog.Variant(name, "runner") for name in "ab")),
          catalog.Framework("ok", "OK", "OK", (catalog.Variant(None, "pytorch"),)))


def test_a_cluster_of_three_nodes_runs_cpu_notebooks_side_by_side_and_gpu_ones_on_distinct_gpus(
        fixture_catalog, loopback_cluster, tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "FRAMEWORKS", SLEEPS)
    on_cluster = ["--on", "ray", "--address", loopback_cluster["head"].address, "--no-setup"]
    assert cli.main(["run", "-f", "sleeps,ok", "--device", "cpu", "--results", str(tmp_path / "cpu")] + on_cluster
                    + RUN) == 1
    (run_dir,) = run_dirs(tmp_path / "cpu")
    records = records_by_stem(run_dir)
    assert records["OK_CNN"]["status"] == "unavailable"
    assert records["OK_CNN"]["error"] == "no node of the cluster has environment pytorch"
    cpu_rows = [records["Sleeps_CNN-a"], records["Sleeps_CNN-b"]]
    assert {row["placement"]["node_ip"] for row in cpu_rows} == {GPU_NODE, CPU_NODE}  # one node each, at once
    assert all(row["status"] == "ok" and row["placement"]["concurrent"] == 1 for row in cpu_rows)

    monkeypatch.setattr(catalog, "FRAMEWORKS", TWO_GPU_RUNS)
    assert cli.main(["run", "-f", "gpus", "--results", str(tmp_path / "gpu")] + on_cluster + RUN) == 0
    (run_dir,) = run_dirs(tmp_path / "gpu")
    records = records_by_stem(run_dir).values()
    assert sorted(record["visible_devices"] for record in records) == ["0", "1"]
    assert {record["placement"]["node_ip"] for record in records} == {GPU_NODE}
    assert all(record["placement"]["concurrent"] == 2 for record in records)


def stop_the_node_running_a_kernel(cluster, killed):
    """Wait until one of the cluster's worker nodes runs a notebook's kernel, then SIGTERM that node (it leaves the
    cluster, as a preempted VM does); its name goes into `killed`."""
    deadline = time.time() + 60
    while time.time() < deadline:
        for name in ("gpu", "cpu"):
            folder = str(cluster[name].folder)
            if any(os.readlink("/proc/{}/cwd".format(pid)).startswith(folder) for pid in kernels_in_ray_folders()):
                cluster[name].stop()
                killed.append(name)
                return
        time.sleep(0.5)


def run_with_a_node_lost(cluster, tmp_path, *options):
    """Run the Sleeps notebooks (15 s each) on `cluster`, stopping the node that runs the first; returns the run's
    status, its records by stem and the name of the node stopped."""
    killed = []
    stopper = threading.Thread(target=stop_the_node_running_a_kernel, args=(cluster, killed))
    stopper.start()
    status = cli.main(["run", "-f", "sleeps", "--results", str(tmp_path), "--on", "ray", "--address",
                       cluster["head"].address, "--no-setup", "--set", "epochs=15", "-t", "cnn", "-p", "smoke",
                       "--data", "synthetic", "--no-equivalence", "-q"] + list(options))
    stopper.join()
    (run_dir,) = run_dirs(tmp_path)
    assert killed, "no kernel was seen on a worker node"
    return status, records_by_stem(run_dir), killed[0]


def test_a_node_lost_mid_notebook_has_it_run_again_on_another(fixture_catalog, loopback_cluster, tmp_path,
                                                              monkeypatch):
    monkeypatch.setattr(catalog, "FRAMEWORKS", SLEEPS[:1])
    status, records, killed = run_with_a_node_lost(loopback_cluster, tmp_path, "--device", "cpu")
    assert status == 0, records
    survivor = {"gpu": CPU_NODE, "cpu": GPU_NODE}[killed]
    reruns = [record for record in records.values() if record["placement"]["attempt"] == 2]
    assert reruns and all(record["placement"]["node_ip"] == survivor and record["status"] == "ok" for record in reruns)


def test_a_gpu_notebook_whose_only_gpu_node_is_lost_is_a_row_that_says_so(fixture_catalog, loopback_cluster, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(catalog, "FRAMEWORKS", SLEEPS[:1])
    status, records, killed = run_with_a_node_lost(loopback_cluster, tmp_path)  # --device auto: both on the GPUs
    assert killed == "gpu" and status == 1
    assert {record["status"] for record in records.values()} == {"failed"}
    assert {record["error"] for record in records.values()} == {"node lost: no node left in the cluster can run it"}


def test_a_node_whose_checkout_has_other_code_runs_the_run_s_code_shipped_by_ray(
        fixture_catalog, loopback_cluster, tmp_path, monkeypatch):
    other = tmp_path / "other-checkout"  # the node's checkout: other code, which would fail if anything ran it
    for folder in ("runner", "common", "frameworks", "tests/fixtures"):
        shutil.copytree(str(catalog.REPO / folder), str(other / folder), ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("runner/run/on_ray.py", "common/__init__.py"):  # the task's code and the notebook's imports
        with open(str(other / name), "a") as edited:
            edited.write("\nraise RuntimeError('the node ran its own checkout')\n")
    for name in (".envs", ".jupyter"):  # its environments: this checkout's
        (other / name).symlink_to(catalog.REPO / name)
    stranger = on_ray.start_node("127.0.0.6", head=loopback_cluster["head"].address, cpus=1,  # the only node with
                                 resources={"rosetta_node": 1, "rosetta_env_pytorch": 1000},  # OK's environment
                                 checkout=other, options=["--min-worker-port", "21300", "--max-worker-port", "21399"])
    monkeypatch.setattr(catalog, "FRAMEWORKS", SLEEPS)
    try:
        status = cli.main(["run", "-f", "sleeps,ok", "--device", "cpu", "--results", str(tmp_path / "results"),
                           "--on", "ray", "--address", loopback_cluster["head"].address, "--no-setup"] + RUN)
    finally:
        stranger.stop()
    (run_dir,) = run_dirs(tmp_path / "results")
    records = records_by_stem(run_dir)
    assert status == 0, records
    assert records["OK_CNN"]["status"] == "ok" and records["OK_CNN"]["placement"]["node_ip"] == "127.0.0.6"
    fingerprints = {record["code_fingerprint"] for record in records.values()}
    digests = on_ray.code_digests(catalog.REPO, [])
    assert fingerprints == {on_ray.code_fingerprint(digests)}  # every row says the run's code


def test_a_node_that_joins_mid_run_from_other_code_runs_the_run_s_code(fixture_catalog, loopback_cluster, tmp_path,
                                                                        monkeypatch):
    other = tmp_path / "other-checkout"  # another commit's checkout, say: code that raises if anything runs it
    for folder in ("runner", "common", "frameworks", "tests/fixtures"):
        shutil.copytree(str(catalog.REPO / folder), str(other / folder), ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("runner/run/on_ray.py", "common/__init__.py"):
        with open(str(other / name), "a") as edited:
            edited.write("\nraise RuntimeError('the node ran its own checkout')\n")
    for name in (".envs", ".jupyter"):
        (other / name).symlink_to(catalog.REPO / name)
    joined = []

    def join_once_a_notebook_has_finished():  # eight 4 s notebooks on two nodes' slots: some still wait for one
        deadline = time.time() + 120
        while not list((tmp_path / "results").glob("*/*.result.json")) and time.time() < deadline:
            time.sleep(0.2)
        joined.append(on_ray.start_node("127.0.0.6", head=loopback_cluster["head"].address, cpus=1,
                                        resources=RUNNER_ENV, checkout=other,
                                        options=["--min-worker-port", "21300", "--max-worker-port", "21399"]))

    monkeypatch.setattr(catalog, "FRAMEWORKS", SLEEPS[:1])
    joiner = threading.Thread(target=join_once_a_notebook_has_finished)
    joiner.start()
    try:
        status = cli.main(["run", "-f", "sleeps", "--device", "cpu", "--results", str(tmp_path / "results"), "--on",
                           "ray", "--address", loopback_cluster["head"].address, "--no-setup", "--sweep",
                           "epochs=4,5,6,7", "-t", "cnn", "-p", "smoke", "--data", "synthetic", "--no-equivalence",
                           "-q"])
    finally:
        joiner.join()
        for node in joined:
            node.stop()
    (run_dir,) = run_dirs(tmp_path / "results")
    records = records_by_stem(run_dir)
    assert status == 0 and len(records) == 8 and {r["status"] for r in records.values()} == {"ok"}, records
    assert any(record["placement"]["node_ip"] == "127.0.0.6" for record in records.values())  # it took some
    assert {record["code_fingerprint"] for record in records.values()} == {
        on_ray.code_fingerprint(on_ray.code_digests(catalog.REPO, []))}


def test_a_task_whose_code_differs_from_the_run_s_answers_one_line_and_runs_nothing(tmp_path, monkeypatch):
    on_ray.import_ray()
    archive, digests = on_ray.ship_code()
    notebook = sorted(path for path in digests if path.endswith(".ipynb"))[0]
    expected = {path: digest for path, digest in digests.items() if not path.endswith(".ipynb") or path == notebook}
    expected["runner/run/on_ray.py"] = "0" * 64  # the run's code says otherwise: the archive was altered, or is stale
    monkeypatch.setenv(on_ray.CHECKOUT_VARIABLE, str(catalog.REPO))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the task unpacks it
    answer = on_ray.on_node_function()("run_on_node", expected, archive, {}, None)
    assert set(answer) == {"code_differs"} and "\n" not in answer["code_differs"]
    assert re.fullmatch(r"node [0-9.]+ runs other code than the run \(fingerprint [0-9a-f]{16}, the run's "
                        r"[0-9a-f]{16}\): runner/run/on_ray\.py differs", answer["code_differs"]), answer
    (unpacked,) = tmp_path.glob(on_ray.CODE_PREFIX + "*")  # unpacked whole, once
    assert on_ray.code_digests(unpacked, [notebook]) == {path: digest for path, digest in digests.items()
                                                          if not path.endswith(".ipynb") or path == notebook}


def test_the_node_command_starts_a_head_that_a_run_joins_and_stops_on_sigterm(fixture_catalog, tmp_path, monkeypatch):
    on_ray.import_ray()
    monkeypatch.setenv(on_ray.TOKEN_VARIABLE, on_ray.token())
    port = on_ray.free_port("127.0.0.7")
    token_file = tmp_path / "private" / "token"
    node = subprocess.Popen([sys.executable, str(catalog.REPO / "run_all.py"), "node", "--ip", "127.0.0.7", "--port",
                             str(port), "--token-file", str(token_file)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=str(catalog.REPO))
    try:
        first = node.stdout.readline()
        assert "node 127.0.0.7 is the head of a cluster at 127.0.0.7:{}".format(port) in first, first
        assert "runner" in first.split("environments: ")[1]  # it advertises the environments built here
        second = node.stdout.readline()
        assert "its token is in {} (mode 0600)".format(token_file) in second, second
        assert token_file.stat().st_mode & 0o777 == 0o600 and token_file.read_text().strip() == on_ray.token()
        assert cli.main(["run", "-f", "ok", "--results", str(tmp_path / "results"), "--on", "ray", "--address",
                         "127.0.0.7:{}".format(port)] + RUN) == 0
        (run_dir,) = run_dirs(tmp_path / "results")
        assert records_by_stem(run_dir)["OK_CNN"]["placement"]["node_ip"] == "127.0.0.7"
    finally:
        node.send_signal(signal.SIGTERM)
        out = node.communicate(timeout=60)[0]
    assert node.returncode == 0 and "node 127.0.0.7 stopped" in out, out
    assert on_ray.token() not in first + second + out  # the token itself only with --show-token
    assert not token_file.exists()  # the head's token goes with it


def test_a_head_prints_its_token_only_where_asked(tmp_path, monkeypatch, capsys):
    class Stopped:  # a head that runs until Ctrl-C, which comes at once
        address, folder, returncode = "127.0.0.8:6379", tmp_path, None

        @property
        def process(self):
            return self

        def wait(self):
            modes.append(token_file.stat().st_mode & 0o777)
            raise KeyboardInterrupt

        def stop(self):
            pass

    monkeypatch.setattr(on_ray, "import_ray", lambda say=print, wheels=None: None)
    monkeypatch.setattr(on_ray, "start_node", lambda *args, **kwargs: Stopped())
    monkeypatch.setattr(on_ray.signal, "signal", lambda *args: None)
    monkeypatch.setenv(on_ray.TOKEN_VARIABLE, "t0ken" * 8)
    token_file, modes = tmp_path / "token", []
    token_file.write_text("another head's")
    token_file.chmod(0o644)
    for show, shown in ((False, False), (True, True)):
        assert on_ray.node_command(ip="127.0.0.8", port=on_ray.free_port("127.0.0.8"), num_gpus=0,
                                   token_file=token_file, show_token=show) == 0
        out = capsys.readouterr().out
        assert "its token is in {} (mode 0600)".format(token_file) in out
        assert (("export ROSETTA_RAY_TOKEN=" + "t0ken" * 8) in out) == shown, out
        assert ("t0ken" * 8 in out) == shown
    assert modes == [0o600, 0o600]  # written private, over a file of another mode
    assert not token_file.exists()
    assert cli.main(["node", "--address", "127.0.0.8:6379", "--show-token"]) == 2  # a joining node has no token to show


def run_all(*argv, token=None):
    """run_all.py ARGV (tests/fixture_run.py: on the fixture notebooks) in a process of its own, with `token` in
    ROSETTA_RAY_TOKEN (None: none); its exit status and output, within 30 s."""
    environ = {name: value for name, value in os.environ.items() if not name.startswith(("RAY_", "ROSETTA_RAY_"))}
    if token is not None:
        environ[on_ray.TOKEN_VARIABLE] = token
    done = subprocess.run([sys.executable, str(catalog.REPO / "tests" / "fixture_run.py")] + list(argv), env=environ,
                          capture_output=True, text=True, cwd=str(catalog.REPO), timeout=30)
    return done.returncode, done.stdout + done.stderr


def test_a_wrong_or_missing_token_is_one_line_naming_rosetta_ray_token_and_leaves_no_run_folder(tmp_path,
                                                                                                monkeypatch):
    on_ray.import_ray()
    monkeypatch.setenv(on_ray.TOKEN_VARIABLE, on_ray.token())
    head = on_ray.start_node("127.0.0.8", cpus=1, resources={})
    try:
        for token in ("f" * 64, None):
            status, out = run_all("run", "-f", "ok", "--results", str(tmp_path / "results"), "--on", "ray",
                                  "--address", head.address, "--no-setup", *RUN, token=token)
            assert status == 1 and out.count("\n") == 1 and on_ray.TOKEN_VARIABLE in out, out
            assert "gcs_client" not in out and "auth_token" not in out and "--resume" not in out
            assert not (tmp_path / "results").exists() or not list((tmp_path / "results").iterdir())  # no run folder
            status, out = run_all("node", "--address", head.address, "--ip", "127.0.0.9", "--num-gpus", "0",
                                  token=token)
            assert status == 1 and out.count("\n") == 1 and on_ray.TOKEN_VARIABLE in out, out
            assert "auth_token" not in out  # Ray's own advice, ~/.ray/auth_token, is not this runner's
        status, out = run_all("setup", "runner", "--on", "ray", "--address", head.address, token="f" * 64)
        assert status == 1 and out.count("\n") == 1 and "refused the token in " + on_ray.TOKEN_VARIABLE in out, out
        status, out = run_all("run", "-f", "ok", "--results", str(tmp_path / "results"), "--on", "ray", "--address",
                              "127.0.0.8:{}".format(on_ray.free_port("127.0.0.8")), "--no-setup", *RUN,
                              token=on_ray.token())
        assert status == 1 and out.count("\n") == 1 and "nothing answers there" in out, out
    finally:
        head.stop()


def test_a_run_that_cannot_start_its_cluster_leaves_no_run_folder(fixture_catalog, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(on_ray, "usable_cores", lambda: -1)  # `ray start --num-cpus -1`: the head refuses to start
    monkeypatch.setenv(on_ray.ceiling.SKIP_VARIABLE, "1")
    assert cli.main(["run", "-f", "ok", "--results", str(tmp_path), "--on", "ray"] + RUN) == 1
    err = capsys.readouterr().err
    assert "the Ray node on {} did not start".format(on_ray.LOCAL_ADDRESS) in err and "--resume" not in err, err
    assert not list(tmp_path.iterdir())


def test_a_smoke_run_of_pytorch_and_tensorflow_through_ray(tmp_path):
    for name in ("pytorch", "tensorflow"):
        require_environment(catalog.ENVIRONMENTS[name])
    assert cli.main(["run", "-f", "pytorch,tensorflow", "-t", "cnn,inference", "-p", "smoke", "--data", "synthetic",
                     "--set", "weights=random", "--no-equivalence", "-q", "--results", str(tmp_path), "--on", "ray",
                     "--no-setup", "--compile", "default"]) == 0  # random weights: no download of ImageNet's is tried
    (run_dir,) = run_dirs(tmp_path)
    records = records_by_stem(run_dir)
    assert sorted(records) == ["PyTorch_CNN", "PyTorch_Inference", "TensorFlow_CNN", "TensorFlow_Inference"]
    for record in records.values():
        assert record["status"] == "ok" and record["placement"]["node_ip"] == on_ray.LOCAL_ADDRESS
        assert record["environment"]["threads"] == record["placement"]["threads"]  # the node's cores reached the notebook
    assert "| PyTorch |" in (run_dir / "results.md").read_text()


def test_each_gpu_kind_runs_every_notebook_once_per_kind_and_merges_the_tables(fixture_catalog, tmp_path,
                                                                               monkeypatch):
    on_ray.import_ray()
    monkeypatch.setenv(on_ray.TOKEN_VARIABLE, on_ray.token())
    monkeypatch.setattr(catalog, "FRAMEWORKS", TWO_GPU_RUNS)

    def of_kind(kind):  # one logical GPU of that kind, on which the runner's environment computes
        return dict(RUNNER_ENV, rosetta_gpu_env_runner=1000, **{on_ray.KIND_RESOURCE.format(kind): 1,
                                                                on_ray.KIND_NODE_RESOURCE.format(kind): 1000})

    nodes = [on_ray.start_node(HEAD, cpus=1, resources={}, options=["--min-worker-port", "21000", "--max-worker-port",
                                                                    "21099"])]
    try:
        for ip, kind, ports in ((GPU_NODE, "fake_p100", "211"), (CPU_NODE, "fake_v100", "212")):
            nodes.append(on_ray.start_node(ip, head=nodes[0].address, cpus=1, gpus=1, resources=of_kind(kind), options=[
                "--min-worker-port", ports + "00", "--max-worker-port", ports + "99"]))
        assert cli.main(["run", "-f", "gpus", "--results", str(tmp_path), "--on", "ray", "--address", nodes[0].address,
                         "--each-gpu-kind", "--no-setup"] + RUN) == 0
    finally:
        for node in reversed(nodes):
            node.stop()
    (run_dir,) = run_dirs(tmp_path)
    for kind, ip in (("fake_p100", GPU_NODE), ("fake_v100", CPU_NODE)):
        records = records_by_stem(run_dir / kind)
        assert sorted(records) == ["Gpus_CNN-a", "Gpus_CNN-b"]
        assert {(r["status"], r["placement"]["node_ip"], r["visible_devices"]) for r in records.values()} == {("ok", ip, "0")}
        assert (run_dir / kind / "results.md").exists()
    merged = (run_dir / "merged.md").read_text()
    assert "(fake_p100)" in merged and "(fake_v100)" in merged  # one column per GPU kind
    assert cli.main(["run", "--each-gpu-kind", "-f", "gpus"]) == 2  # it goes with --on ray


def test_setup_on_ray_runs_the_setup_on_every_node(loopback_cluster, capsys):
    assert cli.main(["setup", "runner", "--on", "ray", "--address", loopback_cluster["head"].address]) == 0
    out = capsys.readouterr().out
    assert "[ray] setup on 3 nodes" in out
    for ip in (HEAD, GPU_NODE, CPU_NODE):
        assert "[ray] {}: ok; nothing to build".format(ip) in out  # the runner's environment is there on each
    assert cli.main(["setup", "--on", "ray"]) == 2  # a cluster's setup needs its address
