"""`recipe schema`: print the joined JSON Schema of a recipe file."""

from __future__ import annotations

import json
from pathlib import Path

from registry.errors import Exit

NAME = "schema"
HELP = "print the joined JSON Schema of a recipe file"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "printed or written"}
EXAMPLES = """\
examples:
  recipe schema > recipe.schema.json
  recipe schema -o team-recipes/recipe.schema.json   # what recipe cp and recipe import bind files to
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write it to FILE (marked as written by recipe, so that recipe cp and recipe import may renew it)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    if args.output:
        from registry.sharing.binding import write_schema

        write_schema(Path(args.output))
        return Exit.OK
    from registry.validate.schemas import joined

    print(json.dumps(joined(), indent=2))
    return Exit.OK
