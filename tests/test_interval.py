"""The median and its distribution-free interval (registry/run/interval.py): known samples give
known bounds and coverages; launches pooled; bench's repeats combined."""

import pytest

from registry.run import interval
from registry.run.bench import Outcome, repeated


def test_coverage_is_binomial():
    assert interval.coverage(3, 1) == 0.75  # [min, max] of 3: misses when all 3 lie on one side
    assert interval.coverage(6, 1) == 1 - 2 / 64
    assert abs(interval.coverage(20, 6) - (1 - 2 * 21700 / 2**20)) < 1e-12  # P(Bin(20, 1/2) <= 5) = 21700 / 2^20


@pytest.mark.parametrize(
    ("n", "bounds", "cover"),
    [
        (20, (6, 15), 0.9586),  # x_(6), x_(15): the narrowest that reaches 95%
        (12, (3, 10), 0.9614),
        (8, (1, 8), 0.9922),  # x_(2), x_(7) would be 93%: [min, max]
        (6, (1, 6), 0.9688),  # the fewest steps for 95%
        (5, (1, 5), 0.9375),  # too few: [min, max] with what it covers
        (3, (1, 3), 0.75),
        (1, (1, 1), 0.0),
    ],
)
def test_order_statistic_interval(n, bounds, cover):
    values = [float(v) for v in range(n, 0, -1)]  # order does not matter
    lower, upper, got = interval.median_interval(values)
    assert (lower, upper) == (float(bounds[0]), float(bounds[1])) and abs(got - cover) < 1e-4


def test_median():
    assert interval.median([3.0, 1.0, 2.0]) == 2.0 and interval.median([4.0, 1.0, 2.0, 3.0]) == 2.5
    with pytest.raises(ValueError):
        interval.median([])


def test_figure_of_one_launch_and_its_text():
    rates = [190.0, 195.0, 196.0, 197.0, 198.0, 200.0, 203.0, 188.0]
    f = interval.figure([rates])
    assert (f.median, f.lower, f.upper, f.confidence, f.launches, f.steps) == (196.5, 188.0, 203.0, 0.95, 1, 8)
    assert f.text() == "196.5 samples/s [188.0, 203.0] (95% CI, 1 launch x 8 steps)"
    short = interval.figure([[10.0, 11.0, 12.0]])
    assert short.confidence == 0.75 and not short.sure and short.text().endswith("(75% CI, 1 launch x 3 steps)")


def test_launches_widen_the_interval_to_each_launchs_median():
    """Steps of two launches pooled: the order-statistic interval of 12 steps is [x_(3), x_(10)],
    but the second launch's median (120) lies above it, so the interval reaches it."""
    first, second = [100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0], [119.0, 120.0, 121.0]
    f = interval.figure([first, second])
    assert (f.lower, f.upper) == (102.0, 120.0) and f.launches == 2 and f.steps == 12
    assert f.text().endswith("(95% CI, 2 launches, 12 steps)")


def test_overlap_and_json_round_trip():
    a, b = interval.figure([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]), interval.figure([[6.0, 7.0, 8.0, 9.0, 10.0, 11.0]])
    c = interval.figure([[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]])
    assert a.overlaps(b) and b.overlaps(a) and not a.overlaps(c)
    back = interval.from_json(b.median, b.json())
    assert back == b and interval.from_json(5.0, None) == interval.exact(5.0)


def _outcome(rates, reserved):
    shares = {"data": 0.1, "other": 0.9}
    return Outcome("x", samples_per_s=interval.median(rates), peak_reserved_gib=reserved, shares=shares, rates=[rates])


def test_bench_repeats_pool_their_launches():
    one, two = _outcome([10.0, 11.0, 12.0], 1.0), _outcome([20.0, 21.0, 22.0], 2.0)
    both = repeated([one, two])
    assert both.rates == [[10.0, 11.0, 12.0], [20.0, 21.0, 22.0]] and both.peak_reserved_gib == 2.0
    assert both.samples_per_s == 16.0 and (both.figure.lower, both.figure.upper) == (10.0, 22.0)
    failed = Outcome("x", skipped="failed with exit code 1")
    assert repeated([one, failed]) is failed and repeated([one]) is one


def test_recorded_bounds_hold_the_median_they_round():
    """A median equal to a bound (an order statistic) stays inside the interval as recorded."""
    fig = interval.Figure(93.19894666515023, 93.19894666515023, 95.0004, 0.95, 1, 8)
    recorded = fig.json()
    assert recorded["lower"] <= fig.median <= recorded["upper"]
    assert (recorded["lower"], recorded["upper"]) == (93.198, 95.001)
