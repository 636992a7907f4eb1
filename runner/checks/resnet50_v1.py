"""The ResNet-50 v1 reference of the same-weights check (runner/checks/equivalence.py): torchvision's ResNet-50 made v1
(the stride of layers 2-4's first block on its first 1x1 convolution instead of its 3x3), with every convolution bias
the canonical file holds (common/weights.py: the v1 layout), in float32, eval mode, cut after the global average pool.

The zoo models' ResNet-50 is v1 (keras.applications in TensorFlow and Keras 3, Keras Applications 1.0.8 in Keras 2,
Gluon's resnet50_v1, Chainer's ResNet50Layers); they are compared with this function instead of PyTorch's notebook
(v1.5). Run as a script in the PyTorch environment (it imports `common`, the registry, NumPy and PyTorch):
    python runner/checks/resnet50_v1.py INIT.npz OUT.npz '{"batch_size": 2, "batches": 2, "image_size": 96, ...}' SEED
(the check's inference hyperparameters and the notebooks' seed). It writes, for each of VARIANTS, the features of
the notebooks' first batch (datasets.fake_images, channels first). features() runs it from the runner.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from common import datasets, weight_layouts, weights
from runner import catalog
from runner.run import environments

REFERENCE_ENVIRONMENT = "pytorch"
SCRIPT = Path(__file__).resolve()
# the functions computed, each by name: the zoo models compute "v1" but for their max pool, and "v1.5" is the control
VARIANTS = {
    "v1": "ResNet-50 v1: stride 2 on the first 1x1 convolution of layers 2-4's first block; max pool 3x3, stride 2, "
          "padded by 1 (torchvision's, keras.applications', Gluon's)",
    "v1_caffe_pool": "ResNet-50 v1 with Caffe's max pool: 3x3, stride 2, unpadded, its last window past the edge "
                     "(ceil mode), one pixel right of and below torchvision's windows (Chainer's ResNet50Layers)",
    "v1.5": "the control: torchvision's v1.5 (the stride on the 3x3 convolution) with the same weights and biases",
}
# the short name of each zoo variant, for the verdict
VARIANT_NAMES = {"v1": "ResNet-50 v1", "v1_caffe_pool": "ResNet-50 v1 with Caffe's max pool", "v1.5": "ResNet-50 v1.5"}


class ReferenceFailed(RuntimeError):
    """The v1 reference could not be computed; the message says why."""


def model_of(start, variant):
    """torchvision's ResNet-50 as `variant` (VARIANTS) from the canonical weights `start`, with a bias on every
    convolution whose bias `start` holds; eval mode, the classifier replaced by the identity."""
    import torch  # the PyTorch environment's: the runner, which imports this module for features(), has no PyTorch
    import torchvision

    model = torchvision.models.resnet50(weights=None)
    model.fc = torch.nn.Identity()
    if variant != "v1.5":
        for stage in (model.layer2, model.layer3, model.layer4):
            stage[0].conv1.stride, stage[0].conv2.stride = (2, 2), (1, 1)
    if variant == "v1_caffe_pool":
        model.maxpool = torch.nn.MaxPool2d(kernel_size=3, stride=2, padding=0, ceil_mode=True)
    for layer in weight_layouts.resnet50_layers():
        if layer.conv + ".bias" in start:
            model.get_submodule(layer.conv).bias = torch.nn.Parameter(torch.zeros(layer.out_channels))
    state = {name: torch.from_numpy(value) for name, value in start.items() if name != weights.LOGITS}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all(name.endswith("num_batches_tracked") for name in missing), (missing, unexpected)
    return model.eval()


def features_of(start, params, seed=0):
    """{variant: features} of the first batch of the inference notebooks' images (params' batch_size, batches and
    image_size; `seed`) for every variant of VARIANTS, float32."""
    import torch

    torch.set_num_threads(1)
    images = datasets.fake_images(params["batch_size"] * params["batches"], params["image_size"], seed=seed)
    batch = torch.from_numpy(images[:params["batch_size"]])
    with torch.inference_mode():
        return {variant: model_of(start, variant)(batch).numpy() for variant in VARIANTS}


def features(init, folder, params, seed=0):
    """Run this script in the PyTorch environment from the canonical weights file `init` with the check's inference
    hyperparameters `params` and the notebooks' `seed`, writing folder/resnet50_v1.npz; returns {variant: features}.
    ReferenceFailed where the environment is not built or the script fails."""
    env = catalog.ENVIRONMENTS[REFERENCE_ENVIRONMENT]
    if not environments.is_ready(env):
        raise ReferenceFailed("the ResNet-50 v1 reference needs the PyTorch environment (python3 run_all.py setup pytorch)")
    Path(folder).mkdir(parents=True, exist_ok=True)
    out = Path(folder) / "resnet50_v1.npz"
    command = [str(environments.interpreter(env)), str(SCRIPT), str(init), str(out), json.dumps(params), str(seed)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=str(catalog.REPO), timeout=600,
                          env=environments.script_environment(env))
    if done.returncode != 0:
        raise ReferenceFailed("ResNet-50 v1 reference failed: " + (done.stderr.strip().splitlines() or ["no output"])[-1])
    with np.load(str(out)) as data:
        return {variant: data[variant] for variant in VARIANTS}


def main(init, out, params_json, seed="0"):
    """Read the canonical weights `init`, write every variant's features to `out` (.npz)."""
    params = json.loads(params_json)
    np.savez(out, **features_of(weights.load_weights(init, "inference", params), params, int(seed)))


if __name__ == "__main__":
    main(*sys.argv[1:])
