"""What the catalog shows, gathered once: every recipe composed, validated and estimated.

Which recipes exist is sharing/listing.py's (as `recipe list --all --versions` shows them):
every tuned overlay and free-standing recipe of every source, every published version of every
source, and the untuned cells of the matrix, of which only those that validate (with or without
warnings) are shown: an untuned cell that `recipe validate` refuses is not a recipe anyone can
run, so it is only counted. A name a source has published is listed as its versions (its bare
name resolves to the newest one), not again as the working file. This module adds what a page
shows on top: the composed recipe, its problems, estimate and results, the version before and
the other versions.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from registry.compose import Recipe, compose
from registry.errors import RecipeError
from registry.names import AXES, parse
from registry.sharing import listing, sources, versions


@dataclass
class Entry:
    source: str
    name: str  # the recipe's name, without source or version
    version: int | None  # the published version, None for a working recipe
    kind: str  # tuned | cell | free-standing | published
    target: str  # what `recipe run` and compose are given
    date: str = ""  # when the version was published
    recipe: Recipe | None = None
    failure: str = ""  # why it could not be composed
    problems: list = field(default_factory=list)  # registry.errors.Problem
    estimate: dict | None = None
    estimate_note: str = ""
    axes: tuple[str, str, str] = ("", "", "")
    results: list[dict] = field(default_factory=list)
    summary: str = ""
    tuned: bool = False
    previous: Entry | None = None  # the version before, for the diff
    siblings: list[Entry] = field(default_factory=list)  # every version of the same source:name

    @property
    def key(self) -> str:
        qualified = self.name if self.source == "bundled" else f"{self.source}:{self.name}"
        return qualified + (f"@{self.version}" if self.version is not None else "")

    @property
    def page(self) -> str:
        """The page's path inside the site. Segments never hold '@' (names.py), so `name@N`
        cannot meet another recipe's page; source names never start with '_' or '.'."""
        stem = self.name + (f"@{self.version}" if self.version is not None else "")
        return f"r/{self.source}/{stem}.html"

    @property
    def status(self) -> str:
        if self.failure or any(p.is_error for p in self.problems):
            return "invalid"
        return "warnings" if self.problems else "valid"

    @property
    def run_command(self) -> str:
        return f"recipe run {shlex.quote(self.target)}"

    @property
    def latest(self) -> dict:
        """The newest measurement, as `recipe history` reads it (the last entry)."""
        return self.results[-1] if self.results else {}


@dataclass
class Catalog:
    entries: list[Entry]
    left_out: int  # untuned cells that do not validate


