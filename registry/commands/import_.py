"""`recipe import`: turn an existing accelerate yaml (with its DeepSpeed JSON, an OpenTau JSON
config or LeRobot flags) into a recipe file, then validate it."""

from __future__ import annotations

import sys
from pathlib import Path

from registry.errors import RecipeError

NAME = "import"
HELP = "turn an existing accelerate yaml (+ trainer config) into a recipe, then validate it"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "imported, and the recipe is valid", 1: "written, but the recipe is invalid (fix what it prints)"}
EXAMPLES = """\
examples:
  recipe import --accelerate-config A.yaml --trainer opentau --trainer-config C.json -o recipe.yaml
  recipe import --accelerate-config A.yaml --trainer lerobot --trainer-args "--policy.type=act ..." -o recipe.yaml
  recipe import --trainer lerobot --trainer-args "--policy.type=act ..." --launch-args "--num_processes 2" -o r.yaml
  recipe import --accelerate-config A.yaml --deepspeed-config ds.json --program train.py -o recipe.yaml
"""


def add_setup_arguments(p, *, required: bool) -> None:
    """The options that name a team's existing setup (shared with `recipe validate`)."""
    p.add_argument(
        "--accelerate-config",
        required=required,
        metavar="A.yaml",
        help="the accelerate yaml (default: what `accelerate launch` does without one, said in the notes)",
    )
    p.add_argument(
        "--deepspeed-config", metavar="D.json", help="the DeepSpeed JSON (default: the yaml's deepspeed_config_file)"
    )
    p.add_argument("--trainer", choices=("opentau", "lerobot"), help="default: the team's own script (command)")
    p.add_argument("--trainer-config", metavar="C.json", help="OpenTau TrainPipelineConfig JSON")
    p.add_argument("--trainer-args", metavar="'--flag=value ...'", help="lerobot-train flags")
    p.add_argument("--policy", metavar="PART", help="a bundled policy part to extend (default: from the trainer)")
    p.add_argument("--program", metavar="SCRIPT", help="the training script, without --trainer (default train.py)")
    p.add_argument(
        "--launch-args", default="", metavar="'--num_processes 8 ...'", help="accelerate launch flags beside the yaml"
    )
    p.add_argument(
        "--gpu", help="GPU catalog name for the hardware section (default A100-80GB, said in the import's notes)"
    )


def setup_of(args):
    from registry.resolve import importer

    path = lambda text: Path(text) if text else None  # noqa: E731
    # argparse reads `--trainer-args=--` as a list: the `--` it strips from every value, and nothing
    text = lambda value: " ".join(value) if isinstance(value, list) else value  # noqa: E731
    return importer.Setup(
        accelerate=path(args.accelerate_config),
        deepspeed=path(args.deepspeed_config),
        trainer=args.trainer,
        trainer_config=path(args.trainer_config),
        trainer_args=text(args.trainer_args),
        gpu=args.gpu,
        policy=args.policy,
        program=args.program,
        launch_args=text(args.launch_args),
    )


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    add_setup_arguments(p, required=False)
    p.add_argument("--name", help="recipe.name (default: imported/<output stem>)")
    p.add_argument("-o", "--output", required=True, metavar="recipe.yaml")
    p.add_argument("--force", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.files import write_atomic
    from registry.resolve import importer
    from registry.validate.report import validate_target

    dest = Path(args.output)
    if dest.is_dir() or (dest.exists() and not args.force):
        raise RecipeError(f"{dest}: exists (hint: --force to replace a file, or name another)")
    imported = importer.read(setup_of(args))
    name = args.name or f"imported/{dest.stem}"
    try:
        write_atomic(dest, importer.render(imported, name, dest))
    except OSError as e:  # a folder that cannot be made or written, a name too long
        raise RecipeError(f"{dest}: cannot write: {e.strerror or e}") from None
    for note in imported.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {dest}", file=sys.stderr)
    report = validate_target(str(dest))
    report.problems = list(imported.notes.conflicts) + report.problems  # what the original setup would hit
    for line in report.lines():
        print(line)
    print(report.summary(), file=sys.stderr)
    return report.exit_code
