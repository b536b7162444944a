"""Choices made by a sort, max or min with a key: the item chosen (or the whole order), pinned on
inputs listed in an order other than the answer, with ties where the code breaks them. The keys
are tested elsewhere apart from the sort; here a reversed sort, a dropped tie-break or min for max
changes what the user is told or what is run."""

from __future__ import annotations

import dataclasses
import re

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match as reference_best_match

from registry.doc import BASE_LAYER, PART_LAYER, RECIPE_LAYER, USER_LAYER, Origins
from registry.run import bench, plot
from registry.run.tune import MEASURED, NOT_RUN, OOM, PRUNED, Candidate, Point, Search, ties
from registry.run.tune import search as tune_search


# --- compose: the innermost of nested sources owns a layer (compose._standing) ------------------
def test_a_layer_in_nested_sources_stands_as_the_innermost_source_says(tmp_path):
    """A git source cloned inside a folder added as a path source: its policy part is a part, not
    the user's file; a path source inside a git clone holds the user's files. Outer listed first."""
    from registry.compose import _standing
    from registry.sharing.sources import Source

    outer, inner = tmp_path / "team", tmp_path / "team" / "vendored"
    part = inner / "policy" / "mine.yaml"
    part.parent.mkdir(parents=True)
    part.write_text("policy: {}\n")
    git_inside_path = (Source("team", outer, "path"), Source("vendored", inner, "git"))
    path_inside_git = (Source("team", outer, "git"), Source("vendored", inner, "path"))
    _standing.cache_clear()
    try:
        for known in (git_inside_path, git_inside_path[::-1]):
            assert _standing(part.resolve(), known) == PART_LAYER
        for known in (path_inside_git, path_inside_git[::-1]):
            assert _standing(part.resolve(), known) == USER_LAYER
        beside = outer / "policy" / "other.yaml"  # only the outer holds it: the git clone's part
        assert _standing(beside.resolve(), path_inside_git) == PART_LAYER
    finally:
        _standing.cache_clear()


# --- validate: where a problem over several values is reported (problems.locate) ---------------
def test_a_problem_over_several_layers_is_reported_at_the_outermost_user_file_first_of_equals():
    layers = {
        "recipes/base.yaml": (BASE_LAYER, 0),
        "recipes/policy/pi07.yaml": (PART_LAYER, 0),
        "recipes/pi07/zero2/8xA100.yaml": (RECIPE_LAYER, 0),
        "lib/common.yaml": (USER_LAYER, 1),
        "mine.yaml": (USER_LAYER, 3),
    }
    origins = Origins(
        {
            ("train", "steps"): "recipes/base.yaml:3:3",
            ("train", "lr"): "lib/common.yaml:2:3",
            ("policy", "chunk_size"): "recipes/policy/pi07.yaml:9:3",
            ("train", "micro_batch_size"): "mine.yaml:4:3",
            ("train", "gradient_accumulation_steps"): "mine.yaml:5:3",
            ("backend", "kind"): "recipes/pi07/zero2/8xA100.yaml:2:3",
        },
        lambda: layers,
    )
    from registry.validate.problems import locate

    related = tuple(
        (p, origins[tuple(p.split("."))])
        for p in (
            "train.lr",
            "policy.chunk_size",
            "train.micro_batch_size",
            "backend.kind",
            "train.gradient_accumulation_steps",
        )
    )
    best, said = locate(("train", "steps"), related, origins)
    assert best == "mine.yaml:4:3"  # the user's outermost file; its first of two equal places
    assert said == (("train.steps", "recipes/base.yaml:3:3"), *related)
    # without a user's file: the most specific layer, the tuned recipe over the part and the base
    parts = tuple(r for r in related if not r[1].startswith(("mine", "lib")))
    assert locate(("train", "steps"), parts, origins)[0] == "recipes/pi07/zero2/8xA100.yaml:2:3"


