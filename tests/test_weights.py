"""Canonical weights: names and shapes per task, deterministic reference values, checked .npz round trips."""

import numpy as np
import pytest

from common import hyperparams, weight_layouts, weights

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


def test_import_if_asked_loads_a_checked_file_only_where_one_is_named(tmp_path, capsys):
    params = hyperparams.for_task("rnn", "smoke")
    reference = weights.reference_weights("rnn", params, seed=3)
    path = weights.save_weights(str(tmp_path / "w.npz"), "rnn", params, reference)
    imported = []
    weights.import_if_asked("", "rnn", params, imported.append)
    assert imported == [] and capsys.readouterr().out == ""
    weights.import_if_asked(path, "rnn", params, imported.append)
    assert len(imported) == 1 and all(np.array_equal(imported[0][k], reference[k]) for k in reference)
    assert capsys.readouterr().out == "weights from {}\n".format(path)
    with pytest.raises(ValueError, match="holds weights for task rnn, not cnn"):
        weights.import_if_asked(path, "cnn", hyperparams.for_task("cnn", "smoke"), imported.append)


def test_keras_resnet50_layouts_hold_the_canonical_function_and_come_back():
    start = weights.resnet50_v1_weights({}, seed=2)
    biases, epsilon = {"conv1", "layer1.0.conv1", "layer2.0.downsample.0"}, 1.001e-5
    held = weights.to_keras_resnet50(start, biases, epsilon, hwio_from_oihw=lambda kernel: kernel.transpose(2, 3, 1, 0))
    assert len(held["conv1"]) == 2 and len(held["layer1.0.conv2"]) == 1 and len(held["layer1.0.bn2"]) == 4
    assert held["layer4.2.conv3"][0].shape == (1, 1, 512, 2048)
    expected = weights.resnet50_for_model(start, biases, epsilon)
    np.testing.assert_array_equal(held["layer1.0.downsample.1"][3], expected["layer1.0.downsample.1.running_var"])
    back = weights.from_keras_resnet50(held, epsilon, oihw_from_hwio=lambda kernel: kernel.transpose(3, 2, 0, 1))
    assert set(back) == set(weight_layouts.resnet50_shapes()) | {name + ".bias" for name in biases}
    for name, value in weights.resnet50_from_model(expected, epsilon).items():
        np.testing.assert_array_equal(back[name], value, err_msg=name)


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


# ResNet-50 v1: optional convolution biases, and the conversions to a model that lacks some or has another epsilon
INFERENCE = hyperparams.for_task("inference", "smoke")
BIASES = sorted(weights.optional_shapes("inference"))
CONVOLUTIONS = [layer.conv for layer in weight_layouts.resnet50_layers()]
# which convolutions the zoo models have biases on, and their batch norms' epsilon (the notebooks read both from the model)
ZOO = {"keras.applications": (set(CONVOLUTIONS), 1.001e-5), "Keras Applications 1.0.8": (set(CONVOLUTIONS), 1e-3),
       "Gluon resnet50_v1": ({c for c in CONVOLUTIONS if c.startswith("layer") and c.endswith(("conv1", "conv3"))}, 1e-5),
       "Chainer ResNet50Layers": ({"conv1"}, 2e-5)}


def batch_norm(arrays, bn, z, epsilon=weight_layouts.BATCH_NORM_EPSILON):
    """A batch norm `bn` of `arrays` in inference mode on pre-activations z (samples, channels), in float64."""
    mean, var = (arrays[bn + "." + stat].astype(np.float64) for stat in ("running_mean", "running_var"))
    return (z - mean) / np.sqrt(var + epsilon) * arrays[bn + ".weight"] + arrays[bn + ".bias"]


def test_the_v1_layout_adds_an_optional_bias_to_every_convolution():
    v1 = weights.resnet50_v1_weights(INFERENCE, seed=0)
    assert len(BIASES) == 53 and BIASES[:2] == ["conv1.bias", "layer1.0.conv1.bias"]
    assert "layer1.0.downsample.0.bias" in BIASES and v1["layer4.0.conv3.bias"].shape == (2048,)
    plain = weights.reference_weights("inference", INFERENCE, seed=0)
    assert all(np.array_equal(v1[name], plain[name]) for name in plain)  # the v1.5 arrays as they were
    assert all(0.02 <= np.abs(v1[name]).min() and np.abs(v1[name]).max() <= 0.1 for name in BIASES)
    weights.check("inference", INFERENCE, v1)
    weights.check("inference", INFERENCE, dict(plain, **{"conv1.bias": v1["conv1.bias"]}))  # any of them
    with pytest.raises(ValueError, match=r"conv1.bias has shape \(3,\), expected \(64,\)"):
        weights.check("inference", INFERENCE, dict(plain, **{"conv1.bias": np.zeros(3, np.float32)}))
    with pytest.raises(ValueError, match=r"unexpected \['layer1.0.conv4.bias'\]"):
        weights.check("inference", INFERENCE, dict(plain, **{"layer1.0.conv4.bias": np.zeros(64, np.float32)}))
    with pytest.raises(ValueError, match=r"unexpected \['conv1.bias'\]"):  # the train task's ResNet-50 stays v1.5
        weights.check("train", {"num_classes": 10}, dict(weights.reference_weights("train", {"num_classes": 10}),
                                                        **{"conv1.bias": v1["conv1.bias"]}))


