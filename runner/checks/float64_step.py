"""The exact steps for the data-parallel check (runner/checks/data_parallel.py): the check's SGD-momentum steps of
torchvision's ResNet-50 in float64, from canonical weights, on the check's images, the batch in micro-batches whose gradients
are averaged as the notebooks average them.

Run as a script in the PyTorch environment (it imports only `common`, NumPy and PyTorch):
    python runner/checks/float64_step.py INIT.npz OUT.npz '{"batch_size": 16, "micro_batches": 2, ...}'
(the one-device run's train hyperparameters: its whole batch, its micro-batches, its steps). It writes the weights after
the steps, float64 rounded once to float32, as canonical weights.
"""

import json
import sys

import numpy as np
import torch
import torchvision

from common import datasets, weights


def exact_steps(start, params, seed=0):
    """The weights after params["steps"] SGD steps with momentum (PyTorch's form: v = momentum v + g, w -= lr v) in float64
    from the canonical weights `start`, every step on the check's images (batch_size of them from the notebooks' seed, in
    micro_batches parts): {name: float64 array}. Running statistics (not compared) are as the micro-batches left them."""
    torch.set_num_threads(1)
    images = datasets.fake_images(params["batch_size"], params["image_size"], seed=seed)
    labels = datasets.fake_labels(params["batch_size"], params["num_classes"], seed=seed)
    micro_batches = params["micro_batches"]
    model = torchvision.models.resnet50(num_classes=params["num_classes"]).double().train()
    model.load_state_dict({name: torch.from_numpy(np.asarray(value, dtype=np.float64)) for name, value in start.items()},
                          strict=False)  # canonical weights are torchvision's, without num_batches_tracked
    velocity = {}
    for _ in range(params["steps"]):
        model.zero_grad(set_to_none=True)
        for x, y in zip(np.split(images, micro_batches), np.split(labels, micro_batches)):
            loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x).double()), torch.from_numpy(y))
            (loss / micro_batches).backward()  # gradients accumulate: the micro-batches' mean
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                velocity[name] = parameter.grad.clone() if name not in velocity else (
                    params["momentum"] * velocity[name] + parameter.grad)
                parameter -= params["lr"] * velocity[name]
    return {name: value.numpy() for name, value in model.state_dict().items() if name in start}


def main(init, out, params_json):
    """Read `init`, take the exact steps with the train hyperparameters `params_json`, write `out`."""
    params = json.loads(params_json)
    start = weights.load_weights(init, "train", params)
    weights.save_weights(out, "train", params, exact_steps(start, params))


if __name__ == "__main__":
    main(*sys.argv[1:])