# --- validate: the order problems are listed in (validate/__init__.py) -------------------------
def test_problems_are_listed_errors_first_then_by_path_then_rule(monkeypatch):
    """pi07 on FSDP handed to lerobot: errors from the parts, the cell and the command line, and
    two warnings; the rule ids run in another order than the paths (lerobot-not-applicable at
    dataset.* before global-batch-size at train.*)."""
    monkeypatch.setenv("RECIPE_VERDICT_CACHE", "0")  # the order made now, not one kept on disk
    from registry.compose import compose
    from registry.validate import validate

    r = compose("pi07/fsdp/8xA100", ["train.global_batch_size=7", "trainer.kind=lerobot"])
    got = [(p.severity, p.path, p.rule) for p in validate(r.data, r.origins)]
    assert got == [
        ("error", "dataset.image_resample_strategy", "lerobot-not-applicable"),
        ("error", "dataset.resolution", "lerobot-not-applicable"),
        ("error", "dataset.vector_resample_strategy", "lerobot-not-applicable"),
        ("error", "policy.attention_implementation", "lerobot-not-applicable"),
        ("error", "policy.dtype", "lerobot-policy-dtype"),
        ("error", "policy.freeze_vision_encoder", "lerobot-policy-freeze"),
        ("error", "policy.gradient_checkpointing", "lerobot-policy-checkpointing"),
        ("error", "policy.history_interval", "lerobot-not-applicable"),
        ("error", "policy.resize_imgs_with_padding", "lerobot-policy-image-size"),
        ("error", "policy.train_expert_only", "lerobot-policy-freeze"),
        ("error", "policy.type", "lerobot-policy-type"),
        ("error", "train.global_batch_size", "global-batch-size"),
        ("warning", "train.checkpoint.resumable", "lerobot-fsdp-resume"),  # before train.global_* by path
        ("warning", "train.micro_batch_size", "memory-fit"),
    ]
    r = compose("pi07/fsdp/8xA100", ["trainer.lerobot.module=x", "train.global_batch_size=7"])
    got = [(p.severity, p.path, p.rule) for p in validate(r.data, r.origins)]
    assert got == [
        ("error", "train.global_batch_size", "global-batch-size"),
        ("error", "trainer.lerobot.module", "opentau-not-applicable"),
        ("warning", "train.micro_batch_size", "memory-fit"),  # before trainer.* by path, after by severity
    ]


# --- validate: the most relevant schema error (checker.best_match) -----------------------------
@pytest.mark.parametrize(
    "schema, instance, message",
    [
        (  # the shallower of two errors, although listed second
            {
                "type": "object",
                "properties": {
                    "a": {"type": "object", "properties": {"b": {"type": "integer"}}},
                    "c": {"type": "integer"},
                },
            },
            {"a": {"b": "x"}, "c": "y"},
            "'y' is not of type 'integer'",
        ),
        (  # siblings at one depth: the greatest path (jsonschema's max over paths), listed in the middle
            {
                "type": "object",
                "properties": {"m": {"type": "integer"}, "z": {"type": "integer"}, "q": {"type": "integer"}},
            },
            {"m": "1", "z": "2", "q": "3"},
            "'2' is not of type 'integer'",
        ),
        (  # at one path a weak anyOf loses to a plain keyword listed after it
            {"anyOf": [{"type": "string"}, {"minimum": 5}], "maximum": 1},
            3,
            "3 is greater than the maximum of 1",
        ),
        (  # inside an anyOf: the branch of the value's own type says what is wrong
            {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]},
            3,
            "3 is less than the minimum of 5",
        ),
    ],
)
def test_the_most_relevant_error_is_the_one_jsonschema_picks(schema, instance, message):
    from registry.validate import checker, standard

    ours = checker.best_match(list(checker.Checker(schema, {}, standard.STANDARD).iter_errors(instance)))
    theirs = reference_best_match(Draft202012Validator(schema).iter_errors(instance))
    assert ours.message == theirs.message == message


