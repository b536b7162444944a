"""`recipe source add|list|update|remove`: where recipes come from (directories and git
repositories, searched in order)."""

from __future__ import annotations

import sys

from registry.errors import Exit

NAME = "source"
HELP = "manage where recipes come from (directories and git repositories)"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "done"}
EXAMPLES = """\
examples:
  recipe source add team-a git@host:team-a/recipes.git
  recipe source add infra /shared/infra-recipes --rules-everywhere
  recipe source update team-a
  recipe source update team-a --accept exp/x@1   # take a version's new hash, deliberately changed
  recipe source accept infra exp/x@1             # the same for a directory source edited in place
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add a directory or a git repository (cloned into the cache)")
    add.add_argument("name")
    add.add_argument("where", metavar="PATH|GIT_URL")
    add.add_argument(
        "--rules-everywhere",
        action="store_true",
        help="apply the source's rules/*.json to every recipe (default: only to the source's own recipes)",
    )
    actions.add_parser("list", help="the sources in search order")
    update = actions.add_parser("update", help="fetch git sources to their newest commit")
    update.add_argument("names", nargs="*")
    update.add_argument(
        "--accept",
        action="append",
        default=[],
        metavar="NAME@N",
        help="take the remote's new sha256 for this published version (repeatable); others that changed still stop it",
    )
    accept = actions.add_parser(
        "accept", help="take the sha256 a source's published versions have now, for versions remembered otherwise"
    )
    accept.add_argument("name", metavar="SOURCE")
    accept.add_argument("versions", nargs="+", metavar="NAME@N")
    remove = actions.add_parser("remove", help="forget a source")
    remove.add_argument("name")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.commands.render import table
    from registry.sharing import manage

    if args.action == "add":
        print(f"added {manage.add(args.name, args.where, args.rules_everywhere)}")
    elif args.action == "remove":
        manage.remove(args.name)
        print(f"removed {args.name}")
    elif args.action == "update":
        for line in manage.update(args.names, tuple(_pins(args.accept))):
            print(line)
    elif args.action == "accept":
        for line in manage.accept(args.name, _pins(args.versions)):
            print(line)
    else:
        sys.stdout.write(table(manage.rows(), ["SOURCE", "KIND", "LOCATION", "COMMIT"]))
    return Exit.OK


def _pins(given: list[str]) -> list[str]:
    """NAME@N as typed, checked: a version of a source's name, without the source."""
    from registry import names
    from registry.errors import RecipeError

    out = []
    for text in given:
        parsed = names.parse(text)
        if parsed.source or parsed.version is None:
            raise RecipeError(f"{text!r}: give a published version as NAME@N (the source is named apart)")
        out.append(f"{parsed.path}@{parsed.version}")
    return out
