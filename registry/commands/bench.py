"""`recipe bench`: measure samples/s, peak memory and phase shares of recipes, or of a matrix of
them, with the built-in trainer."""

from __future__ import annotations

import shlex
import sys

from registry.commands import number
from registry.errors import Exit, RecipeError
from registry.names import is_override

NAME = "bench"
HELP = "measure samples/s, peak memory and phase shares with the built-in trainer"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "at least one recipe was measured", 1: "every recipe was skipped (invalid, or failed to run)"}
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
    p.add_argument("--steps", type=number(int, 1), default=20, help="measured steps (default 20)")
    p.add_argument("--warmup", type=number(int, 0), default=5, help="steps before measuring (default 5)")
    p.add_argument(
        "--repeats",
        type=number(int, 1),
        default=1,
        help="launches per recipe, their steps pooled; the interval then holds each launch's median (default 1)",
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="append the results, with provenance, to each recipe's own file: a FILE, or a NAME's file in a "
        "directory source (never the bundled recipes, a git source's clone or a published version)",
    )
    p.add_argument("--allow-hardware-mismatch", action="store_true")
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="json: the results as one document on stdout (the trainers' output is not shown)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.run.bench import main as bench

    targets = [t for t in args.targets if not is_override(t)]
    sets = [t for t in args.targets if is_override(t)]
    if not targets:
        raise RecipeError("nothing to bench (hint: recipe bench 'tiny/*/cpu' --steps 20)")
    command = "recipe " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "recipe bench"
    if args.format == "json":
        return _json(targets, sets, args, command)
    return bench(
        targets, sets, args.steps, args.warmup, args.allow_hardware_mismatch, args.record, command, args.repeats
    )


def outcome_json(outcome) -> dict:
    """One row of the results table as JSON: every key always present; a skipped cell has its
    reason in `skipped` and null figures. Shares are fractions of the step time (adding up to 1);
    samples_per_s is the median step's, `samples_per_s_interval` its confidence interval."""
    measured = outcome.skipped is None
    return {
        "recipe": outcome.name,
        "skipped": outcome.skipped,
        "samples_per_s": outcome.samples_per_s if measured else None,
        "samples_per_s_interval": outcome.figure.json() if measured else None,
        "peak_allocated_gib": outcome.peak_allocated_gib if measured else None,
        "peak_reserved_gib": outcome.peak_reserved_gib if measured else None,
        "shares": dict(outcome.shares) if measured else None,
        "phase_peaks_gib": dict(outcome.phase_peaks_gib) if measured else None,
        "resident_gib": outcome.resident_gib if measured else None,
        "micro_batch_size": outcome.micro_batch_size if measured else None,
        "world_size": outcome.world_size if measured else None,
        "run_dir": str(outcome.run_dir) if outcome.run_dir else None,
    }


def _json(targets: list[str], sets: list[str], args, command: str) -> int:
    """As registry.run.bench.main, with the trainers' output kept off stdout and the table as JSON."""
    from registry.commands.render import document
    from registry.compose import patterns
    from registry.run import bench, interval

    cells: list[str] = []
    for target in targets:
        cells += patterns.expand(target) if patterns.is_pattern(target) else [target]
    files = bench.record_files(cells) if args.record else {}
    outcomes = []
    for cell in cells:
        print(
            f"recipe bench: {cell} ({bench.said(args.repeats, args.warmup, args.steps)})", file=sys.stderr, flush=True
        )
        outcomes.append(
            bench.bench_cell(cell, sets, args.steps, args.warmup, args.repeats, args.allow_hardware_mismatch, False)
        )
    recorded: dict[str, str | None] = {}
    if args.record:
        for o, cell in zip(outcomes, cells):
            if o.skipped:
                continue
            path = files[cell]
            if path is None:
                print(
                    f"{cell}: not recorded: it has no file of its own (hint: write a tuned overlay {cell}.yaml)",
                    file=sys.stderr,
                )
            else:
                bench.record(o, path, command, args.steps)
            recorded[o.name] = str(path) if path else None
    rows = [{**outcome_json(o), "recorded_in": recorded.get(o.name)} for o in outcomes]  # null: not recorded
    info = {"steps": args.steps, "warmup": args.warmup, "repeats": args.repeats, "interval_method": interval.METHOD}
    sys.stdout.write(document({**info, "results": rows}))
    return Exit.INVALID if all(o.skipped for o in outcomes) else Exit.OK
