"""`recipe tune`: search backend x micro batch x accumulation at a fixed global batch, prune by the
rules and the memory estimate, measure the rest with successive halving, write the winner."""

from __future__ import annotations

import shlex
import sys

from registry.commands import number
from registry.errors import RecipeError
from registry.names import is_override

NAME = "tune"
HELP = "find the fastest backend, micro batch and accumulation at a fixed global batch"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "a best candidate was found", 1: "nothing could be measured"}
EXAMPLES = """\
examples:
  recipe tune tiny/cpu --backends ddp,zero2,zero3 --global-batch 8 --steps 2 --warmup 1
  recipe tune ref-1b/2xH100 --budget 30
  recipe tune ref-1b/zero2/2xH100 --record-to benchmarks/results/tune_points.jsonl
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        NAME,
        help=HELP,
        description=(
            "POLICY/HARDWARE (every backend's cell), a cell or a recipe FILE (tuned around it). Writes table.txt, "
            "results.json, plot.svg, points.jsonl (predicted vs measured memory) and tuned.yaml into the output folder."
        ),
        epilog=EXAMPLES,
    )
    p.add_argument("target", metavar="POLICY/HARDWARE|NAME|FILE")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.add_argument("--backends", help="comma-separated backend parts (default: every backend the rules allow)")
    p.add_argument("--global-batch", type=number(int, 1), help="samples per optimizer step (default: the recipe's)")
    p.add_argument(
        "--budget",
        type=number(float, 0, above=True),
        metavar="MINUTES",
        help="launch no new run after this many minutes",
    )
    p.add_argument("--objective", choices=("samples_per_s",), default="samples_per_s")
    p.add_argument(
        "--steps", type=number(int, 1), default=3, help="measured steps of the first rung (default 3; x3 each rung)"
    )
    p.add_argument("--warmup", type=number(int, 0), default=2, help="steps before measuring, every rung (default 2)")
    p.add_argument(
        "--tie-runs",
        type=number(int, 0),
        default=4,
        metavar="N",
        help="launches allowed after the last rung to separate the best from candidates within noise (default 4)",
    )
    p.add_argument("--output-dir", help="default runs/tune/NAME/TIMESTAMP")
    p.add_argument("--record-to", metavar="FILE", help="also append points.jsonl's lines to FILE")
    p.add_argument("--allow-hardware-mismatch", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.run.tune import main

    if is_override(args.target):
        raise RecipeError("nothing to tune (hint: recipe tune tiny/cpu)")
    backends = None
    if args.backends is not None:
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        if not backends:
            raise RecipeError("--backends names no backend (hint: --backends ddp,zero2)")
    command = "recipe " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "recipe tune"
    return main(
        args.target,
        args.overrides,
        backends,
        args.global_batch,
        args.budget,
        args.warmup,
        args.steps,
        args.output_dir,
        args.record_to,
        args.allow_hardware_mismatch,
        command,
        args.tie_runs,
    )
