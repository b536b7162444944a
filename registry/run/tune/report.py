"""What `recipe tune` writes: the table, results.json and the winner as a tuned overlay."""

from __future__ import annotations

import os
from pathlib import Path

from registry.compose import compose
from registry.errors import RecipeError
from registry.estimate import CUDA_CONTEXT_GIB
from registry.files import write_atomic
from registry.run.tune.search import ranking
from registry.run.tune.space import MEASURED, Point, Target
from registry.validate import validate


def table_text(points: list[Point], capacity: float | None, first: Point | None = None) -> str:
    """Every candidate, the pick first; SAMPLES/S is the median step's of every launch pooled."""
    from registry.commands.render import table

    rows = []
    for rank, p in enumerate(ranking(points, first), 1):
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
                f"{p.figure.bounds()} {p.figure.confidence:.0%}" if p.status == MEASURED else "-",
                f"{p.peak_allocated_gib:.2f}" if p.peak_allocated_gib is not None else "-",
                predicted,
                f"{p.figure.launches}/{p.figure.steps}" if p.status == MEASURED else "-",
                p.status + (f": {p.reason}" if p.reason else ""),
            ]
        )
    header = ["RANK", "BACKEND", "MICRO", "ACCUM", "CKPT", "SAMPLES/S", "INTERVAL", "PEAK GiB", "PREDICTED GiB"]
    header += ["RUNS/STEPS", "STATUS"]
    return table(rows, header)


def results_json(points: list[Point], best: Point | None, info: dict) -> dict:
    """Every candidate, the pick first (`winner`); samples_per_s with its interval."""
    rows = []
    for p in ranking(points, best):
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
                "samples_per_s_interval": p.figure.json() if p.status == MEASURED else None,
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
    own: dict = {}
    if target.file is not None:
        # a file outside every source may extend only files below its own folder, so tuned.yaml
        # (in the output folder) cannot extend the tuned file: it carries the file's own layer and
        # extends what the file extends
        parent, own = file_layer(target.file)
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
            + f", {best.samples_per_s:.1f} samples/s {best.figure.bounds()}"
        ),
        "tags": ["tuned"],
    }
    body: dict = {"recipe": meta, "extends": [parent] if isinstance(parent, str) else parent, **own}
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
        best.outcome,
        path,
        command,
        best.steps,
        source=_source(best),
        memory_fraction=fraction,
        figure=best.figure,  # every launch of the pick, not only its last
    )
    composed = compose(str(path))
    errors = [p for p in validate(composed.data, composed.origins) if p.is_error]
    if errors:
        raise RecipeError(f"{path}: the tuned recipe does not validate: " + "; ".join(p.render() for p in errors))
    return path


class NoOverlay(RecipeError):
    """A pick that no tuned.yaml can hold: said, and the rest of the output kept."""


def file_layer(file: Path) -> tuple[list[str], dict]:
    """(what the file extends, its own sections) for tuned.yaml to carry; refused where the file
    extends another by path, which no file elsewhere can reach."""
    from registry.load import load_file
    from registry.names import looks_like_file

    data = load_file(file).data
    extends = data.get("extends") or []
    extends = [extends] if isinstance(extends, str) else list(extends)
    by_path = [e for e in extends if isinstance(e, str) and looks_like_file(e)]
    if by_path:
        raise NoOverlay(
            f"no tuned.yaml: {file} extends {by_path[0]!r} by path, which a file in the output folder cannot "
            "extend (hint: set the tuned micro batch and accumulation in the file itself, as the table says)"
        )
    return extends, {k: v for k, v in data.items() if k not in ("recipe", "extends", "results")}


def _source(best: Point) -> str:
    kind = best.outcome.doc["trainer"]["kind"] if best.outcome and best.outcome.doc else "builtin"
    if kind == "builtin":
        return "recipe tune (built-in trainer)"
    return f"recipe tune ({kind}, rehearsed: random weights, synthetic data)"


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
