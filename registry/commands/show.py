"""`recipe show`: print a resolved recipe, optionally with where each value was set."""

from __future__ import annotations

import sys

from registry.errors import Exit

NAME = "show"
HELP = "print a resolved recipe"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "shown, valid or not (recipe validate judges it)", 1: "a file it names is malformed"}
EXAMPLES = """\
examples:
  recipe show pi07/zero2/8xA100 --origin
  recipe show tiny/ddp/cpu train.micro_batch_size=16 hardware=2x1 --format json
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("target", metavar="NAME|FILE")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="overrides and axis swaps (hardware=4xH100)")
    p.add_argument("--origin", action="store_true", help="say which file:line:column (or command line) set each value")
    p.add_argument("--format", choices=("yaml", "json"), default="yaml")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.commands.render import to_json, to_yaml
    from registry.compose import compose

    recipe = compose(args.target, args.overrides)
    origins = recipe.origins if args.origin else None
    text = to_json(recipe.data, origins) if args.format == "json" else to_yaml(recipe.data, origins)
    sys.stdout.write(text)
    return Exit.OK
