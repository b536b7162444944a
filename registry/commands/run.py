"""`recipe run`: validate, resolve into a fresh run directory and launch (or resume) the trainer."""

from __future__ import annotations

from registry.errors import RecipeError

NAME = "run"
HELP = "validate, resolve into a fresh run directory and launch"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {
    0: "the run finished (or --dry-run printed it)",
    1: "the recipe is invalid, this host does not match its hardware, or a pre-flight error is not waived",
    127: "the trainer's program is not on PATH",
    "N": "otherwise the trainer's own exit code (130, 143: stopped by a signal)",
}
EXAMPLES = """\
examples:
  recipe run tiny/ddp/cpu
  recipe run pi07/zero2/8xA100 train.micro_batch_size=16 --dry-run
  recipe run tiny/ddp/cpu train.steps=400 --resume runs/tiny_ddp_cpu/20250101-120000 --require-same-env
  recipe run act/ddp/2xH100 dataset.root=data/mine --waive dataset-fps='the chunk was retuned for 30 fps'
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        NAME,
        help=HELP,
        description="Checks the recipe against its dataset and this host first (recipe doctor; an error stops"
        " the launch unless waived), then streams the trainer's output and exits with its exit code;"
        " Ctrl-C stops every rank.",
        epilog=EXAMPLES,
    )
    p.add_argument("target", metavar="NAME|FILE")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.add_argument("--dry-run", action="store_true", help="print the resolved files and the command; launch nothing")
    p.add_argument("--output-dir", metavar="DIR", help="the run directory (default: runs/NAME/TIMESTAMP)")
    p.add_argument(
        "--allow-hardware-mismatch",
        action="store_true",
        help="launch even if this host does not match the hardware part",
    )
    p.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="DIR",
        help="continue a run of the built-in trainer from its last checkpoint (default: the newest run of this recipe)",
    )
    p.add_argument(
        "--require-same-env",
        action="store_true",
        help="with --resume: refuse (exit 1) when this host's environment differs from the one the run's lock"
        " records (default: warn and record both; see recipe verify)",
    )
    p.add_argument(
        "--waive",
        action="append",
        metavar="RULE=REASON",
        help="launch despite a pre-flight error of this rule (recipe doctor lists them); the reason is kept in"
        " the run folder's preflight.json. Repeatable",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.run import run as launch

    if args.resume is not None and args.output_dir:
        raise RecipeError("give --resume DIR or --output-dir, not both")
    if args.require_same_env and args.resume is None:
        raise RecipeError(
            "--require-same-env goes with --resume (a new run records its environment; nothing to compare)"
        )
    return launch(
        args.target,
        args.overrides,
        dry_run=args.dry_run,
        output_dir=args.output_dir,
        allow_mismatch=args.allow_hardware_mismatch,
        resume=args.resume,
        require_same_env=args.require_same_env,
        waive=args.waive,
    )
