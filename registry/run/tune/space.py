"""What `recipe tune` searches: the target, its candidates (backend x micro batch x the
accumulation that keeps the global batch, with activation checkpointing where memory asks for
it), and each candidate judged by the rules and the memory estimate before anything runs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from registry import view
from registry.compose import Recipe, compose
from registry.compose import hardware as generated_hardware
from registry.errors import RecipeError
from registry.estimate import estimate
from registry.names import AXES, Name, looks_like_file, parse
from registry.run import interval
from registry.sharing import sources
from registry.topology import world_size
from registry.validate import validate

LIMIT = 0.95  # of the GPU's memory: a candidate predicted above it is pruned before it runs

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
    samples_per_s: float | None = None  # the median step's, every launch of it pooled
    peak_allocated_gib: float | None = None
    peak_reserved_gib: float | None = None
    rung: int = -1  # the highest rung it was measured in
    steps: int = 0
    run_dir: str | None = None
    outcome: object = None  # the bench Outcome of its last measurement
    launches: list[list[float]] = field(default_factory=list)  # each launch's per-step samples/s

    @property
    def alive(self) -> bool:
        return self.status in (MEASURED, NOT_RUN)

    @property
    def figure(self) -> interval.Figure:
        """samples/s with its interval; a rate without steps (a replayed one) is taken as exact."""
        return interval.figure(self.launches) if self.launches else interval.exact(self.samples_per_s)


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
        """A name part for tuned.yaml's recipe.name and the default output folder: a file's stem
        (its folders, absolute or relative, are no part of what was tuned), a name's segments."""
        text = self.file.stem if self.file is not None else self.text
        slug = re.sub(r"[^A-Za-z0-9_-]+", "_", text.replace("/", "_").removesuffix(".yaml")).strip("_-")
        return slug or "recipe"


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
    elif est is not None and (not est.finite or est.needed_fraction > LIMIT):
        point.status = PRUNED
        point.reason = f"predicted {est.needed_fraction:.0%} of {capacity:g} GiB allocated (over {LIMIT:.0%})"
    elif kind != "builtin" and kind not in rehearsed_trainers():
        point.status = PRUNED
        point.reason = f"the {kind} trainer reports no metrics.jsonl and has no rehearsal to measure it with"
    return Checked(point, recipe, capacity)


def rehearsed_trainers() -> tuple[str, ...]:
    """The real trainers a candidate is measured through: their rehearsal (random weights,
    synthetic data, their own trainer and launch; docs/rehearsal.md)."""
    from registry.run.rehearse import ADAPTERS

    return tuple(ADAPTERS)


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