def number(value) -> float | None:
    """A measured figure, or None for anything that is not a plain number (a shared file may
    hold anything the schema then rejects)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def gather(progress=None) -> Catalog:
    """Every recipe composed, validated and estimated; `progress(line)`, where given, hears a few
    plain lines of how far it is (recipe catalog says them on stderr: the gathering takes a while)."""
    with sources.pinned():  # one command over every recipe: each name looked up (and hashed) once
        return _gathered(progress or (lambda line: None))


PROGRESS_LINES = 4  # lines while checking: enough to see it move in a CI log, few enough to read


def _gathered(say) -> Catalog:
    entries: list[Entry] = []
    groups: dict[tuple[str, str], list[Entry]] = {}
    left_out = 0
    say("listing every recipe, published version and cell of every source")
    every = listing.every_recipe()
    every_so_often = max(1, -(-len(every) // PROGRESS_LINES))
    for done, listed in enumerate(every, 1):
        version = listed.version if listed.published else None  # a bundled file's own number is no version here
        entry = _entry(_source(listed), listed.path, version, listed.kind, _target(listed), listed.cell)
        entry.date = listed.date
        if done % every_so_often == 0 or done == len(every):
            say(f"checked {done} of {len(every)} (composed, validated, estimated)")
        if listed.kind == "cell" and entry.status == "invalid":
            left_out += 1
            continue
        entries.append(entry)
        if listed.published:
            groups.setdefault((entry.source, entry.name), []).append(entry)
    for group in groups.values():
        group.sort(key=lambda e: e.version)
        for before, entry in zip([None, *group], group):
            entry.previous, entry.siblings = before, group
    return Catalog(entries, left_out)


def _target(listed: listing.Entry) -> str:
    """What the page's commands are given: a bundled working recipe or an untuned cell by the
    name `recipe list` shows (bare where no other source takes the name first); a team's recipe
    and every published version qualified with their source, so the command runs exactly what
    the page shows."""
    if listed.kind == "cell" or (listed.source == "bundled" and not listed.published):
        return listed.name
    return f"{listed.source}:{listed.path}" + (f"@{listed.version}" if listed.published else "")


def _source(listed: listing.Entry) -> str:
    """The source whose pages hold the recipe; an untuned cell's is the first team source that
    supplies one of its parts."""
    return next((s for s in listed.parts_from if s != "bundled"), "bundled") if listed.parts_from else listed.source


def _entry(source: str, name: str, version: int | None, kind: str, target: str, cell: tuple | None) -> Entry:
    from registry.validate import validate

    entry = Entry(source, name, version, kind, target)
    try:
        recipe = compose(target)
    except RecipeError as e:
        entry.failure = e.render(prefix=target)
        entry.axes = _axes(cell, None)
        return entry
    entry.recipe = recipe
    entry.tuned = recipe.tuned  # a tuned overlay was composed (a published version is frozen, not an overlay)
    entry.problems = validate(recipe.data, recipe.origins)
    version = _published(target) if kind == "published" else None
    if version is not None:  # its file holds values only: the parts its index entry records
        entry.axes = tuple(listing.published_parts(version, recipe.data).values())  # type: ignore[assignment]
    else:
        entry.axes = _axes(cell, recipe)
    meta = recipe.data.get("recipe")
    entry.summary = str(meta.get("summary") or "") if isinstance(meta, dict) else ""
    results = recipe.data.get("results")
    entry.results = [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
    _estimate(entry)
    return entry


def _published(target: str) -> versions.Version | None:
    """The version a published entry composed (compose looked it up just now, under pinned
    sources: no second read), None where it cannot be looked up again."""
    try:
        return versions.lookup(parse(target))
    except RecipeError:
        return None


def _axes(cell: tuple | None, recipe: Recipe | None) -> tuple[str, str, str]:
    """policy, backend, hardware: the cell's own names; for another recipe the parts it was
    composed from, else what its resolved values say (a published file holds no parts)."""
    if cell is not None:
        return cell  # type: ignore[return-value]
    if recipe is None:
        return ("", "", "")
    found = dict(versions.composed_parts(recipe.inputs))
    return tuple(found.get(axis) or listing.described(recipe.data, axis) for axis in AXES)  # type: ignore[return-value]


def _estimate(entry: Entry) -> None:
    """`recipe estimate`'s figures, where the schema accepted the structure (the estimator reads
    values as the types the schema promises)."""
    from registry import estimate as memory
    from registry import view
    from registry.validate.problems import STRUCTURAL

    if any(p.rule in STRUCTURAL for p in entry.problems):
        entry.estimate_note = "the schema rejects this recipe, so there is nothing to estimate"
        return
    data = entry.recipe.data
    est = memory.estimate(view.of(data))
    if est is None:
        entry.estimate_note = "runs on CPU or its policy declares no sizes (policy.memory): nothing to estimate"
        return
    if not est.finite:
        entry.estimate_note = memory.overflow(data)
        return
    entry.estimate = {
        "describe": memory.describe(data),
        "breakdown": dict(est.breakdown),
        "capacity_gib": est.capacity_gib,
        "total_gib": est.total_gib,
        "allocated_gib": est.allocated_gib,
        "reserved_gib": est.reserved_gib,
        "fraction": est.fraction,
        "phase": est.phase,
        "micro_batch_size": est.micro_batch_size,
        "per_sample_gib": est.per_sample_gib,
        "largest_micro_batch": est.largest_micro_batch,
        "largest_under_90": est.largest_under(0.9),
    }
