"""fp16's dynamic loss scaling written out for TensorFlow (frameworks/tensorflow.py LossScale), run in the
TensorFlow environment: a step whose gradients overflowed is skipped and the scale halved, finite steps update and
the scale grows on schedule; under a MirroredStrategy one replica's overflow skips the step on every replica."""

import json
import subprocess

import pytest
from conftest import require_environment

from runner import catalog
from runner.run import environments

SCRIPT = r"""
import contextlib
import json

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from frameworks.tensorflow import LossScale

strategy = tf.distribute.MirroredStrategy(["/CPU:0", "/CPU:1"]) if MIRRORED else None
with strategy.scope() if strategy else contextlib.nullcontext():
    weight = tf.Variable(1.0)
    loss_scale = LossScale("fp16", initial_scale=8.0, growth_steps=2)


def gradient(overflow):
    # the gradient of a scaled loss, 1 once unscaled; inf on replica 1 (or the only one) when told to overflow
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    bad = tf.logical_and(overflow, tf.equal(replica, 1 if strategy else 0))
    return loss_scale.unscale([tf.where(bad, float("inf"), 1.0) * loss_scale.scale])


@tf.function
def step(overflow):
    grads = strategy.run(gradient, args=(overflow,)) if strategy else gradient(overflow)

    def update():
        if strategy:
            strategy.extended.update(weight, lambda w, g: w.assign_sub(g), args=(grads[0],))
        else:
            weight.assign_sub(grads[0])

    loss_scale.update_if_finite(grads, update, strategy)


seen = []
for overflow in (True, False, False):
    step(tf.constant(overflow))
    copies = strategy.experimental_local_results(weight) if strategy else [weight]
    seen.append({"weights": [float(w.numpy()) for w in copies], "scale": float(loss_scale.scale.numpy())})
print(json.dumps(seen))
"""


@pytest.mark.parametrize("mirrored", [False, True], ids=["one device", "MirroredStrategy"])
def test_tensorflow_loss_scale_skips_overflowing_steps_and_grows_on_schedule(mirrored):
    (job,) = catalog.select(["tensorflow"], ["train"])
    require_environment(job.environment)
    done = subprocess.run([str(environments.interpreter(job.environment)), "-c",
                           SCRIPT.replace("MIRRORED", str(mirrored))], capture_output=True, text=True, timeout=300,
                          cwd=str(catalog.REPO), env=environments.script_environment(job.environment))
    assert done.returncode == 0, done.stderr[-2000:]
    skipped, first, second = json.loads(done.stdout.strip().splitlines()[-1])
    copies = 2 if mirrored else 1
    assert skipped == {"weights": [1.0] * copies, "scale": 4.0}  # no update anywhere, the scale halved
    assert first == {"weights": [0.0] * copies, "scale": 4.0}  # the update, with the gradient unscaled
    assert second == {"weights": [-1.0] * copies, "scale": 8.0}  # two finite steps in a row: the scale doubles
