"""`recipe publish`: validate a recipe and freeze it as the next immutable version of its name
in a directory source."""

from __future__ import annotations

import sys

from registry.errors import Exit, RecipeError
from registry.sharing import sources

NAME = "publish"
HELP = "freeze a recipe as the next immutable version of its name in a source"
EXAMPLES = """\
examples:
  recipe publish my.yaml --to team-a
  recipe publish pi07/zero2/8xA100 train.micro_batch_size=16 --to team-a
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("target", metavar="FILE|NAME")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.add_argument("--to", required=True, metavar="SOURCE", help="a directory source (recipe source add, RECIPE_PATH)")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.compose import compose
    from registry.sharing.versions import publish
    from registry.validate import validate

    recipe = compose(args.target, args.overrides)
    problems = validate(recipe.data, recipe.origins)
    for p in problems:
        print(p.render(), file=sys.stderr)
    if any(p.is_error for p in problems):
        raise RecipeError(f"{recipe.name}: invalid; nothing was published", Exit.INVALID)
    chosen = [s for s in sources.all_sources() if s.name == args.to]
    if not chosen:
        raise RecipeError(f"unknown source {args.to!r}; known: {', '.join(s.name for s in sources.all_sources())}")
    version = publish(recipe, chosen[0])
    print(f"published {version.qualified} ({version.file}, sha256 {version.sha256[:12]})")
    return Exit.OK
