"""The batch on Ray (`run --on ray`): every notebook a Ray task, on every GPU of this machine or every node of a cluster.

Each job becomes one task that reserves what its notebook needs: one GPU (the train task: `devices` GPUs) where its
environment computes on that node's GPUs, else the node's one notebook slot, so that two CPU notebooks never share a
node's cores. A node says what it can run through custom resources (`node_resources`): the slot, and one resource
per environment built there (and per environment that computes on its GPUs). The task runs papermill on its node,
on that node's kernel, into a private folder, and returns the executed notebook and the record; the head writes
them into the run folder, each file written whole then renamed, as a sequential run would have written them.
Where it ran (node, GPUs, attempt, notebooks at once on that node) goes into the record as `placement`.

Ray retries a task once when its worker or node is lost (the attempt number says so); a notebook's own error is a
row, as in a sequential run, and is never retried. Ctrl-C cancels every task, which ends their kernels.
"""

import contextlib
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import checkout, results, tasks
from runner import catalog, run_folder
from runner.run import ceiling, environments

RAY_VERSION = "2.60.0"
TOKEN_VARIABLE = "ROSETTA_RAY_TOKEN"  # the cluster's token (Ray's token authentication), on every node and the head
NODE_SLOT = "rosetta_node"  # one per node: a CPU notebook takes its node whole
ENV_RESOURCE = "rosetta_env_{}"  # the node has this environment built
GPU_ENV_RESOURCE = "rosetta_gpu_env_{}"  # ... and it computes on the node's GPUs
KIND_RESOURCE = "rosetta_gpu_kind_{}"  # the node's GPUs of this kind (kind_name), as many as it has
KIND_NODE_RESOURCE = "rosetta_kind_node_{}"  # the node has GPUs of this kind: where a CPU notebook of that kind runs
UNITS = 1000  # how much of an environment resource a node advertises: more notebooks than it could hold at once
LOCAL_ADDRESS = "127.0.0.2"  # the cluster `--on ray` starts on this machine: loopback (Ray takes 127.0.0.1 for the host)
RETRIES = 1  # a task whose worker or node was lost runs once more
STOP_GRACE_S = 0.5  # the run's own head: its processes still running this long after SIGTERM are killed


class RayError(Exception):
    """Why the batch cannot run on Ray (no Ray, no cluster at that address, a node's checkout differs): one line."""


class NotConnected(RayError):
    """The run could not start or join its cluster: nothing ran, so a new run's folder is removed."""


_TOKEN = []  # the token this process made for the clusters it starts (Ray reads it once per process)


def token():
    """The cluster's token: $ROSETTA_RAY_TOKEN where set, else one made for this process (secrets.token_hex)."""
    if os.environ.get(TOKEN_VARIABLE):
        return os.environ[TOKEN_VARIABLE]
    if not _TOKEN:
        _TOKEN.append(secrets.token_hex(32))
    return _TOKEN[0]


def import_ray(say=print, wheels=None):
    """Ray, installed into the runner's environment on first use (envs/runner-ray.txt), with token authentication
    on (set before Ray is imported, which reads it once); RayError where it cannot be had."""
    os.environ.update(auth_environment(token()))
    try:
        import ray
        return ray
    except ImportError:
        pass
    try:
        environments.ensure_extra(catalog.ENVIRONMENTS["runner"], "ray", "--on ray", say=say, wheels=wheels)
    except environments.SetupError as error:
        raise RayError(str(error)) from None
    import importlib
    importlib.invalidate_caches()
    try:
        import ray
    except ImportError as error:
        raise RayError("--on ray: Ray was installed but does not import: {}".format(error)) from None
    return ray


NO_TOKEN = ("set {} to the cluster's token (the head's `run_all.py node` wrote it to the file it names; "
            "docs/cluster.md)".format(TOKEN_VARIABLE))
REFUSED_TOKEN = ("--address {{}}: the cluster refused the token in {}: set it to the cluster's token (the head's `run_all.py "
                 "node` wrote it to the file it names; docs/cluster.md)".format(TOKEN_VARIABLE))


@contextlib.contextmanager
def stderr_discarded():
    """Within: what this process writes to file descriptor 2 (Ray's C++ log lines) is discarded."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def check_cluster(address, timeout=10):
    """RayError (NotConnected) in one line where this process cannot join the cluster at `address` (HOST:PORT): no
    token in $ROSETTA_RAY_TOKEN, nothing listening there, or a token the cluster refuses. Asks its GCS once, its
    C++ warnings discarded, where ray.init asks 20 times a second apart and logs a warning each time; `timeout` bounds
    the TCP connection and the question (a port that answers without a GCS behind it takes Ray 10 s more)."""
    if not os.environ.get(TOKEN_VARIABLE):
        raise NotConnected("--address {}: {}".format(address, NO_TOKEN))
    host, colon, port = address.rpartition(":")
    host, port = (host, port) if colon else (address, "6379")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except (OSError, ValueError) as error:
        raise NotConnected("--address {}: nothing answers there ({}): is the cluster's head running?".format(
            address, getattr(error, "strerror", None) or error)) from None
    import_ray()
    from ray import _raylet, exceptions

    try:
        with stderr_discarded():
            _raylet.InnerGcsClient.standalone(address, None, int(timeout * 1000))
    except exceptions.AuthenticationError:
        raise NotConnected(REFUSED_TOKEN.format(address)) from None
    except (exceptions.RayError, ConnectionError, RuntimeError) as error:  # RpcError: no GCS, or a mute one
        raise NotConnected("--address {}: no Ray cluster answers there: {}".format(
            address, results.first_line(str(error)))) from None


def auth_environment(token):
    """The variables that turn on Ray's token authentication (every node and the head need the same token)."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "RAY_USAGE_STATS_ENABLED": "0"}


