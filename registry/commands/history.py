"""`recipe history`: the published versions of a name in every source, with dates and results."""

from __future__ import annotations

import sys

from registry.errors import Exit, RecipeError

NAME = "history"
HELP = "published versions of a name, with dates and results"
EXAMPLES = """\
example:
  recipe history pi07/zero2/8xA100
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("name")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.commands.render import table
    from registry.names import parse
    from registry.sharing.versions import history_rows

    rows = history_rows(parse(args.name).path)
    if not rows:
        raise RecipeError(f"{args.name}: no published versions in any source")
    sys.stdout.write(table(rows, ["VERSION", "PUBLISHED", "SHA256", "SAMPLES/S", "SUMMARY"]))
    return Exit.OK
