"""`recipe tune`: search backend x micro batch x gradient accumulation (and activation
checkpointing where memory asks for it) at a fixed global batch for the highest samples/s.

Candidates the rules reject, or that the estimator puts over LIMIT of the GPU's memory, are
pruned before anything runs. Survivors run under `recipe bench`'s measuring conditions, keeping
their accumulation, with successive halving: every survivor for a few steps, then the best
1/ETA for ETA times as many, until one is left. An out-of-memory run is recorded and pruned
(with every larger micro batch of its backend); no failure stops the search. The search logic is
pure functions over Candidate and Point; `search` runs them with a measuring function, which the
tests replace with fake measurements."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from registry import view
from registry.compose import Recipe, compose
from registry.compose import hardware as generated_hardware
from registry.errors import RecipeError
from registry.estimate import CUDA_CONTEXT_GIB, estimate
from registry.files import write_atomic
from registry.names import AXES, Name, looks_like_file, parse
from registry.sharing import sources
from registry.topology import world_size
from registry.validate import validate

LIMIT = 0.95  # of the GPU's memory: a candidate predicted above it is pruned before it runs
ETA = 3  # successive halving keeps the best 1/ETA of each rung for the next
# ... of those within CLOSE of the rung's best: each launch pays 20-30 s of start-up and exit on a GPU
# host (benchmarks/README.md), so measuring a candidate 10% behind again costs more than it can win
CLOSE = 0.9
# A leader is walked down to smaller micro batches only when its run came this close to the GPU's
# memory: at a fixed global batch a smaller micro batch only adds micro steps (and, under ZeRO-2/3,
# a reduction or a gather each); near capacity the caching allocator frees and retries, and only
# there can a smaller one be faster (docs/failure-modes.md §46)
PRESSURE = 0.9
OOM_MARKERS = ("out of memory", "OutOfMemoryError")

MEASURED, PRUNED, OOM, FAILED, NOT_RUN = "measured", "pruned", "oom", "failed", "not run"


@dataclass(frozen=True)
class Candidate:
    backend: str
    micro_batch_size: int
    accumulation: int
    checkpointing: bool = False  # policy.gradient_checkpointing=true added by tune

    @property
    def label(self) -> str:
        return f"{self.backend} mb{self.micro_batch_size}x{self.accumulation}" + (
            " +ckpt" if self.checkpointing else ""
        )

    @property
    def series(self) -> str:
        """The plot's line this candidate lies on."""
        return self.backend + (" +ckpt" if self.checkpointing else "")

    def overrides(self) -> list[str]:
        sets = [
            f"train.micro_batch_size={self.micro_batch_size}",
            f"train.gradient_accumulation_steps={self.accumulation}",
        ]
        return sets + (["policy.gradient_checkpointing=true"] if self.checkpointing else [])


@dataclass
class Point:
    """A candidate and what became of it."""

    candidate: Candidate
    status: str = NOT_RUN
    reason: str = ""
    predicted_gib: float | None = None  # peak allocated, as torch reports it
    predicted_fraction: float | None = None  # of the GPU's memory, with the allocator's overhead and context
    samples_per_s: float | None = None
    peak_allocated_gib: float | None = None
    peak_reserved_gib: float | None = None
    rung: int = -1  # the highest rung it was measured in
    steps: int = 0
    run_dir: str | None = None
    outcome: object = None  # the bench Outcome of its last measurement

    @property
    def alive(self) -> bool:
        return self.status in (MEASURED, NOT_RUN)


@dataclass
class Target:
    """What is tuned: a POLICY/HARDWARE pair, a cell, or a recipe file."""

    text: str
    policy: str
    hardware: str
    backend: str | None = None  # the cell's or file's own backend
    file: Path | None = None

    def args(self, backend: str, sets: list[str]) -> tuple[str, list[str]]:
        """What to compose for `backend`: each cell with its own tuned overlay; a file as written,
        its backend swapped."""
        if self.file is None:
            return f"{self.policy}/{backend}/{self.hardware}", list(sets)
        return str(self.file), ([f"backend={backend}"] if backend != self.backend else []) + list(sets)

    @property
    def slug(self) -> str:
        return self.text.replace("/", "_").replace(":", "_").removesuffix(".yaml")