def gpu_ok(env):
    """True where `env`'s GPU check (the probe at setup) computed on this machine's GPU."""
    return bool(((environments.read_stamp(env) or {}).get("probe") or {}).get("gpu_ok"))


def node_resources(gpu_names=()):
    """The custom resources this machine advertises as a Ray node: its notebook slot, each environment built here,
    each that computes on its GPUs, and its GPUs by kind (`gpu_names`: the names nvidia-smi gives them)."""
    found = {NODE_SLOT: 1}
    for name in gpu_names:
        found[KIND_RESOURCE.format(kind_name(name))] = found.get(KIND_RESOURCE.format(kind_name(name)), 0) + 1
        found[KIND_NODE_RESOURCE.format(kind_name(name))] = UNITS
    for env in list(catalog.ENVIRONMENTS.values()) + catalog.release_environments():  # jax@0.6.2 too, where built
        if environments.is_ready(env):
            found[ENV_RESOURCE.format(env.name)] = UNITS
            if gpu_ok(env):
                found[GPU_ENV_RESOURCE.format(env.name)] = UNITS
    return found


def local_gpus(machine, device):
    """How many GPUs the cluster started on this machine declares: those nvidia-smi found, none with --device cpu."""
    return 0 if device == "cpu" else len(machine.gpus)


def local_gpu_names(count):
    """The names of this machine's first `count` GPUs (nvidia-smi), [] without any."""
    if not count:
        return []
    from runner.run import compatibility
    return [gpu.get("name") or "unknown GPU" for gpu in compatibility.detect().gpus[:count]]


def usable_cores():
    """CPU cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class Node:
    """A Ray node started from this checkout (`ray start --block`), in a folder of its own; `address` is the cluster's
    (HOST:PORT of its head). `stop()` ends it and removes its folder."""

    def __init__(self, process, address, folder):
        self.process, self.address, self.folder = process, address, folder

    def stop(self, signal_number=signal.SIGTERM, grace_s=None):
        """End the node (`signal_number` to all its processes, then SIGKILL after 30 s) and remove its folder. With
        `grace_s`, its processes that have not ended that long after the signal are killed outright, the leader
        (`ray start`) left to notice and reap them: for a cluster nobody else uses, whose Ray would otherwise give its
        raylet, GCS and monitors one second each in turn (3.3 s here, against 0.5 s)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal_number)
            try:
                self.process.wait(30 if grace_s is None else grace_s)
            except subprocess.TimeoutExpired:
                if grace_s is not None:
                    for pid in group_members(self.process.pid):
                        if pid != self.process.pid:
                            with contextlib.suppress(OSError):  # it ended meanwhile
                                os.kill(pid, signal.SIGKILL)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(str(self.folder), ignore_errors=True)


def group_members(group):
    """The ids of the live processes of process group `group` (from /proc; [] where it cannot be read)."""
    members = []
    for proc in Path("/proc").iterdir():
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError, ValueError):
            continue
        if proc.name.isdigit() and fields[0] != "Z" and int(fields[2]) == group:
            members.append(int(proc.name))
    return members