def test_a_bias_folded_into_its_batch_norm_computes_the_same_function():
    v1 = weights.resnet50_v1_weights(INFERENCE, seed=0)
    folded = weights.fold_conv_biases(v1, kept={"conv1"})
    assert set(folded) == set(v1) - set(BIASES[1:])
    assert np.array_equal(folded["conv1.bias"], v1["conv1.bias"]) and np.array_equal(folded["bn1.running_mean"],
                                                                                       v1["bn1.running_mean"])
    z = np.random.RandomState(0).normal(size=(5, 256))
    for conv, bn in (("layer1.0.conv3", "layer1.0.bn3"), ("layer1.0.downsample.0", "layer1.0.downsample.1")):
        np.testing.assert_allclose(batch_norm(folded, bn, z), batch_norm(v1, bn, z + v1[conv + ".bias"]), rtol=0,
                                   atol=1e-6)
        assert np.abs(batch_norm(folded, bn, z) - batch_norm(v1, bn, z)).max() > 1e-3  # the bias does count
    assert all(np.array_equal(v1[name], folded[name]) for name in folded if not name.endswith("running_mean"))


def test_a_model_gets_the_same_function_with_its_biases_and_its_epsilon():
    v1 = weights.resnet50_v1_weights(INFERENCE, seed=0)
    z = np.random.RandomState(1).normal(size=(5, 64))
    for zoo, (biases, epsilon) in ZOO.items():
        held = weights.resnet50_for_model(v1, biases, epsilon)
        assert set(held) == set(v1) - {c + ".bias" for c in set(CONVOLUTIONS) - biases}, zoo
        assert all(held[name].dtype == np.float32 for name in held)
        bias = held["conv1.bias"] if "conv1" in biases else 0.0
        np.testing.assert_allclose(batch_norm(held, "bn1", z + bias, epsilon), batch_norm(v1, "bn1", z + v1["conv1.bias"]),
                                   rtol=0, atol=1e-6, err_msg=zoo)
        if epsilon != 1e-5:  # the difference does count (Keras 3's is below float32's resolution of a variance near 1)
            moved = np.abs(held["bn1.running_var"] - v1["bn1.running_var"]).max()
            assert moved > 1e-6 if epsilon > 1.001e-5 else moved < 1e-7, zoo


def test_a_v15_file_gives_a_model_with_biases_zero_biases():
    plain = weights.reference_weights("inference", INFERENCE, seed=0)
    held = weights.resnet50_for_model(plain, {"conv1", "layer1.0.conv1"})
    assert not held["conv1.bias"].any() and held["layer1.0.conv1.bias"].shape == (64,)
    assert all(np.array_equal(held[name], plain[name]) for name in plain)
    assert sorted(weights.as_held(plain, set(held))) == sorted(held)


def test_a_variance_that_would_not_stay_positive_is_refused():
    v1 = weights.resnet50_v1_weights(INFERENCE, seed=0)
    v1["layer2.1.bn2.running_var"][3] = 5e-4  # plus torchvision's 1e-5, less than Keras 2's 1e-3
    with pytest.raises(ValueError, match=r"layer2.1.bn2.running_var: a canonical running variance of 0.0005 \(with "
                                         r"torchvision's epsilon, 1e-05\) is less than this model's batch-norm epsilon, "
                                         r"0.001: it would hold -0.00049, and cannot compute that function"):
        weights.resnet50_for_model(v1, (), 1e-3)
    weights.resnet50_for_model(v1, (), 2e-5)  # Chainer's epsilon still leaves it positive


def test_what_a_model_exports_is_as_held_to_the_last_bit():
    v1 = weights.resnet50_v1_weights(INFERENCE, seed=0)
    for zoo, (biases, epsilon) in ZOO.items():
        exported = weights.resnet50_from_model(weights.resnet50_for_model(v1, biases, epsilon), epsilon)
        expected = weights.as_held(v1, set(exported))
        assert sorted(exported) == sorted(expected), zoo
        assert all(np.array_equal(exported[name], expected[name]) for name in expected), zoo
        assert all(np.array_equal(exported[name], v1[name]) for name in exported if not name.endswith("running_mean"))
    # the variance's way there and back rounds to the same float32 over a wide range, for every epsilon above 1e-5
    var = np.exp(np.random.RandomState(2).uniform(np.log(2e-3), np.log(100), 200000)).astype(np.float32)
    arrays = {"bn1.running_var": var}
    for epsilon in (1.001e-5, 2e-5, 1e-4, 1e-3):
        back = weights.resnet50_from_model(weights.resnet50_for_model(arrays, (), epsilon), epsilon)
        assert np.array_equal(back["bn1.running_var"], var), epsilon


def test_keras_names_cover_every_convolution_and_batch_norm():
    names = weights.keras_resnet50_names()
    layers = weight_layouts.resnet50_layers()
    assert set(names) == {layer.conv for layer in layers} | {layer.bn for layer in layers}
    assert len(set(names.values())) == len(names) == 106
    assert (names["conv1"], names["bn1"]) == ("conv1_conv", "conv1_bn")
    assert (names["layer2.0.conv1"], names["layer2.0.downsample.1"]) == ("conv3_block1_1_conv", "conv3_block1_0_bn")
    assert names["layer4.2.bn3"] == "conv5_block3_3_bn"
