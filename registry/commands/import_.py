"""`recipe import`: turn an existing accelerate yaml (with an OpenTau JSON config or LeRobot
flags) into a recipe file, then validate it."""

from __future__ import annotations

import sys
from pathlib import Path

from registry.errors import RecipeError

NAME = "import"
HELP = "turn an existing accelerate yaml (+ trainer config) into a recipe, then validate it"
EXAMPLES = """\
examples:
  recipe import --accelerate-config A.yaml --trainer opentau --trainer-config C.json -o recipe.yaml
  recipe import --accelerate-config A.yaml --trainer lerobot --trainer-args "--policy.type=act ..." -o recipe.yaml
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("--accelerate-config", required=True, metavar="A.yaml")
    p.add_argument("--trainer", choices=("opentau", "lerobot"))
    p.add_argument("--trainer-config", metavar="C.json", help="OpenTau TrainPipelineConfig JSON")
    p.add_argument("--trainer-args", metavar="'--flag=value ...'", help="lerobot-train flags")
    p.add_argument("--gpu", default="A100-80GB", help="GPU catalog name for the hardware section (default A100-80GB)")
    p.add_argument("--name", help="recipe.name (default: imported/<output stem>)")
    p.add_argument("-o", "--output", required=True, metavar="recipe.yaml")
    p.add_argument("--force", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
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
        part = importer.from_opentau(Path(args.trainer_config), recipe, notes)
        origin += f" and {Path(args.trainer_config).name}"
    elif args.trainer == "lerobot":
        part = importer.from_lerobot(args.trainer_args, recipe, notes)
        origin += " and lerobot-train flags"
    else:
        part = "tiny"  # no trainer given: the distributed set-up runs with the built-in reference policy
    importer.finish(recipe, notes)
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
