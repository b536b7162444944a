"""When `recipe tune`'s best is within noise of others: which candidates it is not separated from,
and how such a tie is broken. Pure functions over Point (registry/run/interval.py has the math)."""

from __future__ import annotations

from dataclasses import dataclass

from registry.run.tune.space import MEASURED, Point

# Simpler first: replicated weights before sharded state; DeepSpeed's optimizer-state and gradient
# sharding (ZeRO-1/2) before FSDP's parameter sharding; sharding that keeps parameters whole in
# forward (SHARD_GRAD_OP) before sharding that gathers them every step (FSDP2, FSDP1 FULL_SHARD,
# ZeRO-3); offload last. Each step adds collectives, checkpoint formats and failure modes
# (docs/failure-modes.md), so at equal speed and memory the earlier one is the safer recipe.
SIMPLICITY = ("ddp", "zero1", "zero2", "fsdp-grad-op", "fsdp2", "fsdp", "zero3", "zero3-offload")
# Peak reserved memory within this share of the lowest counts as the same headroom: allocator
# rounding moves a run's reserved peak by a few percent from launch to launch.
MEMORY_EQUAL = 0.05


@dataclass
class Tie:
    points: list[Point]  # the candidates the best was not separated from, the best among them
    pick: Point
    criterion: str  # what broke it: "memory headroom", "simplicity", ...
    runs: int  # extra launches spent trying to separate them

    def text(self) -> str:
        names = [p.candidate.label for p in self.points]
        listed = ", ".join(names[:-1]) + f" and {names[-1]}"
        return f"tie: {listed} within noise; picked {self.pick.candidate.label} by {self.criterion}"

    def json(self) -> dict:
        return {
            "candidates": [p.candidate.label for p in self.points],
            "pick": self.pick.candidate.label,
            "criterion": self.criterion,
            "extra_runs": self.runs,
        }


def rivals(points: list[Point], best: Point, close: float) -> list[Point]:
    """The measured candidates `best` is not separated from: their intervals overlap; or, where an
    interval falls short of its confidence (fewer than 6 steps), those within `close` of the best."""
    out = []
    for p in points:
        if p is best or p.status != MEASURED:
            continue
        a, b = best.figure, p.figure
        if a.overlaps(b) or (not (a.sure and b.sure) and p.samples_per_s >= close * best.samples_per_s):
            out.append(p)
    return sorted(out, key=lambda p: -p.samples_per_s)


def simplicity(p: Point) -> tuple[int, str]:
    backend = p.candidate.backend
    return (SIMPLICITY.index(backend) if backend in SIMPLICITY else len(SIMPLICITY), backend)


def break_tie(tied: list[Point]) -> tuple[Point, str]:
    """The pick among candidates within noise of each other, and the criterion that decided: the
    most memory headroom (lowest peak reserved, MEMORY_EQUAL apart), then the simplest backend
    (SIMPLICITY), then the larger micro batch, then no added checkpointing, then the higher median."""
    pool = list(tied)
    reserved = [p.peak_reserved_gib for p in pool]
    if None not in reserved:
        low = min(reserved)
        pool = [p for p in pool if p.peak_reserved_gib <= low * (1 + MEMORY_EQUAL)]
        if len(pool) == 1:
            return pool[0], "memory headroom"
    keys = (
        ("simplicity", simplicity),
        ("the larger micro batch", lambda p: -p.candidate.micro_batch_size),
        ("no added checkpointing", lambda p: p.candidate.checkpointing),
    )
    for criterion, key in keys:
        first = min(key(p) for p in pool)
        pool = [p for p in pool if key(p) == first]
        if len(pool) == 1:
            return pool[0], criterion
    return max(pool, key=lambda p: p.samples_per_s), "the higher median"
