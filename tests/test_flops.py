"""Analytic FLOP counts (common/flops.py and each task's module) against hand counts, and the peak tables."""

import json

import pytest
from conftest import json_from_environment

from common import flops, hyperparams, tasks
from common.tasks import cnn, rnn, transformer

CNN = hyperparams.for_task("cnn", "full")
RNN = hyperparams.for_task("rnn", "full")


def test_cnn_counts_match_a_hand_count():
    # multiply-adds per image: conv 3x3 (3->50) at 32x32, (50->50) at 32x32, (50->100) at 16x16, (100->100)
    # at 16x16, dense 6400->512, 512->10; each multiply-add is 2 FLOPs
    macs = 9 * 3 * 50 * 1024 + 9 * 50 * 50 * 1024 + 9 * 50 * 100 * 256 + 9 * 100 * 100 * 256 + 6400 * 512 + 512 * 10
    assert cnn.forward_flops(CNN) == 2 * macs == 124528640
    assert tasks.get("cnn").training_flops(CNN) == 3 * 2 * macs - 2 * 9 * 3 * 50 * 1024


def test_rnn_and_resnet_counts():
    assert rnn.forward_flops(RNN) == 150 * 2 * 3 * (125 * 100 + 100 * 100) + 2 * 100 * 2
    assert tasks.get("rnn").training_flops(RNN) == 3 * rnn.forward_flops(RNN)
    assert tasks.get("inference").training_flops({}) is None  # nothing trained
    # ResNet-50 to the pool: 4.09 billion multiply-adds at 224x224, the figure usually quoted
    assert flops.resnet50_forward_flops(224) / 2 == pytest.approx(4.087e9, rel=1e-3)
    assert flops.resnet50_forward_flops(96) < flops.resnet50_forward_flops(224) / 5
    # v1 strides the first 1x1 of a downsampling block instead of its 3x3: 3.86 billion multiply-adds
    assert flops.resnet50_forward_flops(224, "1") / 2 == pytest.approx(3.86e9, rel=2e-3)
    with pytest.raises(ValueError, match="known versions"):
        flops.resnet50_forward_flops(224, "2")


def test_peaks():
    assert flops.gpu_peak_tflops("NVIDIA H100 PCIe")["fp32"] == 51.2
    assert flops.gpu_peak_tflops("NVIDIA H100 80GB HBM3")["gpu"] == "H100"
    assert flops.gpu_peak_tflops("NVIDIA H200")["tf32"] == 494.7
    assert flops.gpu_peak_tflops("Tesla V100-SXM2-16GB")["fp32"] == 15.7
    assert flops.gpu_peak_tflops("Tesla K80")["fp16"] is None and flops.gpu_peak_tflops("GeForce GTX 1080") is None
    assert flops.cpu_peak_gflops(2, 2500.0, "avx512-on-256") == 160.0
    assert flops.cpu_peak_gflops(4, 3000.0, "avx512") == 768.0
    assert flops.cpu_peak_gflops(2, None, "avx2") is None and flops.cpu_simd() in set(flops.CPU_FLOPS_PER_CYCLE) | {None}


def test_a_data_parallel_training_step_counts_three_resnet50_passes_and_its_classifier():
    params = {"image_size": 224, "num_classes": 1000}
    forward = flops.resnet50_forward_flops(224, "1.5") + 2 * 2048 * 1000
    first_input_gradient = 2 * 7 * 7 * 3 * 64 * 112 * 112
    assert tasks.get("train").training_flops(params) == 3 * forward - first_input_gradient
    assert 24.0e9 < tasks.get("train").training_flops(params) < 24.6e9  # about 3 x 8.2 GFLOPs (4.1 G multiply-adds)


# Run in the PyTorch environment: the PyTorch notebook's own model cell, counted by torch.utils.flop_counter
TRANSFORMER_COUNT = """
import json, sys
import torch
from torch.utils.flop_counter import FlopCounterMode
from common import hyperparams
from runner import catalog

notebook = json.load(open(str(catalog.notebook_path(catalog.select(["pytorch"], ["transformer"])[0].framework, "transformer"))))
source = "\\n".join("".join(cell["source"]) for cell in notebook["cells"]  # cells end without a newline
                   if cell["cell_type"] == "code" and "model" in cell["metadata"].get("tags", []))
params = dict(hyperparams.for_task("transformer", "full"), **json.loads(sys.argv[1]))
scope = {"torch": torch, "nn": torch.nn, "F": torch.nn.functional, "params": params, "dev": torch.device("cpu"),
         "compiled": lambda model: model}
exec(source, scope)
model = scope["model"]
tokens = torch.randint(3, params["vocab_size"], (2, params["maxlen"]))
tokens[0, :params["maxlen"] // 3] = 0  # padding: masked, not skipped, so it counts the same
# the counter has formulas for the GPU's fused attention kernels, not for the CPU's: on the CPU, attention computed as
# PyTorch's reference (math) kernel shows as the two batched products it is
with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
    with FlopCounterMode(display=False) as forward:
        logits = model(tokens)
    with FlopCounterMode(display=False) as backward:
        logits.sum().backward()
print(json.dumps({"forward": forward.get_total_flops() / 2, "backward": backward.get_total_flops() / 2}))
"""


@pytest.mark.parametrize("overrides", [{}, {"maxlen": 512, "layers": 2, "heads": 8}])
def test_the_transformers_count_is_torchs_flop_counter_on_the_pytorch_notebooks_model(overrides):
    """torch.utils.flop_counter counts the matrix products and the fused attention of the notebook's model as it runs;
    a training step is its forward and backward passes, three forward passes in all."""
    counted = json_from_environment("pytorch", TRANSFORMER_COUNT, json.dumps(overrides))
    params = dict(hyperparams.for_task("transformer", "full"), **overrides)
    assert counted["forward"] == transformer.forward_flops(params)
    assert counted["forward"] + counted["backward"] == tasks.get("transformer").training_flops(params)