def parse_target(text: str) -> Target:
    if looks_like_file(text):
        path = Path(text)
        if not path.is_file():
            raise RecipeError(f"{text}: no such file")
        recipe = compose(text)
        parts = {q.parent.name: q.stem for q in recipe.inputs if q.parent.name in AXES}  # the last of each axis
        axis = [parts.get(a) or "" for a in AXES]  # a file outside the matrix may name none
        return Target(text, axis[0], axis[2], axis[1] or None, path)
    name = parse(text)
    segs = name.segments
    if len(segs) == 2 and sources.find(Name(("policy", segs[0]))) and generated_hardware.exists("hardware", segs[1]):
        return Target(text, segs[0], segs[1])
    if len(segs) == 2 and sources.find(Name(("policy", segs[0]))) and generated_hardware.problem(segs[1]):
        raise RecipeError(str(generated_hardware.problem(segs[1])))
    if len(segs) == 3 and generated_hardware.is_cell(name):
        return Target(text, segs[0], segs[2], backend=segs[1])
    raise RecipeError(
        f"{text!r} is neither POLICY/HARDWARE, a cell nor a recipe file (hint: recipe tune tiny/cpu, "
        f"recipe tune ref-1b/zero2/2xH100; policies: {', '.join(sources.part_names(AXES[0]))})"
    )


def micro_batches(global_batch: int, world: int) -> list[int]:
    """Powers of two m, largest first, with global_batch = m x accumulation x world."""
    if global_batch < 1 or world < 1 or global_batch % world:
        return []
    per_rank = global_batch // world
    out, m = [], 1
    while m <= per_rank:
        if per_rank % m == 0:
            out.append(m)
        m *= 2
    return out[::-1]


def global_batch_of(doc: dict) -> int:
    train = view.of(doc).train
    return int(train.micro_batch_size) * int(train.gradient_accumulation_steps) * int(world_size(doc))


@dataclass
class Checked:
    """One candidate composed and judged: its point, and the recipe it runs as."""

    point: Point
    recipe: Recipe | None
    capacity_gib: float | None


def judge(target: Target, candidate: Candidate, sets: list[str]) -> Checked:
    """Compose the candidate, validate it, and predict its memory: pruned, or left to run."""
    where, base = target.args(candidate.backend, sets)
    point = Point(candidate)
    try:
        recipe = compose(where, [*base, *candidate.overrides()])
    except RecipeError as e:
        point.status, point.reason = PRUNED, f"does not compose: {e}"
        return Checked(point, None, None)
    est = estimate(recipe.data) if recipe.data["hardware"].get("gpu") else None
    capacity = est.capacity_gib if est is not None else None
    if est is not None and est.finite:
        point.predicted_gib, point.predicted_fraction = est.allocated_gib, est.fraction
    rules = sorted({p.rule for p in validate(recipe.data, recipe.origins) if p.is_error} - {"memory-fit"})
    kind = recipe.data["trainer"]["kind"]
    if rules:
        point.status, point.reason = PRUNED, "invalid: " + ", ".join(rules)
    elif est is not None and (not est.finite or est.fraction > LIMIT):
        point.status = PRUNED
        point.reason = f"predicted {est.fraction:.0%} of {capacity:g} GiB (over {LIMIT:.0%})"
    elif kind != "builtin":
        point.status = PRUNED
        point.reason = f"the {kind} trainer reports no metrics.jsonl (tune measures with the built-in one)"
    return Checked(point, recipe, capacity)


