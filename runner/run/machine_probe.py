"""How fast this machine is while a notebook runs, and what else ran on it meanwhile, so that a row measured on a
slowed or shared machine (other work, thermal limits, a noisy neighbour, a hypervisor taking the CPU) is flagged in
the table (runner/report/table.py) instead of being read as the framework's speed.

Two readings, kept in each record as {"machine_probe": {"before": speed(), "after": speed(), "others_cores": x}}:
- the probe, before and after the notebook: fixed work on one core, a pure-Python loop (the interpreter: what a
  notebook's Python between kernels costs) and small NumPy products (96x96 float64, with BLAS held to one thread:
  OpenBLAS's Haswell kernels, which machines that set OPENBLAS_CORETYPE=Haswell run, split such a product over two
  threads, and the product then took 7.7 ms or 13.5 ms at random, as the second thread got a core at once or not;
  on one thread it takes 12.3 to 13.1 ms there, and its SkylakeX kernels run it on one thread anyway, 5.8 ms),
  each timed SAMPLES times in short interleaved pieces and reported as the best piece scaled to the whole work, in
  seconds (lower is faster). The best of many short pieces is what the machine gave at its quietest over the probe;
  a moment's interruption does not count, a machine slowed throughout does. Before the pieces the loop runs
  WARM_UP_S untimed: a core that sat idle (the runner waits on the kernel) first runs slowly, on this project's VM
  the loop up to 75% slower for its first tenths of a second, which no best piece escapes and no notebook, busy
  throughout, suffers; and SPREAD_S more between the pieces, so that they span the slow spells of up to a tenth of
  a second that a busy core has too. The "after" probe waits until the notebook's kernel has exited (its shutdown
  is not the machine's state).
- others_cores: how many cores other programs kept busy, on average, over the whole notebook: the machine's busy
  time from /proc/stat (the hypervisor's steal included) less this process's and its children's, over the wall time.
  The probe sees two moments; this sees everything in between.
"""

import os
import time
from pathlib import Path

SAMPLES = 20  # pieces of each work timed, interleaved; the best one counts
PYTHON_ITERATIONS = 200_000  # the pure-Python loop's whole work (SAMPLES pieces of it are timed)
PRODUCTS = 400  # the NumPy products' whole work
SIZE = 96
WARM_UP_S = 0.3  # the loop's untimed run before the pieces, until an idle core runs at its working speed
SPREAD_S = 0.2  # more of it between the pieces, so that they span a slow spell of the core (up to ~0.1 s here)
SETTLE_S = 10.0  # the "after" probe waits at most this long for the notebook's kernel to exit
BUSY_WALL_S = 1.0  # others_cores of a shorter span cannot tell (a tick of the system's CPU clock is 10 ms)


def _python_piece(iterations):
    total = 0
    for number in range(iterations):
        total += number * number % 7
    return total


def warm_up(seconds):
    """Run the pure-Python loop for `seconds` (wall time), untimed; returns how many pieces it ran."""
    pieces, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        _python_piece(PYTHON_ITERATIONS // SAMPLES)
        pieces += 1
    return pieces


def speed():
    """{'python_s', 'numpy_s', 'at'}: the fixed work's time at the machine's best now (lower is faster), and when,
    after WARM_UP_S of untimed work."""
    import numpy
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):  # one core's work, on every BLAS and core type
        return _timed_pieces(numpy.random.default_rng(0).standard_normal((SIZE, SIZE)))


def _timed_pieces(matrix):
    """speed()'s timings: the loop and the products of `matrix`, each the best of SAMPLES interleaved pieces."""
    python_piece, products_piece = PYTHON_ITERATIONS // SAMPLES, PRODUCTS // SAMPLES

    def products():
        result = matrix
        for _ in range(products_piece):
            result = matrix @ matrix
        return result

    best = {"python_s": None, "numpy_s": None}
    warm_up(WARM_UP_S)
    for _ in range(SAMPLES):
        warm_up(SPREAD_S / SAMPLES)
        for key, work in (("python_s", lambda: _python_piece(python_piece)), ("numpy_s", products)):
            started = time.perf_counter()
            work()
            elapsed = time.perf_counter() - started
            best[key] = elapsed if best[key] is None else min(best[key], elapsed)
    return {"python_s": round(best["python_s"] * SAMPLES, 6), "numpy_s": round(best["numpy_s"] * SAMPLES, 6),
            "at": round(time.time(), 3)}


def cpu_seconds_of_others():
    """CPU seconds the whole machine has spent busy (its hypervisor's steal included) less this process's and its
    waited children's, from /proc/stat: what other programs took. None where the system does not show it."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields[:8])
    except (OSError, ValueError, IndexError):
        return None
    mine = os.times()
    busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    return busy - (mine.user + mine.system + mine.children_user + mine.children_system)


def cores_busy(others_before, others_after, wall_s):
    """How many cores other programs kept busy on average over `wall_s` seconds between two cpu_seconds_of_others
    readings; None where either is unknown or the span is too short to tell (BUSY_WALL_S)."""
    if None in (others_before, others_after) or wall_s < BUSY_WALL_S:
        return None
    return (others_after - others_before) / wall_s


class Watch:
    """The machine watched over one notebook: made just before it starts, `ended()` once it has finished."""

    def __init__(self, probe=None, others=None):
        self.probe = probe or speed
        self.others = others or cpu_seconds_of_others
        self.before = self.probe()
        self.started, self.others_before = time.monotonic(), self.others()

    def ended(self, settled=lambda: True):
        """The record's machine_probe: the probe before, the probe after (taken once `settled()` holds, the kernel
        gone, or after SETTLE_S) and others_cores over the notebook (None where it cannot tell)."""
        deadline = time.monotonic() + SETTLE_S
        while not settled() and time.monotonic() < deadline:
            time.sleep(0.05)
        busy = cores_busy(self.others_before, self.others(), time.monotonic() - self.started)
        return {"before": self.before, "after": self.probe(),
                "others_cores": None if busy is None else round(max(0.0, busy), 3)}


def watching():
    """A Watch started now (what the executors call before each notebook)."""
    return Watch()
