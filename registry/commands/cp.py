"""`recipe cp`: copy a recipe's own file to edit, keeping the parts it extends."""

from __future__ import annotations

from pathlib import Path

from registry.errors import Exit

NAME = "cp"
HELP = "copy a recipe's own file to edit, keeping what it extends"
EXAMPLES = """\
example:
  recipe cp pi07/zero2/8xA100 mine.yaml
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("target", metavar="NAME")
    p.add_argument("dest", metavar="DEST.yaml")
    p.add_argument("--force", action="store_true", help="replace DEST if it exists")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.sharing.copying import copy

    print(f"copied {args.target} to {copy(args.target, Path(args.dest), args.force)}")
    return Exit.OK
