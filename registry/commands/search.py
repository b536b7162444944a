"""`recipe search TEXT`: recipes whose name, summary or tags hold TEXT, from every source and
every cell (the rows and columns of `recipe list`)."""

from __future__ import annotations

from registry.errors import Exit, RecipeError

NAME = "search"
HELP = "find recipes by name, summary or tag (any case), with their source and validity"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "searched (no match prints an empty table)"}
EXAMPLES = """\
examples:
  recipe search zero3 --valid
  recipe search "micro batch 20" --format json
"""


def register(subparsers) -> None:
    from registry.commands.list_ import add_finding_arguments

    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("text", metavar="TEXT")
    add_finding_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.commands.list_ import show
    from registry.names import AXES
    from registry.sharing import listing, sources

    if not args.text.strip():
        raise RecipeError("nothing to search for (hint: recipe search TEXT)")
    with sources.pinned():
        found, _ = listing.entries(
            dict.fromkeys(AXES), everything=True, every_version=args.versions, grep=args.text, valid_only=args.valid
        )
    show(found, args.format)
    return Exit.OK
