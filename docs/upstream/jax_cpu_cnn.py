"""Time a small VGG-style CNN's training step on XLA:CPU, in pure JAX: a reproducer of a CPU slowdown across releases.

The network is the DL Rosetta Stone's CIFAR-10 CNN (32x32x3 images, NHWC): conv3x3 3->50, conv3x3 50->50, 2x2 max
pool, conv3x3 50->100, conv3x3 100->100, 2x2 max pool, dense 6400->512->10, ReLU after each, dropout 0.25 after each
pool and 0.5 after the first dense layer, softmax cross-entropy, SGD with momentum 0.9 (learning rate 0.01), batch 64.
Only jax, numpy and the standard library: no Flax, no Optax. It times, each compiled by jax.jit before the clock starts
and warmed up: (1) the whole training step (forward, backward, update), (2) the four convolutions alone, forward and
backward, (3) the two dense layers alone, forward and backward; for each, the median [min-max] of R repeats of K steps,
and the calls into CPU libraries (`__ynn_fusion`, `__xnn_fusion`, oneDNN) that the compiled program makes.

Run it on two releases (jaxlib pinned too: jax X accepts any jaxlib from its minimum to X) and with XLA's CPU flags:
    python -m venv a && a/bin/pip install jax==0.8.1 jaxlib==0.8.1 && a/bin/python jax_cpu_cnn.py --threads 2
    python -m venv b && b/bin/pip install jax==0.10.2 jaxlib==0.10.2 && b/bin/python jax_cpu_cnn.py --threads 2
    XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type= b/bin/python jax_cpu_cnn.py --threads 2   # nothing to YNNPACK
XLA aborts on a flag (or a flag value) it does not know, so try a flag only on releases that have it.
"""

import argparse
import importlib.metadata
import json
import os
import statistics
import time

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
CONVS = ((3, 50), (50, 50), (50, 100), (100, 100))  # (in, out) channels of the 3x3 convolutions
DENSE = ((100 * 8 * 8, 512), (512, 10))
LR, MOMENTUM, DROPOUT = 0.01, 0.9, (0.25, 0.5)
LIBRARY_CALLS = ("__ynn_fusion", "__xnn_fusion", "__onednn_fusion", "__onednn$")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20, help="K: steps timed in each repeat (default 20)")
    p.add_argument("--repeats", type=int, default=5, help="R: timed repeats; the median and range are printed (default 5)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps after compiling (default 3)")
    p.add_argument("--batch", type=int, default=64, help="B: images per step (default 64)")
    p.add_argument("--threads", type=int, default=0, help="N: run on the first N CPUs (the process's affinity, which "
                   "sizes XLA's CPU thread pool) and set OMP/MKL/OpenBLAS_NUM_THREADS to N; 0 leaves both alone")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    args = p.parse_args(argv)
    if min(args.steps, args.repeats, args.batch) < 1 or min(args.warmup, args.threads) < 0:
        p.error("--steps, --repeats and --batch must be at least 1, --warmup and --threads at least 0")
    return args


def pin_threads(n):
    """Before JAX starts: XLA's CPU client sizes its intra-op (Eigen) pool from the CPUs this process may run on."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(n)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:n])


def usable_cpus():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.lower().startswith("model name")), "?")
    except OSError:
        return "?"


def xla_pool_threads():
    """Threads of XLA's CPU pool now alive in this process (Linux: named tf_XLAEigen), or None where unknown."""
    try:
        names = [open("/proc/self/task/{}/comm".format(t)).read().strip() for t in os.listdir("/proc/self/task")]
    except OSError:
        return None
    return sum(name.startswith("tf_XLAEigen") for name in names)


