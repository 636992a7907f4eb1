"""How fast this machine is at a moment: a short fixed probe, well under a second, taken before and after every
notebook, so that a row during which the machine slowed (other work, thermal limits, a noisy neighbour) can be flagged
in the table (runner/report/table.py) instead of being read as the framework's speed.

The probe times fixed work on one core: a pure-Python loop (the interpreter: what a notebook's Python between
kernels costs) and a loop of small NumPy products (a 96x96 float64 product, which BLAS libraries run on one thread),
each the best of REPEATS timings, so that one interruption does not count. Its figures are seconds: lower is faster.
A record keeps them as {"machine_probe": {"before": speed(), "after": speed()}}.
"""

import time

REPEATS = 5
PYTHON_ITERATIONS = 200_000
PRODUCTS = 400
SIZE = 96


def _best(work):
    """The shortest of REPEATS timings of `work()`, in seconds."""
    best = None
    for _ in range(REPEATS):
        started = time.perf_counter()
        work()
        elapsed = time.perf_counter() - started
        best = elapsed if best is None else min(best, elapsed)
    return best


def _python_loop():
    total = 0
    for number in range(PYTHON_ITERATIONS):
        total += number * number % 7
    return total


def speed():
    """{'python_s', 'numpy_s', 'at'}: the best times of the fixed work now (lower is faster) and when it was taken."""
    import numpy

    matrix = numpy.random.default_rng(0).standard_normal((SIZE, SIZE))

    def products():
        result = matrix
        for _ in range(PRODUCTS):
            result = matrix @ matrix
        return result

    return {"python_s": round(_best(_python_loop), 6), "numpy_s": round(_best(products), 6),
            "at": round(time.time(), 3)}
