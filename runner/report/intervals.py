"""Rounds' statistics: a row's median with an interval, two rows compared by the ratio of their medians with a verdict,
and the rows that cannot be told apart from the best (the rounds' order is the run's: runner/run/batch.py).

Pure functions on lists of float samples (one per round), NumPy only. Every resampling draws from a
numpy.random.Generator seeded with SEED afresh per call, so the same samples give the same figures in any order of calls.

With n >= 5 samples (on both sides, for a comparison) intervals are 95% percentile bootstrap intervals (RESAMPLES
resamples) of the median, or of the ratio of medians with each side resampled on its own; with fewer, the
bootstrap is degenerate and the interval is the min–max range instead (for a ratio: min(b)/max(a) to max(b)/min(a));
one sample has no interval. A comparison's verdict reads off its interval alone: "within noise" when it holds 1.0.
With min–max ranges, identical distributions give ranges that miss each other in 2/C(2n, n) of trials: 10% at 3
samples a side, 3% at 4, every time at 1 (two single samples differ unless equal; method "single" says so).

Samples taken inside one kernel (the epochs of one training, the passes of one inference) agree more closely than
two runs of the notebook do: compared on them alone, single runs of the same code on this project's machine were called
apart in 85 of 186 pairs of rows. Where a side's samples come from one kernel, compare() is given RUN_TO_RUN and widens the
interval by it at both ends, so that the verdict still reads off the interval printed.

No rank test (Mann–Whitney U) backs the verdict: measured on normal samples with 2% noise, the bootstrap alone calls
identical distributions different in 2.5–4.2% of trials at n = 5 to 20, requiring U's p < 0.05 as well only brings that to
2.3–3.6%, and a verdict that a second test can veto no longer reads off the interval printed beside it.
"""

import dataclasses

import numpy as np

SEED = 0
RESAMPLES = 4000
BOOTSTRAP_MIN_N = 5  # fewer samples than this on a side: min–max ranges instead of the bootstrap
LEVEL = 0.95
VERDICTS = ("faster", "slower", "within noise")
RUN_TO_RUN = 0.33  # how far a row's headline moves between two single runs of its notebook on a quiet machine: the 95th
# percentile of 186 ratios of the same rows between single runs of the same code on this project's 2-core VM (two sets
# of three runs, of 17 and 45 rows: docs/results.md, "Three single runs against one repeated run")


