"""Data parallelism computes the single-device steps (runner/checks/data_parallel.py, the check run_all.py --devices N runs):
every train notebook takes two SGD-momentum steps on 2 devices and two on 1 device with the whole batch in 2 micro-batches
(without the split where batch norm normalises over the whole batch), from the same weights and images, and the
weights agree; a control run with the batch the other way differs. A notebook that cannot run on several devices
(Keras on TensorFlow or torch) refuses, with the reason.

Across machines: the notebook run twice at once, as two "machines" with one device each over the loopback address
(machine 0 coordinating: torchrun's --nnodes, jax.distributed.initialize; TensorFlow's TF_CONFIG naming both;
Caffe2's Gloo workers meeting in a folder both mount), takes the step of two devices on one machine (the check's
own two-device run, where the check ran first in this session).
"""

import re
import shutil
import socket

import pytest
from conftest import TRAIN_ONE_DEVICE, require_environment

from runner import catalog, run_folder
from runner.checks import data_parallel

JOBS = catalog.select(task_keys=["train"])
# How far a framework's own float32 steps may be from the float64 steps, as a share of the steps: after two steps the
# kinks that rounding moved leave up to a quarter of a step between them (measured: PyTorch itself 26%, TensorFlow
# 18%, JAX 16%)
EXACT_SHARE = 0.5
CHECKED = {}  # job stem -> the folder of its check in this session: init.npz, parallel/weights.npz, float64/float64.npz


@pytest.fixture(scope="module", params=JOBS, ids=lambda job: job.stem)
def job(request):
    """A train job; module-wide, so that pytest runs each job's tests one after the other."""
    return request.param


@pytest.fixture(scope="module")
def check_folder(job, tmp_path_factory, request):
    """The folder of `job`'s check, which its test across machines reads too (0.5 GB of weights): removed once the
    job's tests are done, unless one failed."""
    folder = tmp_path_factory.mktemp(job.stem)
    failed_before = request.session.testsfailed
    yield folder
    if request.session.testsfailed == failed_before:
        shutil.rmtree(str(folder), ignore_errors=True)


def test_a_data_parallel_step_is_the_single_device_step(job, check_folder):
    require_environment(job.environment)
    if job.label in TRAIN_ONE_DEVICE:
        with pytest.raises(data_parallel.StepError, match=TRAIN_ONE_DEVICE[job.label]) as refusal:
            data_parallel.check_job(job, check_folder, control=True)
        assert refusal.value.status == "unsupported"
        return
    result = data_parallel.check_job(job, check_folder, control=True)
    CHECKED[job.stem] = check_folder
    assert result["failures"] == []
    assert result["moved"] > 1e-3 and result["max_abs"] < result["allowed"]
    assert result["control_max_abs"] > 0.2 * result["moved"]  # batch norm's statistics do matter
    if job.label in data_parallel.FLOAT64_REFERENCE:  # held to the exact step: as close to it as one device
        assert result["parallel_error"] < data_parallel.REFERENCE_FACTOR * result["single_error"]
        assert result["single_error"] < EXACT_SHARE * result["moved"]  # its own steps compute the float64 steps' function
        assert result["control_error"] > 0.2 * result["moved"]  # and the control is far from it
        assert run_folder.data_parallel_verdict(result).startswith("as exact as one device")
    else:
        assert result["allowed"] == data_parallel.TOLERANCE and run_folder.data_parallel_verdict(result).startswith("yes")


# Frameworks whose train notebook runs on one machine only, and the words of its refusal of two
ONE_MACHINE = {"Chainer": "this notebook runs on one machine (mpiexec across machines",
               "CNTK": "this notebook runs on one machine (mpiexec across machines", **TRAIN_ONE_DEVICE}

# Frameworks whose machines keep their own batch-norm running statistics (compared: the trained weights only)
OWN_RUNNING_STATISTICS = {"MXNet"}  # the parameter server holds what the optimizer updates
# Frameworks that need every machine's address, not only machine 0's (TensorFlow's TF_CONFIG lists the cluster)
EVERY_ADDRESS = {"TensorFlow"}
# Frameworks whose count of timed passes is their worker 0's, which is not machine 0 but whichever machine the
# scheduler numbers 0 (MXNet's kvstore broadcasts worker 0's): the test cannot choose which machine's count all take,
# and the check's weights need one pass. The agreement runs, but the test's machines want the same count.
WORKER_0_BY_ARRIVAL = {"MXNet"}
# Frameworks whose machines meet in a folder they all mount, not at an address (Caffe2's Gloo file store)
SHARED_FOLDER = {"Caffe2"}


