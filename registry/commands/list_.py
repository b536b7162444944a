"""`recipe list`: the cells of the policy x backend x hardware matrix, tuned or not; or the
parts of each axis; or the sources."""

from __future__ import annotations

import itertools
import sys

from registry.errors import Exit, RecipeError
from registry.load import load_cached
from registry.names import AXES, Name
from registry.sharing import sources

NAME = "list"
HELP = "list recipes (tuned and untuned cells)"
EXAMPLES = """\
examples:
  recipe list --policy pi07
  recipe list --tuned --hardware cpu
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    for axis in AXES:
        p.add_argument(f"--{axis}", metavar="NAME", help=f"only this {axis} part")
    p.add_argument("--tuned", action="store_true", help="only cells with a tuned overlay")
    p.add_argument("--all", action="store_true", help="every cell, even without filters")
    p.add_argument("--parts", action="store_true", help="list the parts of each axis instead")
    p.add_argument("--sources", action="store_true", help="list the sources, and which one wins where names collide")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.commands.render import table

    if args.parts:
        sys.stdout.write(table(parts_rows(), ["AXIS", "PART", "SUMMARY"]))
        return Exit.OK
    if args.sources:
        from registry.sharing.manage import rows, winners

        sys.stdout.write(table(rows(), ["SOURCE", "KIND", "LOCATION", "COMMIT"]))
        clashes = winners()
        if clashes:
            print()
            sys.stdout.write(table(clashes, ["NAME", "WINS", "SHADOWED"]))
        return Exit.OK
    filters = {axis: getattr(args, axis) for axis in AXES}
    for axis, value in filters.items():
        if value and value not in sources.part_names(axis):
            raise RecipeError(f"unknown {axis} {value!r}; known: {', '.join(sources.part_names(axis))}")
    rows, hidden = cells(filters, tuned_only=args.tuned, everything=args.all)
    sys.stdout.write(table(rows, ["NAME", "TUNED", "VERSION", "SUMMARY"]))
    if hidden:
        print(f"({hidden} untuned cells not shown: filter with --policy/--backend/--hardware, or --all)")
    return Exit.OK


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
                str(meta.get("version") or "-") if meta else "-",
                (meta.get("summary") or "") if meta else _untuned_summary(cell),
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
            rows.append([axis, part, _meta(sources.find(Name((axis, part)))).get("summary") or ""])
    return rows
