"""`recipe tune`: candidates, pruning by the rules and the memory estimate, successive halving and
out-of-memory handling with fake measurements; and one real search on this CPU host."""

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

from registry.run import tune
from registry.run.bench import summarize
from registry.run.tune import MEASURED, NOT_RUN, OOM, PRUNED, Candidate, Point, Search

ROOT = Path(__file__).resolve().parent.parent

GLOBAL = 8


# --- candidates and pruning ------------------------------------------------------------------


def test_micro_batches_keep_the_global_batch():
    assert tune.micro_batches(32, 2) == [16, 8, 4, 2, 1]
    assert tune.micro_batches(24, 2) == [4, 2, 1]  # 12 per rank: powers of two that divide it
    assert tune.micro_batches(7, 2) == []
    assert all(c.micro_batch_size * c.accumulation * 2 == 32 for c in tune.candidates(["ddp", "zero2"], 32, 2))


def test_cpu_candidates_are_not_pruned_by_memory():
    target = tune.parse_target("tiny/cpu")
    judged = tune.space(target, ["ddp", "zero2", "zero3"], GLOBAL, [])
    assert {(j.point.candidate.backend, j.point.candidate.micro_batch_size) for j in judged} == {
        (b, m) for b in ("ddp", "zero2", "zero3") for m in (4, 2, 1)
    }
    assert all(j.point.status == NOT_RUN and j.point.predicted_fraction is None for j in judged)
    assert not any(j.point.candidate.checkpointing for j in judged)  # nothing to win on CPU


def test_gpu_candidates_pruned_by_the_rules_and_the_estimate():
    target = tune.parse_target("pi07/8xA100")
    judged = {j.point.candidate: j.point for j in tune.space(target, ["ddp", "zero2", "zero3", "fsdp"], 256, [])}
    ddp = [p for c, p in judged.items() if c.backend == "ddp"]
    assert ddp and all(p.status == PRUNED and p.reason.startswith("predicted") for p in ddp)  # 146% of 80 GiB
    assert all(p.predicted_fraction > tune.LIMIT for p in ddp)
    zero3 = [p for c, p in judged.items() if c.backend == "zero3"]
    # ZeRO-3 composes with pi07's checkpointing off (the rule's fix): judged on memory, and no
    # checkpointing variant is added where the rule forbids it
    assert zero3 and not any(c.checkpointing for c, p in judged.items() if c.backend == "zero3")
    assert any(p.reason.startswith("predicted") for p in zero3) and not any("invalid" in p.reason for p in zero3)
    pruned = [p for p in judged.values() if p.status == PRUNED and p.reason.startswith("predicted")]
    # larger micro batches of a sharded backend are over the limit, smaller ones fit
    zero2 = sorted((p for c, p in judged.items() if c.backend == "zero2"), key=lambda p: p.candidate.micro_batch_size)
    assert zero2[-1] in pruned and all(p.predicted_fraction <= tune.LIMIT for p in zero2 if p not in pruned)
    # pi07 is an OpenTau policy: what fits is left to run through OpenTau's rehearsal
    left = [p for p in judged.values() if p.status == NOT_RUN]
    assert left and not any(p.reason for p in left)
    assert {p.candidate.backend for p in left} >= {"zero2", "fsdp"}


def test_checkpointing_is_added_only_where_memory_asks_and_the_rules_allow():
    target = tune.parse_target("pi07/8xA100")
    judged = [j.point for j in tune.space(target, ["zero2", "zero3"], 256, ["policy.gradient_checkpointing=false"])]
    with_ckpt = [p for p in judged if p.candidate.checkpointing]
    assert with_ckpt and all(
        p.candidate.backend == "zero2" for p in with_ckpt
    )  # never under ZeRO-3 (docs/failure-modes.md §9)
    plain = {(p.candidate.backend, p.candidate.micro_batch_size): p for p in judged if not p.candidate.checkpointing}
    twins = [(p, plain[(p.candidate.backend, p.candidate.micro_batch_size)]) for p in with_ckpt]
    assert all(twin.reason.startswith("predicted") for _, twin in twins)
    assert all(p.predicted_fraction < twin.predicted_fraction for p, twin in twins)
    assert any(p.predicted_fraction <= tune.LIMIT for p in with_ckpt)  # checkpointing makes it fit


