"""The models of the same-weights check, written once more in NumPy (float32): the CNN, the RNN and the transformer
forward and backward, ResNet-50's features forward, with switches for the mistakes a translation can make:
tests/test_check_controls.py feeds what they compute to the check's comparison, to show that each mistake fails it and
that a correct run computed another way passes.

They take the canonical weights (common/weights.py) and the check's data and hyperparameters, as the notebooks do,
and return what a notebook exports: the canonical weights after training (or as they went in) and the logits of the
first test batch (ResNet-50: its features).
"""

import numpy as np

from common import datasets, weight_layouts, weights

CNN_MISTAKES = ("transposed kernel", "flipped kernel", "missing bias", "frozen layer", "momentum dropped",
                "unit-gain momentum", "flattened channels last")
RESNET_MISTAKES = ("transposed kernel", "stride on the 1x1 (v1)", "batch norm epsilon 1e-3", "running mean ignored",
                  "shortcut without its batch norm")
RNN_MISTAKES = ("betas swapped", "beta1 ignored", "no bias correction", "gates swapped",
                "new gate's recurrent bias dropped", "frozen embedding")
TRANSFORMER_MISTAKES = ("tanh GELU", "norm epsilon 1e-3", "padding attended", "padding in the mean", "heads interleaved",
                        "L2 instead of decoupled decay", "decay without the learning rate")


# ---------------------------------------------------------------- the CNN's layers


def _windows(x):
    """The 3x3 windows of `x` (N, C, H, W) padded by 1: (N*H*W, C*9), each row one output pixel's inputs."""
    n, c, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    strides = padded.strides
    view = np.lib.stride_tricks.as_strided(padded, (n, h, w, c, 3, 3),
                                           (strides[0], strides[2], strides[3], strides[1], strides[2], strides[3]))
    return view.reshape(n * h * w, c * 9)


def conv_forward(x, kernel, bias):
    """A 3x3 'same' convolution (cross-correlation, as every framework's): (N, C, H, W) -> (N, O, H, W)."""
    n, _, h, w = x.shape
    columns = _windows(x)
    out = columns @ kernel.reshape(len(kernel), -1).T + bias
    return out.reshape(n, h, w, -1).transpose(0, 3, 1, 2), columns


