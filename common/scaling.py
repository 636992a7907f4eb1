"""A model of data-parallel training on several GPUs: the step time on N devices predicted from one device's.

Data parallelism as the frameworks' engines do it (PyTorch DDP, TensorFlow's MirroredStrategy, JAX sharding):
every device computes the step on its own batch (the per-device batch stays fixed, so N devices take N
times the images a step), then the gradients are summed across devices with a ring all-reduce, which sends
and receives 2 (N - 1) / N of the gradient's bytes through each device's link. Predicted:

- without overlap, the step is the one-device step plus the all-reduce;
- with overlap, the all-reduce runs during the backward pass (two thirds of a step, common/flops.py's three
  forward passes a step), so only what does not fit behind it adds to the step.

Idealised on purpose: each link at its nominal bandwidth in one direction, no latency, no contention, the
whole gradient in one all-reduce. Measured scaling below it shows what that leaves out. Standard library
only (imported on Python 3.6).
"""

from collections import OrderedDict

from common import weight_layouts

# Nominal bandwidth per direction of one GPU's link to the others, in bytes per second.
LINKS = OrderedDict([
    ("pcie4", ("PCIe 4.0 x16", 31.5e9)),  # 16 GT/s x 16 lanes, 128b/130b encoding
    ("nvlink3", ("NVLink 3 (A100 SXM, 12 links)", 300e9)),  # 12 x 25 GB/s
    ("nvlink4", ("NVLink 4 (H100 SXM, 18 links)", 450e9)),  # 18 x 25 GB/s
])
BACKWARD_SHARE = 2.0 / 3  # of a training step: the gradients of activations and of weights, two forward passes' work
DEVICE_COUNTS = (1, 2, 4, 8)


def resnet50_parameters(num_classes=1000):
    """Trainable parameters of ResNet-50 v1.5 with its classifier (25,557,032 for 1000 classes): every gradient a
    data-parallel step all-reduces."""
    shapes = weight_layouts.resnet50_shapes()
    count = 0
    for name, shape in shapes.items():
        if not name.endswith(("running_mean", "running_var")):
            size = 1
            for dim in shape:
                size *= dim
            count += size
    return count + 2048 * num_classes + num_classes


def allreduce_seconds(gradient_bytes, devices, bandwidth):
    """Seconds a ring all-reduce of `gradient_bytes` takes on `devices` devices whose links carry `bandwidth` bytes
    per second each way: 2 (N - 1) / N of the bytes through each link; 0 on one device."""
    if devices < 1 or bandwidth <= 0:
        raise ValueError("devices must be 1 or more and bandwidth positive")
    return 2.0 * (devices - 1) / devices * gradient_bytes / bandwidth


def step_seconds(one_device_seconds, gradient_bytes, devices, bandwidth, overlap=False):
    """Predicted seconds of one data-parallel step on `devices` devices, from the one-device step time; with
    `overlap`, the all-reduce runs during the backward pass and only its excess adds."""
    communication = allreduce_seconds(gradient_bytes, devices, bandwidth)
    if not overlap:
        return one_device_seconds + communication
    backward = BACKWARD_SHARE * one_device_seconds
    return one_device_seconds - backward + max(backward, communication)


def efficiency(one_device_seconds, gradient_bytes, devices, bandwidth, overlap=False):
    """Scaling efficiency: throughput on `devices` devices over `devices` times one device's (1.0 is linear)."""
    return one_device_seconds / step_seconds(one_device_seconds, gradient_bytes, devices, bandwidth, overlap)


def step_time_for(target_efficiency, gradient_bytes, devices, bandwidth):
    """The shortest one-device step time (s) that still scales at `target_efficiency` without overlap: the compute a
    step needs so that the all-reduce costs at most 1 - target of the step."""
    if not 0 < target_efficiency < 1:
        raise ValueError("target_efficiency must be between 0 and 1")
    communication = allreduce_seconds(gradient_bytes, devices, bandwidth)
    return communication * target_efficiency / (1 - target_efficiency)


def prediction_table(one_device_seconds=None, gradient_bytes=None, devices=DEVICE_COUNTS):
    """Rows {link, label, devices, allreduce_ms, step_ms_for_90, and, given `one_device_seconds`, efficiency and
    efficiency_overlap} for every link and device count: ResNet-50's float32 gradients unless `gradient_bytes`."""
    gradient_bytes = gradient_bytes or 4 * resnet50_parameters()
    rows = []
    for key, (label, bandwidth) in LINKS.items():
        for count in devices:
            row = OrderedDict([("link", key), ("label", label), ("devices", count),
                               ("allreduce_ms", 1e3 * allreduce_seconds(gradient_bytes, count, bandwidth)),
                               ("step_ms_for_90", 1e3 * step_time_for(0.9, gradient_bytes, count, bandwidth))])
            if one_device_seconds:
                row["efficiency"] = efficiency(one_device_seconds, gradient_bytes, count, bandwidth)
                row["efficiency_overlap"] = efficiency(one_device_seconds, gradient_bytes, count, bandwidth, True)
            rows.append(row)
    return rows