# --- tune: what the search runs and keeps (search.py) ------------------------------------------
def _points(backends: dict[str, tuple[int, ...]], ckpt: bool = False) -> list[Point]:
    return [Point(Candidate(b, m, 32 // m, ckpt)) for b, micros in backends.items() for m in micros]


class Table:
    """Measures from {(backend, micro): rate}; records the runs."""

    def __init__(self, rates: dict):
        self.rates, self.runs = rates, []

    def __call__(self, c: Candidate, warmup: int, steps: int) -> Point:
        self.runs.append((c.backend, c.micro_batch_size, steps))
        gib = 1.0 + c.micro_batch_size
        return Point(
            c,
            MEASURED,
            samples_per_s=self.rates[(c.backend, c.micro_batch_size)],
            peak_allocated_gib=gib,
            peak_reserved_gib=gib,
        )


def test_rung0_starts_each_line_at_its_largest_micro_batch_whatever_the_listing():
    """Candidates listed smallest first, lines slowest first: each line's head is its largest micro
    batch; the leader (ranked by rate, not listing) walks down, the others are not run again."""
    rates = {("zero3", m): 30.0 * m / 8 for m in (1, 2, 4, 8)}
    rates |= {("zero2", m): 60.0 * m / 8 for m in (1, 2, 4, 8)}
    rates |= {("ddp", m): 100.0 * m / 8 for m in (1, 2, 4, 8)}
    rates[("ddp", 4)] = 110.0  # one down is faster: walked to, then 2 is slower
    fake = Table(rates)
    search = Search(_points({"zero3": (1, 2, 4, 8), "zero2": (1, 2, 4, 8), "ddp": (1, 2, 4, 8)}), warmup=0, steps=1)
    best = search.run(fake)
    rung0 = [r for r in fake.runs if r[2] == 1]
    assert rung0 == [("zero3", 8, 1), ("zero2", 8, 1), ("ddp", 8, 1), ("ddp", 4, 1), ("ddp", 2, 1)]
    assert best.candidate == Candidate("ddp", 4, 8)
    reasons = {(p.candidate.backend, p.candidate.micro_batch_size): p.reason for p in search.points}
    assert reasons[("zero2", 4)] == "zero2 trailed the leaders at rung 0"
    assert reasons[("ddp", 1)] == "a larger micro batch was faster"


def test_a_later_rung_runs_its_survivors_fastest_first_and_keeps_the_best_third():
    """Six lines within CLOSE of each other, listed slowest first: rung 1 runs the best two
    (the fastest first), rung 2 the one left ends the halving."""
    heads = {"zero3": 91.0, "fsdp": 92.0, "fsdp2": 93.0, "zero1": 94.0, "zero2": 97.0, "ddp": 100.0}
    fake = Table({(b, 8): r for b, r in heads.items()})
    search = Search(_points({b: (8,) for b in heads}), warmup=0, steps=1)
    best = search.run(fake)
    assert [r[:2] for r in fake.runs if r[2] == 3] == [("ddp", 8), ("zero2", 8)]
    assert best.candidate.backend == "ddp" and search.rungs == [(0, 1), (0, 3)]
    rung1 = [p for p in search.points if p.rung == 1]
    assert [p.candidate.backend for p in tune_search.survivors(rung1[::-1], 1)] == ["ddp"]


def test_survivors_are_the_fastest_third_in_order_of_rate():
    rates = [91.0, 99.0, 93.0, 100.0, 95.0, 97.0, 60.0]
    pts = [Point(Candidate(f"b{i}", 8, 4), MEASURED, samples_per_s=r, rung=0) for i, r in enumerate(rates)]
    kept = tune_search.survivors(pts, 0)
    assert [p.samples_per_s for p in kept] == [100.0, 99.0, 97.0]  # ceil(7 / 3), within CLOSE of 100


def test_the_ranking_puts_the_pick_then_the_highest_rung_then_rate_then_each_failure_kind():
    def pt(name, status, rung=-1, rate=None):
        return Point(Candidate(name, 8, 4), status, samples_per_s=rate, rung=rung)

    listed = [
        pt("notrun", NOT_RUN),
        pt("pruned", PRUNED),
        pt("fast0", MEASURED, 0, 120.0),
        pt("failed", "failed"),
        pt("slow1", MEASURED, 1, 90.0),
        pt("oom", OOM),
        pt("fast1", MEASURED, 1, 95.0),
        pt("slow0", MEASURED, 0, 80.0),
    ]
    order = [p.candidate.backend for p in tune_search.ranking(listed)]
    assert order == ["fast1", "slow1", "fast0", "slow0", "oom", "failed", "pruned", "notrun"]
    assert tune_search.winner(listed).candidate.backend == "fast1"
    picked = listed[4]  # a tie broken towards the slower
    assert [p.candidate.backend for p in tune_search.ranking(listed, picked)][:3] == ["slow1", "fast1", "fast0"]


# --- tune: a tie within noise (ties.py) --------------------------------------------------------
def _measured(backend, micro, reserved, rate=100.0, ckpt=False, launches=()):
    return Point(
        Candidate(backend, micro, 64 // micro, ckpt),
        MEASURED,
        samples_per_s=rate,
        peak_reserved_gib=reserved,
        launches=[list(x) for x in launches],
    )


def test_rivals_are_listed_fastest_first():
    best = _measured("ddp", 8, 10.0, 100.0, launches=[(98.0, 100.0, 102.0)])
    listed = [
        _measured("zero3", 8, 10.0, 93.0, launches=[(91.0, 93.0, 95.0)]),
        _measured("zero1", 8, 10.0, 99.0, launches=[(97.0, 99.0, 101.0)]),
        _measured("far", 8, 10.0, 50.0, launches=[(49.0, 50.0, 51.0)] * 2),
        _measured("zero2", 8, 10.0, 96.0, launches=[(94.0, 96.0, 98.0)]),
    ]
    close = ties.rivals([best, *listed], best, tune_search.CLOSE)
    assert [p.candidate.backend for p in close] == ["zero1", "zero2", "zero3"]
    tie = ties.Tie([best, *close], best, "the higher median", 0)
    assert tie.text().startswith("tie: ddp mb8x8, zero1 mb8x8, zero2 mb8x8 and zero3 mb8x8 within noise")


def test_a_tie_among_several_keeps_the_memory_band_then_the_simplest_then_the_faster():
    """Four within noise: zero3 reserved least; zero2 within 5% of it; ddp (simplest) 10% over
    it, so out. Among zero3 and zero2 the simpler wins, listed after the rest."""
    zero3, ddp, zero2 = _measured("zero3", 16, 20.0), _measured("ddp", 16, 22.0), _measured("zero2", 16, 20.8)
    over = _measured("zero1", 16, 30.0)
    assert ties.break_tie([zero3, ddp, over, zero2]) == (zero2, "simplicity")
    # equal on everything but the median: the highest of three, listed in the middle
    a, b, c = (_measured("zero2", 16, 20.0, rate) for rate in (99.0, 101.0, 100.0))
    assert ties.break_tie([a, b, c]) == (b, "the higher median")
    # the larger micro batch of three at one backend and headroom, the largest listed first of none
    small, large, mid = (_measured("zero2", m, 20.0) for m in (4, 16, 8))
    assert ties.break_tie([small, mid, large]) == (large, "the larger micro batch")


def test_a_tie_at_one_median_keeps_the_first_listed():
    first, second = _measured("ddp", 16, 20.0, 100.0), _measured("ddp", 16, 20.0, 100.0)
    assert ties.break_tie([first, second])[0] is first  # the search lists the best first


# --- bench: which recipe of a matrix is the fastest (bench.within_noise) -----------------------
def test_the_fastest_of_a_matrix_is_named_and_those_within_noise_by_rate():
    outcomes = [
        bench.Outcome("slow", samples_per_s=50.0, rates=[[49.0, 50.0, 51.0] * 3]),
        bench.Outcome("mid", samples_per_s=98.0, rates=[[90.0, 98.0, 105.0]]),
        bench.Outcome("skipped", skipped="no GPU here"),
        bench.Outcome("fast", samples_per_s=100.0, rates=[[92.0, 100.0, 108.0]]),
        bench.Outcome("mid2", samples_per_s=99.0, rates=[[91.0, 99.0, 106.0]]),
    ]
    assert (
        bench.within_noise(outcomes) == "fastest: not resolved: fast and mid2, mid within noise (intervals overlap)\n"
    )
    clear = [outcomes[0], bench.Outcome("quick", samples_per_s=80.0, rates=[[79.0, 80.0, 81.0] * 3])]
    assert bench.within_noise(clear) == "fastest: quick (its interval is clear of every other)\n"


# --- plot: each line drawn in micro batch order, lines coloured in name order (plot.svg) -------
def test_each_line_runs_left_to_right_and_the_series_are_coloured_by_name():
    def pt(backend, micro, rate, ckpt=False):
        return Point(Candidate(backend, micro, 16 // micro, ckpt), MEASURED, samples_per_s=rate, peak_allocated_gib=2.0)

    pts = [pt("zero2", 4, 30.0), pt("zero2", 1, 10.0), pt("zero2", 2, 35.0), pt("ddp", 2, 25.0), pt("ddp", 1, 12.0)]
    pts.append(pt("ddp", 4, 40.0, ckpt=True))
    text = plot.svg(pts, 80.0, "x/y")
    legend = re.findall(
        r'<rect x="[\d.]+" y="[\d.]+" width="10" height="10" fill="([^"]+)"/>\n<text [^>]*>([^<]+)</text>', text
    )
    assert [name for _, name in legend] == ["ddp", "ddp +ckpt", "zero2"]
    assert [color for color, _ in legend] == list(plot.PALETTE[:3])
    lines = re.findall(r'<polyline points="([^"]+)" fill="none" stroke="([^"]+)"', text)
    rate_panel = {color: [tuple(map(float, xy.split(","))) for xy in path.split()] for path, color in lines[::2]}
    zero2 = rate_panel[plot.PALETTE[2]]
    assert [x for x, _ in zero2] == sorted(x for x, _ in zero2) and len(zero2) == 3
    ys = [y for _, y in zero2]  # 10, 35, 30 samples/s at 1, 2, 4: the highest drawn highest
    assert ys[1] < ys[2] < ys[0]
    assert zero2[0][0] == plot.MARGIN and zero2[-1][0] == plot.WIDTH - plot.MARGIN
    assert re.search(r'text-anchor="end">44</text>', text)  # the rate axis tops at the highest, 40 x 1.1


# --- compose: a GPU name the catalog lacks (catalog.suggestions) --------------------------------
def test_a_missing_gpu_name_suggests_its_models_nearest_memory_first():
    from registry.compose import catalog

    assert catalog.suggestions("H100-90GB")[:3] == ["H100-NVL", "H100-SXM", "H100-PCIe"]  # 94 GB, then the 80s
    assert catalog.suggestions("A100-79GB")[:2] == ["A100-80GB", "A100-40GB"]
    assert catalog.suggestions("A100-48GB")[:2] == ["A100-40GB", "A100-80GB"]


# --- preflight: the oldest of a host's drivers is the one judged (hostchecks.driver) -----------
def test_a_host_of_mixed_drivers_is_judged_by_its_oldest():
    from registry.compose import compose
    from registry.resolve import resolve
    from registry.run import preflight
    from registry.run.machine import GPU
    from registry.run.preflight import hostchecks
    from registry.run.preflight.host import HostFacts

    gib = 1024**3
    # 525.105.17 reads below 525.60.11 as text; CUDA 12 needs 525.60.13
    new, old, mid = (GPU("NVIDIA H100 80GB HBM3", 81559, d) for d in ("525.105.17", "525.60.11", "550.54.15"))
    trainer = {"python": "3.11.9", "packages": {"torch": "2.9.0", "accelerate": "1.11.0"}, "torch_cuda": "12.8"}
    trainer |= {"nccl": "2.27.3"}
    host = HostFacts(
        gpus=(new, old),
        python="/env/bin/python",
        trainer=trainer,
        shm_free=64 * gib,
        disk_path="/s",
        disk_free=10 * 1024 * gib,
    )

    def found(facts):
        recipe = compose("tiny/ddp/2xH100", [])
        run = hostchecks.Run(recipe.data, resolve(recipe), (), recipe.data["trainer"].get("env"))
        report = preflight.Report()
        preflight.check_host(recipe.data, recipe.origins, facts, run, report)
        return [p for p in report.problems if p.rule == "host-driver"]

    (problem,) = found(host)
    assert "the NVIDIA driver is 525.60.11 " in problem.message
    assert found(dataclasses.replace(host, gpus=(new, mid))) == []
