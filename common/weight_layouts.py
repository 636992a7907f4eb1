"""The canonical layouts' shapes that need no task (ResNet-50's convolutions and batch norms, under torchvision's
names) and the deterministic weights drawn for a layout: what the tasks (common/tasks) compute their weights from,
below common/weights.py, which reads and writes the files and asks the tasks."""

import collections

import numpy as np

__all__ = ["BATCH_NORM_EPSILON", "ConvBN", "fan_in_weights", "resnet50_layers", "resnet50_shapes", "resnet50_weights"]

ConvBN = collections.namedtuple("ConvBN", "conv bn out_channels in_channels size")
BATCH_NORM_EPSILON = 1e-5  # torchvision's: the canonical running variances are for it


def resnet50_layers():
    """ResNet-50's convolutions, each with the batch norm after it, under torchvision's names, in order: [ConvBN]."""
    layers = [ConvBN("conv1", "bn1", 64, 3, 7)]
    channels = 64
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), 1):
        for block in range(blocks):
            prefix = "layer{}.{}.".format(stage, block)
            layers += [ConvBN(prefix + "conv1", prefix + "bn1", width, channels, 1),
                       ConvBN(prefix + "conv2", prefix + "bn2", width, width, 3),
                       ConvBN(prefix + "conv3", prefix + "bn3", 4 * width, width, 1)]
            if block == 0:
                layers.append(ConvBN(prefix + "downsample.0", prefix + "downsample.1", 4 * width, channels, 1))
            channels = 4 * width
    return layers


def resnet50_shapes():
    """{name: shape} of ResNet-50 v1.5's convolutions and batch norms under torchvision's names."""
    out = {}
    for layer in resnet50_layers():
        out[layer.conv + ".weight"] = (layer.out_channels, layer.in_channels, layer.size, layer.size)
        for stat in ("weight", "bias", "running_mean", "running_var"):
            out[layer.bn + "." + stat] = (layer.out_channels,)
    return out


def fan_in_weights(shapes_by_name, seed=0):
    """Deterministic weights of the layouts `shapes_by_name` from `seed`: uniform(+-1/sqrt(fan_in)) like PyTorch's
    layers (a GRU's every weight and bias from +-1/sqrt(units)), embeddings N(0, 1), layer norms' scales in 0.8-1.2
    and shifts in +-0.1; drawn in the names' order."""
    rng = np.random.RandomState(seed)
    out = {}
    for name, shape in sorted(shapes_by_name.items()):
        if name.startswith("embedding"):
            out[name] = rng.normal(0.0, 1.0, size=shape)
            continue
        if name.endswith("/scale"):  # a layer norm: away from identity, so that scale and shift cannot be mixed up
            out[name] = rng.uniform(0.8, 1.2, size=shape)
            continue
        if name.endswith("norm/bias"):
            out[name] = rng.uniform(-0.1, 0.1, size=shape)
            continue
        if name.startswith("gru/"):
            fan_in = shape[-1] // 3  # PyTorch's GRU: every weight and bias from +-1/sqrt(units)
        elif name.endswith("/kernel"):
            fan_in = int(np.prod(shape[1:])) if len(shape) == 4 else shape[0]
        else:  # a bias: the fan-in of its kernel
            kernel = shapes_by_name[name.replace("/bias", "/kernel")]
            fan_in = int(np.prod(kernel[1:])) if len(kernel) == 4 else kernel[0]
        bound = 1.0 / np.sqrt(fan_in)
        out[name] = rng.uniform(-bound, bound, size=shape)
    return {name: value.astype(np.float32) for name, value in out.items()}


def resnet50_weights(shapes_by_name, seed=0):
    """Deterministic ResNet-50 weights of the layouts `shapes_by_name` (torchvision's names) from `seed`: He-normal
    convolutions, batch-norm scales and variances in 0.8-1.2, shifts and means in +-0.1 (away from identity, so that
    a mix-up shows), a classifier ("fc.") uniform(+-1/sqrt(2048)); drawn in the names' order."""
    rng = np.random.RandomState(seed)
    out = {}
    for name, shape in sorted(shapes_by_name.items()):
        if name.startswith("fc."):
            out[name] = rng.uniform(-1 / np.sqrt(2048), 1 / np.sqrt(2048), size=shape)
        elif len(shape) == 4:
            out[name] = rng.normal(0.0, np.sqrt(2.0 / np.prod(shape[1:])), size=shape)
        elif name.endswith(("running_var", ".weight")):
            out[name] = rng.uniform(0.8, 1.2, size=shape)
        else:  # bias, running_mean
            out[name] = rng.uniform(-0.1, 0.1, size=shape)
    return {name: value.astype(np.float32) for name, value in out.items()}
