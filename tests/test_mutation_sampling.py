"""The arithmetic of a sampled mutation score (benchmarks/mutation_sampling.py): the draw is
reproducible and per package, a package's interval is Wilson's, registry/'s is the packages'
weighted sum (docs/mutation.md)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import mutation_sampling as sampling

NAMES = [f"registry.validate.m.x_f__mutmut_{i}" for i in range(300)] + [
    f"registry.run.m.x_g__mutmut_{i}" for i in range(100)
]


def test_the_draw_is_per_stratum_reproducible_and_leaves_equivalents_out():
    drawn = sampling.draw(NAMES, ["registry/validate"], 50, seed=1, equivalent={NAMES[0]})
    assert drawn == sampling.draw(list(reversed(NAMES)), ["registry/validate"], 50, seed=1, equivalent={NAMES[0]})
    assert drawn != sampling.draw(NAMES, ["registry/validate"], 50, seed=2)
    assert sum(n.startswith("registry.validate.") for n in drawn) == 50
    assert sum(n.startswith("registry.run.") for n in drawn) == 50 and NAMES[0] not in drawn
    # a stratum smaller than the draw is taken whole
    assert len(sampling.draw(NAMES, ["registry/validate"], 200, seed=1)) == 300


@pytest.mark.parametrize(
    "caught, tested, low, high",
    [(85, 100, 76.7, 90.7), (100, 100, 96.3, 100.0), (0, 10, 0.0, 27.8), (0, 0, 0.0, 100.0)],
)
def test_wilson_interval(caught, tested, low, high):
    assert sampling.wilson(caught, tested) == (low, high)


def test_the_whole_is_the_strata_weighted_by_their_mutants():
    verdicts = {n: "killed" for n in NAMES[:300:3]} | {n: "survived" for n in NAMES[1:300:3]}
    verdicts |= {n: "unchecked" for n in NAMES[2:300:3]}  # not tested: no part of any score
    verdicts |= {n: ("timeout" if i % 2 else "no_tests") for i, n in enumerate(NAMES[300:])}
    figures = sampling.estimate(NAMES, verdicts, ["registry/validate"], equivalent=())
    assert figures["registry/validate"] | {} == {
        "mutants": 300,
        "tested": 200,
        "caught": 100,
        "score": 50.0,
        **dict(zip(("low", "high"), sampling.wilson(100, 200))),
        "unreached": 100,  # drawn, not reached: counted as survivors, the floor is 100 of 300
        "floor": 33.3,
    }
    assert figures["registry (the rest)"]["score"] == 50.0 and figures["registry (the rest)"]["low"] == 40.4
    whole = figures["registry"]
    assert whole["score"] == 50.0 and whole["tested"] == 300 and whole["mutants"] == 400
    # the rest was tested whole: only validate's draw spreads the estimate, by its weight (3/4)
    half = (figures["registry/validate"]["high"] - figures["registry/validate"]["low"]) / 2
    assert whole["high"] - 50.0 == pytest.approx(0.75 * half * (1 - 200 / 300) ** 0.5, abs=0.1)


def test_a_mutant_listed_equivalent_after_the_draw_leaves_the_score():
    verdicts = {n: "killed" for n in NAMES[:10]} | {NAMES[10]: "survived"}
    figures = sampling.estimate(NAMES, verdicts, ["registry/validate"], equivalent={NAMES[10]})
    shown = figures["registry/validate"]
    assert (shown["mutants"], shown["tested"], shown["caught"], shown["score"]) == (299, 10, 10, 100.0)


def test_one_package_measured_alone_is_its_own_whole():
    verdicts = {n: "killed" for n in NAMES[:99]} | {NAMES[99]: "survived"}
    figures = sampling.estimate(NAMES[:300], verdicts, ["registry/validate"], (), whole="registry/validate")
    assert list(figures) == ["registry/validate"]
    assert (figures["registry/validate"]["low"], figures["registry/validate"]["high"]) == sampling.wilson(99, 100)


def test_the_weighted_whole_stays_within_0_and_100():
    verdicts = {n: "killed" for n in NAMES[:20]} | {n: "killed" for n in NAMES[300:302]}
    whole = sampling.estimate(NAMES, verdicts, ["registry/validate"], ())["registry"]
    assert whole["score"] == 100.0 and whole["high"] == 100.0 and 0.0 <= whole["low"] < 100.0


def test_packages_measured_apart_join_with_their_own_draws(tmp_path):
    import json

    run = tmp_path / "validate.json"
    own = {
        NAMES[0]: "killed",
        NAMES[1]: "survived",
        NAMES[2]: "unchecked",
        "registry.validate.gone__mutmut_1": "killed",
    }
    run.write_text(json.dumps({"module": "registry/validate", "verdicts": own}))
    drawn = sampling.draw(NAMES, ["registry/validate"], 5, seed=0)
    names, verdicts = sampling.joined(drawn, NAMES, ["registry/validate"], {"registry/validate": run})
    rest = [n for n in drawn if n.startswith("registry.run.")]
    assert names == sorted([*NAMES[:3], *rest])  # validate's own three, the rest as drawn here
    assert verdicts == {NAMES[0]: "killed", NAMES[1]: "survived"}  # untested and gone ones have none


def test_a_whole_with_a_package_not_tested_is_only_bounded():
    verdicts = {n: "killed" for n in NAMES[:30]}  # validate tested, the rest (a quarter) not at all
    whole = sampling.estimate(NAMES, verdicts, ["registry/validate"], ())["registry"]
    assert whole["score"] is None and whole["low"] < 75.0 and whole["high"] == 100.0


def test_a_verdict_tested_again_keeps_the_earlier_one_where_the_tests_did_not_reach():
    import mutation

    assert mutation._again("killed", "survived") == "killed"
    assert mutation._again("no_tests", "survived") == "survived"  # a recheck's narrower tests
    assert mutation._again("no_tests", None) == "no_tests"  # never tested: no tests reach it
    assert mutation._again("unchecked", "survived") == "survived" and mutation._again(None, None) == "unchecked"
