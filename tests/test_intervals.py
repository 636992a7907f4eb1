import math

import numpy as np
import pytest

from runner.report import intervals


def noisy(rng, n, centre=10.0, noise=0.02):
    """n samples around centre with relative normal noise."""
    return list(centre * (1.0 + noise * rng.standard_normal(n)))


# ---------------------------------------------------------------------------------------------------------------------
# summary

def test_a_single_sample_has_no_interval():
    s = intervals.summary([12.34])
    assert (s.median, s.low, s.high, s.n, s.method) == (12.34, 12.34, 12.34, 1, "single")
    assert s.cell("s") == "12.3 s n=1"


@pytest.mark.parametrize("samples", [[3.0, 1.0], [2.0, 1.0, 4.0], [4.0, 1.0, 2.5, 3.0]])
def test_fewer_than_five_samples_give_their_min_max_range(samples):
    s = intervals.summary(samples)
    assert (s.low, s.high, s.n, s.method) == (min(samples), max(samples), len(samples), "min–max")
    assert s.median == float(np.median(samples))


def test_the_cell_names_unit_interval_count_and_method():
    assert intervals.summary([12.3, 11.94, 12.8]).cell("s", digits=1) == "12.3 s [11.9–12.8] n=3 (min–max)"
    assert intervals.summary([0.5, 0.25]).cell(digits=2) == "0.38 [0.25–0.50] n=2 (min–max)"


def test_five_samples_or_more_give_a_bootstrap_interval_that_holds_the_median():
    rng = np.random.default_rng(1)
    for n in (5, 6, 10, 30):
        for _ in range(20):
            samples = noisy(rng, n)
            s = intervals.summary(samples)
            assert s.method == "bootstrap" and s.n == n
            assert min(samples) <= s.low <= s.median <= s.high <= max(samples)
            assert s.median == float(np.median(samples))


def test_the_bootstrap_interval_is_reproducible_and_narrows_with_more_samples():
    rng = np.random.default_rng(2)
    few, many = noisy(rng, 6), noisy(rng, 200)
    assert intervals.summary(few) == intervals.summary(few)
    s_few, s_many = intervals.summary(few), intervals.summary(many)
    assert s_many.high - s_many.low < s_few.high - s_few.low
    assert s_many.low < 10.0 < s_many.high


def test_equal_samples_give_an_interval_of_no_width():
    s = intervals.summary([2.0] * 7)
    assert (s.median, s.low, s.high) == (2.0, 2.0, 2.0)


# ---------------------------------------------------------------------------------------------------------------------
# compare

QUICK_COUNTS = [5 + trial % 6 for trial in range(300)]  # 5 to 10 samples a side, as a quick profile's rounds give


def test_identical_distributions_are_within_noise_in_95_percent_of_trials():
    # 300 trials rather than 100: the rule's measured rate is 96-97.5%, close enough to 95% that 100 trials would pass
    # or fail by the seed's luck
    rng = np.random.default_rng(0)
    verdicts = [intervals.compare(noisy(rng, n), noisy(rng, n)).verdict for n in QUICK_COUNTS]
    assert verdicts.count("within noise") >= 0.95 * len(verdicts), verdicts.count("within noise")


def test_a_ten_percent_shift_in_two_percent_noise_is_found_in_95_of_100_trials():
    rng = np.random.default_rng(1)
    slower = [intervals.compare(noisy(rng, n), noisy(rng, n, centre=11.0)).verdict for n in QUICK_COUNTS[:100]]
    faster = [intervals.compare(noisy(rng, n), noisy(rng, n, centre=9.0)).verdict for n in QUICK_COUNTS[:100]]
    assert slower.count("slower") >= 95, slower
    assert faster.count("faster") >= 95, faster


def test_the_ratio_is_b_over_a_and_its_interval_holds_it():
    rng = np.random.default_rng(3)
    a, b = noisy(rng, 8), noisy(rng, 8, centre=12.0)
    c = intervals.compare(a, b)
    assert c.ratio == pytest.approx(np.median(b) / np.median(a))
    assert c.low <= c.ratio <= c.high and c.low > 1.0
    assert (c.method, c.n_a, c.n_b, c.verdict) == ("bootstrap", 8, 8, "slower")
    assert c.cell() == "{:.2f}× [{:.2f}–{:.2f}] slower".format(c.ratio, c.low, c.high)
    assert intervals.compare(a, b) == c  # seeded: the same samples give the same interval


def test_higher_is_better_flips_the_verdict():
    rng = np.random.default_rng(4)
    a, b = noisy(rng, 6, centre=100.0), noisy(rng, 6, centre=120.0)
    assert intervals.compare(a, b, lower_is_better=True).verdict == "slower"
    assert intervals.compare(a, b, lower_is_better=False).verdict == "faster"
    assert intervals.compare(b, a, lower_is_better=False).verdict == "slower"
    same = intervals.compare(a, a, lower_is_better=False)
    assert same.verdict == "within noise" and same.ratio == 1.0


