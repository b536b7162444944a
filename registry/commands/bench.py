"""`recipe bench`: measure samples/s, peak memory and phase shares of recipes, or of a matrix of
them, with the built-in trainer."""

from __future__ import annotations

import shlex
import sys

from registry.errors import RecipeError
from registry.names import is_override

NAME = "bench"
HELP = "measure samples/s, peak memory and phase shares with the built-in trainer"
EXAMPLES = """\
examples:
  recipe bench 'tiny/*/cpu' --steps 20
  recipe bench 'ref-1b/{zero2,fsdp}/2xH100' --record
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        NAME,
        help=HELP,
        description="NAME|FILE|PATTERN: a recipe, or a matrix such as 'tiny/*/cpu' or 'ref-1b/{zero2,fsdp}/2xH100'.",
        epilog=EXAMPLES,
    )
    p.add_argument("targets", nargs="+", metavar="NAME|FILE|PATTERN|KEY=VALUE")
    p.add_argument("--steps", type=int, default=20, help="measured steps (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="steps before measuring (default 5)")
    p.add_argument(
        "--record", action="store_true", help="append the results, with provenance, to each recipe's own file"
    )
    p.add_argument("--allow-hardware-mismatch", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.run.bench import main as bench

    targets = [t for t in args.targets if not is_override(t)]
    sets = [t for t in args.targets if is_override(t)]
    if not targets:
        raise RecipeError("nothing to bench (hint: recipe bench 'tiny/*/cpu' --steps 20)")
    if args.steps < 1 or args.warmup < 0:
        raise RecipeError("--steps must be at least 1 and --warmup at least 0")
    command = "recipe " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "recipe bench"
    return bench(targets, sets, args.steps, args.warmup, args.allow_hardware_mismatch, args.record, command)
