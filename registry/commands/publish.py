"""`recipe publish`: validate a recipe and freeze it as the next immutable version of its name
in a source: written into a directory source, or committed and pushed to a git source through the
working copy the registry keeps for it (sharing/gitpublish.py)."""

from __future__ import annotations

import sys

from registry import names
from registry.errors import Exit, RecipeError
from registry.sharing import sources

NAME = "publish"
HELP = "freeze a recipe as the next immutable version of its name in a source"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "published", 1: "the recipe is invalid: nothing was published"}
EXAMPLES = """\
examples:
  recipe publish my.yaml --to team-a
  recipe publish pi07/zero2/8xA100 train.micro_batch_size=16 --to team-a
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("target", metavar="FILE|NAME")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.add_argument(
        "--to", required=True, metavar="SOURCE", help="a directory or git source (recipe source add, RECIPE_PATH)"
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="publish a name another source already has (bundled included), shadowing it for this source's users",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.compose import compose
    from registry.sharing import trust
    from registry.sharing.versions import hashes, publish
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
    if not args.replace:
        # a name another source has would be shadowed for everyone who adds this source, and its
        # bare name would change meaning for them: only on purpose (docs/failure-modes.md §53)
        _not_shadowing(recipe.data["recipe"]["name"], chosen[0])
    if chosen[0].kind == "git":  # through the working copy the registry keeps, then pushed
        from registry.sharing import gitpublish

        version = gitpublish.publish(recipe, chosen[0])
    else:
        # never a next version beside one changed since this machine saw it (docs/failure-modes.md §69)
        trust.refuse_publishing(chosen[0], lambda: hashes(chosen[0]), recipe.data["recipe"]["name"])
        version = publish(recipe, chosen[0])
    trust.remember(chosen[0], {f"{version.name}@{version.number}": version.sha256})  # the publisher saw it first
    print(f"published {version.qualified} ({version.file}, sha256 {version.sha256[:12]})")
    return Exit.OK


def _not_shadowing(name: str, target: sources.Source) -> None:
    """A first publish of a name into `target` while another source has that name (a file, a
    cell of its parts or published versions) needs --replace; a source's next version of a name
    it has does not."""
    from registry.sharing.versions import index

    try:
        parsed = names.parse(name)
    except RecipeError:
        return  # the schema already refused a malformed name

    def holds(source: sources.Source) -> bool:
        return sources.has(source, parsed) or name in index(source)

    if holds(target):
        return
    others = [s.name for s in sources.all_sources() if s.name != target.name and holds(s)]
    if others:
        raise RecipeError(
            f"{name}: {', '.join(others)} already has this name; publishing it to {target.name} would shadow it "
            f"for everyone who adds {target.name} (hint: publish under a name of your own, e.g. "
            f"recipe.name=my-team/{name.replace('/', '-')}, or --replace to shadow {others[0]} on purpose)"
        )