def build(batch):
    """The parameters, a batch, and the three functions to time (all pure, jit-able)."""
    import jax
    import jax.numpy as jnp

    keys = iter(jax.random.split(jax.random.PRNGKey(0), 16))
    convs = [(jax.random.normal(next(keys), (3, 3, cin, cout)) * (9 * cin) ** -0.5, jnp.zeros(cout)) for cin, cout in CONVS]
    dense = [(jax.random.normal(next(keys), (din, dout)) * din ** -0.5, jnp.zeros(dout)) for din, dout in DENSE]
    x = jax.random.normal(next(keys), (batch, 32, 32, 3))
    y = jax.random.randint(next(keys), (batch,), 0, 10)

    def conv(x, kb):
        k, b = kb
        return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def dropout(x, rate, key):
        return x if key is None else jnp.where(jax.random.bernoulli(key, 1 - rate, x.shape), x / (1 - rate), 0)

    def features(convs, x, keys=(None, None)):  # conv relu conv pool relu [dropout], twice; flattened in (C, H, W) order
        for i in (0, 2):
            x = jax.nn.relu(conv(x, convs[i]))
            x = dropout(jax.nn.relu(pool(conv(x, convs[i + 1]))), DROPOUT[0], keys[i // 2])
        return x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)

    def head(dense, h, key=None):
        h = dropout(jax.nn.relu(h @ dense[0][0] + dense[0][1]), DROPOUT[1], key)
        return h @ dense[1][0] + dense[1][1]

    def loss(params, x, y, key):
        k1, k2, k3 = jax.random.split(key, 3)
        logits = head(params["dense"], features(params["convs"], x, (k1, k2)), k3)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    def train_step(params, velocity, key, x, y):  # SGD with momentum, as optax.sgd(lr, momentum): v = g + m v; p -= lr v
        key, sub = jax.random.split(key)
        value, grads = jax.value_and_grad(loss)(params, x, y, sub)
        velocity = jax.tree_util.tree_map(lambda g, v: g + MOMENTUM * v, grads, velocity)
        params = jax.tree_util.tree_map(lambda p, v: p - LR * v, params, velocity)
        return params, velocity, key, value

    def backward(f, params, inputs, cotangent):  # forward and backward, gradients of the parameters only
        return jax.vjp(lambda p: f(p, inputs), params)[1](cotangent)[0]

    params = {"convs": convs, "dense": dense}
    h = features(convs, x)
    cotangents = jax.random.normal(next(keys), h.shape), jax.random.normal(next(keys), (batch, 10))
    state = (params, jax.tree_util.tree_map(jnp.zeros_like, params), jax.random.PRNGKey(1))
    return {
        "train step": (train_step, state + (x, y), True),
        "convolutions fwd+bwd": (lambda p, x, c: backward(features, p, x, c), (convs, x, cotangents[0]), False),
        "dense layers fwd+bwd": (lambda p, h, c: backward(head, p, h, c), (dense, h, cotangents[1]), False),
    }


def time_one(fn, args, chained, steps, repeats, warmup):
    """Compile seconds, library calls in the compiled HLO, and ms per step of each repeat."""
    import jax

    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - start
    text = compiled.as_text() or ""
    calls = {name.strip("_$"): text.count(name) for name in LIBRARY_CALLS if name in text}

    def run(n):
        state = out = args
        for _ in range(n):
            out = compiled(*state)
            if chained:  # the training step feeds its parameters, velocity and key to the next, dispatched ahead
                state = out[:3] + args[3:]
            else:  # independent calls: each waited for, so that none overlaps the next
                jax.block_until_ready(out)
        jax.block_until_ready(out)

    run(warmup)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        times.append((time.perf_counter() - start) * 1000 / steps)
    return compile_s, calls, times


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        pin_threads(args.threads)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.print_environment_info()
    print("CPU:", cpu_model(), "| CPUs this process may use:", usable_cpus(),
          "| XLA_FLAGS:", repr(os.environ.get("XLA_FLAGS", "")), "| device:", jax.devices()[0])
    print("steps K={} repeats R={} warm-up={} batch B={}".format(args.steps, args.repeats, args.warmup, args.batch))
    record = {"jax": jax.__version__, "jaxlib": importlib.metadata.version("jaxlib"), "cpu": cpu_model(),
              "cpus": usable_cpus(), "xla_flags": os.environ.get("XLA_FLAGS", ""), "batch": args.batch,
              "steps": args.steps, "repeats": args.repeats, "results": {}}
    for name, (fn, fn_args, chained) in build(args.batch).items():
        compile_s, calls, times = time_one(fn, fn_args, chained, args.steps, args.repeats, args.warmup)
        median = statistics.median(times)
        print("{:22s} {:8.2f} ms/step [{:.2f}-{:.2f}]  compile {:.2f} s  library calls in HLO: {}".format(
            name, median, min(times), max(times), compile_s, calls or "none"))
        record["results"][name] = {"median_ms": median, "min_ms": min(times), "max_ms": max(times), "ms": times,
                                   "compile_s": compile_s, "library_calls": calls}
    record["xla_pool_threads"] = xla_pool_threads()
    print("XLA CPU pool threads alive:", record["xla_pool_threads"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
