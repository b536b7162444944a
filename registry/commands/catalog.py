"""`recipe catalog -o DIR`: a static site of every recipe, to open offline (file://)."""

from __future__ import annotations

import sys
from pathlib import Path

from registry.errors import Exit, RecipeError

NAME = "catalog"
HELP = "write a static, offline site of every recipe (search, estimates, results, diffs)"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "the site is written"}
EXAMPLES = """\
examples:
  recipe catalog -o site && xdg-open site/index.html
  (site/index.html?q=act filters the rows; ?sort=samples_per_s&dir=desc sorts them)
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the folder to write the site into")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.sharing.site import build

    if not args.output:  # Path("") is the working directory: never write there by accident
        raise RecipeError("-o needs a folder name")
    out = Path(args.output)
    # a few plain lines on stderr while it works (CI logs keep them); stdout keeps its one line
    catalog = build(out, lambda line: print(f"recipe catalog: {line}", file=sys.stderr, flush=True))
    counts = {s: sum(e.status == s for e in catalog.entries) for s in ("valid", "warnings", "invalid")}
    print(
        f"wrote {out / 'index.html'}: {len(catalog.entries)} recipes ({counts['valid']} valid, "
        f"{counts['warnings']} with warnings, {counts['invalid']} invalid; "
        f"{catalog.left_out} untuned cells that do not validate left out)"
    )
    return Exit.OK
