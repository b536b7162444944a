"""`recipe cp`: a new recipe extending an existing one, with its own settings to edit."""

from __future__ import annotations

from registry.errors import Exit

NAME = "cp"
HELP = "copy a recipe to edit: a new recipe that extends it"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "copied", 1: "the recipe to copy is invalid"}
EXAMPLES = """\
examples:
  recipe cp pi07/zero2/8xA100 mine.yaml             # recipe.name: mine
  recipe cp pi07/zero2/8xA100 exp/pi07-fast         # writes exp/pi07-fast.yaml here
  recipe cp team-a:pi07/zero2/8xA100@2 exp/pi07-fast --to team-a
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        NAME,
        help=HELP,
        description="The copy has its own recipe.name and no version, tuned tag, summary or results; "
        "it extends SRC (pinned when SRC is a published version). DEST.yaml names it after the file "
        "(its path inside a source when it lies in one); a NAME writes NAME.yaml.",
        epilog=EXAMPLES,
    )
    p.add_argument("target", metavar="SRC")
    p.add_argument("dest", metavar="NAME|DEST.yaml")
    p.add_argument("--to", metavar="SOURCE", help="write NAME.yaml into this directory source")
    p.add_argument("--force", action="store_true", help="replace DEST if it exists")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.sharing.copying import copy

    path, name = copy(args.target, args.dest, args.force, args.to)
    print(f"copied {args.target} to {path} as {name}")
    return Exit.OK
