"""The search of `recipe tune`: pure functions over Candidate and Point, and `Search`, which runs
them with a measuring function (the tests replace it with fake measurements). Each launch of a
candidate adds its per-step rates to the candidate's figure (registry/run/interval.py); when the
best is not separated from others, they are measured again (at most `tie_runs` launches), and a
tie that remains is broken by registry/run/tune/ties.py."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from registry.estimate import CUDA_CONTEXT_GIB
from registry.run.tune.space import FAILED, LIMIT, MEASURED, NOT_RUN, OOM, PRUNED, Candidate, Point
from registry.run.tune.ties import Tie, break_tie, rivals

ETA = 3  # successive halving keeps the best 1/ETA of each rung for the next
# ... of those within CLOSE of the rung's best: each launch pays 20-30 s of start-up and exit on a GPU
# host (benchmarks/README.md), so measuring a candidate 10% behind again costs more than it can win
CLOSE = 0.9
# A leader is walked down to smaller micro batches only when its run came this close to the GPU's
# memory: at a fixed global batch a smaller micro batch only adds micro steps (and, under ZeRO-2/3,
# a reduction or a gather each); near capacity the caching allocator frees and retries, and only
# there can a smaller one be faster (docs/failure-modes.md §46)
PRESSURE = 0.9


Measure = Callable[[Candidate, int, int], Point]  # (candidate, warmup, steps) -> a point with figures or a failure


class Interrupted(Exception):
    pass


@dataclass
class Search:
    """Rung 0 measures each backend (each line: a backend, with or without added checkpointing) at
    its largest micro batch predicted to fit, then walks the leading 1/ETA of them (within CLOSE
    of the best, and near the GPU's memory: PRESSURE) down to smaller micro batches while that
    gets faster. Each later rung runs the best 1/ETA of the previous one (within CLOSE) ETA times
    longer, until one is left. `warmup` and `steps` are rung 0's. Then, while the best's interval
    overlaps another's (ties.rivals), those are launched again with the last rung's steps, at most
    `tie_runs` launches in all; a tie left is broken by ties.break_tie and kept in `tie`."""

    points: list[Point]
    warmup: int
    steps: int
    budget_s: float | None = None
    progress: Callable[[str], None] = lambda line: None
    clock: Callable[[], float] = time.monotonic
    capacity_gib: float | None = None
    max_rungs: int = 4
    started: float = 0.0
    interrupted: bool = False
    rungs: list[tuple[int, int]] = field(default_factory=list)  # (warmup, steps) of each rung run
    logged: Callable[[dict], None] = lambda entry: None  # told of each run as it ends: the point's figures then
    tie_runs: int = 0  # launches allowed to separate the leaders after the last rung
    tie_runs_used: int = 0
    tie: Tie | None = None  # the leaders left within noise, and how the pick was made

    def over_budget(self) -> bool:
        return self.budget_s is not None and self.clock() - self.started > self.budget_s

    def run(self, measure: Measure) -> Point | None:
        """The pick, or None when nothing was measured. Stops early, keeping what was measured,
        when the budget is spent or on Ctrl-C."""
        self.started = self.clock()
        try:
            self._rung0(measure)
            alive = survivors(self.points, 0)
            rung = 1
            while len(alive) > 1 and rung < self.max_rungs:
                steps = self.steps * ETA**rung
                self.rungs.append((self.warmup, steps))
                for point in sorted(alive, key=lambda p: -(p.samples_per_s or 0.0)):
                    self._one(point, rung, steps, measure)
                alive = survivors(self.points, rung)
                rung += 1
            self._separate(measure)
        except (KeyboardInterrupt, Interrupted):
            self.interrupted = True  # what was measured stands
            self._leave("interrupted")
        except _Spent:
            self.progress("budget spent: launching nothing more")
            self._leave("budget spent")
        return self._decide()

    def _separate(self, measure: Measure) -> None:
        """Launch the best and those it is not separated from again, the best first, until their
        intervals part or `tie_runs` launches are spent."""
        best = winner(self.points)
        while best is not None and self.tie_runs_used < self.tie_runs:
            close = rivals(self.points, best, CLOSE)
            if not close:
                return
            left = self.tie_runs - self.tie_runs_used
            names = ", ".join(p.candidate.label for p in close)
            self.progress(f"{best.candidate.label} not separated from {names}: measuring again ({left} runs left)")
            rung, steps = max(p.rung for p in [best, *close]), self.rungs[-1][1]
            for p in [best, *close]:
                if self.tie_runs_used >= self.tie_runs:
                    break
                self.tie_runs_used += 1
                self._one(p, rung, steps, measure)
            best = winner(self.points)

    def _decide(self) -> Point | None:
        best = winner(self.points)
        if best is None:
            return None
        close = rivals(self.points, best, CLOSE)
        if not close:
            return best
        pick, criterion = break_tie([best, *close])
        self.tie = Tie([best, *close], pick, criterion, self.tie_runs_used)
        return pick

    def _rung0(self, measure: Measure) -> None:
        self.rungs.append((self.warmup, self.steps))
        lines: dict[str, list[Point]] = {}
        for p in self.points:
            if p.status == NOT_RUN:
                lines.setdefault(p.candidate.series, []).append(p)
        for line in lines.values():
            line.sort(key=lambda p: -p.candidate.micro_batch_size)
        heads: dict[str, Point] = {}
        for name, line in lines.items():  # each line's largest micro batch that runs
            for p in line:
                if p.status != NOT_RUN:
                    continue  # pruned after an out-of-memory run
                self._one(p, 0, self.steps, measure)
                if p.status == MEASURED:
                    heads[name] = p
                    break
        ranked = sorted(heads, key=lambda n: -heads[n].samples_per_s)
        top = heads[ranked[0]].samples_per_s if ranked else 0.0
        leaders = [n for n in ranked[: math.ceil(len(ranked) / ETA)] if heads[n].samples_per_s >= CLOSE * top]
        used = {name: self._used(heads[name]) for name in leaders}
        roomy = {name: used[name] is not None and used[name] < PRESSURE for name in leaders}
        for name in leaders:  # walk down while smaller micro batches get faster
            best = heads[name]
            for p in [] if roomy[name] else lines[name]:
                if p.status != NOT_RUN or p.candidate.micro_batch_size >= best.candidate.micro_batch_size:
                    continue
                self._one(p, 0, self.steps, measure)
                if p.status != MEASURED or p.samples_per_s <= best.samples_per_s:
                    break
                best = p
        for name, line in lines.items():
            for p in line:
                if p.status == NOT_RUN and not p.reason:
                    if name not in leaders:
                        p.reason = f"{name} trailed the leaders at rung 0"
                    elif roomy[name]:
                        p.reason = (
                            f"{heads[name].candidate.label} used {used[name]:.0%} of the GPU's memory:"
                            " a smaller micro batch only adds micro steps"
                        )
                    else:
                        p.reason = "a larger micro batch was faster"

    def _used(self, head: Point) -> float | None:
        """The share of the GPU's memory the head's run reserved (with the CUDA context); None
        without a GPU capacity (a CPU host), where every leader walks down."""
        if not self.capacity_gib or head.peak_reserved_gib is None:
            return None
        return (head.peak_reserved_gib + CUDA_CONTEXT_GIB) / self.capacity_gib

    def _leave(self, why: str) -> None:
        for p in self.points:
            if p.status == NOT_RUN and not p.reason:
                p.reason = why

    def _one(self, point: Point, rung: int, steps: int, measure: Measure) -> None:
        if self.over_budget():
            raise _Spent
        c = point.candidate
        self.progress(f"rung {rung}: {c.label}: running ({self.warmup} warm-up + {steps} steps)")
        got = measure(c, self.warmup, steps)
        if got.status == MEASURED:
            point.status, point.reason, point.rung, point.steps = MEASURED, "", rung, steps
            point.launches += got.launches  # every launch of a candidate counts towards its figure
            point.samples_per_s = point.figure.median if point.launches else got.samples_per_s
            point.peak_allocated_gib = max(got.peak_allocated_gib, point.peak_allocated_gib or 0.0)
            point.peak_reserved_gib = max(got.peak_reserved_gib, point.peak_reserved_gib or 0.0)
            point.run_dir, point.outcome = got.run_dir, got.outcome
            pooled = f"; {point.figure.text()} over its launches" if len(point.launches) > 1 else ""
            self.progress(f"rung {rung}: {c.label}: {got.figure.text()}, peak {got.peak_allocated_gib:.2f} GiB{pooled}")
        else:
            if got.status == "interrupted":
                raise Interrupted
            point.status, point.reason, point.run_dir = got.status, got.reason, got.run_dir
            self.progress(f"rung {rung}: {c.label}: {got.status}: {got.reason}")
            if got.status == OOM:
                prune_after_oom(self.points, point, self.capacity_gib)
        self.logged(
            {
                "rung": rung,
                "warmup": self.warmup,
                "steps": steps,
                "point": point,
                "status": got.status,
                "samples_per_s": got.samples_per_s,
                "interval": got.figure.json() if got.status == MEASURED else None,
                "peak_allocated_gib": got.peak_allocated_gib,
                "peak_reserved_gib": got.peak_reserved_gib,
                "run_dir": got.run_dir,
                "reason": got.reason,
            }
        )


class _Spent(Exception):
    pass


def survivors(points: list[Point], rung: int) -> list[Point]:
    """The best 1/ETA (at least one) of those measured at `rung`, less any more than 1 - CLOSE
    behind the best."""
    measured = sorted((p for p in points if p.status == MEASURED and p.rung == rung), key=lambda p: -p.samples_per_s)
    if not measured:
        return []
    top = measured[0].samples_per_s
    return [p for p in measured[: max(1, math.ceil(len(measured) / ETA))] if p.samples_per_s >= CLOSE * top]


def prune_after_oom(points: list[Point], oom: Point, capacity_gib: float | None) -> None:
    """A backend that ran out of memory at micro batch m runs nothing larger (so at most one OOM
    per backend): its larger candidates not yet run are pruned, and so are those below m whose
    predicted peak, raised by what the estimator missed at m, still crosses LIMIT."""
    c = oom.candidate
    missed = 0.0
    if capacity_gib and oom.predicted_fraction is not None:
        missed = max(0.0, 1.0 - oom.predicted_fraction)  # at least this much was missing from the prediction
    for p in points:
        o = p.candidate
        if o.backend != c.backend or o.checkpointing != c.checkpointing or p.status != NOT_RUN or p is oom:
            continue
        if o.micro_batch_size >= c.micro_batch_size:
            p.status, p.reason = PRUNED, f"{c.label} ran out of memory"
        elif p.predicted_fraction is not None and p.predicted_fraction + missed > LIMIT:
            p.status, p.reason = PRUNED, f"{c.label} ran out of memory; corrected prediction over {LIMIT:.0%}"


def winner(points: list[Point]) -> Point | None:
    """The highest median of the highest rung, before any tie is broken."""
    ranked = ranking(points)
    return ranked[0] if ranked and ranked[0].status == MEASURED else None


def ranking(points: list[Point], first: Point | None = None) -> list[Point]:
    """`first` (the pick), then measured, by the highest rung reached, then samples/s; then everything else."""
    order = {MEASURED: 0, OOM: 1, FAILED: 2, PRUNED: 3, NOT_RUN: 4}
    return sorted(points, key=lambda p: (p is not first, order[p.status], -p.rung, -(p.samples_per_s or 0.0)))
