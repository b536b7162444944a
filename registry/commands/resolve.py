"""`recipe resolve`: write what the launchers take (accelerate yaml, DeepSpeed JSON, trainer
config, launch.sh) and the lock into a directory."""

from __future__ import annotations

from pathlib import Path

from registry.errors import Exit

NAME = "resolve"
HELP = "write the accelerate yaml, DeepSpeed JSON, trainer config, launch.sh and lock"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "the files are written", 1: "the recipe is invalid: nothing is written"}
EXAMPLES = """\
examples:
  recipe resolve pi07/zero2/8xA100 -o out/pi07
  recipe resolve tiny/ddp/cpu hardware=2x1 -o out/tiny
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("target", metavar="NAME|FILE")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.add_argument("-o", "--output-dir", required=True, metavar="DIR")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.run import checked, write_bundle

    _, bundle = checked(args.target, args.overrides)
    folder = Path(args.output_dir)
    write_bundle(bundle, folder)
    for name in bundle.files:
        print(folder / name)
    return Exit.OK
