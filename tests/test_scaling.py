"""The predicted scaling of data-parallel training (common/scaling.py) and docs/train.md's table of it."""

import pytest

from common import scaling
from runner import catalog
from runner.report import plots


def test_resnet50_has_torchvision_s_parameter_count():
    assert scaling.resnet50_parameters() == 25557032  # torchvision.models.resnet50(): sum of p.numel()
    assert scaling.resnet50_parameters(10) == 25557032 - 2049000 + 20490


def test_a_ring_all_reduce_sends_2_n_minus_1_over_n_of_the_gradient_through_each_link():
    assert scaling.allreduce_seconds(100e6, 1, 10e9) == 0
    assert scaling.allreduce_seconds(100e6, 2, 10e9) == pytest.approx(0.01)
    assert scaling.allreduce_seconds(100e6, 8, 10e9) == pytest.approx(2 * 7 / 8 * 0.01)
    with pytest.raises(ValueError):
        scaling.allreduce_seconds(100e6, 0, 10e9)


def test_overlap_hides_the_all_reduce_behind_the_backward_pass_only():
    gradient, bandwidth = 100e6, 10e9  # 17.5 ms of all-reduce on 8 devices
    assert scaling.step_seconds(0.1, gradient, 8, bandwidth) == pytest.approx(0.1175)
    assert scaling.step_seconds(0.1, gradient, 8, bandwidth, overlap=True) == pytest.approx(0.1)  # 66.7 ms backward
    assert scaling.step_seconds(0.015, gradient, 8, bandwidth, overlap=True) == pytest.approx(0.005 + 0.0175)
    assert scaling.efficiency(0.1, gradient, 1, bandwidth) == 1.0
    for step in (0.001, 0.01, 0.1, 1.0):
        assert scaling.efficiency(step, gradient, 8, bandwidth, True) >= scaling.efficiency(step, gradient, 8, bandwidth)


def test_the_step_time_for_an_efficiency_gives_that_efficiency():
    step = scaling.step_time_for(0.9, 102e6, 8, 31.5e9)
    assert scaling.efficiency(step, 102e6, 8, 31.5e9) == pytest.approx(0.9)
    with pytest.raises(ValueError):
        scaling.step_time_for(1.0, 102e6, 8, 31.5e9)


def test_docs_train_shows_the_model_s_table_and_the_plot_is_drawn(tmp_path):
    page = (catalog.REPO / "docs" / "train.md").read_text()
    assert "\n".join(plots.scaling_lines()) in page, "docs/train.md's scaling table is stale: paste plots.scaling_lines()"
    assert "](scaling.png)" in page and plots.SCALING_PLOT.exists()
    path = plots.plot_scaling(tmp_path / "scaling.png", measured={"PyTorch": (0.05, {2: 0.9})})
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
