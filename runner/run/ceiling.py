"""The measured ceiling: what this machine's device reaches on large dense matrix products, per precision, the
operation that bounds the workloads' convolutions and dense layers. The tables' Util. divides a row's achieved
GFLOP/s by it (runner/report/table.py), where a datasheet or per-cycle peak is a number no kernel reaches, or one
a guessed clock and vector width put too low.

Before the notebooks, a run measures every path the machine offers (PATHS: NumPy's BLAS in the runner's environment,
PyTorch's MKL and oneDNN on the CPU, PyTorch's CUDA matmul and JAX's dot per precision on a GPU), each in its
environment's interpreter (runner/run/gemm_probe.py) with the run's threads, for a few seconds each (a path sizes its
problem to its speed, and one that does not answer in its time is stopped alone), and keeps the best path of each
precision: a slow library path is not the machine's ceiling. The answer is cached per machine in .envs/ (keyed by the
CPU or GPU, the threads, the driver, the environments' builds and the variables that choose a library's kernels),
unless other programs kept the machine busy while it was measured, and written into the run folder
(runner/run_folder.py CEILING_FILE) with how it was measured.
"""

import hashlib
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import flops
from runner import catalog, run_folder
from runner.run import environments, machine_probe

PROBE = Path(__file__).resolve().with_name("gemm_probe.py")  # run as a script in each environment
CACHE_FILE = "ceilings.json"  # in .envs/: {key: measured ceiling}
BUDGET_S = 1.5  # timed repeats per path, after its calibration (runner/run/gemm_probe.py)
PATH_LIMIT_S = 20.0  # a path unanswered after this long is stopped and reported so: the others still are measured
START_LIMIT_S = 60.0  # an environment's interpreter start and imports, before its first path
BUSY_CORES = 0.25  # a ceiling measured while other programs kept more cores than this busy is not cached
TAKES = 3  # quiet measurements, one per run, before a machine's ceiling is kept as it is: the best of them, its spread said
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


def run_probe(env_name, paths, threads, budget_s=BUDGET_S, path_limit_s=PATH_LIMIT_S):
    """Measure `paths` in environment `env_name`'s interpreter with `threads` threads: {path: answer}, each path
    {"error": why} where the environment is not built or the probe failed. The probe answers path by path: a path
    still unanswered after `path_limit_s` is stopped and said to be (with "retry": measured again next time), and the
    paths after it are measured in a new probe."""
    from common import environment

    env = catalog.ENVIRONMENTS[env_name]
    if not environments.is_ready(env):
        return {path: {"error": "environment {} is not built".format(env_name)} for path in paths}
    environ = environments.script_environment(env)
    environ.update({name: str(threads) for name in environment.THREAD_VARIABLES})
    command = [str(environments.interpreter(env)), str(PROBE),
               json.dumps({"paths": list(paths), "threads": threads, "budget_s": budget_s})]
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, cwd=str(catalog.REPO),
                                   env=environ)
        answers, stopped = probe_answers(process, paths, path_limit_s)
        errors.seek(0)
        err = errors.read().strip()
    for answer in answers.values():
        answer["environment"] = env_name
    rest = [path for path in paths if path not in answers]
    if stopped:
        answers[stopped] = {"error": "no answer within {:.0f} s".format(path_limit_s), "environment": env_name,
                            "retry": True}
        rest.remove(stopped)
        return dict(answers, **(run_probe(env_name, rest, threads, budget_s, path_limit_s) if rest else {}))
    why = err.splitlines()[-1] if err else "exit status {}".format(process.returncode)
    answers.update({path: {"error": "the probe failed: " + why, "environment": env_name, "retry": True}
                    for path in rest})
    return answers


def probe_answers(process, paths, path_limit_s):
    """Read a probe's answers, a JSON line each, as it writes them: ({path: answer}, None) when it ends, or (what it
    answered, the path it was measuring) when one of `paths` takes longer than `path_limit_s` (after START_LIMIT_S for
    the first), the probe then killed."""
    lines = queue.Queue()

    def read():
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    answers, deadline = {}, time.monotonic() + START_LIMIT_S + path_limit_s
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            process.kill()
            process.wait()
            return answers, next(path for path in paths if path not in answers)
        if line is None:
            process.wait()
            return answers, None
        try:
            found = json.loads(line)
        except ValueError:  # a library's own print
            continue
        if isinstance(found, dict) and set(found) <= set(paths):
            answers.update(found)
            deadline = time.monotonic() + path_limit_s


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


