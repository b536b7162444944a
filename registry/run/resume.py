"""`recipe run --resume`: which run folder, which checkpoint, and whether the recipe may still
continue it. A resume may change only what keeps the saved state meaningful, the fields marked
`"x-resume": "may-change"` in schemas/ (steps, checkpoint, log and eval frequency); any other
difference is refused, naming each field (docs/failure-modes.md §37)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from registry import view
from registry.compose import Recipe
from registry.doc import MISSING, join, lookup
from registry.errors import RecipeError
from registry.train import state

RESUMABLE = ("builtin", "lerobot")  # the trainers `recipe run --resume` drives
MAY_CHANGE = "may-change"


@dataclass(frozen=True)
class Plan:
    folder: Path
    checkpoint: str | None  # relative to the folder: what the built-in trainer loads
    step: int | None  # the checkpoint's step (built-in trainer)
    changed: tuple[str, ...]  # fields that differ from the run's lock, all of them may change
    lock: dict = field(default_factory=dict)  # the run's lock as read (its environment: run/envlock.py)


def runs_of(recipe: Recipe, base: Path = Path("runs")) -> Path:
    """Where the runs of a recipe go: runs/pi07_zero2_8xA100/<timestamp>."""
    return base / recipe.name.replace("/", "_").replace(":", "_").replace("@", "_v")


def run_order(folder: Path) -> tuple:
    """runs/NAME/<stamp>[-n]: by time stamp, then n as a number (-10 after -9), then the name, so
    that `<stamp>` and `<stamp>-1` never tie on the folders' listing order. A folder named by hand
    sorts below every stamped run: letters would otherwise sort after any stamp's digits. The
    folders' mtimes play no part (a copied or touched run keeps its place)."""
    match = re.fullmatch(r"(\d{8}-\d{6})(?:-(\d+))?", folder.name)
    if match is None:
        return (0, "", 0, folder.name)
    return (1, match.group(1), int(match.group(2) or 1), folder.name)


def folder_of(recipe: Recipe, where: str) -> Path:
    """The run folder to resume: DIR, the run a checkpoint folder DIR/checkpoints/NNNNNN belongs
    to, or the newest run of the recipe."""
    kind = recipe.data["trainer"]["kind"]
    if kind not in RESUMABLE:
        raise RecipeError(f"--resume drives the built-in and LeRobot trainers, not {kind}")
    if not view.of(recipe.data).train.checkpoint.resumable:
        raise RecipeError(
            f"{recipe.name}: train.checkpoint.resumable is false, so its checkpoints hold no optimizer state to"
            " resume from (hint: start a new run)"
        )
    folder = Path(where) if where else _latest_run(recipe)
    if folder.parent.name == "checkpoints" and state.CHECKPOINT.fullmatch(folder.name):
        folder = folder.parent.parent
    if not (folder / "recipe.lock.yaml").is_file():
        raise RecipeError(f"{folder}: not a run directory (no recipe.lock.yaml)")
    return folder


def plan(recipe: Recipe, folder: Path, where: str) -> Plan:
    """Read the run's lock and checkpoints (under the folder's lock, so that nothing moves)."""
    lock_file = folder / "recipe.lock.yaml"
    try:
        content = yaml.safe_load(lock_file.read_text(encoding="utf-8"))
        resolved = content["resolved"]
        if not isinstance(resolved, dict):
            raise TypeError
    except (OSError, UnicodeDecodeError, yaml.YAMLError, TypeError, KeyError) as e:
        raise RecipeError(
            f"{lock_file}: not a recipe lock this run wrote ({type(e).__name__}); cannot resume"
        ) from None
    changed = _changes(resolved, recipe.data, folder)
    kind = recipe.data["trainer"]["kind"]
    if kind != "builtin":
        if not (folder / _last_state(kind)).is_file():
            raise RecipeError(f"{folder}: no checkpoint to resume from ({_last_state(kind)})")
        return Plan(folder, None, None, changed, content)
    checkpoint, step = _checkpoint(folder, where)
    return Plan(folder, checkpoint, step, changed, content)


def _checkpoint(folder: Path, where: str) -> tuple[str, int]:
    """The checkpoint named by --resume DIR/checkpoints/NNNNNN, else the newest complete one;
    each newer one that is incomplete or damaged is named on stderr."""
    named = Path(where) if where else None
    if named is not None and named.parent.name == "checkpoints" and state.CHECKPOINT.fullmatch(named.name):
        try:
            return f"checkpoints/{named.name}", state.check(named)
        except ValueError as e:
            raise RecipeError(f"{named}: cannot resume from it: {e}") from None
    found = state.complete(folder / "checkpoints") if (folder / "checkpoints").is_dir() else []
    for checkpoint, step, wrong in found:
        if wrong is None:
            return f"checkpoints/{checkpoint.name}", step
        print(f"recipe: warning: skipping {checkpoint}: {wrong}", file=sys.stderr)
    if found:
        raise RecipeError(f"{folder}: no complete checkpoint to resume from ({len(found)} damaged or incomplete)")
    raise RecipeError(f"{folder}: no checkpoint to resume from (checkpoints/NNNNNN/{state.FILE})")


@cache
def may_change() -> tuple[str, ...]:
    """Dotted paths marked "x-resume": "may-change" in the schemas: whole sections in the root
    schema (the recipe's name and results), fields in the section schemas."""
    from registry.validate.schemas import ROOT, SECTIONS, documents

    found: list[str] = []

    def walk(node: dict, prefix: str) -> None:
        for key, sub in node.get("properties", {}).items():
            if isinstance(sub, dict):
                if sub.get("x-resume") == MAY_CHANGE:
                    found.append(f"{prefix}{key}")
                if prefix:
                    walk(sub, f"{prefix}{key}.")

    docs = documents()
    walk(docs[ROOT], "")
    for section in SECTIONS:
        if f"{section}.schema.json" in docs and f"{section}.schema.json" != ROOT:
            walk(docs[f"{section}.schema.json"], f"{section}.")
    return tuple(found)


def _changes(before: dict, after: dict, folder: Path) -> tuple[str, ...]:
    """The fields that differ; RecipeError naming each of those a resume may not change."""
    differing = sorted(set(_differences(before, after)))
    free = may_change()
    refused = [p for p in differing if not any(p == f or p.startswith(f + ".") for f in free)]
    if refused:
        shown = "; ".join(f"{p}: {_show(lookup(before, p))} -> {_show(lookup(after, p))}" for p in refused)
        raise RecipeError(
            f"{folder}: the saved state does not fit the recipe as given ({shown})"
            f" (hint: pass the run's own name and overrides; a resume may change only {', '.join(free)})"
        )
    return tuple(differing)


def _differences(a, b, prefix: tuple = ()):
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() | b.keys():
            yield from _differences(a.get(key, MISSING), b.get(key, MISSING), prefix + (key,))
    elif a != b or type(a) is not type(b):
        yield join(prefix)


def _show(value) -> str:
    text = "unset" if value is MISSING else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _latest_run(recipe: Recipe) -> Path:
    base = runs_of(recipe)
    found = [p for p in base.glob("*") if (p / "recipe.lock.yaml").is_file()] if base.is_dir() else []
    runs = sorted(found, key=run_order)
    if not runs:
        raise RecipeError(f"no earlier run of {recipe.name} under {base} (hint: --resume DIR)")
    return runs[-1]


def _last_state(kind: str) -> str:
    """Where a trainer leaves what a resume reads."""
    if kind == "lerobot":
        from registry.trainers import lerobot

        return lerobot.RESUME_CONFIG
    return "checkpoints/last/" + state.FILE
