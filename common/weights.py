"""Framework-neutral weights of every task: canonical names and layouts, reference values, .npz files.

Every framework's notebook can start from the same numbers (`init_weights`) and save what it trained
(`export_weights`), converting between its own layouts and the canonical ones below in a few lines.
The equivalence tests use this to check that every translation computes the same function.

Canonical layouts (float32):
- inference, ResNet-50 v1.5 up to the global average pool: torchvision's state-dict names and layouts
  ("layer1.0.conv2.weight" OIHW; batch norms as weight, bias, running_mean, running_var), no fc
- inference, ResNet-50 v1 (the stride of a downsampling block on its first 1x1 convolution, not its 3x3; the
  same shapes): the same names and layouts, plus optional convolution biases "<conv>.bias" (out_channels,), e.g.
  "conv1.bias", "layer1.0.conv1.bias", "layer1.0.downsample.0.bias"; running variances are for torchvision's
  batch-norm epsilon, 1e-5, whatever the model's. A model without some of the biases, or with another epsilon,
  holds the same function as resnet50_for_model converts it (bias folded into the next batch norm's mean,
  epsilon's difference into its variance) and exports it back with resnet50_from_model; as_held says what it
  gives back.
- convolution kernels OIHW: (out_channels, in_channels, height, width); biases (out,)
- dense kernels (in, out), applied as x @ kernel + bias; the CNN's first dense layer takes the
  (channels, height, width) feature map flattened in that order (C-order)
- embedding (vocab_size, embedding_dim)
- GRU gates in the order reset, update, new (r, z, n), stacked along the last axis:
  kernel_input (input_dim, 3 * units), kernel_recurrent (units, 3 * units), and the biases
  bias_input and bias_recurrent (3 * units,) kept apart; the reset gate applies after the
  recurrent product (cuDNN's and PyTorch's GRU, Keras's reset_after=True):
      r = sigmoid(x Wr + bir + h Ur + bhr);  z = sigmoid(x Wz + biz + h Uz + bhz)
      n = tanh(x Wn + bin + r * (h Un + bhn));  h' = (1 - z) * n + z * h
- transformer, a pre-norm encoder: "embedding/tokens" (vocab_size, model_dim), "embedding/positions" (maxlen,
  model_dim), summed; per layer i "layer<i>/attention_norm/{scale,bias}", "layer<i>/attention/{query,key,value,output}/
  {kernel,bias}" (model_dim, model_dim) and (model_dim,), "layer<i>/feedforward_norm/{scale,bias}",
  "layer<i>/feedforward/hidden/{kernel,bias}" (model_dim, units) and "layer<i>/feedforward/output/{kernel,bias}"
  (units, model_dim); "final_norm/{scale,bias}"; "fc/kernel" (model_dim, classes), "fc/bias". Dense kernels (in, out)
  as above. Head h of the query, key and value projections is their output columns h*d:(h+1)*d (d = model_dim / heads),
  and the output projection's input rows h*d:(h+1)*d: the layout of (batch, length, heads, d) flattened in C order
      a = LN(x); x = x + (softmax(q_h k_h^T / sqrt(d) + mask) v_h for each h, concatenated) Wo + bo
      x = x + GELU(LN(x) W1 + b1) W2 + b2          (erf GELU; LN with norm_epsilon; no dropout at inference)
  then the final LN, the mean over the review's tokens that are not padding, and the classifier
"""

import os
import tempfile

import numpy as np

from common import results, tasks
from common.weight_layouts import BATCH_NORM_EPSILON, resnet50_layers, resnet50_shapes, resnet50_weights

FORMAT_VERSION = 1
LOGITS = "logits"  # optional entry of an exported file: the model's logits on a probe batch


def shapes(task, params):
    """Return {name: shape} of the canonical weights of `task` (its module's Task.weight_shapes) for its
    hyperparameters."""
    if task not in tasks.TASKS:
        raise ValueError("no canonical weights for task {!r}; tasks with them: {}".format(task, ", ".join(tasks.TASKS)))
    return tasks.get(task).weight_shapes(params)


