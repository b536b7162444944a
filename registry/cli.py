"""The `recipe` command line: argument parsing and one small function per verb.

The start-up path (list, show, validate, schema) imports neither torch, accelerate nor
deepspeed.
"""

from __future__ import annotations

import argparse
import itertools
import sys

from . import __version__, overrides, sources
from .errors import RecipeError
from .names import AXES


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    # Overrides may follow options (`show NAME --origin k=v`); anything else is a usage error.
    rest = getattr(args, "overrides", getattr(args, "args", getattr(args, "targets", None)))
    if extra and (rest is None or not all(overrides.is_override(e) for e in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        rest.extend(extra)
    try:
        return args.func(args)
    except RecipeError as e:
        print(str(e) if ": error[" in str(e) else f"recipe: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (`recipe list | head`)
        return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="recipe",
        description="Tuned, versioned, validated recipes for distributed training of robot-learning policies.",
        epilog="A recipe is named by its cell, policy/backend/hardware (pi07/zero2/8xA100), or given as a file.",
    )
    p.add_argument("--version", action="version", version=f"recipe {__version__}")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    ls = sub.add_parser("list", help="list recipes (tuned and untuned cells)")
    for axis in AXES:
        ls.add_argument(f"--{axis}", metavar="NAME", help=f"only this {axis} part")
    ls.add_argument("--tuned", action="store_true", help="only cells with a tuned overlay")
    ls.add_argument("--all", action="store_true", help="every cell, even without filters")
    ls.add_argument("--parts", action="store_true", help="list the parts of each axis instead")
    ls.set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="print a resolved recipe")
    show.add_argument("target", metavar="NAME|FILE")
    show.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="overrides and axis swaps (hardware=4xH100)")
    show.add_argument("--origin", action="store_true", help="say which file:line:column (or command line) set each value")
    show.add_argument("--format", choices=("yaml", "json"), default="yaml")
    show.set_defaults(func=cmd_show)

    val = sub.add_parser("validate", help="check recipes against the schemas and invariants",
                         description="Exit 0: valid (warnings allowed); 1: invalid; 2: usage error or unknown name.")
    val.add_argument("args", nargs="*", metavar="NAME|FILE|KEY=VALUE", help="recipes, then overrides applied to each")
    val.add_argument("--all", action="store_true", help="every bundled part, overlay and recipe")
    val.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    val.set_defaults(func=cmd_validate)

    res = sub.add_parser("resolve", help="write the accelerate yaml, DeepSpeed JSON, trainer config, launch.sh and lock")
    res.add_argument("target", metavar="NAME|FILE")
    res.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    res.add_argument("-o", "--output-dir", required=True, metavar="DIR")
    res.set_defaults(func=cmd_resolve)

    run = sub.add_parser("run", help="validate, resolve into a fresh run directory and launch",
                         description="Streams the trainer's output and exits with its exit code; Ctrl-C stops every rank.")
    run.add_argument("target", metavar="NAME|FILE")
    run.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    run.add_argument("--dry-run", action="store_true", help="print the resolved files and the command; launch nothing")
    run.add_argument("--output-dir", metavar="DIR", help="the run directory (default: runs/NAME/TIMESTAMP)")
    run.add_argument("--allow-hardware-mismatch", action="store_true", help="launch even if this host does not match the hardware part")
    run.add_argument("--resume", nargs="?", const="", metavar="DIR",
                     help="continue a run of the built-in trainer from its last checkpoint (default: the newest run of this recipe)")
    run.set_defaults(func=cmd_run)

    est = sub.add_parser("estimate", help="per-rank GPU memory: the breakdown, and the largest micro batch that fits")
    est.add_argument("target", metavar="NAME|FILE")
    est.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    est.add_argument("--format", choices=("text", "json"), default="text")
    est.set_defaults(func=cmd_estimate)

    ben = sub.add_parser("bench", help="measure samples/s, peak memory and phase shares with the built-in trainer",
                         description="NAME|FILE|PATTERN: a recipe, or a matrix such as 'tiny/*/cpu' or 'ref-1b/{zero2,fsdp}/2xH100'.")
    ben.add_argument("targets", nargs="+", metavar="NAME|FILE|PATTERN|KEY=VALUE")
    ben.add_argument("--steps", type=int, default=20, help="measured steps (default 20)")
    ben.add_argument("--warmup", type=int, default=5, help="steps before measuring (default 5)")
    ben.add_argument("--record", action="store_true", help="append the results, with provenance, to each recipe's own file")
    ben.add_argument("--allow-hardware-mismatch", action="store_true")
    ben.set_defaults(func=cmd_bench)

    sch = sub.add_parser("schema", help="print the joined JSON Schema of a recipe file")
    sch.set_defaults(func=cmd_schema)
    return p


