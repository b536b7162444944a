"""`recipe source add|list|update|remove`: where recipes come from (directories and git
repositories, searched in order)."""

from __future__ import annotations

import sys

from registry.errors import Exit

NAME = "source"
HELP = "manage where recipes come from (directories and git repositories)"
EXAMPLES = """\
examples:
  recipe source add team-a git@host:team-a/recipes.git
  recipe source add infra /shared/infra-recipes --rules-everywhere
  recipe source update team-a
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
        for line in manage.update(args.names):
            print(line)
    else:
        sys.stdout.write(table(manage.rows(), ["SOURCE", "KIND", "LOCATION", "COMMIT"]))
    return Exit.OK