def free_port(address=LOCAL_ADDRESS):
    """A TCP port free on `address` now."""
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def _end_with_parent():
    """In a node's process before it starts: have Linux SIGTERM it when the process that started it dies, so that
    a run killed outright leaves no cluster of its own behind (prctl PR_SET_PDEATHSIG; nothing elsewhere)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


FOLDER_PREFIX = "rosetta-ray-"  # a node's folder in the temporary folder: rosetta-ray-<pid of the runner>-<random>


def node_folder():
    """A new folder for a node this process starts, named after this process, after removing those of processes
    that no longer run (a runner killed outright cannot remove its own)."""
    for folder in Path(tempfile.gettempdir()).glob(FOLDER_PREFIX + "*"):
        pid = folder.name[len(FOLDER_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not Path("/proc", pid).exists():
            shutil.rmtree(str(folder), ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix="{}{}-".format(FOLDER_PREFIX, os.getpid())))


def start_node(ip, head=None, gpus=0, cpus=None, resources=None, options=(), checkout=None, port=None, timeout=120):
    """Start a Ray node on this machine at address `ip`: the head of a new cluster (`head` None; it listens on
    `port`, default a free one) or one joining the cluster at `head` (HOST:PORT). It declares `gpus` GPUs, `cpus`
    CPUs (default: its usable cores) and `resources` (default: node_resources()), with token authentication, its
    tasks using the environments of `checkout` (default this one). Returns the Node once Ray says it runs; RayError with the
    node's last line where it does not."""
    folder = node_folder()
    command = [str(Path(sys.executable).parent / "ray"), "start", "--block", "--node-ip-address", ip,
               "--num-cpus", str(cpus or usable_cores()), "--num-gpus", str(gpus),
               "--resources", json.dumps(node_resources(local_gpu_names(gpus)) if resources is None else resources),
               "--dashboard-agent-listen-port=0", "--disable-usage-stats"] + list(options)
    address = head or "{}:{}".format(ip, port or free_port(ip))
    if head is None:
        command += ["--head", "--port", address.rsplit(":", 1)[1], "--include-dashboard=false",
                    "--temp-dir", str(folder / "ray")]
    else:
        command += ["--address", head]
    # TMPDIR: the tasks' private folders go inside the node's, removed with it even where a worker was killed
    environ = dict(os.environ, RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0", TMPDIR=str(folder), RAY_TMPDIR=str(folder),
                   **auth_environment(token()))
    environ[CHECKOUT_VARIABLE] = str(checkout or catalog.REPO)
    log = folder / "node.log"
    with open(str(log), "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=environ,
                                   preexec_fn=None if head or checkout else _end_with_parent)
    node = Node(process, address, folder)
    deadline = time.time() + timeout
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.time() > deadline:
            text = log.read_text(errors="replace")
            last = (text.strip().splitlines() or ["no output"])[-1]
            node.stop()
            if head is not None and "InvalidAuthToken" in text:  # Ray's own line names ~/.ray/auth_token, not ours
                raise NotConnected(REFUSED_TOKEN.format(head))
            raise NotConnected("--on ray: the Ray node on {} did not start: {}".format(ip, last))
        time.sleep(0.2)
    return node


def start_head(gpus, say=print):
    """The one-node cluster `--on ray` starts on this machine for a run: on loopback, declaring `gpus` GPUs."""
    head = start_node(LOCAL_ADDRESS, gpus=gpus)
    say("[ray] started a Ray head on {} ({} GPU{}; stopped at the end of the run)".format(
        head.address, gpus, "" if gpus == 1 else "s"))
    return head


class Cluster:
    """A connection to Ray: a cluster started on this machine for the run (no address), or one joined at `address`.
    Use as a context manager: leaving it disconnects, and stops the cluster it started."""

    def __init__(self, address=None, gpus=0, say=print, wheels=None):
        self.address, self.gpus, self.say, self.wheels = address, gpus, say, wheels
        self.ray = self.head = self.archive = self.code = None

    def __enter__(self):
        self.ray = ray = import_ray(self.say, self.wheels)
        if self.address is not None:
            check_cluster(self.address)
        # the tasks' workers import the runner from their node's checkout: start_node puts it on their PYTHONPATH
        options = dict(log_to_driver=False, logging_level="ERROR")
        # Ray's core worker installs its own handler of SIGTERM, which aborts the process: keep the run's
        handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        self.archive, self.code = ship_code()  # what every task unpacks, and must find there
        try:
            if self.address is None:
                self.head = start_head(self.gpus, self.say)
                ray.init(address=self.head.address, _node_ip_address=LOCAL_ADDRESS, **options)
            else:
                ray.init(address=self.address, **options)
        except (ConnectionError, RuntimeError, ValueError) as error:
            self.__exit__()
            raise NotConnected("--on ray: could not {} Ray: {}".format(
                "start" if self.address is None else "reach the cluster at " + self.address,
                results.first_line(str(error)))) from None
        finally:
            for number, handler in handlers.items():
                if handler is not None:
                    signal.signal(number, handler)
        return self

    def __exit__(self, *exc):
        self.ray.shutdown()
        if self.head is not None:
            self.head.stop(grace_s=STOP_GRACE_S)  # the run's own cluster: nothing in it is worth a graceful wait
            self.head = None
        return False

    def nodes(self):
        """The cluster's live nodes: [{"NodeID", "NodeManagerAddress", "Resources", ...}] (Ray's ray.nodes())."""
        return [node for node in self.ray.nodes() if node.get("Alive")]

    def describe(self):
        """'3 nodes, 2 GPUs, 6 CPUs': what the run has to work with."""
        nodes = self.nodes()
        total = lambda key: int(sum(node["Resources"].get(key, 0) for node in nodes))  # noqa: E731
        return "{} node{}, {} GPU{}, {} CPUs".format(len(nodes), "" if len(nodes) == 1 else "s", total("GPU"),
                                                    "" if total("GPU") == 1 else "s", total("CPU"))


def demand(job, nodes, device, devices=1, kind=None):
    """The Ray resources `job` asks for, or (None, why) where no node of the cluster can run it: a GPU notebook asks
    for `devices` GPUs on a node whose copy of its environment computes on GPUs, any other its node's slot; with a
    GPU `kind`, on a node of that kind (a CPU notebook too: the row of that kind's machine)."""
    name = job.variant.env
    gpu_key, env_key = GPU_ENV_RESOURCE.format(name), ENV_RESOURCE.format(name)
    gpus = {KIND_RESOURCE.format(kind): devices} if kind else {}
    pinned = {KIND_NODE_RESOURCE.format(kind): 1} if kind else {}
    where = "of GPU kind {} ".format(kind) if kind else "of the cluster "
    if device != "cpu":
        wanted = {"num_gpus": devices, "num_cpus": 0, "resources": dict(gpus, **{gpu_key: 1})}
        if any(fits(wanted, node) for node in nodes):
            return wanted, None
    if device == "cuda":
        return None, "no node {}has {} GPU{} on which environment {} computes".format(
            where, devices, "" if devices == 1 else "s", name)
    wanted = {"num_cpus": 0, "resources": dict(pinned, **{env_key: 1, NODE_SLOT: 1})}
    if any(fits(wanted, node) for node in nodes):
        return wanted, None
    return None, "no node {}has environment {}".format(where, name)