def measure(device, threads, gpu=None, probe=run_probe, say=print, paths=None, others=machine_probe.cpu_seconds_of_others):
    """Measure the ceiling now: {"device", "threads", "ceilings": {precision: best path}, "paths": {path: answer},
    "busy_cores": how many cores other programs kept busy meanwhile (None where unknown)}. `paths` chooses some of
    the device's paths (all by default)."""
    wanted = [(env, path) for env, path in (GPU_PATHS if device == "gpu" else CPU_PATHS) if paths is None or path in paths]
    measured = {}
    started, others_before = time.monotonic(), others()
    for env_name in dict.fromkeys(env for env, _ in wanted):
        mine = [path for env, path in wanted if env == env_name]
        say("[ceiling] {}: {} ...".format(env_name, ", ".join(mine)))
        measured.update(probe(env_name, mine, threads))
    busy = machine_probe.cores_busy(others_before, others(), time.monotonic() - started)
    return {"device": gpu.get("name") if gpu else "cpu", "threads": threads, "ceilings": best_per_precision(measured),
            "paths": measured, "busy_cores": busy}


def merged(earlier, now):
    """`earlier`'s paths with `now`'s measured again: a path keeps its fastest answer (the machine's best is its
    ceiling), with every take's figure in its 'takes'; an error gives way to any answer."""
    paths = dict(earlier["paths"])
    for path, answer in now["paths"].items():
        before = paths.get(path, {})
        takes = before.get("takes", [before["gflops"]] if "gflops" in before else []) + (
            [answer["gflops"]] if "gflops" in answer else [])
        paths[path] = answer if "gflops" not in before or answer.get("gflops", 0) > before["gflops"] else before
        if takes:
            paths[path] = dict(paths[path], takes=takes)
    return dict(earlier, paths=paths, ceilings=best_per_precision(paths), busy_cores=now["busy_cores"])


def cached_or_measured(device, threads, gpu=None, probe=run_probe, cache_dir=None, say=print,
                       others=machine_probe.cpu_seconds_of_others):
    """The machine's ceiling, from the cache in `cache_dir` (.envs/) where this key was measured, else measured now:
    measure()'s answer with the key, whether it came from the cache, and the command that measures it. A cached entry
    whose paths include one that failed for a reason that may pass (no answer in its time, the probe failing) has
    those paths measured again. What was measured while other programs kept more than BUSY_CORES cores busy is not
    cached: it is said so, and measured again next time."""
    key = machine_key(device, threads, gpu)
    path = Path(cache_dir or catalog.ENVS_DIR) / CACHE_FILE
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    digest = key_digest(key)
    earlier = cache.get(digest)
    again = [name for name, answer in (earlier or {}).get("paths", {}).items() if answer.get("retry")]
    if earlier and not again and earlier.get("taken", 1) >= TAKES:
        return dict(earlier, cached=True)
    found = measure(device, threads, gpu, probe, say, paths=again or None, others=others)
    found = dict(merged(earlier, found) if earlier else found, key=key, cached=False,
                 command="{} {} '{}'".format(Path(sys.executable).name, PROBE.relative_to(catalog.REPO),
                                             json.dumps({"paths": "...", "threads": threads, "budget_s": BUDGET_S})))
    busy = found["busy_cores"]
    if busy is not None and busy > BUSY_CORES:
        say("[ceiling] other programs kept {:.1f} cores busy while it was measured: not cached, measured again next "
            "run".format(busy))
    elif found["ceilings"]:  # a machine where nothing could be measured is asked again next time
        found["taken"] = (earlier or {}).get("taken", 0) + (0 if again else 1)  # a retry of failed paths is no take
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
        shown = ", ".join("{} {:.0f} GFLOP/s ({})".format(precision, best["gflops"], "; ".join(
            part for part in (best["path"], run_folder.ceiling_spread(best)) if part))
                          for precision, best in sorted(one["ceilings"].items()))
        say("[ceiling] {} with {} threads{}: {}".format(one["device"], threads, " (cached)" if one["cached"] else "",
                                                        shown or "nothing could be measured"))
    return found