def optional_shapes(task):
    """{name: shape} of the arrays a canonical file of `task` may hold besides shapes(): ResNet-50 v1's convolution
    biases for inference ("<conv>.bias"), none for the other tasks."""
    return tasks.get(task).optional_weight_shapes()


def reference_weights(task, params, seed=0):
    """Deterministic canonical weights for `task` from `seed`, by its rule (Task.reference_weights): fan_in_weights, or
    resnet50_weights for ResNet-50."""
    return tasks.get(task).reference_weights(params, seed)


def resnet50_v1_weights(params, seed=0):
    """The shared ResNet-50 v1 test weights: resnet50_weights(resnet50_shapes(), seed), the v1.5 ones, and a bias for
    every convolution, 0.02 to 0.1 in magnitude with either sign (never zero, so that a lost bias shows)."""
    out = resnet50_weights(resnet50_shapes(), seed)
    rng = np.random.RandomState(seed + 1)  # apart from the v1.5 weights' draws, which stay as they are
    for name, shape in sorted((layer.conv + ".bias", (layer.out_channels,)) for layer in resnet50_layers()):
        out[name] = (rng.uniform(0.02, 0.1, size=shape) * rng.choice([-1.0, 1.0], size=shape)).astype(np.float32)
    return out


def keras_resnet50_names():
    """{torchvision name: keras.applications layer name} of ResNet50's convolutions and batch norms (Keras 3 and
    tf.keras): "layer2.0.conv1" is "conv3_block1_1_conv", its shortcut "layer2.0.downsample.0" "conv3_block1_0_conv"."""
    names = {"conv1": "conv1_conv", "bn1": "conv1_bn"}
    parts = {"conv1": "1_conv", "bn1": "1_bn", "conv2": "2_conv", "bn2": "2_bn", "conv3": "3_conv", "bn3": "3_bn",
             "downsample.0": "0_conv", "downsample.1": "0_bn"}
    for layer in resnet50_layers()[1:]:
        stage, block, _ = layer.conv.split(".", 2)
        prefix = "conv{}_block{}_".format(int(stage[len("layer"):]) + 1, int(block) + 1)
        for name in (layer.conv, layer.bn):
            names[name] = prefix + parts[name.split(".", 2)[2]]
    return names


KERAS_BATCH_NORM = ("weight", "bias", "running_mean", "running_var")  # Keras' gamma, beta, moving mean and variance


def to_keras_resnet50(arrays, biases, epsilon, hwio_from_oihw):
    """Canonical ResNet-50 weights as a keras.applications ResNet50 holds them (Keras 3, tf.keras, Keras 2), whose
    convolutions named in `biases` have a bias and whose batch norms have `epsilon` (resnet50_for_model): {torchvision
    name: the list its layer's set_weights takes}, each kernel through `hwio_from_oihw`."""
    held = resnet50_for_model(arrays, biases, epsilon)
    out = {}
    for layer in resnet50_layers():
        kernel = hwio_from_oihw(held[layer.conv + ".weight"])
        out[layer.conv] = [kernel, held[layer.conv + ".bias"]] if layer.conv in biases else [kernel]
        out[layer.bn] = [held[layer.bn + "." + field] for field in KERAS_BATCH_NORM]
    return out


def from_keras_resnet50(values, epsilon, oihw_from_hwio):
    """The canonical weights, its convolution biases included, of a keras.applications ResNet50's `values` ({torchvision
    name: its layer's get_weights()}) with batch norms of `epsilon`, each kernel through `oihw_from_hwio`
    (to_keras_resnet50 undone)."""
    held = {}
    for layer in resnet50_layers():
        conv = values[layer.conv]
        held[layer.conv + ".weight"] = oihw_from_hwio(conv[0])
        if len(conv) == 2:
            held[layer.conv + ".bias"] = conv[1]
        held.update((layer.bn + "." + field, value) for field, value in zip(KERAS_BATCH_NORM, values[layer.bn]))
    return resnet50_from_model(held, epsilon)


