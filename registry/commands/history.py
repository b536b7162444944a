"""`recipe history`: the published versions of a name in every source, with dates and results."""

from __future__ import annotations

import sys

from registry.errors import Exit, RecipeError

NAME = "history"
HELP = "versions of a name (published, or shipped with the bundled recipes), with dates and results"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "versions shown", 2: "the name has no version in any source, or a usage error (one line on stderr)"}
EXAMPLES = """\
example:
  recipe history pi07/zero2/8xA100
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("name")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.commands.render import document, table
    from registry.names import parse

    name = parse(args.name).path
    found = published(name)
    if not found:
        raise RecipeError(
            f"{args.name}: no versions in any source (hint: recipe publish {args.name} --to SOURCE makes one)"
        )
    if args.format == "json":
        sys.stdout.write(document({"name": name, "versions": found}))
        return Exit.OK
    rows = [
        [
            v["version"],
            v["published"] or "",
            v["sha256"][:12],
            "-" if v["samples_per_s"] is None else f"{v['samples_per_s']:.1f}",
            f"REFUSED: {v['refused']}" if v["refused"] else v["summary"] or "",
        ]
        for v in found
    ]
    sys.stdout.write(table(rows, ["VERSION", "PUBLISHED", "SHA256", "SAMPLES/S", "SUMMARY"]))
    return Exit.OK


def published(name: str) -> list[dict]:
    """Every version of the name (published in a source, or shipped with the bundled recipes), in
    source order, with the full sha256 and the last recorded results as numbers (null where none
    were recorded)."""
    from registry.load import load_cached
    from registry.sharing import versions

    found = []
    for v in versions.history(name):
        try:  # a file changed since it was published or first seen: its figures are not shown
            versions.verified(v)
            refused = None
        except RecipeError as e:
            refused = e.problem.message if e.problem else str(e)
        doc = load_cached(v.file).data if v.file.is_file() and refused is None else {}
        results = doc.get("results")
        last = results[-1] if isinstance(results, list) and results and isinstance(results[-1], dict) else {}
        meta = doc.get("recipe") if isinstance(doc.get("recipe"), dict) else {}
        found.append(
            {
                "version": v.qualified,
                "source": v.source.name,
                "number": v.number,
                "published": v.date or None,
                "sha256": v.sha256,
                "file": str(v.file),
                "samples_per_s": _number(last.get("samples_per_s")),
                "peak_allocated_gib": _number(last.get("peak_allocated_gib")),
                "summary": meta.get("summary") or None,
                "refused": refused,  # why the version's file is not to be trusted, or null
            }
        )
    return found


def _number(value) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
