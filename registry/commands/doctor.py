"""`recipe doctor NAME|FILE|RUN_DIR`: the recipe against its dataset and this host, as `recipe run`
checks it before launch (docs/preflight.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from registry.errors import Exit

NAME = "doctor"
HELP = "check a recipe against its dataset and this host before launching it"
EXAMPLES = """\
examples:
  recipe doctor act/ddp/2xH100 dataset.root=data/mine
  recipe doctor tiny/ddp/2xH100 --format json
  recipe doctor runs/act_ddp_2xH100/20250101-120000
"""
DESCRIPTION = (
    "Reads the dataset's own metadata (meta/info.json under dataset.root or in the local Hugging Face"
    " cache; nothing is downloaded) and checks cameras, state and action sizes, image sizes, fps, episode"
    " lengths, frames per global batch and memory at the dataset's image size; then this host: GPUs against"
    " the hardware part, the driver against torch's CUDA, NCCL, /dev/shm against the data-loader workers,"
    " free disk against the checkpoints, and the trainer's environment with the policy's extra. One line a"
    " finding, at the recipe's line that sets the value."
)
EXIT_CODES = {
    0: "no error (warnings and notes may remain)",
    1: "an error, which recipe run refuses unless waived (--waive RULE=REASON)",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, description=DESCRIPTION, epilog=EXAMPLES)
    p.add_argument("target", metavar="NAME|FILE|RUN_DIR")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.add_argument("--output-dir", metavar="DIR", help="where the run would write (default: runs/NAME)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def _recipe(target: str, overrides: list[str]):
    """The composed recipe, or a run folder's resolved one (its lock), and the folder the trainer
    runs in (None before a run)."""
    from registry.compose import Recipe, compose
    from registry.errors import RecipeError
    from registry.resolve import LOCK

    folder = Path(target)
    if folder.is_dir() and (folder / LOCK).is_file():
        if overrides:
            raise RecipeError(f"{target}: a run folder is checked as it was resolved; overrides go with a NAME")
        from registry.run import envlock

        _, content = envlock.read_lock(folder)
        name = (content.get("recipe") or {}).get("name") or folder.name
        return Recipe(name=str(name), data=content["resolved"], origins={}), folder
    return compose(target, overrides), None


def run(args) -> int:
    import os

    from registry.resolve import resolve
    from registry.run import launch_env, preflight, resume
    from registry.validate import validate

    recipe, folder = _recipe(args.target, args.overrides)
    invalid = [p for p in validate(recipe.data, recipe.origins) if p.is_error]
    bundle = None
    if not invalid:
        bundle = resolve(recipe)
    output = Path(args.output_dir) if args.output_dir else folder or resume.runs_of(recipe, Path("runs"))
    env = launch_env(bundle) if bundle is not None else dict(os.environ)  # the PATH recipe run launches with
    # the trainer runs in the run folder, or --output-dir; None: a run folder `recipe run` would make new
    base = folder or (Path(args.output_dir) if args.output_dir else None)
    if invalid:
        # recipe run stops at these before its pre-flight, whose checks read the values as the
        # schemas type them: an invalid value (a list for a mapping, 10**400) would be read unchecked
        report = preflight.Report(problems=list(invalid))
        report.notes.append("the recipe is invalid (recipe validate): the pre-flight runs once it is valid")
    else:
        report = preflight.check(recipe, bundle, output, env, base, use_torch=True)
        from registry.validate import trainer_check

        if recipe.data["trainer"]["kind"] in trainer_check.SCRIPTS:  # the trainer's own parser, as validate --upstream
            report.problems += trainer_check.check(recipe, env)
    errors = len(report.errors)
    if args.format == "json":
        sys.stdout.write(json.dumps(_document(recipe.name, report), indent=2) + "\n")
    else:
        _, lines = preflight.verdict(report, {})
        for line in lines:
            print(line)
        print(_summary(recipe.name, report))
    return Exit.INVALID if errors else Exit.OK


def _document(name: str, report) -> dict:
    from registry.commands.validate import problem_json

    errors = len(report.errors)
    return {
        "recipe": name,
        "ok": errors == 0,
        "errors": errors,
        "warnings": len(report.problems) - errors,
        "problems": [problem_json(p) for p in report.problems],
        "notes": report.notes,
        "datasets": [_dataset(m) for m in report.datasets],
        "host": report.facts.to_json() if report.facts else None,
    }


def _dataset(meta) -> dict:
    return {
        "path": str(meta.path),
        "codebase_version": meta.version,
        "fps": meta.fps,
        "episodes": meta.episodes,
        "frames": meta.frames,
        "cameras": [{"name": c.name, "height": c.height, "width": c.width} for c in meta.cameras],
        "vectors": meta.vectors,
    }


def _summary(name: str, report) -> str:
    """One closing line: the verdict and what was looked at."""
    errors = len(report.errors)
    warnings = len(report.problems) - errors
    verdict = "ready" if not errors else f"{errors} error{'s' if errors > 1 else ''}"
    if warnings:
        verdict += f", {warnings} warning{'s' if warnings > 1 else ''}"
    facts, seen = report.facts, []
    if facts is not None:
        gpus = sorted({g.name for g in facts.gpus})
        seen.append(f"{len(facts.gpus)} x {', '.join(gpus)}" if gpus else "no GPU")
        drivers = sorted({g.driver for g in facts.gpus if g.driver})
        if drivers:
            seen.append(f"driver {', '.join(drivers)}")
        if facts.trainer:
            torch = (facts.trainer.get("packages") or {}).get("torch")
            cuda = facts.trainer.get("torch_cuda")
            seen.append(
                f"torch {torch or 'absent'}" + (f" (CUDA {cuda})" if torch and cuda else " (CPU)" if torch else "")
            )
    seen += [str(m.path) for m in report.datasets]
    return f"recipe: {name}: {verdict}" + (f" ({'; '.join(seen)})" if seen else "")
