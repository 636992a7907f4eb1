"""The measured ceiling: what this machine's device reaches on large dense matrix products, per precision, the
operation that bounds the workloads' convolutions and dense layers. The tables' Util. divides a row's achieved
GFLOP/s by it (runner/report/table.py), where a datasheet or per-cycle peak is a number no kernel reaches, or one
a guessed clock and vector width put too low.

Before the notebooks, a run measures every path the machine offers (PATHS: NumPy's BLAS in the runner's environment,
PyTorch's MKL and oneDNN on the CPU, PyTorch's CUDA matmul and JAX's dot per precision on a GPU), each in its environment's
interpreter (runner/run/gemm_probe.py) with the run's threads, for a few seconds, and keeps the best path of each
precision: a slow library path is not the machine's ceiling. The answer is cached per machine in .envs/ (keyed by the
CPU or GPU, the threads, the driver, the environments' builds and the variables that choose a library's kernels) and
written into the run folder (runner/run_folder.py CEILING_FILE) with how it was measured.
"""

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from common import flops
from runner import catalog, run_folder
from runner.run import environments

PROBE = Path(__file__).resolve().with_name("gemm_probe.py")  # run as a script in each environment
CACHE_FILE = "ceilings.json"  # in .envs/: {key: measured ceiling}
BUDGET_S = 1.5  # timed repeats per path, after one untimed product
# Set (to anything) to leave the ceiling unmeasured: the tests' runs of fixture notebooks, which compute nothing it bounds
SKIP_VARIABLE = "ROSETTA_NO_CEILING"
# (environment, path) the machine may offer; a path's last word is its precision
CPU_PATHS = (("runner", "numpy.matmul fp32"), ("pytorch", "torch.mm fp32"), ("pytorch", "torch.conv1x1 fp32"),
             ("pytorch", "torch.mm bf16"), ("pytorch", "torch.conv1x1 bf16"), ("pytorch", "torch.mm fp16"))
# on a GPU, PyTorch's and JAX's (XLA's) matrix products: the best of each precision, so that a machine without one of
# the two environments still has its GPU's ceiling
GPU_PATHS = (("pytorch", "torch.cuda.mm fp32"), ("pytorch", "torch.cuda.mm tf32"), ("pytorch", "torch.cuda.mm bf16"),
             ("pytorch", "torch.cuda.mm fp16"), ("jax", "jax.dot fp32"), ("jax", "jax.dot tf32"), ("jax", "jax.dot bf16"),
             ("jax", "jax.dot fp16"))


def precision_of(path):
    """The precision a path computes in: its last word."""
    return path.rsplit(" ", 1)[1]


def machine_key(device, threads, gpu=None):
    """What a ceiling depends on, as a dict: the CPU (model, family, cores) or the GPU (name, driver), the threads,
    each path's environment build (its stamp) and the variables that choose a library's kernels."""
    from common import environment  # NumPy with it: not at the command line's start (tests/test_runner.py)

    paths = GPU_PATHS if device == "gpu" else CPU_PATHS
    builds = {}
    for name in sorted({env for env, _ in paths}):
        stamp = environments.read_stamp(catalog.ENVIRONMENTS[name]) or {}
        builds[name] = {field: stamp.get(field) for field in ("build", "requirements", "requirements_sha256", "python",
                                                                "python_path")}
    key = {"device": device, "cpu": environment.cpu_model(), "cpu_family": flops.cpu_family(), "cpu_count": os.cpu_count(),
           "threads": threads, "builds": builds, "kernel_variables": environment.kernel_variables()}
    if gpu:
        key.update(gpu=gpu.get("name"), driver=gpu.get("driver"))
    return key