def conv_backward(grad, x_shape, kernel, columns):
    """The gradients of conv_forward: (input, kernel, bias)."""
    n, c, h, w = x_shape
    grad_rows = grad.transpose(0, 2, 3, 1).reshape(n * h * w, -1)
    grad_kernel = (grad_rows.T @ columns).reshape(kernel.shape)
    grad_columns = (grad_rows @ kernel.reshape(len(kernel), -1)).reshape(n, h, w, c, 3, 3)
    padded = np.zeros((n, c, h + 2, w + 2), np.float32)
    for i in range(3):
        for j in range(3):
            padded[:, :, i:i + h, j:j + w] += grad_columns[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return padded[:, :, 1:-1, 1:-1], grad_kernel, grad_rows.sum(axis=0)


def pool_forward(x):
    """2x2 max pooling of (N, C, H, W), and the one-hot position of each maximum for the backward pass."""
    n, c, h, w = x.shape
    blocks = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    winner = np.eye(4, dtype=np.float32)[blocks.argmax(axis=-1)]
    return blocks.max(axis=-1), winner


def pool_backward(grad, winner):
    """The gradient of pool_forward's input."""
    n, c, h, w, _ = winner.shape
    blocks = (grad[..., None] * winner).reshape(n, c, h, w, 2, 2).transpose(0, 1, 2, 4, 3, 5)
    return blocks.reshape(n, c, 2 * h, 2 * w)


def softmax_cross_entropy(logits, labels):
    """The mean cross-entropy of `logits` and its gradient."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    probabilities = np.exp(shifted)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    grad = probabilities.copy()
    grad[np.arange(len(labels)), labels] -= 1
    return grad / np.float32(len(labels))


# ---------------------------------------------------------------- the CNN


def _cnn_as_used(arrays, mistake):
    """The arrays the model computes with: the canonical ones, or as a wrong import reads them."""
    used = dict(arrays)
    if mistake == "transposed kernel":  # height and width exchanged
        used["conv2/kernel"] = arrays["conv2/kernel"].transpose(0, 1, 3, 2)
    if mistake == "flipped kernel":  # a true convolution where frameworks correlate
        used["conv2/kernel"] = arrays["conv2/kernel"][:, :, ::-1, ::-1]
    if mistake == "missing bias":
        used["conv3/bias"] = np.zeros_like(arrays["conv3/bias"])
    return used


def cnn_logits(arrays, images, mistake=None):
    """The CNN's logits of `images` (N, 3, 32, 32) and what its backward pass needs."""
    used = _cnn_as_used(arrays, mistake)
    saved = []
    x = images
    for layer in ("conv1", "conv2", "conv3", "conv4"):
        out, columns = conv_forward(x, used[layer + "/kernel"], used[layer + "/bias"])
        saved.append((layer, x.shape, columns, out))
        x = out
        if layer in ("conv2", "conv4"):
            x, winner = pool_forward(x)
            saved.append(("pool", winner))
        x = np.maximum(x, 0)
    flat = x.transpose(0, 2, 3, 1).reshape(len(x), -1) if mistake == "flattened channels last" else x.reshape(len(x), -1)
    hidden = np.maximum(flat @ used["fc1/kernel"] + used["fc1/bias"], 0)
    return hidden @ used["fc2/kernel"] + used["fc2/bias"], (saved, x.shape, flat, hidden, used)


def cnn_gradients(arrays, images, labels, mistake=None):
    """The gradients of the mean cross-entropy with respect to the canonical arrays."""
    logits, (saved, pooled_shape, flat, hidden, used) = cnn_logits(arrays, images, mistake)
    grad = softmax_cross_entropy(logits, labels)
    grads = {"fc2/kernel": hidden.T @ grad, "fc2/bias": grad.sum(axis=0)}
    grad = (grad @ used["fc2/kernel"].T) * (hidden > 0)
    grads.update({"fc1/kernel": flat.T @ grad, "fc1/bias": grad.sum(axis=0)})
    grad = grad @ used["fc1/kernel"].T
    n, c, h, w = pooled_shape
    grad = grad.reshape(n, h, w, c).transpose(0, 3, 1, 2) if mistake == "flattened channels last" else grad.reshape(pooled_shape)
    for entry in reversed(saved):
        if entry[0] == "pool":
            winner = entry[1]
            continue
        layer, x_shape, columns, out = entry
        if layer in ("conv2", "conv4"):  # pool, then ReLU
            pooled, _ = pool_forward(out)
            grad = pool_backward(grad * (pooled > 0), winner)
        else:
            grad = grad * (out > 0)
        grad, grads[layer + "/kernel"], grads[layer + "/bias"] = conv_backward(grad, x_shape, used[layer + "/kernel"],
                                                                             columns)
    if mistake == "transposed kernel":  # the gradient of the array it holds, back in the canonical layout
        grads["conv2/kernel"] = grads["conv2/kernel"].transpose(0, 1, 3, 2)
    if mistake == "flipped kernel":
        grads["conv2/kernel"] = grads["conv2/kernel"][:, :, ::-1, ::-1]
    if mistake == "missing bias":
        grads["conv3/bias"] = np.zeros_like(grads["conv3/bias"])
    if mistake == "frozen layer":
        grads["conv1/kernel"] = np.zeros_like(grads["conv1/kernel"])
        grads["conv1/bias"] = np.zeros_like(grads["conv1/bias"])
    return grads


def train_cnn(start, params, mistake=None, reverse=False, seed=0):
    """SGD with momentum (PyTorch's form: v = momentum v + g, w -= lr v) over the check's CIFAR-10 stand-in, as the
    notebooks train; returns the canonical weights after training with the logits of the first test batch.
    `reverse` takes each batch in reverse order: a correct run whose sums run the other way."""
    cifar = datasets.load_cifar10("synthetic", train_samples=params["train_samples"], test_samples=params["test_samples"],
                                  seed=seed)
    arrays = {name: value.copy() for name, value in start.items()}
    velocity = {name: np.zeros_like(value) for name, value in arrays.items()}
    lr, momentum = np.float32(params["lr"]), np.float32(0.0 if mistake == "momentum dropped" else params["momentum"])
    gain = np.float32(1 - momentum) if mistake == "unit-gain momentum" else np.float32(1)  # CNTK's default form
    for epoch in range(params["epochs"] if lr else 0):  # at learning rate 0 nothing moves
        for x, y in datasets.batches(cifar.x_train, cifar.y_train, params["batch_size"], shuffle=True, seed=seed + epoch):
            if reverse:
                x, y = x[::-1].copy(), y[::-1].copy()
            for name, grad in cnn_gradients(arrays, x, y, mistake).items():
                velocity[name] = momentum * velocity[name] + gain * grad
                arrays[name] = arrays[name] - lr * velocity[name]
    arrays[weights.LOGITS] = cnn_logits(arrays, cifar.x_test[:params["batch_size"]], mistake)[0]
    return arrays


# ---------------------------------------------------------------- the RNN


def _sigmoid(x):
    return np.float32(1) / (np.float32(1) + np.exp(-x))


def _reset_update_exchanged(value):
    """A GRU array with its reset and update gates exchanged along the last axis."""
    reset, update, new = np.split(value, 3, axis=-1)
    return np.concatenate([update, reset, new], axis=-1)


def _gru_as_used(arrays, mistake):
    """The GRU's arrays as the model computes with them: canonical, or as a wrong import reads them."""
    used = {name: arrays[name] for name in arrays if name.startswith("gru/")}
    if mistake == "gates swapped":
        used = {name: _reset_update_exchanged(value) for name, value in used.items()}
    if mistake == "new gate's recurrent bias dropped":
        used["gru/bias_recurrent"] = used["gru/bias_recurrent"].copy()
        used["gru/bias_recurrent"][2 * (len(used["gru/bias_recurrent"]) // 3):] = 0
    return used


def rnn_forward(arrays, tokens, mistake=None):
    """The GRU classifier's logits of `tokens` (N, T) and the states its backward pass needs."""
    gru = _gru_as_used(arrays, mistake)
    units = gru["gru/kernel_recurrent"].shape[0]
    inputs = arrays["embedding"][tokens]
    h = np.zeros((len(tokens), units), np.float32)
    states = []
    for t in range(tokens.shape[1]):
        x = inputs[:, t]
        gi = x @ gru["gru/kernel_input"] + gru["gru/bias_input"]
        gh = h @ gru["gru/kernel_recurrent"] + gru["gru/bias_recurrent"]
        r = _sigmoid(gi[:, :units] + gh[:, :units])
        z = _sigmoid(gi[:, units:2 * units] + gh[:, units:2 * units])
        n = np.tanh(gi[:, 2 * units:] + r * gh[:, 2 * units:])
        states.append((x, h, r, z, n, gh[:, 2 * units:]))
        h = (1 - z) * n + z * h
    return h @ arrays["fc/kernel"] + arrays["fc/bias"], (inputs, states, h, gru)


def rnn_gradients(arrays, tokens, labels, mistake=None):
    """The gradients of the mean cross-entropy with respect to the canonical arrays (backpropagation through time)."""
    logits, (inputs, states, last, gru) = rnn_forward(arrays, tokens, mistake)
    grad = softmax_cross_entropy(logits, labels)
    grads = {"fc/kernel": last.T @ grad, "fc/bias": grad.sum(axis=0)}
    grads.update({name: np.zeros_like(value) for name, value in gru.items()})
    grad_inputs = np.zeros_like(inputs)
    dh = grad @ arrays["fc/kernel"].T
    for t in reversed(range(len(states))):
        x, h, r, z, n, gh_n = states[t]
        dn = dh * (1 - z)
        dz = dh * (h - n)
        dh = dh * z
        da_n = dn * (1 - n * n)
        da_r = da_n * gh_n * r * (1 - r)
        da_z = dz * z * (1 - z)
        d_input = np.concatenate([da_r, da_z, da_n], axis=1)
        d_recurrent = np.concatenate([da_r, da_z, da_n * r], axis=1)
        grads["gru/kernel_input"] += x.T @ d_input
        grads["gru/bias_input"] += d_input.sum(axis=0)
        grads["gru/kernel_recurrent"] += h.T @ d_recurrent
        grads["gru/bias_recurrent"] += d_recurrent.sum(axis=0)
        dh = dh + d_recurrent @ gru["gru/kernel_recurrent"].T
        grad_inputs[:, t] = d_input @ gru["gru/kernel_input"].T
    if mistake == "gates swapped":  # the gradients of the arrays it holds, back in the canonical order
        grads.update({name: _reset_update_exchanged(value) for name, value in grads.items() if name.startswith("gru/")})
    if mistake == "new gate's recurrent bias dropped":
        grads["gru/bias_recurrent"][2 * (len(grads["gru/bias_recurrent"]) // 3):] = 0
    grads["embedding"] = np.zeros_like(arrays["embedding"])
    if mistake != "frozen embedding":
        np.add.at(grads["embedding"], tokens, grad_inputs)
    return grads


def _adam_on_imdb(start, params, reverse, seed):
    """What train_rnn and train_transformer share: the check's IMDB stand-in, a copy of the weights `start` with
    Adam's moments at zero, and the training batches as (step, x, y), steps counted from 1, each batch reversed where
    `reverse`; no batch at learning rate 0 (the check's forward run: nothing moves)."""
    imdb = datasets.load_imdb("synthetic", vocab_size=params["vocab_size"], maxlen=params["maxlen"],
                              train_samples=params["train_samples"], test_samples=params["test_samples"], seed=seed)
    arrays = {name: value.copy() for name, value in start.items()}
    first = {name: np.zeros_like(value) for name, value in arrays.items()}
    second = {name: np.zeros_like(value) for name, value in arrays.items()}

    def steps():
        step = 0
        for epoch in range(params["epochs"] if params["lr"] else 0):
            for x, y in datasets.batches(imdb.x_train, imdb.y_train, params["batch_size"], shuffle=True,
                                         seed=seed + epoch):
                if reverse:
                    x, y = x[::-1].copy(), y[::-1].copy()
                step += 1
                yield step, x, y
    return imdb, arrays, first, second, steps()


def train_rnn(start, params, mistake=None, epsilon_before_correction=False, reverse=False, seed=0):
    """Adam over the check's IMDB stand-in, as the notebooks train; returns the canonical weights after training with
    the logits of the first test batch. `epsilon_before_correction` takes Keras' form of the step (epsilon added to
    the uncorrected second moment's root), `reverse` each batch in reverse order: correct runs computed another way."""
    imdb, arrays, first, second, steps = _adam_on_imdb(start, params, reverse, seed)
    beta1, beta2 = np.float32(params["beta1"]), np.float32(params["beta2"])
    if mistake == "betas swapped":
        beta1, beta2 = beta2, beta1
    if mistake == "beta1 ignored":
        beta1 = np.float32(0)
    lr, eps = np.float32(params["lr"]), np.float32(params["eps"])
    for step, x, y in steps:
        correction1 = np.float32(1) if mistake == "no bias correction" else np.float32(1 - beta1 ** step)
        correction2 = np.float32(1) if mistake == "no bias correction" else np.float32(1 - beta2 ** step)
        for name, grad in rnn_gradients(arrays, x, y, mistake).items():
            first[name] = beta1 * first[name] + (1 - beta1) * grad
            second[name] = beta2 * second[name] + (1 - beta2) * grad * grad
            if epsilon_before_correction:
                rate = lr * np.sqrt(correction2) / correction1
                arrays[name] = arrays[name] - rate * first[name] / (np.sqrt(second[name]) + eps)
            else:
                arrays[name] = arrays[name] - lr * (first[name] / correction1) / (
                    np.sqrt(second[name] / correction2) + eps)
    arrays[weights.LOGITS] = rnn_forward(arrays, imdb.x_test[:params["batch_size"]], mistake)[0]
    return arrays


# ---------------------------------------------------------------- ResNet-50's features


def conv2d(x, kernel, stride=1, padding=0):
    """A convolution (cross-correlation) of `x` (N, C, H, W) with an OIHW `kernel`, without bias."""
    n, c, h, w = x.shape
    size = kernel.shape[-1]
    if padding:
        x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out_h, out_w = (x.shape[2] - size) // stride + 1, (x.shape[3] - size) // stride + 1
    s = x.strides
    view = np.lib.stride_tricks.as_strided(x, (n, out_h, out_w, c, size, size),
                                           (s[0], s[2] * stride, s[3] * stride, s[1], s[2], s[3]))
    out = view.reshape(n * out_h * out_w, c * size * size) @ kernel.reshape(len(kernel), -1).T
    return out.reshape(n, out_h, out_w, -1).transpose(0, 3, 1, 2)


def resnet50_features(arrays, images, mistake=None, float64=False):
    """ResNet-50 v1.5 (torchvision's) up to the global average pool, in eval mode, from canonical weights: (N, 2048),
    float32 (computed in float64 with `float64`: a correct run whose rounding differs)."""
    if float64:
        arrays = {name: value.astype(np.float64) for name, value in arrays.items()}
        return resnet50_features(arrays, images.astype(np.float64), mistake).astype(np.float32)
    epsilon = 1e-3 if mistake == "batch norm epsilon 1e-3" else 1e-5

    def conv_bn(x, layer, stride=1, padding=0, relu=True):
        kernel = arrays[layer.conv + ".weight"]
        if mistake == "transposed kernel" and kernel.shape[-1] == 3:
            kernel = kernel.transpose(0, 1, 3, 2)
        x = conv2d(x, kernel, stride, padding)
        if layer.conv + ".bias" in arrays:
            x = x + arrays[layer.conv + ".bias"][:, None, None]
        if not (mistake == "shortcut without its batch norm" and "downsample" in layer.conv):
            mean = 0 if mistake == "running mean ignored" else arrays[layer.bn + ".running_mean"]
            scale = arrays[layer.bn + ".weight"] / np.sqrt(arrays[layer.bn + ".running_var"] + epsilon)
            x = (x - np.reshape(mean, (-1, 1, 1))) * scale[:, None, None] + arrays[layer.bn + ".bias"][:, None, None]
        return np.maximum(x, 0) if relu else x

    layers = iter(weight_layouts.resnet50_layers())
    x = conv_bn(images, next(layers), stride=2, padding=3)
    x = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)  # max pool 3x3, stride 2, padded by 1
    n, c, h, w = x.shape
    s = x.strides
    x = np.lib.stride_tricks.as_strided(x, (n, c, (h - 3) // 2 + 1, (w - 3) // 2 + 1, 3, 3),
                                        (s[0], s[1], 2 * s[2], 2 * s[3], s[2], s[3])).max(axis=(-1, -2))
    for stage, blocks in enumerate((3, 4, 6, 3)):
        for block in range(blocks):
            stride = 2 if stage and not block else 1
            first, second = (stride, 1) if mistake == "stride on the 1x1 (v1)" else (1, stride)
            out = conv_bn(x, next(layers), stride=first)
            out = conv_bn(out, next(layers), stride=second, padding=1)
            out = conv_bn(out, next(layers), relu=False)
            shortcut = conv_bn(x, next(layers), stride=stride, relu=False) if not block else x
            x = np.maximum(out + shortcut, 0)
    return x.mean(axis=(2, 3))


def infer_resnet50(start, params, mistake=None, float64=False, seed=0):
    """What an inference notebook exports for the check: the weights as they went in and the features of its first
    batch of datasets.fake_images (params' batch_size, batches and image_size)."""
    images = datasets.fake_images(params["batch_size"] * params["batches"], params["image_size"], seed=seed)
    return dict(start, **{weights.LOGITS: resnet50_features(start, images[:params["batch_size"]], mistake, float64)})


# ---------------------------------------------------------------- the transformer


def _erfc(x):
    """erfc in float64 to a relative error under 1.2e-7 (a Chebyshev fit: NumPy has no erf, and this runner no SciPy)."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    tail = t * np.exp(poly)
    return np.where(x >= 0, tail, 2.0 - tail)


def _gelu(u, mistake):
    """GELU of `u` and its derivative: erf's exact form, or (the mistake "tanh GELU") the tanh approximation."""
    x = u.astype(np.float64)
    if mistake == "tanh GELU":
        inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
        th = np.tanh(inner)
        value = 0.5 * x * (1 + th)
        slope = 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x * x)
    else:
        cdf = 1.0 - 0.5 * _erfc(x / np.sqrt(2.0))
        value, slope = x * cdf, cdf + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
    return value.astype(u.dtype), slope.astype(u.dtype)


def _norm(x, scale, bias, epsilon):
    """Layer norm over the last axis, and what its backward pass needs."""
    mean = x.mean(axis=-1, keepdims=True)
    deviation = np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + np.float32(epsilon))
    normed = (x - mean) / deviation
    return normed * scale + bias, (normed, deviation, scale)


def _norm_backward(grad, saved):
    """(input gradient, scale gradient, bias gradient) of _norm."""
    normed, deviation, scale = saved
    g = grad * scale
    dx = (g - g.mean(axis=-1, keepdims=True) - normed * (g * normed).mean(axis=-1, keepdims=True)) / deviation
    return dx, (grad * normed).reshape(-1, normed.shape[-1]).sum(axis=0), grad.reshape(-1, grad.shape[-1]).sum(axis=0)


def _heads(x, heads, mistake):
    """(N, T, D) -> (N, H, T, D/H): consecutive columns per head, or (the mistake "heads interleaved") every H-th."""
    n, t, width = x.shape
    if mistake == "heads interleaved":
        return x.reshape(n, t, width // heads, heads).transpose(0, 3, 1, 2)
    return x.reshape(n, t, heads, width // heads).transpose(0, 2, 1, 3)


def _merged(x, mistake):
    """_heads undone: (N, H, T, D/H) -> (N, T, D)."""
    n, heads, t, d = x.shape
    if mistake == "heads interleaved":
        return x.transpose(0, 2, 3, 1).reshape(n, t, heads * d)
    return x.transpose(0, 2, 1, 3).reshape(n, t, heads * d)


def transformer_forward(arrays, tokens, params, mistake=None):
    """The encoder's logits of `tokens` (N, T) at the canonical weights (no dropout), and what backward needs."""
    epsilon = 1e-3 if mistake == "norm epsilon 1e-3" else params["norm_epsilon"]
    heads = params["heads"]
    keep = tokens != 0
    attended = np.ones_like(keep) if mistake == "padding attended" else keep
    counted = np.ones_like(keep) if mistake == "padding in the mean" else keep
    scale = np.float32(1.0 / np.sqrt(params["model_dim"] // heads))
    x = arrays["embedding/tokens"][tokens] + arrays["embedding/positions"][:tokens.shape[1]]
    saved = []
    for layer in range(params["layers"]):
        p = "layer{}/".format(layer)
        a, norm1 = _norm(x, arrays[p + "attention_norm/scale"], arrays[p + "attention_norm/bias"], epsilon)
        q, k, v = (_heads(a @ arrays[p + "attention/" + name + "/kernel"] + arrays[p + "attention/" + name + "/bias"],
                          heads, mistake) for name in ("query", "key", "value"))
        scores = np.where(attended[:, None, None, :], q @ k.transpose(0, 1, 3, 2) * scale, -np.inf)
        weights_ = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights_ /= weights_.sum(axis=-1, keepdims=True)
        o = _merged(weights_ @ v, mistake)
        x = x + o @ arrays[p + "attention/output/kernel"] + arrays[p + "attention/output/bias"]
        h, norm2 = _norm(x, arrays[p + "feedforward_norm/scale"], arrays[p + "feedforward_norm/bias"], epsilon)
        hidden, slope = _gelu(h @ arrays[p + "feedforward/hidden/kernel"] + arrays[p + "feedforward/hidden/bias"], mistake)
        x = x + hidden @ arrays[p + "feedforward/output/kernel"] + arrays[p + "feedforward/output/bias"]
        saved.append((a, norm1, q, k, v, weights_, o, h, norm2, hidden, slope))
    out, final = _norm(x, arrays["final_norm/scale"], arrays["final_norm/bias"], epsilon)
    share = counted[:, :, None].astype(np.float32) / counted.sum(axis=1)[:, None, None].astype(np.float32)
    pooled = (out * share).sum(axis=1)
    logits = pooled @ arrays["fc/kernel"] + arrays["fc/bias"]
    return logits, (saved, final, share, pooled, scale, heads)


def transformer_gradients(arrays, tokens, labels, params, mistake=None):
    """The gradients of the mean cross-entropy with respect to the canonical arrays."""
    logits, (saved, final, share, pooled, scale, heads) = transformer_forward(arrays, tokens, params, mistake)
    grad = softmax_cross_entropy(logits, labels)
    grads = {"fc/kernel": pooled.T @ grad, "fc/bias": grad.sum(axis=0)}
    dx, grads["final_norm/scale"], grads["final_norm/bias"] = _norm_backward(
        share * (grad @ arrays["fc/kernel"].T)[:, None, :], final)

    def dense(name, inputs, d_out):
        flat = inputs.reshape(-1, inputs.shape[-1])
        grads[name + "/kernel"] = flat.T @ d_out.reshape(-1, d_out.shape[-1])
        grads[name + "/bias"] = d_out.reshape(-1, d_out.shape[-1]).sum(axis=0)
        return d_out @ arrays[name + "/kernel"].T

    for layer in reversed(range(params["layers"])):
        p = "layer{}/".format(layer)
        a, norm1, q, k, v, weights_, o, h, norm2, hidden, slope = saved[layer]
        d_hidden = dense(p + "feedforward/output", hidden, dx)
        d_h = dense(p + "feedforward/hidden", h, d_hidden * slope)
        d_norm, grads[p + "feedforward_norm/scale"], grads[p + "feedforward_norm/bias"] = _norm_backward(d_h, norm2)
        dx = dx + d_norm
        d_o = _heads(dense(p + "attention/output", o, dx), heads, mistake)
        d_weights = d_o @ v.transpose(0, 1, 3, 2)
        d_v = weights_.transpose(0, 1, 3, 2) @ d_o
        d_scores = weights_ * (d_weights - (d_weights * weights_).sum(axis=-1, keepdims=True)) * scale
        d_q, d_k = d_scores @ k, d_scores.transpose(0, 1, 3, 2) @ q
        d_a = sum(dense(p + "attention/" + name, a, _merged(d, mistake))
                  for name, d in (("query", d_q), ("key", d_k), ("value", d_v)))
        d_norm, grads[p + "attention_norm/scale"], grads[p + "attention_norm/bias"] = _norm_backward(d_a, norm1)
        dx = dx + d_norm
    grads["embedding/positions"] = np.zeros_like(arrays["embedding/positions"])
    grads["embedding/positions"][:tokens.shape[1]] = dx.sum(axis=0)
    grads["embedding/tokens"] = np.zeros_like(arrays["embedding/tokens"])
    np.add.at(grads["embedding/tokens"], tokens, dx)
    return grads


def train_transformer(start, params, mistake=None, reverse=False, seed=0):
    """AdamW over the check's IMDB stand-in, as the notebooks train (decay p -= lr * weight_decay * p, then Adam's step);
    returns the canonical weights after training with the logits of the first test batch. Mistakes of the update:
    "L2 instead of decoupled decay" (the decay added to the gradient, as Adam's weight_decay does), "decay without the
    learning rate" (p -= weight_decay * p, Chainer's weight_decay_rate taken as it reads)."""
    imdb, arrays, first, second, steps = _adam_on_imdb(start, params, reverse, seed)
    beta1, beta2 = np.float32(params["beta1"]), np.float32(params["beta2"])
    lr, eps, decay = np.float32(params["lr"]), np.float32(params["eps"]), np.float32(params["weight_decay"])
    for step, x, y in steps:
        correction1, correction2 = np.float32(1 - beta1 ** step), np.float32(1 - beta2 ** step)
        for name, grad in transformer_gradients(arrays, x, y, params, mistake).items():
            if mistake == "L2 instead of decoupled decay":
                grad = grad + decay * arrays[name]
            elif mistake == "decay without the learning rate":
                arrays[name] = arrays[name] - decay * arrays[name]
            else:
                arrays[name] = arrays[name] - lr * decay * arrays[name]
            first[name] = beta1 * first[name] + (1 - beta1) * grad
            second[name] = beta2 * second[name] + (1 - beta2) * grad * grad
            arrays[name] = arrays[name] - lr * (first[name] / correction1) / (np.sqrt(second[name] / correction2) + eps)
    arrays[weights.LOGITS] = transformer_forward(arrays, imdb.x_test[:params["batch_size"]], params, mistake)[0]
    return arrays