def free_port():
    """A TCP port on the loopback address that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_machines_over_loopback_take_the_two_device_step(job, tmp_path):
    """Two "machines" (the notebook run twice at once, one device each, machine 0 coordinating on 127.0.0.1) form
    one group of two workers, as two devices on one machine do, take the same step, and agree on machine 0's count of
    timed passes."""
    require_environment(job.environment)
    if job.label in ONE_MACHINE:  # it refuses, with the reason, before any worker starts
        init = data_parallel.start_weights(tmp_path / "init.npz")
        with pytest.raises(data_parallel.StepError, match=re.escape(ONE_MACHINE[job.label])) as refusal:
            data_parallel.take_steps(job, tmp_path / "machine-0", init, 1, {"devices": 1, "machines": 2}, machine_rank=0,
                                     coordinator="127.0.0.1:{}".format(free_port()))
        assert refusal.value.status == "unsupported"
        return
    checked = CHECKED.get(job.stem)
    if checked:  # the check's two-device step: the same weights, images and single thread
        init, on_one = checked / "init.npz", checked / "parallel" / "weights.npz"
    else:
        init = data_parallel.start_weights(tmp_path / "init.npz")
        _, on_one = data_parallel.take_steps(job, tmp_path / "one-machine", init, 1, {"devices": 2})  # one thread each
    coordinator = "127.0.0.1:{}".format(free_port())
    if job.label in SHARED_FOLDER:  # a folder both "machines" mount
        (tmp_path / "rendezvous").mkdir()
        coordinator = str(tmp_path / "rendezvous")
    elif job.label in EVERY_ADDRESS:  # every machine's address, machine 0's first
        coordinator += ",127.0.0.1:{}".format(free_port())
    # machine 1 alone would time passes for 1000 s: every machine takes machine 0's count (one pass) instead, as the
    # steps must be the same on all (timing.time_passes); without the agreement machine 1 would wait for ever
    wants = {0: {}, 1: {} if job.label in WORKER_0_BY_ARRIVAL else {"min_timed_s": 1000.0}}
    machines = data_parallel.take_steps_on_machines(job, tmp_path, init, 1, [dict(devices=1, **wants[rank])
                                                                             for rank in (0, 1)], coordinator)
    assert not any(isinstance(machine, Exception) for machine in machines), [str(m) for m in machines]
    (first, on_two), (second, _) = machines
    assert first["params"]["machines"] == second["params"]["machines"] == 2
    assert len(first["timings"]["passes_s"]) == len(second["timings"]["passes_s"]) == 1
    assert first["timings"]["images_per_pass"] == 2 * data_parallel.params()["batch_size"] * \
        data_parallel.params()["steps"]
    one, two = data_parallel.load(on_one), data_parallel.load(on_two)
    moved = data_parallel.largest_difference(one, data_parallel.load(init), list(one))
    assert moved > 1e-3  # a real step
    if job.label in data_parallel.FLOAT64_REFERENCE:  # as close to the exact step as two devices on one machine
        if checked:  # the check's float64 step (it has one for these frameworks), from the same weights
            exact = data_parallel.load(checked / "float64" / "float64.npz")
        else:
            exact = data_parallel.exact_weights(init, tmp_path / "float64", **data_parallel.single_device_run(job.label))
        trained = data_parallel.trained_names(one)
        one_error, two_error = (data_parallel.largest_difference(w, exact, trained) for w in (one, two))
        assert two_error < data_parallel.REFERENCE_FACTOR * one_error and one_error < EXACT_SHARE * moved
    else:
        compared = data_parallel.trained_names(one) if job.label in OWN_RUNNING_STATISTICS else list(one)
        assert data_parallel.largest_difference(one, two, compared) < data_parallel.TOLERANCE


# Frameworks whose coordinator is not machine 0's host:port alone, and the words of their one-line refusal of it
OTHER_COORDINATOR = {
    "TensorFlow": "TensorFlow needs every machine's host:port in coordinator",  # TF_CONFIG lists the whole cluster
    "Caffe2": "Caffe2's machines meet in a folder that every machine mounts",  # else Caffe2 would abort the process
}


@pytest.mark.parametrize("label", sorted(OTHER_COORDINATOR))
def test_several_machines_refuse_machine_0_s_address_where_they_need_more(label, tmp_path):
    """Machine 0's address alone is refused in one line, before the framework starts its workers."""
    job = next(job for job in JOBS if job.label == label)
    require_environment(job.environment)
    init = data_parallel.start_weights(tmp_path / "init.npz")
    with pytest.raises(data_parallel.StepError, match=OTHER_COORDINATOR[label]):
        data_parallel.take_steps(job, tmp_path / "machine-0", init, 1, {"machines": 2}, machine_rank=0,
                               coordinator="127.0.0.1:{}".format(free_port()))
