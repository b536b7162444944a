"""`recipe run`: validate, resolve into a fresh run directory and launch (or resume) the trainer."""

from __future__ import annotations

from registry.commands import number
from registry.errors import RecipeError

NAME = "run"
HELP = "validate, resolve into a fresh run directory and launch"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {
    0: "the run finished (or --dry-run printed it and its pre-flight found no error a run would stop on)",
    1: "the recipe is invalid, this host does not match its hardware, or a pre-flight error is not waived"
    " (with --dry-run: the plan is printed, and a real run would stop on it)",
    127: "the trainer's program is not on PATH",
    "N": "otherwise the trainer's own exit code (130, 143: stopped by a signal)",
}
EXAMPLES = """\
examples:
  recipe run tiny/ddp/cpu
  recipe run pi07/zero2/8xA100 train.micro_batch_size=16 --dry-run
  recipe run tiny/ddp/cpu train.steps=400 --resume runs/tiny_ddp_cpu/20250101-120000 --require-same-env
  recipe run act/ddp/2xH100 dataset.root=data/mine --waive dataset-fps='the chunk was retuned for 30 fps'
  recipe run pi07/zero2/8xA100 --rehearse --steps 20
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
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved files and the command, then the pre-flight a real run would do here (its errors,"
        " warnings and notes on stderr); launch nothing. Exits 1 when a real run would stop on a pre-flight error"
        " not waived; this host's GPUs and the trainer's environment are left to recipe doctor",
    )
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
    p.add_argument(
        "--rehearse",
        action="store_true",
        help="run the recipe's real trainer for a few steps with random weights and synthetic data in the"
        " recipe's layout, made here (nothing is fetched); report losses, peak memory per rank beside recipe"
        " estimate, and samples/s. Fails on a loss that is not finite (docs/rehearsal.md)",
    )
    p.add_argument(
        "--steps",
        type=number(int, 1),
        metavar="N",
        help="with --rehearse: how many optimizer steps (default 10)",
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
    if args.steps is not None and not args.rehearse:
        raise RecipeError("--steps goes with --rehearse (a run takes train.steps=N)")
    if args.rehearse:
        if args.dry_run or args.resume is not None:
            raise RecipeError("--rehearse makes a run of its own: not with --dry-run or --resume")
        from registry.run.rehearse import rehearse

        return rehearse(
            args.target,
            args.overrides,
            steps=args.steps,
            output_dir=args.output_dir,
            allow_mismatch=args.allow_hardware_mismatch,
            waive=args.waive,
        )
    if args.dry_run:
        return dry_run(args)
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


# Rules a real run checks before its pre-flight, each its own way (registry/run/__init__.py run):
# a dry run leaves them to recipe doctor, so that a plan can be read on a host without the GPUs.
HOST_CHECKED_APART = ("host-gpus", "host-trainer-env", "host-build-locks")


def dry_run(args) -> int:
    """The launch plan, then the pre-flight a real run would do here, said as the run says it; 1
    when a real run would stop on an error not waived (docs/running.md, Dry run)."""
    import os
    import sys
    from pathlib import Path

    from registry import view
    from registry.errors import Exit
    from registry.run import CLUSTER_ENGINES, checked, launch_env, machine, preflight, show
    from registry.run import resume as resume_

    waived = preflight.waivers(args.waive)
    recipe, bundle = checked(args.target, args.overrides)
    show(bundle)
    sys.stdout.flush()  # the plan first, then what the pre-flight says of it
    where = Path(args.output_dir) if args.output_dir else None
    if view.of(recipe.data).launch.launcher in CLUSTER_ENGINES:  # the cluster's hosts are not this one
        report = preflight.check(recipe, bundle, where or Path.cwd(), dict(os.environ), where, host=False)
    else:
        if args.resume is not None:
            where = resume_.folder_of(recipe, args.resume)
        output = where or resume_.runs_of(recipe, Path("runs"))
        # a plan read away from its hardware (a laptop, for an 8xA100 cell) is the common case: the
        # host rules judge this host, so they run only where the recipe's hardware is this host's
        away = machine.mismatch(recipe.data, machine.gpus())
        report = preflight.check(
            recipe, bundle, output, launch_env(bundle), where, host=not away, skip=HOST_CHECKED_APART
        )
        if away:
            report.notes.append(f"the host checks were left out: {away} (hint: recipe doctor on the hardware)")
    blocking, lines = preflight.verdict(report, waived)
    for line in lines:
        print(line, file=sys.stderr)
    if not blocking:
        return Exit.OK
    rules = sorted({p.rule for p in blocking})
    count = f"{len(blocking)} pre-flight error{'s' if len(blocking) > 1 else ''}"
    waive = " ".join(f"--waive {r}='why it is fine'" for r in rules)
    print(
        f"recipe: dry run: a real run would stop here, on {count} (hint: fix {'them' if len(blocking) > 1 else 'it'},"
        f" or launch anyway with {waive})",
        file=sys.stderr,
    )
    return Exit.INVALID
