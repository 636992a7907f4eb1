"""The exact step for the data-parallel check (runner/checks/data_parallel.py): one SGD step of torchvision's ResNet-50 in
float64, from canonical weights, on the check's images, the batch in micro-batches whose gradients are averaged as the notebooks
average them.

Run as a script in the PyTorch environment (it imports only `common`, NumPy and PyTorch):
    python runner/checks/float64_step.py INIT.npz OUT.npz '{"batch_size": 16, "micro_batches": 2, ...}'
(the one-device run's train hyperparameters: its whole batch and its micro-batches). It writes the weights after the
step, float64 rounded once to float32, as canonical weights.
"""

import json
import sys

import numpy as np
import torch
import torchvision

from common import datasets, weights


def exact_step(start, params, seed=0):
    """The weights after one SGD step in float64 from the canonical weights `start` on the check's images (batch_size
    of them from the notebooks' seed, in micro_batches parts): {name: float64 array}. Momentum has nothing to add
    to a first step (the velocity starts as the gradient); running statistics (not compared) are as the micro-batches
    left them."""
    torch.set_num_threads(1)
    images = datasets.fake_images(params["batch_size"], params["image_size"], seed=seed)
    labels = datasets.fake_labels(params["batch_size"], params["num_classes"], seed=seed)
    micro_batches = params["micro_batches"]
    model = torchvision.models.resnet50(num_classes=params["num_classes"]).double().train()
    model.load_state_dict({name: torch.from_numpy(np.asarray(value, dtype=np.float64)) for name, value in start.items()},
                          strict=False)  # canonical weights are torchvision's, without num_batches_tracked
    for x, y in zip(np.split(images, micro_batches), np.split(labels, micro_batches)):
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x).double()), torch.from_numpy(y))
        (loss / micro_batches).backward()  # gradients accumulate: the micro-batches' mean
    with torch.no_grad():
        for parameter in model.parameters():
            parameter -= params["lr"] * parameter.grad
    return {name: value.numpy() for name, value in model.state_dict().items() if name in start}


def main(init, out, params_json):
    """Read `init`, take the exact step with the train hyperparameters `params_json`, write `out`."""
    params = json.loads(params_json)
    start = weights.load_weights(init, "train", params)
    weights.save_weights(out, "train", params, exact_step(start, params))


if __name__ == "__main__":
    main(*sys.argv[1:])
