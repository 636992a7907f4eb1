"""Canonical weights: names and shapes per task, deterministic reference values, checked .npz round trips."""

import numpy as np
import pytest

from common import hyperparams, weights

CNN = hyperparams.for_task("cnn", "full")
RNN = hyperparams.for_task("rnn", "full")


def test_shapes_count_the_parameters_of_each_model():
    cnn = sum(int(np.prod(s)) for s in weights.shapes("cnn", CNN).values())
    # by hand: convs 3*50*9+50, 50*50*9+50, 50*100*9+100, 100*100*9+100; dense 6400*512+512, 512*10+10
    assert cnn == 1400 + 22550 + 45100 + 90100 + 3277312 + 5130
    rnn = sum(int(np.prod(s)) for s in weights.shapes("rnn", RNN).values())
    assert rnn == 30000 * 125 + 3 * (125 * 100 + 100 * 100 + 2 * 100) + 100 * 2 + 2
    with pytest.raises(ValueError, match="no canonical weights for task .detection."):
        weights.shapes("detection", CNN)


def test_reference_weights_are_deterministic_and_scaled_by_fan_in():
    first, again, other = (weights.reference_weights("cnn", CNN, seed) for seed in (0, 0, 1))
    assert all(np.array_equal(first[k], again[k]) for k in first)
    assert not np.array_equal(first["fc1/kernel"], other["fc1/kernel"])
    assert all(a.dtype == np.float32 for a in first.values())
    assert np.abs(first["conv1/kernel"]).max() <= 1 / np.sqrt(27) and np.abs(first["conv1/kernel"]).max() > 0.9 / np.sqrt(27)
    assert np.abs(first["fc1/bias"]).max() <= 1 / np.sqrt(6400)
    rnn = weights.reference_weights("rnn", RNN)
    assert np.abs(rnn["gru/kernel_input"]).max() <= 0.1 and 0.9 < rnn["embedding"].std() < 1.1


def test_a_round_trip_keeps_every_array_and_the_probe_logits(tmp_path):
    params = hyperparams.for_task("rnn", "smoke")
    reference = weights.reference_weights("rnn", params, seed=5)
    path = weights.save_weights(str(tmp_path / "w.npz"), "rnn", params, reference, logits=np.ones((4, 2)))
    loaded = weights.load_weights(path, "rnn", params)
    assert all(np.array_equal(loaded[k], reference[k]) for k in reference)
    assert loaded[weights.LOGITS].shape == (4, 2)
    assert [p.name for p in tmp_path.iterdir()] == ["w.npz"]  # no temporary file left behind


def test_wrong_names_shapes_or_task_are_refused(tmp_path):
    params = hyperparams.for_task("cnn", "smoke")
    reference = weights.reference_weights("cnn", params)
    broken = dict(reference, **{"fc2/kernel": np.zeros((10, 512), np.float32)})
    with pytest.raises(ValueError, match=r"fc2/kernel has shape \(10, 512\), expected \(512, 10\)"):
        weights.save_weights(str(tmp_path / "w.npz"), "cnn", params, broken)
    missing = {k: v for k, v in reference.items() if k != "conv1/bias"}
    with pytest.raises(ValueError, match=r"missing \['conv1/bias'\]"):
        weights.check("cnn", params, missing)
    path = weights.save_weights(str(tmp_path / "w.npz"), "cnn", params, reference)
    with pytest.raises(ValueError, match="holds weights for task cnn, not rnn"):
        weights.load_weights(path, "rnn", hyperparams.for_task("rnn", "smoke"))


def test_resnet50_layout_is_torchvisions():
    import json
    import subprocess

    from runner import catalog
    from runner.run import environments

    env = catalog.ENVIRONMENTS["pytorch"]
    if not environments.is_ready(env):
        pytest.fail("environment pytorch is not built: run `python3 run_all.py setup pytorch`")
    code = ("import json, torchvision; model = torchvision.models.resnet50(weights=None); "
            "print(json.dumps({k: list(v.shape) for k, v in model.state_dict().items() "
            "if not k.startswith('fc.') and not k.endswith('num_batches_tracked')}))")
    out = subprocess.run([str(env.python_path), "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    expected = {name: list(shape) for name, shape in weights.shapes("inference", {}).items()}
    assert json.loads(out.stdout.strip().splitlines()[-1]) == expected
    reference = weights.reference_weights("inference", {}, seed=0)
    assert sum(a.size for a in reference.values()) == 23508032 + 53120  # parameters without fc, plus BN statistics
    assert 0.8 <= reference["layer4.2.bn3.running_var"].min() and reference["layer4.2.bn3.running_var"].max() <= 1.2


def test_pretrained_or_random_follows_the_choice(capsys):
    def offline():
        raise OSError("no route to host\nsecond line")

    assert weights.pretrained_or_random("auto", lambda: "zoo", lambda: "fresh") == ("zoo", "imagenet")
    assert weights.pretrained_or_random("auto", offline, lambda: "fresh") == ("fresh", "random")
    assert "NOTICE: ImageNet weights unavailable (no route to host); using random" in capsys.readouterr().out
    assert weights.pretrained_or_random("random", offline, lambda: "fresh") == ("fresh", "random")
    with pytest.raises(OSError):
        weights.pretrained_or_random("imagenet", offline, lambda: "fresh")
    with pytest.raises(KeyError):  # not a failed download: it is not hidden behind random weights
        weights.pretrained_or_random("auto", lambda: {}["bug"], lambda: "fresh")
    with pytest.raises(ValueError, match="weights='imagnet'; choose one of auto, imagenet, random"):
        weights.pretrained_or_random("imagnet", offline, lambda: "fresh")