def cmd_list(args) -> int:
    from .listing import cells, parts_rows
    from .render import table

    if args.parts:
        sys.stdout.write(table(parts_rows(), ["AXIS", "PART", "SUMMARY"]))
        return 0
    filters = {axis: getattr(args, axis) for axis in AXES}
    for axis, value in filters.items():
        if value and value not in sources.part_names(axis):
            raise RecipeError(f"unknown {axis} {value!r}; known: {', '.join(sources.part_names(axis))}")
    rows, hidden = cells(filters, tuned_only=args.tuned, everything=args.all)
    sys.stdout.write(table(rows, ["NAME", "TUNED", "VERSION", "SUMMARY"]))
    if hidden:
        print(f"({hidden} untuned cells not shown: filter with --policy/--backend/--hardware, or --all)")
    return 0


def cmd_show(args) -> int:
    from .compose import compose
    from .render import to_json, to_yaml

    recipe = compose(args.target, args.overrides)
    origins = recipe.origins if args.origin else None
    text = to_json(recipe.data, origins) if args.format == "json" else to_yaml(recipe.data, origins)
    sys.stdout.write(text)
    return 0


def cmd_validate(args) -> int:
    from .checking import validate_all, validate_target

    targets = [a for a in args.args if not overrides.is_override(a)]
    sets = [a for a in args.args if overrides.is_override(a)]
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


def cmd_resolve(args) -> int:
    from pathlib import Path

    from .run import checked, write_bundle

    _, bundle = checked(args.target, args.overrides)
    folder = Path(args.output_dir)
    write_bundle(bundle, folder)
    for name in bundle.files:
        print(folder / name)
    return 0


def cmd_run(args) -> int:
    from .run import run

    if args.resume is not None and args.output_dir:
        raise RecipeError("give --resume DIR or --output-dir, not both")
    return run(args.target, args.overrides, dry_run=args.dry_run, output_dir=args.output_dir,
               allow_mismatch=args.allow_hardware_mismatch, resume=args.resume)


def cmd_estimate(args) -> int:
    import json

    from . import memory
    from .compose import compose
    from .render import table

    recipe = compose(args.target, args.overrides)
    est = memory.estimate(recipe.data)
    if est is None:
        raise RecipeError(f"{recipe.name} runs on CPU or its policy declares no sizes (policy.memory): nothing to estimate", 1)
    if args.format == "json":
        print(json.dumps({"recipe": recipe.name, "capacity_gib": est.capacity_gib, "breakdown_gib": est.breakdown,
                          "allocated_gib": est.allocated_gib, "reserved_gib": est.reserved_gib, "total_gib": est.total_gib,
                          "fraction": est.fraction, "micro_batch_size": est.micro_batch_size,
                          "largest_micro_batch": est.largest_micro_batch, "largest_micro_batch_under_90": est.largest_under(0.9)}, indent=2))
        return 0
    print(f"{recipe.name}: {memory.describe(recipe.data)}, micro batch {est.micro_batch_size}")
    rows = [[k, f"{v:.2f}"] for k, v in est.breakdown.items()]
    rows.append(["total", f"{est.total_gib:.2f}"])
    sys.stdout.write(table(rows, ["PER RANK", "GiB"]))
    print(f"{est.fraction:.0%} of {est.capacity_gib:.2f} GiB (allocated {est.allocated_gib:.2f}, reserved {est.reserved_gib:.2f}; "
          f"activations {est.per_sample_gib:.3f} GiB per sample)")
    print(f"largest micro batch that fits: {est.largest_micro_batch} (under 90%: {est.largest_under(0.9)})")
    return 0


def cmd_bench(args) -> int:
    import shlex

    from .bench import main as bench

    targets = [t for t in args.targets if not overrides.is_override(t)]
    sets = [t for t in args.targets if overrides.is_override(t)]
    if not targets:
        raise RecipeError("nothing to bench (hint: recipe bench 'tiny/*/cpu' --steps 20)")
    if args.steps < 1 or args.warmup < 0:
        raise RecipeError("--steps must be at least 1 and --warmup at least 0")
    command = "recipe " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "recipe bench"
    return bench(targets, sets, args.steps, args.warmup, args.allow_hardware_mismatch, args.record, command)


def cmd_schema(args) -> int:
    import json

    from .validate.schemas import joined

    print(json.dumps(joined(), indent=2))
    return 0


