"""How fast one environment's libraries multiply large dense matrices: the paths of runner/run/ceiling.py, measured.

Run as a script in an environment's interpreter (it imports only the standard library, NumPy and, for their paths,
PyTorch or JAX):
    python runner/run/gemm_probe.py '{"paths": ["numpy.matmul fp32", ...], "threads": 2, "budget_s": 2.0}'
It prints one JSON line per path as soon as that path is measured, {path: {"gflops": the best of its repeats,
"library": what computed it, "size": n, "repeats": k, "seconds": the best repeat's, "spread": (slowest - best) /
best, "spent_s": the path's time, calibration included}} or {path: {"error": why}} for a path it cannot take, so
that a path that never ends loses only itself (runner/run/ceiling.py run_probe).

Each path sizes its problem first: it grows the matrices from a small size while one product stays under an eighth
of the budget, up to the size that keeps a fast path far from any cache. A path its CPU computes slowly (float16 on
a CPU without a float16 unit: 0.4 GFLOP/s, 43 s for one 2048-square product) is measured at a size that answers in
its budget, and reported slow, instead of sinking the paths after it.
"""

import json
import os
import sys
import time

CPU_SIZES = (256, 2048)  # square sizes from, to: 17 GFLOP a product at the top, far from any cache
GPU_SIZES = (1024, 8192)  # 1.1 TFLOP a product at the top: milliseconds on a GPU
CONV_SHAPE = (8, 512, 64, 64)  # a 1x1 convolution (N, C, H, W) to C channels: a GEMM of 32768 x 512 x 512 through oneDNN
CALIBRATION_SHARE = 8  # a path grows its problem while one product takes under budget_s / CALIBRATION_SHARE


def timed(run, sync):
    """Seconds of one `run()`, the device synchronised before the clock stops."""
    started = time.perf_counter()
    run()
    sync()
    return time.perf_counter() - started


def calibrated(make_run, sync, sizes, budget_s):
    """The largest size, doubling from sizes[0] to sizes[1], at which one product of `make_run(size)` takes under
    budget_s / CALIBRATION_SHARE (or the first size, however slow); with its run and the seconds of that product, the
    first of its samples. One untimed call first: the library's own start."""
    size, run = sizes[0], make_run(sizes[0])
    run()
    sync()
    while True:
        seconds = timed(run, sync)
        if size * 2 > sizes[1] or seconds * CALIBRATION_SHARE >= budget_s:
            return size, run, seconds
        size, run = size * 2, make_run(size * 2)


def best_seconds(run, sync, budget_s, first):
    """The best time of `run()` over repeats until `budget_s` is spent, at least two, `first` (the calibration's
    product) the first of them; how many were timed; and their spread, (slowest - best) / best."""
    times = [first]
    while len(times) < 2 or (sum(times) < budget_s and len(times) < 10):
        times.append(timed(run, sync))
    return min(times), len(times), (max(times) - min(times)) / min(times)


def measured(make_run, sync, sizes, budget_s):
    """(size, best seconds, repeats, spread) of the products of `make_run(size)` at the size calibrated() chooses."""
    size, run, first = calibrated(make_run, sync, sizes, budget_s)
    return (size,) + best_seconds(run, sync, budget_s, first)


def answer(flops, seconds, repeats, spread, library, size, started):
    """One path's answer: its GFLOP/s with how they were measured."""
    return {"gflops": flops / seconds / 1e9, "library": library, "size": size, "repeats": repeats, "seconds": seconds,
            "spread": spread, "spent_s": time.perf_counter() - started}


def numpy_blas():
    """The BLAS NumPy was built with, e.g. 'scipy-openblas 0.3.29', or 'unknown'."""
    import numpy as np

    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return "{} {}".format(blas.get("name"), blas.get("version")).strip()
    except (TypeError, KeyError, AttributeError):  # an older NumPy prints its configuration only
        return "unknown"


def measure_numpy(path, threads, budget_s):
    """numpy.matmul in float32 on two square matrices of a calibrated size."""
    import numpy as np

    started = time.perf_counter()
    rng = np.random.RandomState(0)

    def make_run(size):
        a, b = (rng.standard_normal((size, size)).astype(np.float32) for _ in range(2))
        return lambda: a @ b

    size, seconds, repeats, spread = measured(make_run, lambda: None, CPU_SIZES, budget_s)
    return answer(2 * size ** 3, seconds, repeats, spread, "NumPy {} ({})".format(np.__version__, numpy_blas()), size,
                  started)


TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def measure_torch(path, threads, budget_s):
    """torch.mm on the CPU or the first GPU in the path's precision, or a 1x1 convolution through oneDNN on the CPU."""
    import torch

    started = time.perf_counter()
    torch.set_num_threads(threads)
    on_gpu = path.startswith("torch.cuda")
    precision = path.rsplit(" ", 1)[1]
    if on_gpu:
        if not torch.cuda.is_available():
            return {"error": "no GPU that PyTorch can use"}
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"  # fp32 on the CUDA cores, tf32 on tensor cores
        device, sizes, sync = "cuda", GPU_SIZES, torch.cuda.synchronize
        library = "PyTorch {} (CUDA {}, {})".format(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))
    else:
        device, sizes, sync = "cpu", CPU_SIZES, lambda: None
        library = "PyTorch {} ({})".format(torch.__version__, "MKL" if torch.backends.mkl.is_available() else "no MKL")
    dtype = getattr(torch, TORCH_DTYPES[precision])
    generator = torch.Generator().manual_seed(0)
    if "conv1x1" in path:  # the batch calibrated, 1 to CONV_SHAPE's
        _, c, h, w = CONV_SHAPE
        weight = torch.randn((c, c, 1, 1), generator=generator).to(dtype).contiguous(memory_format=torch.channels_last)

        def make_run(n):
            x = torch.randn((n, c, h, w), generator=generator).to(dtype).contiguous(memory_format=torch.channels_last)
            return lambda: torch.nn.functional.conv2d(x, weight)

        with torch.no_grad():
            n, seconds, repeats, spread = measured(make_run, sync, (1, CONV_SHAPE[0]), budget_s)
        flops, size = 2 * n * h * w * c * c, [n, c, h, w]
        library += ", oneDNN" if torch.backends.mkldnn.is_available() else ", no oneDNN"
    else:
        def make_run(size):
            a, b = (torch.randn((size, size), generator=generator).to(dtype).to(device) for _ in range(2))
            return lambda: torch.mm(a, b)

        size, seconds, repeats, spread = measured(make_run, sync, sizes, budget_s)
        flops = 2 * size ** 3
    return answer(flops, seconds, repeats, spread, library, size, started)


JAX_MATMUL_PRECISION = {"fp32": "highest", "tf32": "tensorfloat32"}  # else the arrays' own type, at "default"


def measure_jax(path, threads, budget_s):
    """jax.numpy.dot on the first GPU JAX sees, in the path's precision: fp32 at matmul precision "highest" (no TF32),
    tf32 at "tensorfloat32", bf16 and fp16 as arrays of that type."""
    import jax
    import jax.numpy as jnp

    precision = path.rsplit(" ", 1)[1]
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # no GPU backend: a CPU build, or no driver
        gpus = []
    if not gpus:
        return {"error": "no GPU that JAX can use"}
    started = time.perf_counter()
    dtype = getattr(jnp, TORCH_DTYPES[precision])
    product = jax.jit(jnp.dot)

    def make_run(size):
        a, b = (jax.device_put(jax.random.normal(key, (size, size), dtype), gpus[0])
                for key in jax.random.split(jax.random.PRNGKey(0)))
        return lambda: product(a, b).block_until_ready()

    with jax.default_matmul_precision(JAX_MATMUL_PRECISION.get(precision, "default")):
        size, seconds, repeats, spread = measured(make_run, lambda: None, GPU_SIZES, budget_s)
    return answer(2 * size ** 3, seconds, repeats, spread, "JAX {} ({})".format(jax.__version__, gpus[0].device_kind),
                  size, started)


def measure_for(path):
    """The function that measures `path`, by its library: NumPy, JAX or PyTorch."""
    return {"numpy": measure_numpy, "jax": measure_jax}.get(path.split(".", 1)[0], measure_torch)


def main(request_json):
    """Measure every path of the request in turn; print each answer as one JSON line, {path: answer}, when it is known."""
    request = json.loads(request_json)
    threads = int(request.get("threads") or os.cpu_count() or 1)
    for path in request["paths"]:
        try:
            found = measure_for(path)(path, threads, float(request.get("budget_s", 2.0)))
        except (ImportError, RuntimeError, ValueError, TypeError) as error:  # a library or dtype this machine lacks
            found = {"error": "{}: {}".format(type(error).__name__, str(error).splitlines()[0] if str(error) else "")}
        print(json.dumps({path: found}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