def candidates(backends: list[str], global_batch: int, world: int) -> list[Candidate]:
    """Every backend's micro batches, largest first, with the accumulation that keeps the global batch."""
    return [Candidate(b, m, global_batch // (m * world)) for b in backends for m in micro_batches(global_batch, world)]


def space(target: Target, backends: list[str], global_batch: int, sets: list[str]) -> list[Checked]:
    """Every candidate judged. Activation checkpointing trades compute for memory: it is added only
    at micro batches predicted not to fit without it, and only where the rules allow it."""
    world = None
    out: list[Checked] = []
    for backend in backends:
        where, base = target.args(backend, sets)
        try:
            world = int(world_size(compose(where, base).data))
        except RecipeError as e:
            raise RecipeError(f"{backend}: {e}") from None
        if global_batch % world:
            raise RecipeError(f"--global-batch {global_batch} is not a multiple of the world size {world}")
        for c in candidates([backend], global_batch, world):
            checked = judge(target, c, sets)
            out.append(checked)
            over = checked.point.reason.startswith("predicted")
            on = checked.recipe is not None and view.of(checked.recipe.data).policy.gradient_checkpointing
            if over and not on:
                variant = judge(target, Candidate(c.backend, c.micro_batch_size, c.accumulation, True), sets)
                lower = (variant.point.predicted_fraction or 0.0) < (checked.point.predicted_fraction or 0.0)
                if lower and not variant.point.reason.startswith("invalid"):  # else not a candidate
                    out.append(variant)
    return out


# --- measuring ------------------------------------------------------------------------------------


def failure_kind(log_text: str) -> tuple[str, str]:
    """(OOM, line) for a run that ran out of GPU memory, else (FAILED, the log's last line)."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    for line in lines:
        if any(marker in line for marker in OOM_MARKERS):
            return OOM, line[:200]
    return FAILED, (lines[-1][:200] if lines else "no output")


Measure = Callable[[Candidate, int, int], Point]  # (candidate, warmup, steps) -> a point with figures or a failure


class Interrupted(Exception):
    pass


@dataclass
class Search:
    """Rung 0 measures each backend (each line: a backend, with or without added checkpointing) at
    its largest micro batch predicted to fit, then walks the leading 1/ETA of them (within CLOSE
    of the best, and near the GPU's memory: PRESSURE) down to smaller micro batches while that
    gets faster. Each later rung runs the best 1/ETA of the previous one (within CLOSE) ETA times
    longer, until one is left. `warmup` and `steps` are rung 0's."""

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

    def over_budget(self) -> bool:
        return self.budget_s is not None and self.clock() - self.started > self.budget_s

    def run(self, measure: Measure) -> Point | None:
        """The winner, or None when nothing was measured. Stops early, keeping what was measured,
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
        except (KeyboardInterrupt, Interrupted):
            self.interrupted = True  # what was measured stands
            self._leave("interrupted")
        except _Spent:
            self.progress("budget spent: launching nothing more")
            self._leave("budget spent")
        return winner(self.points)

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
            point.samples_per_s, point.peak_allocated_gib = got.samples_per_s, got.peak_allocated_gib
            point.peak_reserved_gib, point.run_dir, point.outcome = got.peak_reserved_gib, got.run_dir, got.outcome
            self.progress(
                f"rung {rung}: {c.label}: {got.samples_per_s:.1f} samples/s, peak {got.peak_allocated_gib:.2f} GiB"
            )
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
    ranked = ranking(points)
    return ranked[0] if ranked and ranked[0].status == MEASURED else None


def ranking(points: list[Point]) -> list[Point]:
    """Measured first, by the highest rung reached, then samples/s; then everything else."""
    order = {MEASURED: 0, OOM: 1, FAILED: 2, PRUNED: 3, NOT_RUN: 4}
    return sorted(points, key=lambda p: (order[p.status], -p.rung, -(p.samples_per_s or 0.0)))


# --- a real run of the search -------------------------------------------------------------------


def measure_with_bench(target: Target, sets: list[str], folder: Path, allow_mismatch: bool) -> Measure:
    from registry.run.bench import bench_one

    def measure(c: Candidate, warmup: int, steps: int) -> Point:
        where, base = target.args(c.backend, sets)
        outcome = bench_one(
            where,
            [*base, *c.overrides()],
            steps,
            warmup,
            allow_mismatch,
            echo=False,
            keep_accumulation=True,
            base=folder / "runs",
        )
        run_dir = str(outcome.run_dir) if outcome.run_dir else None
        if outcome.skipped is None:
            return Point(
                c,
                MEASURED,
                samples_per_s=outcome.samples_per_s,
                peak_allocated_gib=outcome.peak_allocated_gib,
                peak_reserved_gib=outcome.peak_reserved_gib,
                run_dir=run_dir,
                outcome=outcome,
            )
        if outcome.run_dir is None:
            return Point(c, FAILED, reason=outcome.skipped)
        if "exit code 130" in outcome.skipped or "exit code 143" in outcome.skipped:
            return Point(c, "interrupted", run_dir=run_dir)
        try:
            text = (outcome.run_dir / "launch.log").read_text(errors="replace")
        except OSError:
            text = outcome.skipped
        kind, line = failure_kind(text)
        return Point(c, kind, reason=line, run_dir=run_dir)

    return measure


def point_record(
    entry: dict, where: tuple[str, list[str]], capacity: float | None, command: str, hardware: str, versions: dict
) -> dict:
    """One line of points.jsonl: one run, its predicted peak memory beside the measured one, and
    what it composed (`where`: Target.args) so that benchmarks/grid.py evaluate can predict it again."""
    p, c = entry["point"], entry["point"].candidate
    reserved = entry["peak_reserved_gib"]
    return {
        "recipe": where[0],
        "overrides": where[1],
        "backend": c.backend,
        "micro_batch_size": c.micro_batch_size,
        "gradient_accumulation_steps": c.accumulation,
        "gradient_checkpointing": c.checkpointing,
        "status": entry["status"],
        "reason": entry["reason"] or None,
        "rung": entry["rung"],
        "warmup": entry["warmup"],
        "steps": entry["steps"],
        "samples_per_s": entry["samples_per_s"],
        "predicted_allocated_gib": p.predicted_gib,
        "predicted_fraction": p.predicted_fraction,
        "measured_allocated_gib": entry["peak_allocated_gib"],
        "measured_reserved_gib": reserved,
        "measured_fraction": (reserved + CUDA_CONTEXT_GIB) / capacity if capacity and reserved is not None else None,
        "capacity_gib": capacity,
        "hardware": hardware,
        "versions": versions,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": command,
        "run_dir": entry["run_dir"],
    }


def table_text(points: list[Point], capacity: float | None) -> str:
    from registry.commands.render import table

    rows = []
    for rank, p in enumerate(ranking(points), 1):
        c = p.candidate
        predicted = "-"
        if p.predicted_fraction is not None:
            predicted = f"{p.predicted_gib:.2f} ({p.predicted_fraction:.0%})"
        rows.append(
            [
                str(rank) if p.status == MEASURED else "-",
                c.backend,
                str(c.micro_batch_size),
                str(c.accumulation),
                "yes" if c.checkpointing else "no",
                f"{p.samples_per_s:.1f}" if p.status == MEASURED else "-",
                f"{p.peak_allocated_gib:.2f}" if p.peak_allocated_gib is not None else "-",
                predicted,
                str(p.steps) if p.status == MEASURED else "-",
                p.status + (f": {p.reason}" if p.reason else ""),
            ]
        )
    header = ["RANK", "BACKEND", "MICRO", "ACCUM", "CKPT", "SAMPLES/S", "PEAK GiB", "PREDICTED GiB", "STEPS", "STATUS"]
    return table(rows, header)


def results_json(points: list[Point], best: Point | None, info: dict) -> dict:
    rows = []
    for p in ranking(points):
        c = p.candidate
        rows.append(
            {
                "backend": c.backend,
                "micro_batch_size": c.micro_batch_size,
                "gradient_accumulation_steps": c.accumulation,
                "gradient_checkpointing": c.checkpointing,
                "status": p.status,
                "reason": p.reason or None,
                "rung": p.rung,
                "steps": p.steps,
                "samples_per_s": p.samples_per_s,
                "peak_allocated_gib": p.peak_allocated_gib,
                "peak_reserved_gib": p.peak_reserved_gib,
                "predicted_allocated_gib": p.predicted_gib,
                "predicted_fraction": p.predicted_fraction,
                "run_dir": p.run_dir,
            }
        )
    return {**info, "winner": rows[0] if best is not None else None, "candidates": rows}


# Overrides that tune was given and that describe the run, not the recipe: left out of the overlay.
RUN_ONLY = (("launch", "main_process_port"),)


def write_overlay(
    folder: Path, target: Target, best: Point, command: str, capacity: float | None, sets: list[str] = ()
) -> Path:
    """The winner as a recipe file extending its cell (or the tuned file), with the KEY=VALUE
    overrides it was tuned under, its measurement in `results` as `recipe bench --record` writes
    it, checked composed as well."""
    import yaml

    from registry.compose.overrides import parse as parse_overrides
    from registry.doc import merge
    from registry.files import SCHEMA_DIR
    from registry.run import bench

    c = best.candidate
    if target.file is not None:
        parent = os.path.relpath(target.file.resolve(), folder.resolve())
        name = f"tuned/{target.slug}"
    else:
        parent = f"{target.policy}/{c.backend}/{target.hardware}"
        name = f"tuned/{parent}"
    schema = os.path.relpath(SCHEMA_DIR / "recipe.schema.json", folder.resolve())
    meta = {
        "name": name,
        "summary": (
            f"{parent} tuned by recipe tune: micro batch {c.micro_batch_size} x accumulation {c.accumulation}"
            + (", gradient checkpointing" if c.checkpointing else "")
            + f", {best.samples_per_s:.1f} samples/s"
        ),
        "tags": ["tuned"],
    }
    body: dict = {"recipe": meta, "extends": [parent]}
    if c.checkpointing:
        body["policy"] = {"gradient_checkpointing": True}
    for path, value in parse_overrides(list(sets)).sets:
        if path not in RUN_ONLY:
            layer: object = value
            for key in reversed(path):
                layer = {key: layer}
            body = merge(body, layer)
    body = merge(
        body, {"train": {"micro_batch_size": c.micro_batch_size, "gradient_accumulation_steps": c.accumulation}}
    )
    text = f"# yaml-language-server: $schema={schema}\n# written by `recipe tune` (table.txt beside it)\n"
    text += yaml.safe_dump(body, sort_keys=False, width=1000)
    path = folder / "tuned.yaml"
    write_atomic(path, text)
    fraction = (best.peak_reserved_gib + CUDA_CONTEXT_GIB) / capacity if capacity else None
    bench.record(
        best.outcome, path, command, best.steps, source="recipe tune (built-in trainer)", memory_fraction=fraction
    )
    composed = compose(str(path))
    errors = [p for p in validate(composed.data, composed.origins) if p.is_error]
    if errors:
        raise RecipeError(f"{path}: the tuned recipe does not validate: " + "; ".join(p.render() for p in errors))
    return path


def main(
    target_text: str,
    sets: list[str],
    backends: list[str] | None,
    global_batch: int | None,
    budget_min: float | None,
    warmup: int,
    steps: int,
    output_dir: str | None,
    record_to: str | None,
    allow_mismatch: bool,
    command: str,
) -> int:
    from registry.run import bench, plot

    target = parse_target(target_text)
    if record_to:  # opened now: a path it cannot append to is found before the first run
        try:
            open(record_to, "a", encoding="utf-8").close()
        except OSError as e:
            raise RecipeError(f"--record-to {record_to}: {e.strerror}") from None
    known = sources.part_names("backend")
    if backends is None:
        backends = known
    unknown = [b for b in backends if b not in known]
    if unknown:
        raise RecipeError(f"unknown backend {unknown[0]!r}; known: {', '.join(known)}")
    if global_batch is None:
        first = target.backend or backends[0]
        where, base = target.args(first, sets)
        global_batch = global_batch_of(compose(where, base).data)
        print(f"recipe tune: global batch {global_batch} (from {where})", file=sys.stderr)
    judged = space(target, backends, global_batch, sets)
    points = [j.point for j in judged]
    capacity = next((j.capacity_gib for j in judged if j.capacity_gib), None)
    if capacity is None:
        print("recipe tune: no GPU in the hardware part: no memory pruning", file=sys.stderr)
    runnable = sum(p.status == NOT_RUN for p in points)
    folder = _output(target, output_dir)
    print(
        f"recipe tune: {len(points)} candidates, {runnable} left after pruning, measuring in {folder}",
        file=sys.stderr,
        flush=True,
    )
    hardware, versions = bench.host(), bench.versions()
    (folder / "points.jsonl").touch()  # a line is appended as each run ends

    def logged(entry: dict) -> None:
        """points.jsonl (and --record-to) gain each run's line as it ends: a tune killed with its
        host still leaves its evaluation data. A write that fails is said, and the search goes on."""
        where = target.args(entry["point"].candidate.backend, sets)
        line = json.dumps(point_record(entry, where, capacity, command, hardware, versions)) + "\n"
        for path in [folder / "points.jsonl", *([record_to] if record_to else [])]:
            try:
                with open(path, "a", encoding="utf-8") as f:
                    f.write(line)
            except OSError as e:
                print(f"recipe tune: {path}: {e.strerror}: this run's line is not recorded", file=sys.stderr)

    search = Search(
        points,
        warmup,
        steps,
        budget_s=budget_min * 60 if budget_min is not None else None,
        progress=lambda line: print(f"recipe tune: {line}", file=sys.stderr, flush=True),
        capacity_gib=capacity,
        logged=logged,
    )
    best = search.run(measure_with_bench(target, sets, folder, allow_mismatch))
    text = table_text(points, capacity)
    if capacity is None:
        text += "no memory pruning: the hardware part has no GPU (peak memory is the processes' resident set)\n"
    write_atomic(folder / "table.txt", text)
    info = {
        "target": target.text,
        "global_batch": global_batch,
        "capacity_gib": capacity,
        "rungs": search.rungs,
        "interrupted": search.interrupted,
        "command": command,
    }
    write_atomic(folder / "results.json", json.dumps(results_json(points, best, info), indent=2) + "\n")
    write_atomic(folder / "plot.svg", plot.svg(points, capacity, f"{target.text}: global batch {global_batch}"))
    sys.stdout.write(text)
    if best is None:
        print(f"recipe tune: nothing measured; see {folder / 'table.txt'}", file=sys.stderr)
        return 130 if search.interrupted else 1
    print(
        f"best: {best.candidate.label}: {best.samples_per_s:.1f} samples/s"
        + (" (so far: interrupted)" if search.interrupted else "")
    )
    kept, note = overlay_pick(target, best, points)
    if note:
        print(f"recipe tune: {note}", file=sys.stderr)
    written = write_overlay(folder, target, kept, command, capacity, sets).name if kept else ""
    print(
        f"recipe tune: wrote {folder}/: table.txt results.json plot.svg points.jsonl {written}".rstrip(),
        file=sys.stderr,
    )
    return 130 if search.interrupted else 0


def overlay_pick(target: Target, best: Point, points: list[Point]) -> tuple[Point | None, str | None]:
    """The candidate tuned.yaml can hold, and what to tell the user when it is not the best. A
    recipe file is extended as written: no file can swap its backend part (swaps are command-line
    overrides), so for a file only candidates of its own backend can be written."""
    if target.file is None or best.candidate.backend == target.backend:
        return best, None
    own = [p for p in ranking(points) if p.status == MEASURED and p.candidate.backend == target.backend]
    where = (
        f"; for {best.candidate.backend}, point the file's extends at a {best.candidate.backend} cell and tune it again"
    )
    if not own:
        return None, (
            f"no tuned.yaml: the fastest is {best.candidate.label}, and {target.text} cannot be extended"
            f" with another backend part{where}"
        )
    return own[0], (
        f"tuned.yaml holds {own[0].candidate.label} ({own[0].samples_per_s:.1f} samples/s), the fastest of the"
        f" file's own backend {target.backend}: the fastest overall is {best.candidate.label}"
        f" ({best.samples_per_s:.1f} samples/s), and a file cannot be extended with another backend part{where}"
    )


def _output(target: Target, output_dir: str | None) -> Path:
    if output_dir:
        folder = Path(output_dir)
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise RecipeError(f"{folder}: exists and is not an empty folder (hint: pick a new --output-dir)")
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    from registry.run import claim

    return claim(Path("runs") / "tune" / target.slug)
