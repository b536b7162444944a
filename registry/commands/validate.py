"""`recipe validate`: check recipes against the schemas and invariants."""

from __future__ import annotations

import sys

from registry.errors import RecipeError
from registry.names import is_override

NAME = "validate"
HELP = "check recipes against the schemas and invariants"
EXAMPLES = """\
examples:
  recipe validate pi07/zero2/8xA100 hardware=8xA100-40GB
  recipe validate --all -q
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        NAME,
        help=HELP,
        description="Exit 0: valid (warnings allowed); 1: invalid; 2: usage error or unknown name.",
        epilog=EXAMPLES,
    )
    p.add_argument("args", nargs="*", metavar="NAME|FILE|KEY=VALUE", help="recipes, then overrides applied to each")
    p.add_argument("--all", action="store_true", help="every bundled part, overlay and recipe")
    p.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.validate.report import validate_all, validate_target

    targets = [a for a in args.args if not is_override(a)]
    sets = [a for a in args.args if is_override(a)]
    if args.all and targets:
        raise RecipeError("give recipes or --all, not both")
    if not args.all and not targets:
        raise RecipeError("nothing to validate (hint: recipe validate NAME|FILE... or --all)")
    reports = validate_all() if args.all else (validate_target(t, sets) for t in targets)
    worst = 0
    for report in reports:
        for line in report.lines():
            print(line)
        if not args.quiet:
            print(report.summary(), file=sys.stderr)
        worst = max(worst, report.exit_code)
    return worst