def gpu_kinds(nodes):
    """The GPU kinds the cluster's nodes declare (KIND_RESOURCE), sorted: ['nvidia_a100_sxm4_80gb', ...]."""
    prefix = KIND_RESOURCE.format("")
    return sorted({key[len(prefix):] for node in nodes for key in node["Resources"] if key.startswith(prefix)})


def kind_name(gpu_name):
    """A GPU's name as a resource and folder name: 'NVIDIA H100 80GB HBM3' -> 'nvidia_h100_80gb_hbm3'."""
    return re.sub(r"[^a-z0-9]+", "_", gpu_name.lower()).strip("_")


def fits(resources, node):
    """True where a live `node` has in all what a task asking for `resources` (demand's answer) needs."""
    wanted = dict(resources.get("resources", {}), GPU=resources.get("num_gpus", 0), CPU=resources.get("num_cpus", 0))
    return all(node["Resources"].get(key, 0) >= amount for key, amount in wanted.items() if amount)


CHECKOUT_VARIABLE = checkout.INSTALL_VARIABLE  # on every node: the checkout whose environments its tasks use
# A task's first step on its node, shipped by value (cloudpickle pickles a function of a module it cannot import by
# value), so that it is always the run's own. A notebook's task gets the run's code as a zip archive (ship_code: the
# head puts it in Ray's object store once; each node fetches it once) and unpacks it, once per node and archive, into
# the node's temporary folder (start_node makes that the node's own folder, removed with it): the node's checkout
# gives only its environments (catalog.INSTALL). The bootstrap compares the unpacked code (every file of common/,
# frameworks/, runner/ and the task's notebook) with the run's (`expected`, code_digests on the head): where they
# differ it answers {"code_differs": one line} and runs nothing. Then it imports the runner from it (ahead of the
# driver's folders, which Ray puts first on its workers' sys.path) and calls runner.run.on_ray.<name> there. A task
# without `expected` (the setup on a node) runs the node's own checkout instead.
# Not Ray's runtime_env working_dir: the nodes of one machine share its unpacked copy (a Ray session's folder), and
# when a node joined mid-run the other nodes' tasks lost it as their working folder (tests/test_on_ray.py); it also
# starts a fresh worker per node and run (1.5 s here).
_BOOTSTRAP = """
CODE_FOLDERS = ("common", "frameworks", "runner")
CODE_PREFIX = "rosetta-code-"  # a node's copy of a run's code, in its temporary folder: rosetta-code-<archive's hash>


def code_digests(root, notebooks):
    import hashlib, os
    digests = {}
    for folder in CODE_FOLDERS:
        for parent, folders, files in os.walk(os.path.join(root, folder)):
            folders[:] = [name for name in folders if name != "__pycache__"]
            for name in files:
                if not name.endswith(".pyc"):
                    path = os.path.join(parent, name)
                    with open(path, "rb") as code:
                        digests[os.path.relpath(path, root)] = hashlib.sha256(code.read()).hexdigest()
    for name in notebooks:
        path = os.path.join(root, name)
        if os.path.exists(path):
            with open(path, "rb") as notebook:
                digests[name] = hashlib.sha256(notebook.read()).hexdigest()
    return digests


def code_only(digests):
    return {path: digest for path, digest in digests.items() if not path.endswith(".ipynb")}


def fingerprint(digests):
    import hashlib, json
    return hashlib.sha256(json.dumps(sorted(digests.items())).encode()).hexdigest()[:16]


def unpacked(archive):
    import hashlib, io, os, shutil, tempfile, zipfile
    folder = os.path.join(tempfile.gettempdir(), CODE_PREFIX + hashlib.sha256(archive).hexdigest()[:16])
    if not os.path.isdir(folder):  # whole or not at all: unpacked beside it, then renamed
        partial = tempfile.mkdtemp(prefix=CODE_PREFIX + "part-")
        zipfile.ZipFile(io.BytesIO(archive)).extractall(partial)
        try:
            os.rename(partial, folder)
        except OSError:  # another task on this node got there first
            shutil.rmtree(partial, ignore_errors=True)
    return folder


def on_node(name, expected, archive, *args):
    import importlib, os, sys
    checkout = os.environ.get("ROSETTA_CHECKOUT")
    if not checkout:
        raise RuntimeError("this Ray node was started without ROSETTA_CHECKOUT, the checkout whose environments its "
                           "notebooks use (docs/cluster.md)")
    code = checkout
    if expected is not None:
        import ray
        code = unpacked(archive)
        there = code_digests(code, [path for path in expected if path.endswith(".ipynb")])
        differ = sorted(path for path in set(there) | set(expected) if there.get(path) != expected.get(path))
        if differ:
            return {"code_differs": "node {} runs other code than the run (fingerprint {}, the run's {}): {}".format(
                ray.util.get_node_ip_address(), fingerprint(code_only(there)), fingerprint(code_only(expected)),
                "{} differs".format(differ[0]) if len(differ) == 1 else "{} files differ ({}{})".format(
                    len(differ), ", ".join(differ[:3]), ", ..." if len(differ) > 3 else ""))}
    if sys.path[0] != code:
        sys.path.insert(0, code)
        for module in [m for m in sys.modules if m.split(".")[0] in CODE_FOLDERS]:
            del sys.modules[module]
    return getattr(importlib.import_module("runner.run.on_ray"), name)(*args)
"""


