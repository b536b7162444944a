"""`recipe run`: validate, resolve into a fresh run directory and launch (or resume) the trainer."""

from __future__ import annotations

from registry.errors import RecipeError

NAME = "run"
HELP = "validate, resolve into a fresh run directory and launch"
EXAMPLES = """\
examples:
  recipe run tiny/ddp/cpu
  recipe run pi07/zero2/8xA100 train.micro_batch_size=16 --dry-run
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        NAME,
        help=HELP,
        description="Streams the trainer's output and exits with its exit code; Ctrl-C stops every rank.",
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
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.run import run as launch

    if args.resume is not None and args.output_dir:
        raise RecipeError("give --resume DIR or --output-dir, not both")
    return launch(
        args.target,
        args.overrides,
        dry_run=args.dry_run,
        output_dir=args.output_dir,
        allow_mismatch=args.allow_hardware_mismatch,
        resume=args.resume,
    )
