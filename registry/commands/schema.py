"""`recipe schema`: print the joined JSON Schema of a recipe file."""

from __future__ import annotations

import json

from registry.errors import Exit

NAME = "schema"
HELP = "print the joined JSON Schema of a recipe file"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "printed or written"}
EXAMPLES = """\
example:
  recipe schema > recipe.schema.json
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.validate.schemas import joined

    print(json.dumps(joined(), indent=2))
    return Exit.OK
