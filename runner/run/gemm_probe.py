"""How fast one environment's libraries multiply large dense matrices: the paths of runner/run/ceiling.py, measured.

Run as a script in an environment's interpreter (it imports only the standard library, NumPy and, for their paths,
PyTorch or JAX):
    python runner/run/gemm_probe.py '{"paths": ["numpy.matmul fp32", ...], "threads": 2, "budget_s": 2.0}'
It prints one JSON object: {path: {"gflops": the best of its repeats, "library": what computed it, "size": n,
"repeats": k, "seconds": the best repeat's}} or {path: {"error": why}} for a path it cannot take.
"""

import json
import os
import sys
import time

CPU_SIZE = 2048  # 17 GFLOP a product: a few tenths of a second on a small CPU, far from any cache
GPU_SIZE = 8192  # 1.1 TFLOP a product: milliseconds on a GPU
CONV_SHAPE = (8, 512, 64, 64)  # a 1x1 convolution (N, C, H, W) to C channels: a GEMM of 32768 x 512 x 512 through oneDNN


def best_seconds(run, sync, budget_s):
    """The best time of `run()` (after one untimed call) over repeats until `budget_s` is spent, at least two; and how
    many were timed."""
    run()
    sync()
    times, spent = [], 0.0
    while len(times) < 2 or (spent < budget_s and len(times) < 10):
        started = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - started)
        spent += times[-1]
    return min(times), len(times)


def numpy_blas():
    """The BLAS NumPy was built with, e.g. 'scipy-openblas 0.3.29', or 'unknown'."""
    import numpy as np

    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return "{} {}".format(blas.get("name"), blas.get("version")).strip()
    except (TypeError, KeyError, AttributeError):  # an older NumPy prints its configuration only
        return "unknown"


def measure_numpy(path, threads, budget_s):
    """numpy.matmul in float32 on two CPU_SIZE square matrices."""
    import numpy as np

    rng = np.random.RandomState(0)
    a, b = (rng.standard_normal((CPU_SIZE, CPU_SIZE)).astype(np.float32) for _ in range(2))
    seconds, repeats = best_seconds(lambda: a @ b, lambda: None, budget_s)
    return {"gflops": 2 * CPU_SIZE ** 3 / seconds / 1e9, "library": "NumPy {} ({})".format(np.__version__, numpy_blas()),
            "size": CPU_SIZE, "repeats": repeats, "seconds": seconds}


TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def measure_torch(path, threads, budget_s):
    """torch.mm on the CPU or the first GPU in the path's precision, or a 1x1 convolution through oneDNN on the CPU."""
    import torch

    torch.set_num_threads(threads)
    on_gpu = path.startswith("torch.cuda")
    precision = path.rsplit(" ", 1)[1]
    if on_gpu:
        if not torch.cuda.is_available():
            return {"error": "no GPU that PyTorch can use"}
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"  # fp32 on the CUDA cores, tf32 on tensor cores
        device, size, sync = "cuda", GPU_SIZE, torch.cuda.synchronize
        library = "PyTorch {} (CUDA {}, {})".format(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))
    else:
        device, size, sync = "cpu", CPU_SIZE, lambda: None
        library = "PyTorch {} ({})".format(torch.__version__, "MKL" if torch.backends.mkl.is_available() else "no MKL")
    dtype = getattr(torch, TORCH_DTYPES[precision])
    generator = torch.Generator().manual_seed(0)
    if "conv1x1" in path:
        n, c, h, w = CONV_SHAPE
        x = torch.randn(CONV_SHAPE, generator=generator).to(dtype).contiguous(memory_format=torch.channels_last)
        weight = torch.randn((c, c, 1, 1), generator=generator).to(dtype).contiguous(memory_format=torch.channels_last)
        with torch.no_grad():
            seconds, repeats = best_seconds(lambda: torch.nn.functional.conv2d(x, weight), sync, budget_s)
        flops, size = 2 * n * h * w * c * c, list(CONV_SHAPE)
        library += ", oneDNN" if torch.backends.mkldnn.is_available() else ", no oneDNN"
    else:
        a, b = (torch.randn((size, size), generator=generator).to(dtype).to(device) for _ in range(2))
        seconds, repeats = best_seconds(lambda: torch.mm(a, b), sync, budget_s)
        flops = 2 * size ** 3
    return {"gflops": flops / seconds / 1e9, "library": library, "size": size, "repeats": repeats, "seconds": seconds}


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
    dtype = getattr(jnp, TORCH_DTYPES[precision])
    a, b = (jax.device_put(jax.random.normal(key, (GPU_SIZE, GPU_SIZE), dtype), gpus[0])
            for key in jax.random.split(jax.random.PRNGKey(0)))
    with jax.default_matmul_precision(JAX_MATMUL_PRECISION.get(precision, "default")):
        product = jax.jit(jnp.dot)
        seconds, repeats = best_seconds(lambda: product(a, b).block_until_ready(), lambda: None, budget_s)
    return {"gflops": 2 * GPU_SIZE ** 3 / seconds / 1e9, "library": "JAX {} ({})".format(jax.__version__, gpus[0].device_kind),
            "size": GPU_SIZE, "repeats": repeats, "seconds": seconds}


def measure_for(path):
    """The function that measures `path`, by its library: NumPy, JAX or PyTorch."""
    return {"numpy": measure_numpy, "jax": measure_jax}.get(path.split(".", 1)[0], measure_torch)


def main(request_json):
    """Measure every path of the request; print the answers as one JSON object."""
    request = json.loads(request_json)
    threads = int(request.get("threads") or os.cpu_count() or 1)
    answers = {}
    for path in request["paths"]:
        try:
            answers[path] = measure_for(path)(path, threads, float(request.get("budget_s", 2.0)))
        except (ImportError, RuntimeError, ValueError, TypeError) as error:  # a library or dtype this machine lacks
            answers[path] = {"error": "{}: {}".format(type(error).__name__, str(error).splitlines()[0] if str(error) else "")}
    print(json.dumps(answers))


if __name__ == "__main__":
    main(sys.argv[1])