def test_fewer_than_five_samples_compare_by_overlapping_min_max_ranges():
    overlapping = intervals.compare([1.0, 2.0, 3.0], [2.5, 4.0, 5.0])
    assert (overlapping.verdict, overlapping.method) == ("within noise", "min–max")
    assert (overlapping.low, overlapping.high) == (2.5 / 3.0, 5.0 / 1.0)
    apart = intervals.compare([1.0, 2.0, 3.0], [3.5, 4.0, 5.0])
    assert (apart.verdict, apart.low) == ("slower", 3.5 / 3.0)
    assert intervals.compare([3.5, 4.0, 5.0], [1.0, 2.0, 3.0]).verdict == "faster"
    # one side with enough samples is not enough: the small side's range decides
    assert intervals.compare([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [5.5, 9.0]).verdict == "within noise"
    assert intervals.compare([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [6.5, 9.0]).verdict == "slower"


def test_single_samples_compare_by_their_difference_alone():
    c = intervals.compare([2.0], [3.0])
    assert (c.ratio, c.low, c.high, c.verdict, c.method) == (1.5, 1.5, 1.5, "slower", "single")
    assert intervals.compare([2.0], [2.0]).verdict == "within noise"
    # one sample against several: within noise when it lies in their range
    assert intervals.compare([2.0], [1.5, 2.5, 3.0]).verdict == "within noise"
    assert intervals.compare([2.0], [1.5, 2.5, 3.0]).method == "min–max"


# ---------------------------------------------------------------------------------------------------------------------
# indistinguishable_from_best

def test_the_best_row_and_the_rows_within_noise_of_it():
    rng = np.random.default_rng(5)
    best = [10.0, 10.1, 9.9, 10.2, 9.8, 10.05, 9.95]
    rows = {"slow": noisy(rng, 7, centre=13.0), "best": best, "close": [s * 1.005 for s in best[::-1]],
            "fast-ish": noisy(rng, 7, centre=11.5)}
    result = intervals.indistinguishable_from_best(rows)
    assert result.best == "best"
    assert result.within_noise == ("best", "close")
    assert set(result.comparisons) == set(rows)
    assert result.comparisons["best"].ratio == 1.0 and result.comparisons["best"].method == "best"
    assert result.comparisons["slow"] == intervals.compare(rows["best"], rows["slow"])
    assert result.comparisons["slow"].verdict == "slower" and result.comparisons["slow"].low > 1.0


def test_higher_is_better_picks_the_highest_median():
    rows = {"a": [100.0, 101.0, 99.0], "b": [150.0, 149.0, 152.0], "c": [148.0, 149.5, 153.0]}
    result = intervals.indistinguishable_from_best(rows, lower_is_better=False)
    assert result.best == "b" and result.within_noise == ("b", "c")
    assert result.comparisons["a"].verdict == "slower"


def test_equal_medians_pick_the_first_row():
    assert intervals.indistinguishable_from_best({"x": [2.0], "y": [1.0], "z": [1.0]}).best == "y"


# ---------------------------------------------------------------------------------------------------------------------
# bad input

@pytest.mark.parametrize("call", [
    lambda: intervals.summary([]),
    lambda: intervals.summary([1.0, math.nan]),
    lambda: intervals.summary([1.0, math.inf]),
    lambda: intervals.summary([[1.0, 2.0]]),
    lambda: intervals.summary(["fast"]),
    lambda: intervals.compare([], [1.0]),
    lambda: intervals.compare([1.0], [math.nan]),
    lambda: intervals.compare([0.0, 1.0], [1.0]),
    lambda: intervals.indistinguishable_from_best({}),
    lambda: intervals.indistinguishable_from_best({"a": [1.0], "b": []}),
])
def test_bad_input_raises_value_error_with_a_one_line_message(call):
    with pytest.raises(ValueError) as raised:
        call()
    assert str(raised.value) and "\n" not in str(raised.value)


def test_a_widened_comparison_widens_its_interval_at_both_ends_and_reads_its_verdict_off_it():
    a, b = [4.0, 4.01, 3.99, 4.02, 3.98], [4.4, 4.41, 4.39, 4.42, 4.38]
    tight = intervals.compare(a, b)
    wide = intervals.compare(a, b, widened=0.16)
    assert (tight.verdict, tight.widened) == ("slower", 0.0)
    assert (wide.ratio, wide.verdict, wide.widened) == (tight.ratio, "within noise", 0.16)
    assert wide.low == pytest.approx(tight.low / 1.16) and wide.high == pytest.approx(tight.high * 1.16)
    assert intervals.compare(a, [5.2 * x / 4.0 for x in a], widened=0.16).verdict == "slower"
    with pytest.raises(ValueError, match="widened must be 0 or more"):
        intervals.compare(a, b, widened=-0.1)