def fold_conv_biases(arrays, kept=()):
    """`arrays` (canonical ResNet-50) with the bias of every convolution not named in `kept` folded into the batch
    norm after it (running_mean -= bias, the same function without the bias); a new dict, the others untouched."""
    out = dict(arrays)
    for layer in resnet50_layers():
        bias = layer.conv + ".bias"
        if bias in out and layer.conv not in kept:
            mean = layer.bn + ".running_mean"
            out[mean] = (out[mean].astype(np.float64) - out.pop(bias)).astype(np.float32)
    return out


def _shift_variances(arrays, shift):
    """`arrays` with every batch norm's running variance plus `shift` (in float64, rounded once to float32)."""
    out = dict(arrays)
    for name, value in arrays.items():
        if name.endswith(".running_var") and shift:
            out[name] = (value.astype(np.float64) + shift).astype(np.float32)
    return out


def resnet50_for_model(arrays, biases=(), epsilon=BATCH_NORM_EPSILON):
    """Canonical ResNet-50 weights (v1 or v1.5 layout) as a model holds them whose convolutions named in `biases` have
    a bias and whose batch norms add `epsilon` to the variance: the same function, under the canonical names.

    The biases it lacks are folded into their batch norms (fold_conv_biases), those it has and `arrays` lacks are
    zero, and each running variance is shifted by 1e-5 - epsilon, so that variance + epsilon is torchvision's; a
    variance that would not stay positive is refused (ValueError)."""
    held = fold_conv_biases(arrays, kept=biases)
    for layer in resnet50_layers():
        if layer.conv in biases:
            held.setdefault(layer.conv + ".bias", np.zeros(layer.out_channels, np.float32))
    held = _shift_variances(held, BATCH_NORM_EPSILON - epsilon)
    for name, value in held.items():
        if name.endswith(".running_var") and value.min() <= 0:
            canonical = arrays[name].reshape(-1)[value.argmin()]
            raise ValueError("{}: a canonical running variance of {:.3g} (with torchvision's epsilon, {:g}) is less than "
                             "this model's batch-norm epsilon, {:g}: it would hold {:.3g}, and cannot compute that "
                             "function".format(name, canonical, BATCH_NORM_EPSILON, epsilon, value.min()))
    return held


def resnet50_from_model(held, epsilon=BATCH_NORM_EPSILON):
    """The canonical weights of a model's arrays `held` (canonical names, its biases only, variances for `epsilon`):
    variances shifted back to torchvision's epsilon (resnet50_for_model undone; a folded bias stays folded)."""
    return _shift_variances(held, epsilon - BATCH_NORM_EPSILON)


def as_held(start, held_names):
    """What a notebook exports from the canonical weights `start` when its model holds the arrays `held_names` (the
    names in its export): `start` with the biases it lacks folded into their batch norms, and those it has and
    `start` lacks zero. The check compares the export with this exactly: a variance's epsilon shift and its way
    back round to the same float32 where the model's epsilon is 1e-5 or more (every zoo model here)."""
    biases = {layer.conv for layer in resnet50_layers() if layer.conv + ".bias" in held_names}
    return resnet50_for_model(start, biases)


def check(task, params, arrays):
    """Raise ValueError unless `arrays` has exactly the canonical names and shapes of `task` (and any of its optional
    arrays)."""
    expected = shapes(task, params)
    optional = optional_shapes(task)
    missing = sorted(set(expected) - set(arrays))
    extra = sorted(set(arrays) - set(expected) - set(optional) - {LOGITS})
    if missing or extra:
        raise ValueError("{} weights: missing {}, unexpected {}".format(task, missing or "none", extra or "none"))
    expected.update((name, shape) for name, shape in optional.items() if name in arrays)
    for name, shape in expected.items():
        if tuple(np.shape(arrays[name])) != tuple(shape):
            raise ValueError("{} weight {} has shape {}, expected {}".format(task, name, np.shape(arrays[name]), shape))