def bootstrap():
    """The bootstrap above as a namespace of a module no worker can import (so that Ray ships its functions' code):
    on_node, unpacked, code_digests, code_only, fingerprint."""
    namespace = {"__name__": "rosetta_ray_bootstrap"}
    exec(compile(_BOOTSTRAP, "<rosetta_ray_bootstrap>", "exec"), namespace)  # our own constant code, nothing from outside
    return namespace


CODE_PREFIX = bootstrap()["CODE_PREFIX"]


def on_node_function():
    """The task's first step on its node (bootstrap's on_node): on_node(name, expected code or None, the code's archive
    or None, *args)."""
    return bootstrap()["on_node"]


def ship_code():
    """The run's code as it is now, uncommitted edits included: a zip archive of the files code_digests hashes in this
    checkout (common/, frameworks/, runner/ less __pycache__, and the catalog's notebooks), each where it is here (what
    every task unpacks on its node), and those digests."""
    import zipfile

    notebooks = [str(path.relative_to(catalog.REPO)) for path in sorted(catalog.NOTEBOOKS.glob("*.ipynb"))]
    digests = code_digests(catalog.REPO, notebooks)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in digests:
            archive.write(str(catalog.REPO / name), name)
    return buffer.getvalue(), digests


def code_digests(folder, notebooks):
    """{path: sha256} of the code in `folder` (a checkout, or a run's code unpacked) and of `notebooks` there."""
    return bootstrap()["code_digests"](str(folder), notebooks)


def code_fingerprint(digests):
    """A short hash of code_digests' answer less the notebooks: the run's code, the same for all its rows, as a record
    names it."""
    namespace = bootstrap()
    return namespace["fingerprint"](namespace["code_only"](digests))


class Placements:
    """A Ray actor on the head: each task's attempt number, and how many notebooks ran at once on each node."""

    def __init__(self):
        self.attempts, self.running = {}, {}  # stem -> attempts so far; node -> {stem: most at once while it ran}

    def start(self, stem, node):
        """A task begins `stem` on `node`: its attempt number (a lost attempt's entry is dropped)."""
        for stems in self.running.values():
            stems.pop(stem, None)
        self.attempts[stem] = self.attempts.get(stem, 0) + 1
        stems = self.running.setdefault(node, {})
        stems[stem] = 0
        for name in stems:
            stems[name] = max(stems[name], len(stems))
        return self.attempts[stem]

    def end(self, stem, node):
        """`stem` ended on `node`: the most notebooks that ran at once there while it ran."""
        return self.running.get(node, {}).pop(stem, 1)

    def now(self):
        """The stems running now."""
        return sorted(stem for stems in self.running.values() for stem in stems)


def gpu_names(indices):
    """The names of this machine's GPUs of those indices (nvidia-smi, through compatibility.detect), [] where it has
    none."""
    if not indices:
        return []
    from runner.run import compatibility
    names = {gpu.get("index"): gpu.get("name") for gpu in compatibility.detect().gpus}
    return [names.get(index, "?") for index in indices] if names else []


def task_gpu(indices):
    """nvidia-smi's dict of the first of this machine's GPUs of those indices (its name and driver, for the ceiling's
    key), or None for a task without a GPU."""
    if not indices:
        return None
    from runner.run import compatibility
    return next((gpu for gpu in compatibility.detect().gpus if gpu.get("index") == indices[0]), None)