def test_bad_targets_are_one_line(tmp_path):
    r = run_cli("tune", "tiny/nowhere", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_cli("tune", "tiny/cpu", "--backends", "ddp,nope", cwd=tmp_path)
    assert r.returncode == 2 and "unknown backend 'nope'" in r.stderr
    r = run_cli("tune", "tiny/cpu", "--global-batch", "7", "--backends", "ddp", cwd=tmp_path)
    assert r.returncode == 2 and "multiple of the world size" in r.stderr
    r = run_cli("tune", "tiny/cpu", "--record-to", "no/such/points.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and "--record-to no/such/points.jsonl: No such file or directory" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run_cli("tune", "tiny/cpu", "--record-to", ".", cwd=tmp_path)
    assert r.returncode == 2 and "Is a directory" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


# --- the search, with fake measurements -------------------------------------------------------


def points(rates: dict[tuple[str, int], float], fractions: dict | None = None) -> list[Point]:
    out = []
    for (backend, micro), _ in rates.items():
        p = Point(Candidate(backend, micro, 32 // micro))
        p.predicted_fraction = (fractions or {}).get((backend, micro))
        out.append(p)
    return out


@dataclass
class Fake:
    """Measures from a table: a rate, or 'oom'/'failed'; counts the runs."""

    rates: dict
    runs: list
    reserved: dict = field(default_factory=dict)  # GiB by (backend, micro); else micro_gib

    def __call__(self, c: Candidate, warmup: int, steps: int) -> Point:
        self.runs.append((c.backend, c.micro_batch_size, steps))
        got = self.rates[(c.backend, c.micro_batch_size)]
        if got == "oom":
            return Point(c, OOM, reason="torch.OutOfMemoryError: CUDA out of memory")
        if got == "failed":
            return Point(c, tune.FAILED, reason="boom")
        reserved = self.reserved.get((c.backend, c.micro_batch_size), micro_gib(c))
        return Point(c, MEASURED, samples_per_s=got, peak_allocated_gib=micro_gib(c), peak_reserved_gib=reserved)


def micro_gib(c: Candidate) -> float:
    return 1.0 + c.micro_batch_size


def test_successive_halving_keeps_the_leaders_and_picks_the_best():
    rates = {(b, m): r * m / (m + 1) for b, r in (("ddp", 100), ("zero2", 95), ("zero3", 60)) for m in (8, 4, 2, 1)}
    fake = Fake(rates, [])
    search = Search(points(rates), warmup=1, steps=2)
    best = search.run(fake)
    assert best.candidate == Candidate("ddp", 8, 4)
    rung0 = [r for r in fake.runs if r[2] == 2]
    # each backend at its largest micro batch, then the leader one below (slower: the walk stops)
    assert rung0 == [("ddp", 8, 2), ("zero2", 8, 2), ("zero3", 8, 2), ("ddp", 4, 2)]
    assert [r for r in fake.runs if r[2] == 6] == [("ddp", 8, 6), ("zero2", 8, 6)]  # the best 1/3, longer
    assert len(fake.runs) == 6 and search.rungs == [(1, 2), (1, 6)]
    reasons = {(p.candidate.backend, p.candidate.micro_batch_size): p.reason for p in search.points}
    assert reasons[("zero3", 4)] == "zero3 trailed the leaders at rung 0"
    assert reasons[("ddp", 2)] == "a larger micro batch was faster"
    assert tune.ranking(search.points)[0] is best and best.rung == 1


def test_candidates_far_behind_are_not_measured_again():
    """More than 1 - CLOSE behind the rung's best: no walk-down, no longer run (each launch costs
    its start-up); a clear winner at rung 0 ends the search there."""
    rates = {("ddp", 8): 100.0, ("ddp", 4): 80.0, ("zero2", 8): 85.0, ("zero2", 4): 80.0, ("zero3", 8): 50.0}
    rates[("zero3", 4)] = 40.0
    fake = Fake(rates, [])
    search = Search(points(rates), warmup=0, steps=1)
    best = search.run(fake)
    assert best.candidate == Candidate("ddp", 8, 4)
    assert fake.runs == [("ddp", 8, 1), ("zero2", 8, 1), ("zero3", 8, 1), ("ddp", 4, 1)]
    assert search.rungs == [(0, 1)]


def test_only_close_leaders_walk_down():
    """Of the leading third (2 of 4 lines), only those within CLOSE of the best walk down."""
    heads = {"ddp": 100.0, "zero2": 85.0, "zero3": 80.0, "fsdp": 50.0}
    rates = {(b, m): r * (1.0 if m == 8 else 0.5) for b, r in heads.items() for m in (8, 4)}
    fake = Fake(rates, [])
    Search(points(rates), warmup=0, steps=1).run(fake)
    rung0 = [r[:2] for r in fake.runs if r[2] == 1]
    assert rung0 == [("ddp", 8), ("zero2", 8), ("zero3", 8), ("fsdp", 8), ("ddp", 4)]  # not zero2 at 4
    close = {"ddp": 100.0, "zero2": 95.0, "zero3": 80.0, "fsdp": 50.0}
    fake = Fake({(b, m): r * (1.0 if m == 8 else 0.5) for b, r in close.items() for m in (8, 4)}, [])
    Search(points(fake.rates), warmup=0, steps=1).run(fake)
    assert [r[:2] for r in fake.runs if r[2] == 1][4:] == [("ddp", 4), ("zero2", 4)]


def test_a_tuned_file_keeps_its_own_backend(tmp_path):
    """A file is extended as written, so tuned.yaml can only hold a candidate of the file's own
    backend; the faster one of another backend is named, never written under the file's name."""
    rates = {("ddp", 8): 100.0, ("zero2", 8): 80.0, ("zero2", 4): 70.0}
    pts = points(rates)
    best = Search(pts, warmup=0, steps=1).run(Fake(rates, []))
    cell = tune.Target("tiny/cpu", "tiny", "cpu")
    assert tune.overlay_pick(cell, best, pts) == (best, None)
    file = tune.Target("my.yaml", "tiny", "cpu", "zero2", tmp_path / "my.yaml")
    kept, note = tune.overlay_pick(file, best, pts)
    assert kept.candidate == Candidate("zero2", 8, 4) and "fastest overall is ddp mb8x4" in note
    outside = tune.Target("free.yaml", "", "", None, tmp_path / "free.yaml")
    assert tune.overlay_pick(outside, best, pts)[0] is None


def test_only_leaders_near_the_gpus_memory_walk_down():
    """On a GPU a leader walks down only when its run reserved PRESSURE of the memory or more:
    below that a smaller micro batch only adds micro steps (ref-1b on 2 x H100: three walks from
    micro batch 32 to 16, all 6-9% slower, each a 25-39 s launch)."""
    heads = (("ddp", 100.0), ("zero2", 95.0), ("zero3", 50.0), ("fsdp", 40.0))  # leaders: ddp, zero2
    rates = {(b, m): r * m / 8 for b, r in heads for m in (8, 4)}
    rates[("zero2", 4)] = 99.0  # faster one down, but its head has room: never run
    fake, seen = Fake(rates, []), []
    search = Search(points(rates), warmup=0, steps=1, capacity_gib=80.0, logged=seen.append)  # heads: 9 GiB
    search.run(fake)
    assert [(e["point"].candidate.backend, e["steps"]) for e in seen] == [(r[0], r[2]) for r in fake.runs]
    assert fake.runs == [
        ("ddp", 8, 1),
        ("zero2", 8, 1),
        ("zero3", 8, 1),
        ("fsdp", 8, 1),
        ("ddp", 8, 3),
        ("zero2", 8, 3),
    ]
    by = {(p.candidate.backend, p.candidate.micro_batch_size): p for p in search.points}
    assert (
        by[("zero2", 4)].reason
        == "zero2 mb8x4 used 12% of the GPU's memory: a smaller micro batch only adds micro steps"
    )
    fake = Fake(rates, [])
    Search(points(rates), warmup=0, steps=1, capacity_gib=10.0).run(fake)  # 9.5 of 10 GiB: pressed
    assert [r[:2] for r in fake.runs if r[2] == 1][4:] == [("ddp", 4), ("zero2", 4)]


def test_ref_1b_on_2xh100_replayed():
    """The rung-0 rates and reserved memory `recipe tune ref-1b/2xH100 --global-batch 64` measured
    on 2 x H100 (benchmarks/results/tune_2xH100_ref-1b_partial/points.jsonl): every head used 42-64%
    of the GPU, so no leader walks down; three leaders run again, and fsdp2 at micro batch 32 wins
    in 11 runs. Without a capacity (as before the rule) the same rates take the real run's 17."""
    lines = (ROOT / "benchmarks/results/tune_2xH100_ref-1b_partial/points.jsonl").read_text().splitlines()
    rung0 = [x for x in map(json.loads, lines) if x["rung"] == 0]
    capacity = rung0[0]["capacity_gib"]
    rates = {(b, m): 1.0 for b in {x["backend"] for x in rung0} for m in (32, 16, 8, 4, 2, 1)}  # never run
    rates |= {(x["backend"], x["micro_batch_size"]): x["samples_per_s"] for x in rung0}
    reserved = {(x["backend"], x["micro_batch_size"]): x["measured_reserved_gib"] for x in rung0}
    fake = Fake(rates, [], reserved)
    search = Search(points(rates), warmup=2, steps=3, capacity_gib=capacity)
    best = search.run(fake)
    assert best.candidate.label == "fsdp2 mb32x1" and len(fake.runs) == 11
    assert [r[0] for r in fake.runs[8:]] == ["fsdp2", "zero1", "fsdp-grad-op"] and search.rungs == [(2, 3), (2, 9)]
    walked = Fake(rates, [], reserved)
    Search(points(rates), warmup=2, steps=3, capacity_gib=None).run(walked)
    assert [r[:2] for r in walked.runs[8:11]] == [("fsdp2", 16), ("zero1", 16), ("fsdp-grad-op", 16)]
    assert len(walked.runs) == 17


def test_the_walk_down_goes_on_while_it_gets_faster():
    rates = {("ddp", 8): 50.0, ("ddp", 4): 60.0, ("ddp", 2): 70.0, ("ddp", 1): 65.0}
    fake = Fake(rates, [])
    best = Search(points(rates), warmup=0, steps=1).run(fake)
    assert best.candidate.micro_batch_size == 2 and [r[1] for r in fake.runs][:4] == [8, 4, 2, 1]


def test_an_out_of_memory_run_is_pruned_and_never_repeated():
    rates = {("ddp", 8): "oom", ("ddp", 4): "oom", ("ddp", 2): 80.0, ("ddp", 1): 70.0, ("zero2", 8): "failed"}
    rates[("zero2", 4)] = 75.0
    fractions = {("ddp", 8): 0.9, ("ddp", 4): 0.93, ("ddp", 2): 0.5, ("ddp", 1): 0.4}
    fake = Fake(rates, [])
    search = Search(points(rates, fractions), warmup=0, steps=1, capacity_gib=80.0)
    best = search.run(fake)
    assert best.candidate == Candidate("ddp", 2, 16)
    # OOM at 8: 4 is predicted at 93%, +10% the estimator missed at 8: pruned without running
    by = {(p.candidate.backend, p.candidate.micro_batch_size): p for p in search.points}
    assert by[("ddp", 8)].status == OOM and by[("ddp", 4)].status == PRUNED
    assert "ran out of memory" in by[("ddp", 4)].reason
    assert sum(1 for r in fake.runs if rates[(r[0], r[1])] == "oom") == 1  # one OOM for the backend
    assert by[("zero2", 8)].status == tune.FAILED and by[("zero2", 4)].status == MEASURED  # a failure stops nothing


def test_prune_after_oom_drops_every_larger_micro_batch():
    pts = points({("zero2", m): 1.0 for m in (16, 8, 4)})
    tune.prune_after_oom(pts, Point(Candidate("zero2", 8, 4), OOM), None)
    assert [p.status for p in pts] == [PRUNED, PRUNED, NOT_RUN]  # 16 and 8 (the same one, not run again)


def test_the_budget_stops_launching_and_keeps_results():
    rates = {(b, 4): r for b, r in (("ddp", 10.0), ("zero2", 20.0), ("zero3", 30.0))}
    now = [0.0]

    def measure(c, warmup, steps):
        now[0] += 60
        return Fake(rates, [])(c, warmup, steps)

    search = Search(points(rates), warmup=0, steps=1, budget_s=90, clock=lambda: now[0])
    best = search.run(measure)
    assert best.candidate.backend == "zero2"  # 2 runs fit in the budget
    assert [p.reason for p in search.points if p.status == NOT_RUN] == ["budget spent"]


def test_an_interrupt_keeps_what_was_measured():
    rates = {("ddp", 4): 10.0, ("zero2", 4): 20.0}

    def measure(c, warmup, steps):
        if c.backend == "zero2":
            raise KeyboardInterrupt
        return Fake(rates, [])(c, warmup, steps)

    search = Search(points(rates), warmup=0, steps=1)
    assert search.run(measure).candidate.backend == "ddp" and search.interrupted


@dataclass
class Noisy:
    """Measures from per-step rates: each launch of a candidate gives its list's first `steps`
    rates (cycled), with a fixed reserved memory; counts the runs."""

    rates: dict  # (backend, micro) -> per-step samples/s
    reserved: dict
    runs: list = field(default_factory=list)

    def __call__(self, c: Candidate, warmup: int, steps: int) -> Point:
        self.runs.append((c.backend, c.micro_batch_size, steps))
        pool = self.rates[(c.backend, c.micro_batch_size)]
        rates = [pool[i % len(pool)] for i in range(steps)]
        reserved = self.reserved[(c.backend, c.micro_batch_size)]
        got = Point(c, MEASURED, peak_allocated_gib=reserved, peak_reserved_gib=reserved, launches=[rates])
        got.samples_per_s = got.figure.median
        return got


def test_leaders_within_noise_are_measured_again_until_they_separate():
    """3 steps give [min, max] at 75% only: zero2, 5% behind, is not separated from ddp. One more
    launch each (6 steps, 97%) separates them: no tie, and the runs are bounded."""
    rates = {("ddp", 8): [100.0, 101.0, 99.0], ("zero2", 8): [95.0, 96.0, 94.0]}
    fake = Noisy(rates, {("ddp", 8): 9.0, ("zero2", 8): 9.0})
    search = Search(points(rates), warmup=0, steps=3, tie_runs=4)
    best = search.run(fake)
    assert best.candidate.backend == "ddp" and search.tie is None and search.tie_runs_used == 2
    assert fake.runs == [("ddp", 8, 3), ("zero2", 8, 3), ("ddp", 8, 3), ("zero2", 8, 3)]
    assert best.figure.steps == 6 and best.figure.launches == 2 and best.figure.sure


def test_a_tie_is_said_and_broken_by_memory_headroom():
    """ref-1b on 2 x H100 (rung 1): fsdp2 191.5 and zero1 188.4 samples/s, within each other's
    noise. Overlapping intervals stay a tie after the allowed runs; fsdp2 reserved less."""
    rates = {("fsdp2", 32): [191.5, 180.0, 200.0, 186.0], ("zero1", 32): [188.4, 178.0, 198.0, 183.0]}
    fake = Noisy(rates, {("fsdp2", 32): 30.0, ("zero1", 32): 40.0})
    search = Search(points(rates), warmup=0, steps=4, tie_runs=3)
    pick = search.run(fake)
    assert len(fake.runs) == 2 + 3  # rung 0, then at most tie_runs launches
    assert pick.candidate.backend == "fsdp2" and search.tie.criterion == "memory headroom"
    assert (
        search.tie.text() == "tie: fsdp2 mb32x1 and zero1 mb32x1 within noise; picked fsdp2 mb32x1 by memory headroom"
    )
    assert tune.ranking(search.points, pick)[0] is pick
    assert search.tie.json()["extra_runs"] == 3


def test_a_tie_at_equal_memory_goes_to_the_simpler_backend():
    rates = {("fsdp2", 32): [191.0, 180.0, 200.0, 186.0, 190.0, 185.0], ("zero1", 32): [189.0, 178.0, 198.0]}
    fake = Noisy(rates, {("fsdp2", 32): 30.0, ("zero1", 32): 31.0})  # within 5%: the same headroom
    search = Search(points(rates), warmup=0, steps=6, tie_runs=0)
    pick = search.run(fake)
    assert pick.candidate.backend == "zero1" and search.tie.criterion == "simplicity"
    assert search.tie_runs_used == 0 and len(fake.runs) == 2  # no runs allowed: the tie is said as it stands
    assert search.tie.text().endswith("picked zero1 mb32x1 by simplicity")


def test_break_tie_order():
    def measured(backend, micro, reserved, rate=100.0, ckpt=False):
        return Point(
            Candidate(backend, micro, 64 // micro, ckpt), MEASURED, samples_per_s=rate, peak_reserved_gib=reserved
        )

    assert tune.SIMPLICITY.index("ddp") < tune.SIMPLICITY.index("zero3") < tune.SIMPLICITY.index("zero3-offload")
    zero3, ddp = measured("zero3", 16, 10.0), measured("ddp", 16, 20.0)
    assert tune.break_tie([ddp, zero3]) == (zero3, "memory headroom")
    small, large = measured("zero2", 8, 10.0), measured("zero2", 16, 10.2)
    assert tune.break_tie([small, large]) == (large, "the larger micro batch")
    plain, ckpt = measured("zero2", 16, 10.0), measured("zero2", 16, 10.0, ckpt=True)
    assert tune.break_tie([ckpt, plain]) == (plain, "no added checkpointing")
    slow, fast = measured("ddp", 16, 10.0, 99.0), measured("ddp", 16, 10.0, 101.0)
    assert tune.break_tie([slow, fast]) == (fast, "the higher median")
    unknown = measured("ddp", 16, None)
    assert tune.break_tie([zero3, unknown])[1] == "simplicity"  # memory unknown for one: not a criterion


def test_separated_candidates_are_no_tie():
    best = Point(Candidate("ddp", 8, 4), MEASURED, samples_per_s=100.0, launches=[[99.0, 100.0, 101.0] * 2])
    far = Point(Candidate("zero3", 8, 4), MEASURED, samples_per_s=60.0, launches=[[59.0, 60.0, 61.0] * 2])
    close = Point(Candidate("zero2", 8, 4), MEASURED, samples_per_s=96.0, launches=[[95.0, 96.0, 97.0]])
    assert tune.rivals([best, far], best, tune.CLOSE) == []
    assert tune.rivals([best, far, close], best, tune.CLOSE) == [close]  # 3 steps: 75%, and within 10%


def test_failure_kind_reads_the_log():
    assert tune.failure_kind("x\ntorch.OutOfMemoryError: CUDA out of memory. Tried\nend")[0] == OOM
    assert tune.failure_kind("RuntimeError: CUDA error: out of memory\n")[0] == OOM
    assert tune.failure_kind("starting\nValueError: bad\n") == (tune.FAILED, "ValueError: bad")


def test_samples_per_s_counts_every_micro_step_of_an_optimizer_step():
    # the loop logs one record per optimizer step: micro 2 x accumulation 4 x world 2 = 16 samples
    # in a step of 0.5 s (its 4 micro steps included) is 32 samples/s, not 4x that
    records = [
        {"step": s, "loss": 1.0, "samples_per_s": 16 / 0.5, "step_time_s": 0.5, "peak_allocated_gib": 1.0}
        for s in range(1, 4)
    ]
    records = [{**r, "peak_reserved_gib": 1.0} for r in records]
    assert abs(summarize(records, warmup=1)["samples_per_s"] - 32.0) < 1e-9


def test_plot_is_svg_with_a_capacity_line():
    from registry.run import plot

    pts = points({("ddp", 4): 1.0, ("ddp", 2): 1.0, ("zero2", 4): 1.0})
    for p, rate in zip(pts, (40.0, 30.0, 20.0)):
        p.status, p.samples_per_s, p.peak_allocated_gib = MEASURED, rate, 3.0
    text = plot.svg(pts, 80.0, "x/y")
    assert text.startswith("<svg") and "GPU capacity 80 GiB" in text and "3.00 GiB" in text
    assert "no capacity line" in plot.svg(pts, None, "cpu")


# --- a real search on this host ---------------------------------------------------------------


def tune_cpu(folder: Path, port: int) -> tuple[subprocess.CompletedProcess, Path, float]:
    started = time.monotonic()
    r = run_cli(
        "tune",
        "tiny/cpu",
        "--backends",
        "ddp,zero2,zero3",
        "--global-batch",
        str(GLOBAL),
        "--steps",
        "1",
        "--warmup",
        "1",
        "--budget",
        "2.5",
        "--tie-runs",
        "2",
        "--output-dir",
        "out",
        f"launch.main_process_port={port}",
        "train.optimizer.lr=0.002",
        cwd=folder,
        timeout=600,
    )
    return r, folder, time.monotonic() - started


def background_runs(items) -> dict:
    return {"tuned": tune_cpu} if any("tuned" in item.fixturenames for item in items) else {}


@pytest.fixture(scope="module")
def tuned(background, request):
    return background.of(request.module)["tuned"].result()


def test_tune_on_cpu_end_to_end(tuned, tmp_path):
    r, folder, wall = tuned
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert wall < 180, wall
    out = folder / "out"
    assert "no memory pruning" in r.stderr and "rung 0: ddp mb4x1: running" in r.stderr  # progress lines
    results = json.loads((out / "results.json").read_text())
    rows = results["candidates"]
    assert len(rows) == 9 and results["global_batch"] == GLOBAL
    assert {(x["backend"], x["micro_batch_size"]) for x in rows} == {
        (b, m) for b in ("ddp", "zero2", "zero3") for m in (4, 2, 1)
    }
    assert all(x["micro_batch_size"] * x["gradient_accumulation_steps"] * 2 == GLOBAL for x in rows)
    assert all(x["status"] == "measured" or x["reason"] for x in rows)  # every one measured or said why not
    win = results["winner"]
    assert win == rows[0] and win["status"] == "measured" and win["samples_per_s"] > 0
    ci = win["samples_per_s_interval"]
    assert ci["lower"] <= win["samples_per_s"] <= ci["upper"] and ci["launches"] >= 1
    assert results["tie_runs"]["used"] <= 2  # the bound on runs to separate the leaders
    said = (results["tie"] and "tie: " in r.stdout) or "resolved: " in r.stdout
    assert said and (results["tie"] is None or results["tie"]["pick"] in r.stdout)
    table = (out / "table.txt").read_text()
    assert table.splitlines()[0].split()[:3] == ["RANK", "BACKEND", "MICRO"] and table in r.stdout
    assert f"{win['samples_per_s']:.1f}" in table.splitlines()[1]
    assert (out / "plot.svg").read_text().startswith("<svg")
    lines = [json.loads(line) for line in (out / "points.jsonl").read_text().splitlines()]
    assert lines and all("predicted_allocated_gib" in x and "measured_allocated_gib" in x for x in lines)
    assert all(x["recipe"] == f"tiny/{x['backend']}/cpu" for x in lines)  # what grid.py evaluate composes
    # the tuned recipe: validates, its results match the table, publish takes it
    overlay = out / "tuned.yaml"
    doc = yaml.safe_load(overlay.read_text())
    assert doc["extends"] == [f"tiny/{win['backend']}/cpu"]
    assert doc["train"]["micro_batch_size"] == win["micro_batch_size"]
    # tuned under train.optimizer.lr=0.002, which the overlay keeps; the rendezvous port was the run's own
    assert doc["train"]["optimizer"] == {"lr": 0.002} and "launch" not in doc
    entry = doc["results"][0]
    assert abs(entry["samples_per_s"] - win["samples_per_s"]) < 1e-3
    assert entry["samples_per_s_interval"] == ci  # every launch of the pick, as results.json has it
    assert entry["gradient_accumulation_steps"] == win["gradient_accumulation_steps"]
    assert entry["command"].startswith("recipe tune tiny/cpu") and entry["hardware"].startswith("CPU")
    assert run_cli("validate", str(overlay)).returncode == 0
    team = tmp_path / "team"
    team.mkdir()
    env = {"RECIPE_PATH": f"team-t={team}", "RECIPE_CONFIG": str(tmp_path / "sources.yaml")}
    published = run_cli("publish", str(overlay), "--to", "team-t", env=env)
    assert published.returncode == 0, published.stderr
    assert (team / "published" / "tuned" / "tiny" / win["backend"] / "cpu" / "1.yaml").is_file()


@pytest.mark.parametrize("kind", ["under-a-file", "existing-file", "not-empty"])
def test_an_output_dir_that_cannot_be_written_is_one_line(tmp_path, kind):
    """A bad --output-dir is one line and exit 2 before any launch, never a traceback."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    folder = {"under-a-file": afile / "out", "existing-file": afile, "not-empty": tmp_path}[kind]
    r = run_cli("tune", "tiny/cpu", "--output-dir", str(folder), "--budget", "0.01")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and str(folder) in errors[0], r.stderr
    assert afile.read_text() == "x"


def test_tuned_yaml_of_a_file_carries_its_layer_and_a_file_extended_by_path_is_said(tmp_path):
    """tuned.yaml lies in the output folder, where the tuned file (confined to its own folder) is out
    of reach: it carries the file's own sections and extends what the file extends."""
    from registry.run.tune.report import NoOverlay, file_layer

    (tmp_path / "mine.yaml").write_text(
        "recipe: {name: mine}\nextends: [tiny/ddp/cpu]\ntrain: {steps: 7}\nresults: [{samples_per_s: 1.0}]\n"
    )
    assert file_layer(tmp_path / "mine.yaml") == (["tiny/ddp/cpu"], {"train": {"steps": 7}})
    (tmp_path / "child.yaml").write_text("extends: [mine.yaml]\ntrain: {steps: 9}\n")
    with pytest.raises(NoOverlay, match=r"extends 'mine.yaml' by path"):
        file_layer(tmp_path / "child.yaml")
    assert tune.Target(str(tmp_path / "mine.yaml"), "tiny", "cpu", "ddp", tmp_path / "mine.yaml").slug == "mine"