def key_digest(key):
    """A short digest of a machine key, for the cache."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def run_probe(env_name, paths, threads, budget_s=BUDGET_S):
    """Measure `paths` in environment `env_name`'s interpreter with `threads` threads: {path: answer}, each path
    {"error": why} where the environment is not built or the probe failed."""
    from common import environment

    env = catalog.ENVIRONMENTS[env_name]
    if not environments.is_ready(env):
        return {path: {"error": "environment {} is not built".format(env_name)} for path in paths}
    environ = environments.script_environment(env)
    environ.update({name: str(threads) for name in environment.THREAD_VARIABLES})
    command = [str(environments.interpreter(env)), str(PROBE),
               json.dumps({"paths": list(paths), "threads": threads, "budget_s": budget_s})]
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=str(catalog.REPO), env=environ,
                              timeout=60 + 10 * budget_s * len(paths))
        answers = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (subprocess.TimeoutExpired, ValueError, IndexError) as error:
        answers, done = None, error
    if answers is None:
        why = (getattr(done, "stderr", None) or str(done) or "no output").strip().splitlines()[-1]
        return {path: {"error": "the probe failed: " + why} for path in paths}
    for answer in answers.values():
        answer["environment"] = env_name
    return answers


def best_per_precision(measured):
    """{precision: the fastest measured path's answer, with its path}."""
    best = {}
    for path, answer in measured.items():
        if "gflops" not in answer:
            continue
        precision = precision_of(path)
        if precision not in best or answer["gflops"] > best[precision]["gflops"]:
            best[precision] = dict(answer, path=path)
    return best


def measure(device, threads, gpu=None, probe=run_probe, say=print):
    """Measure the ceiling now: {"device", "threads", "ceilings": {precision: best path}, "paths": {path: answer}}."""
    paths = GPU_PATHS if device == "gpu" else CPU_PATHS
    measured = {}
    for env_name in dict.fromkeys(env for env, _ in paths):
        mine = [path for env, path in paths if env == env_name]
        say("[ceiling] {}: {} ...".format(env_name, ", ".join(mine)))
        measured.update(probe(env_name, mine, threads))
    return {"device": gpu.get("name") if gpu else "cpu", "threads": threads, "ceilings": best_per_precision(measured),
            "paths": measured}


def cached_or_measured(device, threads, gpu=None, probe=run_probe, cache_dir=None, say=print):
    """The machine's ceiling, from the cache in `cache_dir` (.envs/) where this key was measured, else measured now and
    cached: measure()'s answer with the key, whether it came from the cache, and the command that measures it."""
    key = machine_key(device, threads, gpu)
    path = Path(cache_dir or catalog.ENVS_DIR) / CACHE_FILE
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    digest = key_digest(key)
    if digest in cache:
        return dict(cache[digest], cached=True)
    found = dict(measure(device, threads, gpu, probe, say), key=key, cached=False,
                 command="{} {} '{}'".format(Path(sys.executable).name, PROBE.relative_to(catalog.REPO),
                                             json.dumps({"paths": "...", "threads": threads, "budget_s": BUDGET_S})))
    if found["ceilings"]:  # a machine where nothing could be measured is asked again next time
        cache[digest] = found
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(cache, indent=1) + "\n")
        os.replace(str(temporary), str(path))
    return found


def cpu_clock(measured, threads):
    """What the CPU says of its clock and vector units, and what the measured fp32 ceiling implies of them: the listed
    clock (cpufreq's maximum where the system shows one, else /proc/cpuinfo's), the per-cycle rule's units (None for a
    family it does not name) and the peak they give, the fp32 FLOPs per cycle and core the ceiling reaches at the
    listed clock, and the clock it implies at the rule's FLOPs per cycle."""
    mhz, simd = flops.cpu_mhz(), flops.cpu_simd()
    best = (measured.get("ceilings") or {}).get("fp32", {}).get("gflops")
    per_cycle = flops.CPU_FLOPS_PER_CYCLE.get(simd)
    return {"cpu_family": flops.cpu_family(), "cpu_mhz": mhz, "cpu_simd": simd,
            "guessed_peak_gflops": flops.cpu_peak_gflops(threads, mhz, simd),
            "flops_per_cycle_at_listed_clock": best / (threads * mhz / 1000.0) if best and mhz else None,
            "implied_mhz": best / (threads * per_cycle) * 1000.0 if best and per_cycle else None}


def here(threads, gpu=None, probe=run_probe, say=print):
    """This machine's measured ceilings, as CEILING_FILE holds them: {"host", "measured": [the CPU's with `threads`,
    the per-cycle estimate beside it; the GPU's where `gpu` (nvidia-smi's dict) is given]}, each from this machine's
    cache or measured now."""
    measured = [cached_or_measured("cpu", threads, None, probe, say=say)]
    measured[0].update(cpu_clock(measured[0], threads))
    if gpu:
        measured.append(cached_or_measured("gpu", threads, gpu, probe, say=say))
    return {"host": socket.gethostname(), "measured": measured}


def for_run(run_dir, threads, gpu=None, probe=run_probe, say=print):
    """Write the run's measured ceilings into `run_dir` (CEILING_FILE): here()'s, with the run's `threads` and the GPU
    it computes on; say each in one line; return the file's contents."""
    found = here(threads, gpu, probe, say)
    measured = found["measured"]
    (Path(run_dir) / run_folder.CEILING_FILE).write_text(json.dumps(found, indent=1) + "\n")
    for one in measured:
        shown = ", ".join("{} {:.0f} GFLOP/s ({})".format(precision, best["gflops"], best["path"])
                          for precision, best in sorted(one["ceilings"].items()))
        say("[ceiling] {} with {} threads{}: {}".format(one["device"], threads, " (cached)" if one["cached"] else "",
                                                        shown or "nothing could be measured"))
    return found