def run_on_node(spec, placements):
    """The Ray task: run one notebook on this node into a private folder; return the executed notebook, the record's
    text and where it ran. A notebook's failure is an answer, not an exception (Ray retries only lost workers)."""
    import ray

    from runner.run import execution, machine_probe

    node = ray.get_runtime_context().get_node_id()
    stem = spec["stem"]  # the job's name in the run ('<GPU kind>/<file stem>' with --each-gpu-kind)
    attempt = ray.get(placements.start.remote(stem, node))
    gpu_ids = [int(index) for index in ray.get_gpu_ids()]
    work = node_folder()  # named after this worker: one a killed worker leaves goes with the next node or task
    output, record_path = work / (spec["file_stem"] + ".ipynb"), work / (spec["file_stem"] + ".result.json")
    parameters = dict(spec["parameters"], result_path=str(record_path))
    this = next((entry for entry in ray.nodes() if entry["NodeID"] == node), {})
    if spec["threads"] is None:  # not asked for: the node's cores, shared evenly by the notebooks its GPUs take
        gpus = int(this.get("Resources", {}).get("GPU", 0)) if gpu_ids else 0
        parameters["threads"] = max(1, usable_cores() // max(1, gpus))
    started = time.time()
    try:
        node_ceiling = None
        if not os.environ.get(ceiling.SKIP_VARIABLE):  # Util.'s bound where the notebook runs, cached on this node
            node_ceiling = ceiling.here(parameters["threads"], task_gpu(gpu_ids), say=lambda line: None)
        dataset = tasks.TASKS[spec["task"]].dataset
        if parameters.get("data_source") == "real" and dataset is not None:  # this node's copy, fetched once
            from common import datasets
            datasets.download(datasets.REMOTE_FILES[dataset])
        watched = machine_probe.watching()
        outcome = execution.run_notebook(catalog.REPO / spec["notebook"], output, spec["kernel"], parameters, work,
                                         spec["timeout"], show_output=False, extra_env=spec.get("kernel_env"))
        kernel_log = run_folder.kernel_log_path(work, output.stem)
        return {"status": outcome.status, "error": outcome.error, "elapsed": round(time.time() - started, 3),
                "ceiling": node_ceiling, "code": spec["code"], "starts": outcome.record_fields(),
                "machine_probe": watched.ended(execution.kernels_ended),
                "notebook": output.read_bytes() if output.exists() else None,
                "kernel_log": kernel_log.read_bytes() if kernel_log.exists() else None,
                "record": record_path.read_text() if record_path.exists() else None,
                "placement": {"host": socket.gethostname(), "node_ip": this.get("NodeManagerAddress"),
                              "node_id": node[:12], "gpu_ids": gpu_ids, "gpus": gpu_names(gpu_ids),
                              "attempt": attempt, "threads": parameters["threads"],
                              "concurrent": ray.get(placements.end.remote(stem, node)), "engine": "ray " + ray.__version__}}
    finally:
        shutil.rmtree(str(work), ignore_errors=True)


def write_whole(path, data):
    """Write bytes or text to `path` through a temporary name renamed at the end: never half a file."""
    partial = path.with_name(path.name + ".part-{}".format(os.getpid()))
    (partial.write_bytes if isinstance(data, bytes) else partial.write_text)(data)
    os.replace(str(partial), str(path))


def land(job, run_dir, profile, answer):
    """Write what a task returned into the run folder and return the job's record (execution.finish_record)."""
    from runner.run import execution

    if answer["notebook"] is not None:
        write_whole(run_dir / (job.stem + ".ipynb"), answer["notebook"])
    if answer.get("kernel_log") is not None:
        log = run_folder.kernel_log_path(run_dir, job.stem)
        log.parent.mkdir(exist_ok=True)
        write_whole(log, answer["kernel_log"])
    record_path = run_folder.record_path(run_dir, job.stem)
    if answer["record"] is not None:
        write_whole(record_path, answer["record"])
    elif record_path.exists():
        record_path.unlink()  # an earlier attempt's (a resumed run's failed row): this attempt left none
    extra = {"placement": answer["placement"], "machine_probe": answer.get("machine_probe"),
             "code_fingerprint": answer.get("code")}  # the run's code, which the node's matched (bootstrap)
    extra.update(answer.get("starts", {}))  # the kernel's starts, where there were several
    if answer.get("ceiling"):  # the node's own (run_folder.ceiling_for prefers it to the run folder's)
        extra["node_ceiling"] = answer["ceiling"]
    return execution.finish_record(job, run_dir, profile, answer["status"], answer["error"], answer["elapsed"], extra=extra)


def run_jobs(cluster, jobs, run_dir, profile, parameters_of, timeout, device, threads, say=print, clock=None,
             stop_name=lambda: "Ctrl-C", kinds=None):
    """Run `jobs` as Ray tasks on `cluster`, landing each one's outputs in `run_dir` as it finishes; returns their
    records by (folder, stem). `parameters_of(job)`: its papermill parameters, less the record's path; `threads`:
    None to let each node use its own cores. `kinds` ({GPU kind: its run folder}): every job once per GPU kind, on a
    node of that kind, into that kind's folder. KeyboardInterrupt cancels every task (the running ones' rows say
    `interrupted (<stop_name()>)`)."""
    from runner.run import execution

    ray = cluster.ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    say("[ray] {}".format(cluster.describe()))
    code, fingerprint = cluster.code, code_fingerprint(cluster.code)  # the run's, which every task checks
    archive = ray.put(cluster.archive)  # in the object store once; each node fetches it once
    head = ray.get_runtime_context().get_node_id()
    placements = ray.remote(Placements).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False)).remote()
    task = ray.remote(on_node_function())
    nodes, pending, records, started = cluster.nodes(), {}, {}, time.time()
    clock = clock or (lambda: "{}:{:02d}".format(*divmod(int(time.time() - started), 60)))
    entries = [(job, run_folder.round_folder(folder, job.round), kind)
               for kind, folder in (kinds or {None: run_dir}).items() for job in jobs]

    def named(job, kind):
        return "{}/{}".format(kind, job.progress_name) if kind else job.progress_name

    for job, folder, kind in entries:
        devices = tasks.get(job.task).devices(parameters_of(job)["overrides"])
        resources, why = demand(job, nodes, device, devices, kind)
        if resources is None:
            records[folder, job.stem] = execution.write_not_run(folder, job, profile, "unavailable", why)
            say("[{}/{} {}] {}: UNAVAILABLE; {}".format(len(records), len(entries), clock(), named(job, kind), why))
            continue
        notebook = str(job.notebook.relative_to(catalog.REPO))
        expected = {path: digest for path, digest in code.items() if not path.endswith(".ipynb") or path == notebook}
        spec = {"stem": named(job, kind), "task": job.task, "notebook": notebook, "code": fingerprint,
                "kernel": job.environment.kernel_name, "parameters": dict(parameters_of(job), threads=threads),
                "timeout": timeout, "threads": threads, "file_stem": job.stem, "kernel_env": dict(job.kernel_env)}
        reference = task.options(max_retries=RETRIES, retry_exceptions=False, **resources).remote(
            "run_on_node", expected, archive, spec, placements)
        pending[reference] = (job, folder, kind, time.time(), resources)
    say("[ray] {} notebook{} submitted".format(len(pending), "" if len(pending) == 1 else "s"))
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=5)
            if not done:  # nodes may have left: a task no live node can run would wait forever
                nodes = cluster.nodes()
                for reference, (job, folder, kind, submitted, resources) in list(pending.items()):
                    if not any(fits(resources, node) for node in nodes):
                        ray.cancel(reference, force=True)
                        pending.pop(reference)
                        records[folder, job.stem] = execution.write_not_run(
                            folder, job, profile, "failed", "node lost: no node left in the cluster can run it",
                            notebook=job.stem + ".ipynb", duration_s=round(time.time() - submitted, 3))
                        say("[{}/{} {}] {}: FAILED; {}".format(len(records), len(entries), clock(), named(job, kind),
                                                              records[folder, job.stem]["error"]))
                continue
            for reference in done:
                job, folder, kind, submitted, _ = pending.pop(reference)
                try:
                    answer = ray.get(reference)
                    record = land(job, folder, profile, answer) if "code_differs" not in answer else (
                        execution.write_not_run(folder, job, profile, "failed", answer["code_differs"],
                                                notebook=job.stem + ".ipynb",
                                                duration_s=round(time.time() - submitted, 3)))
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                        ray.exceptions.OwnerDiedError, ray.exceptions.RayTaskError) as error:
                    why = "node lost" if isinstance(error, ray.exceptions.NodeDiedError) else "Ray: {}".format(
                        results.first_line(str(error)))
                    record = execution.write_not_run(folder, job, profile, "failed", why, notebook=job.stem + ".ipynb",
                                                     duration_s=round(time.time() - submitted, 3))
                records[folder, job.stem] = record
                where = record.get("placement") or {}
                outcome = results.summary_line(record) if record["status"] == "ok" else record["error"]
                say("[{}/{} {}] {}: {} after {:.0f} s on {}{}{}; {}".format(
                    len(records), len(entries), clock(), named(job, kind), record["status"].upper(),
                    record.get("duration_s") or 0, where.get("node_ip", "?"),
                    " GPU " + ",".join(map(str, where["gpu_ids"])) if where.get("gpu_ids") else "",
                    " (attempt {})".format(where["attempt"]) if where.get("attempt", 1) > 1 else "",
                    outcome + execution.starts_note(record)))
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP (`stop_name()` says which)
        running = set(ray.get(placements.now.remote(), timeout=10))
        why = "interrupted ({}) after {{:.0f}} s".format(stop_name())
        for reference, (job, folder, kind, submitted, _) in pending.items():
            ray.cancel(reference, force=True)
            if named(job, kind) in running:
                execution.write_not_run(folder, job, profile, "interrupted", why.format(time.time() - submitted),
                                        notebook=job.stem + ".ipynb")
        raise
    return records


