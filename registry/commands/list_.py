"""`recipe list`: every recipe a name reaches, from every source: tuned cells, published
versions, free-standing recipes, and (filtered or --all) untuned cells; or the parts of each
axis; or the sources.

sharing/listing.py finds the rows (what exists, its name as `show` takes it, source, version,
status); this module parses the arguments and prints them as a table or JSON.
"""

from __future__ import annotations

import json
import sys

from registry.errors import Exit, RecipeError
from registry.names import AXES
from registry.sharing import listing, sources

NAME = "list"
HELP = "list recipes from every source, with their version, source and validity"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "listed (invalid recipes are rows with their reasons, not a failure)"}
EXAMPLES = """\
examples:
  recipe list --policy pi07
  recipe list --tuned --hardware cpu
  recipe list --all --valid --grep zero3
  recipe list --versions --format json
"""

HEADER = ["NAME", "VERSION", "SOURCE", "TUNED", "STATUS", "REASON", "SHADOWS", "SUMMARY"]


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    for axis in AXES:
        p.add_argument(f"--{axis}", metavar="NAME", help=f"only this {axis} part")
    p.add_argument("--tuned", action="store_true", help="only cells with a tuned overlay")
    p.add_argument("--all", action="store_true", help="every cell, even without filters")
    add_finding_arguments(p)
    p.add_argument("--grep", metavar="TEXT", help="only names, summaries or tags holding TEXT (any case)")
    p.add_argument("--parts", action="store_true", help="list the parts of each axis instead")
    p.add_argument("--sources", action="store_true", help="list the sources, and which one wins where names collide")
    p.set_defaults(func=run)


def add_finding_arguments(p) -> None:
    """Arguments `list` and `search` share."""
    p.add_argument(
        "--valid",
        action="store_true",
        help="only recipes without errors: STATUS valid or warnings (rows with warnings are kept)",
    )
    p.add_argument("--versions", action="store_true", help="every published version, and shadowed recipes too")
    p.add_argument("--format", choices=("table", "json"), default="table")


def run(args) -> int:
    if args.parts:
        emit(listing.parts(), ["AXIS", "PART", "SUMMARY"], args.format)
        return Exit.OK
    if args.sources:
        from registry.sharing.manage import rows, winners

        emit(rows(), ["SOURCE", "KIND", "LOCATION", "COMMIT"], args.format)
        clashes = winners()
        if clashes and args.format == "table":
            print()
            emit(clashes, ["NAME", "WINS", "SHADOWED"], args.format)
        return Exit.OK
    filters = {axis: getattr(args, axis) for axis in AXES}
    for axis, value in filters.items():
        if value and value not in sources.part_names(axis):
            generated = ""
            if axis == "hardware":
                from registry.compose import hardware

                if hardware.generable(value):
                    generated = " (a generated hardware name: only parts with a file are listed)"
            raise RecipeError(f"unknown {axis} {value!r}{generated}; known: {', '.join(sources.part_names(axis))}")
    with sources.pinned():
        found, hidden = listing.entries(
            filters,
            tuned_only=args.tuned,
            everything=args.all or bool(args.grep),
            every_version=args.versions,
            grep=args.grep,
            valid_only=args.valid,
        )
    show(found, args.format)
    if hidden:
        note = f"({hidden} untuned cells not shown: filter with --policy/--backend/--hardware, or --all)"
        print(note, file=sys.stderr if args.format == "json" else sys.stdout)
    return Exit.OK


def show(found: list[listing.Entry], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps([_json(e) for e in found], indent=2))
        return
    from registry.commands.render import table

    sys.stdout.write(table([_row(e) for e in found], HEADER))


def _json(e: listing.Entry) -> dict:
    return {
        "name": e.name,
        "version": e.version,
        "target": e.target or e.name,  # what `recipe show` takes for exactly this entry
        "source": e.source,
        "tuned": e.tuned,
        "status": e.status,
        # why it is invalid: each error's rule and message (docs/design.md, "Fixes")
        "reasons": [{"rule": rule, "message": message} for rule, message in e.reasons],
        "shadows": e.shadows,
        "summary": e.summary,
    }


def _row(e: listing.Entry) -> list[str]:
    return [
        e.name,
        str(e.version) if e.version else "-",
        e.source,
        "tuned" if e.tuned else "-",
        e.status,
        ", ".join(dict.fromkeys(rule for rule, _ in e.reasons)) or "-",
        ", ".join(e.shadows) or "-",
        e.summary,
    ]


def emit(rows: list[list[str]], header: list[str], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps([dict(zip((h.lower() for h in header), r)) for r in rows], indent=2))
        return
    from registry.commands.render import table

    sys.stdout.write(table(rows, header))
