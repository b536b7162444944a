"""The `recipe` command line: argument parsing and one small function per verb.

The start-up path (list, show, validate, schema) imports neither torch, accelerate nor
deepspeed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from registry import __version__
from registry.compose import overrides
from registry.errors import Exit, RecipeError
from registry.names import AXES
from registry.sharing import sources


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
        print(e.render(), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
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
    ls.add_argument("--sources", action="store_true", help="list the sources, and which one wins where names collide")
    ls.set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="print a resolved recipe")
    show.add_argument("target", metavar="NAME|FILE")
    show.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="overrides and axis swaps (hardware=4xH100)")
    show.add_argument(
        "--origin", action="store_true", help="say which file:line:column (or command line) set each value"
    )
    show.add_argument("--format", choices=("yaml", "json"), default="yaml")
    show.set_defaults(func=cmd_show)

    val = sub.add_parser(
        "validate",
        help="check recipes against the schemas and invariants",
        description="Exit 0: valid (warnings allowed); 1: invalid; 2: usage error or unknown name.",
    )
    val.add_argument("args", nargs="*", metavar="NAME|FILE|KEY=VALUE", help="recipes, then overrides applied to each")
    val.add_argument("--all", action="store_true", help="every bundled part, overlay and recipe")
    val.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    val.set_defaults(func=cmd_validate)

    res = sub.add_parser(
        "resolve", help="write the accelerate yaml, DeepSpeed JSON, trainer config, launch.sh and lock"
    )
    res.add_argument("target", metavar="NAME|FILE")
    res.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    res.add_argument("-o", "--output-dir", required=True, metavar="DIR")
    res.set_defaults(func=cmd_resolve)

    run = sub.add_parser(
        "run",
        help="validate, resolve into a fresh run directory and launch",
        description="Streams the trainer's output and exits with its exit code; Ctrl-C stops every rank.",
    )
    run.add_argument("target", metavar="NAME|FILE")
    run.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    run.add_argument("--dry-run", action="store_true", help="print the resolved files and the command; launch nothing")
    run.add_argument("--output-dir", metavar="DIR", help="the run directory (default: runs/NAME/TIMESTAMP)")
    run.add_argument(
        "--allow-hardware-mismatch",
        action="store_true",
        help="launch even if this host does not match the hardware part",
    )
    run.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="DIR",
        help="continue a run of the built-in trainer from its last checkpoint (default: the newest run of this recipe)",
    )
    run.set_defaults(func=cmd_run)

    est = sub.add_parser("estimate", help="per-rank GPU memory: the breakdown, and the largest micro batch that fits")
    est.add_argument("target", metavar="NAME|FILE")
    est.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    est.add_argument("--format", choices=("text", "json"), default="text")
    est.set_defaults(func=cmd_estimate)

    ben = sub.add_parser(
        "bench",
        help="measure samples/s, peak memory and phase shares with the built-in trainer",
        description="NAME|FILE|PATTERN: a recipe, or a matrix such as 'tiny/*/cpu' or 'ref-1b/{zero2,fsdp}/2xH100'.",
    )
    ben.add_argument("targets", nargs="+", metavar="NAME|FILE|PATTERN|KEY=VALUE")
    ben.add_argument("--steps", type=int, default=20, help="measured steps (default 20)")
    ben.add_argument("--warmup", type=int, default=5, help="steps before measuring (default 5)")
    ben.add_argument(
        "--record", action="store_true", help="append the results, with provenance, to each recipe's own file"
    )
    ben.add_argument("--allow-hardware-mismatch", action="store_true")
    ben.set_defaults(func=cmd_bench)

    src = sub.add_parser("source", help="manage where recipes come from (directories and git repositories)")
    src_sub = src.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = src_sub.add_parser("add", help="add a directory or a git repository (cloned into the cache)")
    add.add_argument("name")
    add.add_argument("where", metavar="PATH|GIT_URL")
    src_sub.add_parser("list", help="the sources in search order")
    upd = src_sub.add_parser("update", help="fetch git sources to their newest commit")
    upd.add_argument("names", nargs="*")
    rem = src_sub.add_parser("remove", help="forget a source")
    rem.add_argument("name")
    src.set_defaults(func=cmd_source)

    pub = sub.add_parser("publish", help="freeze a recipe as the next immutable version of its name in a source")
    pub.add_argument("target", metavar="FILE|NAME")
    pub.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    pub.add_argument(
        "--to", required=True, metavar="SOURCE", help="a directory source (recipe source add, RECIPE_PATH)"
    )
    pub.set_defaults(func=cmd_publish)

    his = sub.add_parser("history", help="published versions of a name, with dates and results")
    his.add_argument("name")
    his.set_defaults(func=cmd_history)

    dif = sub.add_parser("diff", help="differences between two resolved recipes, with both origins")
    dif.add_argument("a", metavar="A")
    dif.add_argument("b", metavar="B")
    dif.set_defaults(func=cmd_diff)

    cp = sub.add_parser("cp", help="copy a recipe's own file to edit, keeping what it extends")
    cp.add_argument("target", metavar="NAME")
    cp.add_argument("dest", metavar="DEST.yaml")
    cp.add_argument("--force", action="store_true", help="replace DEST if it exists")
    cp.set_defaults(func=cmd_cp)

    imp = sub.add_parser(
        "import", help="turn an existing accelerate yaml (+ trainer config) into a recipe, then validate it"
    )
    imp.add_argument("--accelerate-config", required=True, metavar="A.yaml")
    imp.add_argument("--trainer", choices=("opentau", "lerobot"))
    imp.add_argument("--trainer-config", metavar="C.json", help="OpenTau TrainPipelineConfig JSON")
    imp.add_argument("--trainer-args", metavar="'--flag=value ...'", help="lerobot-train flags")
    imp.add_argument("--gpu", default="A100-80GB", help="GPU catalog name for the hardware section (default A100-80GB)")
    imp.add_argument("--name", help="recipe.name (default: imported/<output stem>)")
    imp.add_argument("-o", "--output", required=True, metavar="recipe.yaml")
    imp.add_argument("--force", action="store_true")
    imp.set_defaults(func=cmd_import)

    sch = sub.add_parser("schema", help="print the joined JSON Schema of a recipe file")
    sch.set_defaults(func=cmd_schema)
    return p


def cmd_list(args) -> int:
    from registry.commands.listing import cells, parts_rows
    from registry.commands.render import table

    if args.parts:
        sys.stdout.write(table(parts_rows(), ["AXIS", "PART", "SUMMARY"]))
        return 0
    if args.sources:
        from registry.sharing.manage import rows, winners

        sys.stdout.write(table(rows(), ["SOURCE", "KIND", "LOCATION", "COMMIT"]))
        clashes = winners()
        if clashes:
            print()
            sys.stdout.write(table(clashes, ["NAME", "WINS", "SHADOWED"]))
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
    from registry.commands.render import to_json, to_yaml
    from registry.compose import compose

    recipe = compose(args.target, args.overrides)
    origins = recipe.origins if args.origin else None
    text = to_json(recipe.data, origins) if args.format == "json" else to_yaml(recipe.data, origins)
    sys.stdout.write(text)
    return 0


def cmd_validate(args) -> int:
    from registry.validate.report import validate_all, validate_target

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
    from registry.run import checked, write_bundle

    _, bundle = checked(args.target, args.overrides)
    folder = Path(args.output_dir)
    write_bundle(bundle, folder)
    for name in bundle.files:
        print(folder / name)
    return 0


def cmd_run(args) -> int:
    from registry.run import run

    if args.resume is not None and args.output_dir:
        raise RecipeError("give --resume DIR or --output-dir, not both")
    return run(
        args.target,
        args.overrides,
        dry_run=args.dry_run,
        output_dir=args.output_dir,
        allow_mismatch=args.allow_hardware_mismatch,
        resume=args.resume,
    )


def cmd_estimate(args) -> int:
    from registry import estimate as memory
    from registry.commands.render import table
    from registry.compose import compose

    recipe = compose(args.target, args.overrides)
    est = memory.estimate(recipe.data)
    if est is None:
        raise RecipeError(
            f"{recipe.name} runs on CPU or its policy declares no sizes (policy.memory): nothing to estimate", 1
        )
    if args.format == "json":
        print(
            json.dumps(
                {
                    "recipe": recipe.name,
                    "capacity_gib": est.capacity_gib,
                    "breakdown_gib": est.breakdown,
                    "allocated_gib": est.allocated_gib,
                    "reserved_gib": est.reserved_gib,
                    "total_gib": est.total_gib,
                    "fraction": est.fraction,
                    "peak_phase": est.phase,
                    "micro_batch_size": est.micro_batch_size,
                    "largest_micro_batch": est.largest_micro_batch,
                    "largest_micro_batch_under_90": est.largest_under(0.9),
                },
                indent=2,
            )
        )
        return 0
    print(f"{recipe.name}: {memory.describe(recipe.data)}, micro batch {est.micro_batch_size}; peak in {est.phase}")
    rows = [[k, f"{v:.2f}"] for k, v in est.breakdown.items()]
    rows.append(["total", f"{est.total_gib:.2f}"])
    sys.stdout.write(table(rows, ["PER RANK", "GiB"]))
    print(
        f"{est.fraction:.0%} of {est.capacity_gib:.2f} GiB (allocated {est.allocated_gib:.2f}, reserved {est.reserved_gib:.2f}; "
        f"activations {est.per_sample_gib:.3f} GiB per sample)"
    )
    print(f"largest micro batch that fits: {est.largest_micro_batch} (under 90%: {est.largest_under(0.9)})")
    return 0


def cmd_bench(args) -> int:
    from registry.run.bench import main as bench

    targets = [t for t in args.targets if not overrides.is_override(t)]
    sets = [t for t in args.targets if overrides.is_override(t)]
    if not targets:
        raise RecipeError("nothing to bench (hint: recipe bench 'tiny/*/cpu' --steps 20)")
    if args.steps < 1 or args.warmup < 0:
        raise RecipeError("--steps must be at least 1 and --warmup at least 0")
    command = "recipe " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "recipe bench"
    return bench(targets, sets, args.steps, args.warmup, args.allow_hardware_mismatch, args.record, command)


def cmd_source(args) -> int:
    from registry.commands.render import table
    from registry.sharing import manage

    if args.action == "add":
        print(f"added {manage.add(args.name, args.where)}")
    elif args.action == "remove":
        manage.remove(args.name)
        print(f"removed {args.name}")
    elif args.action == "update":
        for line in manage.update(args.names):
            print(line)
    else:
        sys.stdout.write(table(manage.rows(), ["SOURCE", "KIND", "LOCATION", "COMMIT"]))
    return 0


def cmd_publish(args) -> int:
    from registry.compose import compose
    from registry.sharing.versions import publish
    from registry.validate import validate

    recipe = compose(args.target, args.overrides)
    problems = validate(recipe.data, recipe.origins)
    for p in problems:
        print(p.render(), file=sys.stderr)
    if any(p.is_error for p in problems):
        raise RecipeError(f"{recipe.name}: invalid; nothing was published", 1)
    chosen = [s for s in sources.all_sources() if s.name == args.to]
    if not chosen:
        raise RecipeError(f"unknown source {args.to!r}; known: {', '.join(s.name for s in sources.all_sources())}")
    version = publish(recipe, chosen[0])
    print(f"published {version.qualified} ({version.file}, sha256 {version.sha256[:12]})")
    return 0


def cmd_history(args) -> int:
    from registry.commands.render import table
    from registry.names import parse
    from registry.sharing.versions import history_rows

    rows = history_rows(parse(args.name).path)
    if not rows:
        raise RecipeError(f"{args.name}: no published versions in any source")
    sys.stdout.write(table(rows, ["VERSION", "PUBLISHED", "SHA256", "SAMPLES/S", "SUMMARY"]))
    return 0


def cmd_diff(args) -> int:
    from registry.commands.diff import differences
    from registry.compose import compose

    lines = differences(compose(args.a), compose(args.b))
    for line in lines:
        print(line)
    return 1 if lines else 0


def cmd_cp(args) -> int:
    from registry.sharing.copying import copy

    print(f"copied {args.target} to {copy(args.target, Path(args.dest), args.force)}")
    return 0


def cmd_import(args) -> int:
    from registry.files import write_atomic
    from registry.resolve import importer
    from registry.validate.report import validate_target

    dest = Path(args.output)
    if dest.exists() and not args.force:
        raise RecipeError(f"{dest}: exists (hint: --force to replace it)")
    if args.trainer == "opentau" and not args.trainer_config:
        raise RecipeError("--trainer opentau needs --trainer-config C.json")
    if args.trainer == "lerobot" and args.trainer_args is None:
        raise RecipeError('--trainer lerobot needs --trainer-args "--policy.type=act ..."')
    accelerate = Path(args.accelerate_config)
    recipe, notes = importer.from_accelerate(accelerate, args.gpu)
    origin = accelerate.name
    if args.trainer == "opentau":
        part = importer.from_opentau(Path(args.trainer_config), recipe)
        origin += f" and {Path(args.trainer_config).name}"
    elif args.trainer == "lerobot":
        part = importer.from_lerobot(args.trainer_args, recipe)
        origin += " and lerobot-train flags"
    else:
        part = "tiny"  # no trainer given: the distributed set-up runs with the built-in reference policy
    name = args.name or f"imported/{dest.stem}"
    write_atomic(dest, importer.render(recipe, part, origin, name, dest))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {dest}", file=sys.stderr)
    report = validate_target(str(dest))
    for line in report.lines():
        print(line)
    print(report.summary(), file=sys.stderr)
    return report.exit_code


def cmd_schema(args) -> int:
    from registry.validate.schemas import joined

    print(json.dumps(joined(), indent=2))
    return 0