def parameters_without_record(job, profile, parameters):
    """The papermill parameters of `job` on a node, where its record's path is the node's to set."""
    from runner.run import execution

    params = execution.notebook_parameters(job, profile, parameters, "")
    params.pop("result_path")
    return params




def setup_here(envs, options):
    """On a node: `run_all.py setup ENVS OPTIONS` in its checkout; returns its exit status, the environments it built
    and its last lines."""
    out = subprocess.run([sys.executable, str(catalog.REPO / "run_all.py"), "setup"] + list(envs) + list(options),
                         capture_output=True, text=True, cwd=str(catalog.REPO))
    lines = (out.stdout + out.stderr).strip().splitlines()
    built = sorted({line.split()[1].rstrip(":") for line in lines if line.startswith("[setup] ") and ": done in " in line})
    return {"status": out.returncode, "built": built, "tail": lines[-3:]}


def setup_on_nodes(address, envs=(), build=None, wheels=None, say=print):
    """`setup --on ray --address`: the setup on every node of the cluster at `address`, one task pinned to each, in
    its own checkout; says what each built, and that a node offers what it built once started again (Ray fixes a
    node's resources when it starts)."""
    options = (["--" + build] if build else []) + (["--wheels", str(wheels)] if wheels else [])
    try:
        with Cluster(address, say=say) as cluster:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            remote = cluster.ray.remote(on_node_function())
            answers = {node["NodeManagerAddress"]: remote.options(num_cpus=0, scheduling_strategy=(
                NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))).remote("setup_here", None, None,
                                                                                list(envs), options)
                for node in cluster.nodes()}
            say("[ray] setup on {} node{}".format(len(answers), "" if len(answers) == 1 else "s"))
            failed, restart = [], []
            for address, answer in sorted(answers.items()):
                done = cluster.ray.get(answer)
                say("[ray] {}: {}{}".format(address, "ok" if done["status"] == 0 else "FAILED (exit {})".format(
                    done["status"]), "; built " + ", ".join(done["built"]) if done["built"] else "; nothing to build"))
                for line in done["tail"] if done["status"] else []:
                    say("    " + line)
                (failed if done["status"] else []).append(address)
                (restart if done["built"] else []).append(address)
            if restart:
                say("[ray] Ray fixes a node's resources when it starts: start {} again (`run_all.py node ...`) so "
                    "that runs can use what {} built".format(", ".join(restart), "it" if len(restart) == 1 else "they"))
            return 1 if failed else 0
    except RayError as error:
        print("run_all.py: error: {}".format(error), file=sys.stderr)
        return 1