def save_weights(path, task, params, arrays, logits=None):
    """Write canonical weights (checked first) and optionally probe logits to `path` as .npz, atomically."""
    check(task, params, arrays)
    contents = {name: np.asarray(value, dtype=np.float32) for name, value in arrays.items()}
    if logits is not None:
        contents[LOGITS] = np.asarray(logits, dtype=np.float32)
    contents["format_version"] = np.array(FORMAT_VERSION)
    contents["task"] = np.array(task)
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(suffix=".npz", dir=folder)
    os.close(handle)
    try:
        np.savez(temporary, **contents)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return path


def _swap_reset_update(matrix):
    """Gates (reset, update, new) <-> (update, reset, new) along the last axis: the same swap both ways."""
    reset, update, new = np.split(matrix, 3, axis=-1)
    return np.concatenate([update, reset, new], axis=-1)


def to_keras_gru(arrays):
    """A GRU's canonical arrays as Keras' GRU layer holds them (Keras 3, tf.keras, Keras 2 with reset_after=True):
    [input kernel, recurrent kernel, the two biases stacked (input, recurrent)], each with its gates in Keras' order,
    (update, reset, new), where the canonical order is (reset, update, new)."""
    return [_swap_reset_update(arrays["gru/kernel_input"]), _swap_reset_update(arrays["gru/kernel_recurrent"]),
            np.stack([_swap_reset_update(arrays["gru/bias_input"]), _swap_reset_update(arrays["gru/bias_recurrent"])])]


def from_keras_gru(kernel, recurrent, bias):
    """The canonical GRU arrays from Keras' GRU weights (the inverse of to_keras_gru)."""
    return {"gru/kernel_input": _swap_reset_update(kernel), "gru/kernel_recurrent": _swap_reset_update(recurrent),
            "gru/bias_input": _swap_reset_update(bias[0]), "gru/bias_recurrent": _swap_reset_update(bias[1])}


def export_if_asked(path, task, params, export_canonical, outputs_of=None, batch=None):
    """Where a run is asked to export (`path`, the notebook's export_weights, set by the same-weights check), save the
    model's canonical weights (`export_canonical()`) and, with `outputs_of`, its outputs on `batch` (logits, or the
    features for inference) for the check to compare; nothing where `path` is ''."""
    if not path:
        return
    arrays = export_canonical()
    save_weights(path, task, params, arrays, logits=None if outputs_of is None else outputs_of(batch))


def load_weights(path, task, params):
    """Read canonical weights of `task` from `path`, checking task, names and shapes; returns {name: float32 array}."""
    with np.load(path) as data:
        stored_task = str(data["task"]) if "task" in data.files else None
        if stored_task != task:
            raise ValueError("{} holds weights for task {}, not {}".format(path, stored_task, task))
        arrays = {name: data[name].astype(np.float32) for name in data.files if name not in ("format_version", "task")}
    check(task, params, arrays)
    return arrays


def import_if_asked(path, task, params, import_canonical):
    """Where a run is asked to start from canonical weights (`path`, the notebook's init_weights), load them, checked, into
    the model with `import_canonical(arrays)` and say so; nothing where `path` is ''."""
    if not path:
        return
    import_canonical(load_weights(path, task, params))
    print("weights from", path)


WEIGHT_CHOICES = ("auto", "imagenet", "random")


def pretrained_or_random(choice, pretrained, random, unavailable=(OSError,)):
    """(model, "imagenet" or "random"): build a model with ImageNet weights or random ones, as `choice` says.

    `pretrained()` and `random()` build the model each way. "imagenet" fails where the weights cannot be
    had; "auto" falls back to random weights with a notice when `pretrained()` raises one of `unavailable`
    (a failed download: OSError in most frameworks); "random" never tries the download.
    """
    if choice not in WEIGHT_CHOICES:
        raise ValueError("weights={!r}; choose one of {}".format(choice, ", ".join(WEIGHT_CHOICES)))
    if choice != "random":
        try:
            return pretrained(), "imagenet"
        except unavailable as error:
            if choice == "imagenet":
                raise
            print("NOTICE: ImageNet weights unavailable ({}); using random initialisation".format(
                results.first_line(str(error))))
    return random(), "random"
