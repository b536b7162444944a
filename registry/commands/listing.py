"""`recipe list`: the cells of the policy x backend x hardware matrix, tuned or not."""

from __future__ import annotations

import itertools

from registry.load import load_cached
from registry.names import AXES, Name
from registry.sharing import sources


def _meta(path) -> dict:
    meta = load_cached(path).data.get("recipe")
    return meta if isinstance(meta, dict) else {}


def cells(filters: dict, tuned_only: bool, everything: bool) -> tuple[list[list[str]], int]:
    """Rows for the table, and how many untuned cells were left out."""
    tuned: dict[tuple, dict] = {}
    for source in reversed(sources.all_sources()):  # the first source wins a clash
        for cell in source.overlays():
            tuned[cell] = _meta(source.file(cell))
    axes = [[filters[a]] if filters[a] else sources.part_names(a) for a in AXES]
    filtered = any(filters.values())
    rows, hidden = [], 0
    for cell in itertools.product(*axes):
        meta = tuned.get(cell)
        if meta is None and (tuned_only or not (filtered or everything)):
            hidden += 0 if tuned_only else 1
            continue
        rows.append(
            [
                "/".join(cell),
                "tuned" if meta is not None else "-",
                str(meta.get("version", "-")) if meta else "-",
                meta.get("summary", "") if meta else _untuned_summary(cell),
            ]
        )
    rows.sort(key=lambda r: (r[1] != "tuned", r[0]))
    return rows, hidden


def _untuned_summary(cell: tuple) -> str:
    return "composed from parts " + ", ".join(f"{a}/{c}" for a, c in zip(AXES, cell))


def parts_rows() -> list[list[str]]:
    rows = []
    for axis in AXES:
        for part in sources.part_names(axis):
            rows.append([axis, part, _meta(sources.find(Name((axis, part)))).get("summary", "")])
    return rows