def _interrupt(number, frame):
    raise KeyboardInterrupt


def port_free(address, port):
    """True where TCP `port` of `address` can be bound now."""
    with socket.socket() as probe:
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


TOKEN_FILE = Path("~/.rosetta/ray_token")  # where a head's `run_all.py node` writes its token (--token-file)


def write_token(path, value):
    """Write `value` to `path`, a file of mode 0600 (its folder made 0700 where missing), whole or not at all."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part-{}".format(os.getpid()))
    descriptor = os.open(str(partial), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # a file left by a killed writer keeps its mode otherwise
        os.write(descriptor, (value + "\n").encode())
    finally:
        os.close(descriptor)
    os.replace(str(partial), str(path))


def remove_token(path, value):
    """Remove the token file at `path` where it still holds `value` (not one another head wrote since)."""
    try:
        if path.read_text().strip() == value:
            path.unlink()
    except OSError:
        pass


def node_command(address=None, ip=None, port=6379, num_gpus=None, setup=False, token_file=None, show_token=False,
                 say=print):
    """`run_all.py node`: start this machine's Ray node (a head, or one joining the cluster at `address`) with the
    resources of the environments built here (after building the missing ones with `setup`), and keep it until
    Ctrl-C or SIGTERM. A head writes its token to `token_file` (mode 0600, default TOKEN_FILE) and names the file;
    the token itself it prints only with `show_token`."""
    from runner.run import compatibility, setup_commands

    if address is not None:
        try:
            check_cluster(address)  # a missing or refused token in one line, before any setup or `ray start`
        except RayError as error:
            print("run_all.py: error: node {}".format(error), file=sys.stderr)
            return 1
    if setup:
        if setup_commands.setup() != 0:
            print("run_all.py: error: node --setup: some environments could not be built; the node advertises those "
                  "that are", file=sys.stderr)
    gpus = num_gpus if num_gpus is not None else len(compatibility.detect().gpus)
    ip = ip or LOCAL_ADDRESS
    try:
        import_ray(say)
        head = address
        if head is None and not port_free(ip, port):
            raise RayError("node: port {} of {} is taken (--port)".format(port, ip))
        node = start_node(ip, head=head, gpus=gpus, port=port)
    except RayError as error:
        print("run_all.py: error: {}".format(error), file=sys.stderr)
        return 1
    advertised = sorted(key[len(ENV_RESOURCE.format("")):] for key in node_resources() if key.startswith(
        ENV_RESOURCE.format("")))
    say("[ray] node {} {} ({} GPU{}; environments: {}); Ctrl-C stops it".format(
        ip, "joined the cluster at " + head if head else "is the head of a cluster at " + node.address, gpus,
        "" if gpus == 1 else "s", ", ".join(advertised) or "none"))
    path = None
    if head is None:
        path = Path(os.path.expanduser(str(token_file or TOKEN_FILE))).absolute()
        try:
            write_token(path, token())
        except OSError as error:
            node.stop()
            print("run_all.py: error: node: cannot write the cluster's token to {}: {}".format(
                path, error.strerror or error), file=sys.stderr)
            return 1
        say("[ray] its token is in {} (mode 0600): `export {}=$(cat {})` where the other nodes and the runs start "
            "(copy the file there; --show-token prints it)".format(path, TOKEN_VARIABLE, path))
        if show_token:
            say("[ray] export {}={}".format(TOKEN_VARIABLE, token()))
    signal.signal(signal.SIGTERM, _interrupt)  # stopped as by Ctrl-C: the node leaves the cluster, its folder goes
    try:
        node.process.wait()
        say("[ray] the node stopped by itself (exit {}); its log: {}".format(node.process.returncode,
                                                                             node.folder / "node.log"))
        return 1
    except KeyboardInterrupt:
        node.stop()
        say("[ray] node {} stopped".format(ip))
        return 0
    finally:
        if path is not None:
            remove_token(path, token())


if __name__ == "__main__":  # `python -m runner.run.on_ray`: the resources `ray start --resources` gives this machine
    from runner.run import compatibility
    print(json.dumps(node_resources([gpu.get("name") or "unknown GPU" for gpu in compatibility.detect().gpus])))