def _samples(samples, what="samples"):
    """The samples as a flat float array, or ValueError saying what is wrong with them."""
    try:
        values = np.asarray(samples, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError("{} must be numbers: {}".format(what, error)) from None
    if values.ndim != 1:
        raise ValueError("{} must be a flat list of numbers, got shape {}".format(what, values.shape))
    if values.size == 0:
        raise ValueError("{} are empty".format(what))
    if not np.all(np.isfinite(values)):
        raise ValueError("{} must be finite, got {}".format(what, values.tolist()))
    return values


def _bootstrap_medians(values, rng):
    """RESAMPLES medians of resamples (with replacement, same size) of the values."""
    return np.median(values[rng.integers(0, values.size, size=(RESAMPLES, values.size))], axis=1)


def _percentiles(values):
    """The two ends of the central LEVEL share of the values."""
    tail = (1.0 - LEVEL) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def _number(value, digits):
    """A figure with a fixed number of decimals."""
    return "{:.{}f}".format(value, digits)


@dataclasses.dataclass(frozen=True)
class Summary:
    """A row's median over rounds with its interval; method is "bootstrap", "min–max" or "single"."""

    median: float
    low: float
    high: float
    n: int
    method: str

    def cell(self, unit="", digits=1):
        """Table-cell text, e.g. "12.3 s [11.9–12.8] n=3 (min–max)"; "12.3 s n=1" for a single sample."""
        value = _number(self.median, digits) + (" " + unit if unit else "")
        if self.method == "single":
            return "{} n=1".format(value)
        return "{} [{}–{}] n={} ({})".format(value, _number(self.low, digits), _number(self.high, digits), self.n,
                                            self.method)


def summary(samples):
    """A row's median with a 95% bootstrap interval (n >= 5), its min–max range (n 2 to 4) or none (n == 1)."""
    values = _samples(samples)
    median = float(np.median(values))
    if values.size == 1:
        return Summary(median, median, median, 1, "single")
    if values.size < BOOTSTRAP_MIN_N:
        return Summary(median, float(values.min()), float(values.max()), int(values.size), "min–max")
    low, high = _percentiles(_bootstrap_medians(values, np.random.default_rng(SEED)))
    # Resampling's discreteness could in principle leave the median just outside: the interval always holds it
    return Summary(median, min(low, median), max(high, median), int(values.size), "bootstrap")


@dataclasses.dataclass(frozen=True)
class Comparison:
    """b against a: ratio = median(b) / median(a), its interval, b's verdict and how the interval was made."""

    ratio: float
    low: float
    high: float
    verdict: str
    method: str
    n_a: int
    n_b: int
    widened: float = 0.0

    def cell(self, digits=2):
        """Table-cell text, e.g. "1.10× [1.06–1.14] slower"."""
        return "{}× [{}–{}] {}".format(_number(self.ratio, digits), _number(self.low, digits),
                                       _number(self.high, digits), self.verdict)


def compare(a, b, lower_is_better=True, widened=0.0):
    """b against a: the ratio median(b)/median(a) with an interval, and whether b is "faster", "slower" or "within
    noise" of a; `widened` (e.g. RUN_TO_RUN) widens the interval by that share at both ends (low / (1 + widened), high
    * (1 + widened)) for samples that do not see what changes between runs.

    The interval is the percentile bootstrap of the ratio of medians, a and b resampled independently, when both have
    at least 5 samples; otherwise (method "min–max", or "single" when both have one sample) it runs from min(b)/max(a)
    to max(b)/min(a), which holds 1.0 exactly when the two min–max ranges overlap. The verdict is "within noise" when
    the interval holds 1.0; otherwise b is "slower" when the interval lies above 1.0 and lower is better (times),
    "faster" when it lies below, and the other way round when higher is better (throughput, accuracy). Two single
    samples get a verdict from their difference alone (method "single" says so). Samples must be positive.
    """
    a, b = _samples(a, "samples of a"), _samples(b, "samples of b")
    if np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("ratios need positive samples, got a={} b={}".format(a.tolist(), b.tolist()))
    ratio = float(np.median(b) / np.median(a))
    if min(a.size, b.size) >= BOOTSTRAP_MIN_N:
        rng = np.random.default_rng(SEED)
        ratios = _bootstrap_medians(b, rng) / _bootstrap_medians(a, rng)
        low, high = _percentiles(ratios)
        low, high, method = min(low, ratio), max(high, ratio), "bootstrap"
    else:
        low, high = float(b.min() / a.max()), float(b.max() / a.min())
        method = "single" if a.size == b.size == 1 else "min–max"
    if widened < 0:
        raise ValueError("widened must be 0 or more, got {}".format(widened))
    low, high = low / (1.0 + widened), high * (1.0 + widened)
    if low <= 1.0 <= high:
        verdict = "within noise"
    else:
        verdict = "slower" if (low > 1.0) == lower_is_better else "faster"
    return Comparison(ratio, low, high, verdict, method, int(a.size), int(b.size), float(widened))


@dataclasses.dataclass(frozen=True)
class BestRows:
    """The best row by median, the rows within noise of it (the best among them, in the given order), and each row's
    comparison with the best (ratio = row / best; the best's own is 1.0 exactly, method "best")."""

    best: str
    within_noise: tuple
    comparisons: dict


def indistinguishable_from_best(rows, lower_is_better=True):
    """The best of {row name: samples} by median (the first in order on a tie) and the rows compare() cannot tell from
    it."""
    if not rows:
        raise ValueError("no rows to compare")
    medians = {name: float(np.median(_samples(samples, "samples of {!r}".format(name)))) for name, samples in rows.items()}
    pick = min if lower_is_better else max
    best = pick(medians, key=medians.get)  # the first of equal medians, as min and max keep the first
    comparisons = {}
    for name, samples in rows.items():
        if name == best:
            comparisons[name] = Comparison(1.0, 1.0, 1.0, "within noise", "best", len(samples), len(samples))
        else:
            comparisons[name] = compare(rows[best], samples, lower_is_better)
    within_noise = tuple(name for name, c in comparisons.items() if c.verdict == "within noise")
    return BestRows(best, within_noise, comparisons)
