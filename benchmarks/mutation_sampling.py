"""A mutation score from a random draw of mutants, with its spread (benchmarks/mutation.py --sample).

Testing every mutant of registry/ takes hours of CPU; a uniform random draw of a few hundred per
package estimates each package's score within a few points, and registry/'s as their weighted sum
(a stratified sample: each package's weight is its share of the mutants). docs/mutation.md."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

Z = 1.96  # two-sided 95%
CAUGHT = ("killed", "timeout")
NOT_TESTED = ("unchecked", "skipped")


def stratum_of(name: str, strata: list[str], rest: str) -> str:
    """The package of STRATA a mutant name (registry.validate.problems.x_f__mutmut_1) is in, else REST."""
    for stratum in strata:
        prefix = stratum.removesuffix(".py").replace("/", ".") + "."
        if name.startswith(prefix):
            return stratum
    return rest


def grouped(names, strata: list[str], rest: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {s: [] for s in [*strata, rest]}
    for name in sorted(names):
        groups[stratum_of(name, strata, rest)].append(name)
    return groups


def draw(names, strata: list[str], n: int, seed: int, equivalent=frozenset(), rest: str = "rest") -> list[str]:
    """N mutants at random from each stratum and from the rest (all of a smaller one), equivalent ones
    left out; the same draw for the same names, strata, N and seed."""
    chosen = []
    for stratum, members in grouped(set(names) - set(equivalent), strata, rest).items():
        chosen += random.Random(f"{seed}:{stratum}").sample(members, min(n, len(members)))
    return sorted(chosen)


def wilson(caught: int, tested: int) -> tuple[float, float]:
    """95% interval of a proportion from a sample (Wilson's: sound near 0 and 1, and for small samples)."""
    if not tested:
        return 0.0, 100.0
    p = caught / tested
    middle = (p + Z * Z / (2 * tested)) / (1 + Z * Z / tested)
    half = Z * math.sqrt(p * (1 - p) / tested + Z * Z / (4 * tested * tested)) / (1 + Z * Z / tested)
    return round(100 * (middle - half), 1), round(100 * (middle + half), 1)


def estimate(names, verdicts: dict[str, str], strata: list[str], equivalent, whole: str = "registry") -> dict:
    """Each stratum's score over its tested mutants, and WHOLE's as the strata's weighted sum."""
    rest = f"{whole} (the rest)"
    population = {s: len(m) for s, m in grouped(set(names) - set(equivalent), strata, rest).items()}
    verdicts = {n: v for n, v in verdicts.items() if n not in set(equivalent)}  # drawn before it was listed
    tested = grouped([n for n, v in verdicts.items() if v not in NOT_TESTED], strata, rest)
    # drawn but not reached before a time limit: mutmut tests the mutants with the fastest tests
    # first, so these lean towards survivors; `floor` counts every one of them as one
    unreached = grouped([n for n, v in verdicts.items() if v == "unchecked"], strata, rest)
    figures, total, mean, variance = {}, sum(population.values()), 0.0, 0.0
    for stratum, members in tested.items():
        caught = sum(verdicts[n] in CAUGHT for n in members)
        low, high = wilson(caught, len(members))
        figures[stratum] = {
            "mutants": population[stratum],
            "tested": len(members),
            "caught": caught,
            "score": round(100 * caught / len(members), 1) if members else None,
            "low": low,
            "high": high,
            "unreached": len(unreached[stratum]),
            "floor": round(100 * caught / (len(members) + len(unreached[stratum])), 1) if members else None,
        }
        if members and population[stratum]:
            share = population[stratum] / total
            mean += share * caught / len(members)
            # each stratum's spread from its Wilson interval (not zero at a score of 0 or 100%); the
            # draw is without replacement, so a stratum tested whole has none
            spread = (high - low) / 100 / (2 * Z)
            variance += share**2 * spread**2 * max(0.0, 1 - len(members) / population[stratum])
    half = Z * math.sqrt(variance)
    figures = {s: f for s, f in figures.items() if f["mutants"]}
    if whole in figures and len(figures) == 1:  # one package, measured alone: it is the whole
        return figures
    # a stratum with no mutant tested says nothing: the whole is then only bounded, by that
    # stratum's share caught in full (high) or not at all (low)
    blind = sum(f["mutants"] for f in figures.values() if not f["tested"]) / total if total else 0.0
    figures[whole if whole not in figures else f"{whole} (all)"] = {
        "mutants": total,
        "tested": sum(f["tested"] for f in figures.values()),
        "caught": sum(f["caught"] for f in figures.values()),
        "score": None if blind else round(100 * mean, 1),
        # the normal approximation of the weighted sum can pass a bound no score passes
        "low": round(max(0.0, 100 * (mean - half)), 1),
        "high": round(min(100.0, 100 * (mean + blind + half)), 1),
        "unreached": sum(f["unreached"] for f in figures.values()),
    }
    return figures


def drawn_of(path: Path) -> list[str]:
    """The mutants an earlier sampled run drew (its results file), tested or not."""
    return sorted(json.loads(Path(path).read_text(encoding="utf-8")).get("verdicts", {}))


def verdicts_of(path: Path) -> dict[str, str]:
    """The verdicts an earlier sampled run found (its results file), the untested ones left out."""
    found = json.loads(Path(path).read_text(encoding="utf-8")).get("verdicts", {})
    return {n: v for n, v in found.items() if v not in NOT_TESTED}


def joined(
    drawn: list[str], names, strata: list[str], runs: dict[str, Path], earlier: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """DRAWN with each package of RUNS (package -> its sampled run's results file) drawn as that run
    drew it, and the verdicts: EARLIER's outside those packages, each run's own inside them (a whole
    from packages measured apart, each with its own tests). A name a run drew that is gone from
    NAMES (its code changed since) is left out."""
    present = set(names)
    chosen = {n for n in drawn if stratum_of(n, strata, "") not in runs}
    verdicts = {n: v for n, v in (earlier or {}).items() if stratum_of(n, strata, "") not in runs}
    for path in runs.values():
        chosen |= {n for n in drawn_of(path) if n in present}
        verdicts |= {n: v for n, v in verdicts_of(path).items() if n in present}
    return sorted(chosen), verdicts
