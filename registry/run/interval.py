"""A throughput figure and its uncertainty: the median of per-step rates with a distribution-free
confidence interval for that median, from order statistics. Pure Python, no torch.

For n exchangeable samples, the number below the true median is Binomial(n, 1/2), so the interval
[x_(j), x_(n+1-j)] of the sorted samples covers the median with probability at least
1 - 2 P(Bin(n, 1/2) <= j - 1), whatever the distribution. The largest j that still reaches
CONFIDENCE is used (the narrowest such interval); below 6 samples no interval reaches 95% and
[min, max] is given with the coverage it has (75% for 3 samples), which is said wherever the
figure is printed.

Steps of one launch share its placement, clocks and communicators; launches of the same loop
on one host have differed by up to 20%. A figure pooled from several launches is therefore never
narrower than the spread of its launches' own medians (benchmarks/README.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import comb

CONFIDENCE = 0.95
METHOD = "median of per-step rates; distribution-free order-statistic interval, widened to every launch's median"


def median(values: list[float]) -> float:
    x = sorted(values)
    n = len(x)
    if not n:
        raise ValueError("median of no values")
    return x[n // 2] if n % 2 else (x[n // 2 - 1] + x[n // 2]) / 2


def coverage(n: int, j: int) -> float:
    """P(x_(j) <= median <= x_(n+1-j)) for n samples: 1 - 2 P(Bin(n, 1/2) <= j - 1)."""
    return 1.0 - 2.0 * sum(comb(n, i) for i in range(j)) / 2**n


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(lower, upper, coverage): the narrowest order-statistic interval for the median that
    reaches `confidence`, or [min, max] with its lower coverage when too few samples."""
    x = sorted(values)
    n = len(x)
    if not n:
        raise ValueError("an interval of no values")
    j = 1
    while j + 1 <= (n + 1) // 2 and coverage(n, j + 1) >= confidence:
        j += 1
    return x[j - 1], x[n - j], coverage(n, j)


@dataclass(frozen=True)
class Figure:
    median: float
    lower: float
    upper: float
    confidence: float  # CONFIDENCE where the steps allow it; below 6 steps the lower coverage [min, max] has
    launches: int
    steps: int  # measured steps, every launch's together

    def overlaps(self, other: Figure) -> bool:
        return self.lower <= other.upper and other.lower <= self.upper

    @property
    def sure(self) -> bool:
        """Its interval reaches CONFIDENCE (6 or more steps, or an exact figure)."""
        return self.confidence >= CONFIDENCE - 1e-12

    def counts(self) -> str:
        if self.launches == 0:
            return "exact"
        if self.launches == 1:
            return f"1 launch x {self.steps} step{'s' if self.steps != 1 else ''}"
        return f"{self.launches} launches, {self.steps} steps"  # launches of a tune may differ in length

    def text(self, unit: str = "samples/s") -> str:
        """`196.6 samples/s [188.2, 203.0] (95% CI, 3 launches, 24 steps)`."""
        return f"{self.median:.1f} {unit} {self.bounds()} ({self.confidence:.0%} CI, {self.counts()})"

    def bounds(self) -> str:
        return f"[{self.lower:.1f}, {self.upper:.1f}]"

    def json(self) -> dict:
        # rounded outwards, so that a median equal to a bound stays inside its interval
        return {
            "lower": math.floor(self.lower * 1000) / 1000,
            "upper": math.ceil(self.upper * 1000) / 1000,
            "confidence": round(self.confidence, 4),
            "launches": self.launches,
            "steps": self.steps,
        }


def figure(launches: list[list[float]], confidence: float = CONFIDENCE) -> Figure:
    """The median of every launch's per-step rates pooled, with its interval; from several launches
    the interval is widened to hold each launch's own median."""
    pooled = [r for rates in launches for r in rates]
    lower, upper, cover = median_interval(pooled, confidence)
    if len(launches) > 1:
        medians = [median(rates) for rates in launches if rates]
        lower, upper = min(lower, *medians), max(upper, *medians)
    level = confidence if cover >= confidence else cover  # claims the level asked for, not the discrete excess
    return Figure(median(pooled), lower, upper, level, len(launches), len(pooled))


def exact(value: float) -> Figure:
    """A figure known without noise (a replayed rate in the tests): a point interval."""
    return Figure(value, value, value, 1.0, 0, 0)


def from_json(value: float, recorded: dict | None) -> Figure:
    """A recorded figure: with its interval where one was recorded, else a point (older files)."""
    if not recorded:
        return exact(value)
    keys = ("lower", "upper", "confidence", "launches", "steps")
    return Figure(value, *(recorded[k] for k in keys))
