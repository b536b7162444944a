"""`recipe validate`: check recipes against the schemas and invariants."""

from __future__ import annotations

import sys

from registry.errors import RecipeError
from registry.names import is_override

NAME = "validate"
HELP = "check recipes against the schemas and invariants"
EXAMPLES = """\
examples:
  recipe validate pi07/zero2/8xA100 hardware=8xA100-40GB
  recipe validate --all -q
  recipe validate --accelerate-config A.yaml [--deepspeed-config D.json] [--trainer opentau --trainer-config C.json]
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        NAME,
        help=HELP,
        description="Exit 0: valid (warnings allowed); 1: invalid; 2: usage error or unknown name.",
        epilog=EXAMPLES,
    )
    p.add_argument("args", nargs="*", metavar="NAME|FILE|KEY=VALUE", help="recipes, then overrides applied to each")
    p.add_argument("--all", action="store_true", help="every bundled part, overlay and recipe")
    p.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    from registry.commands.import_ import add_setup_arguments

    add_setup_arguments(
        p.add_argument_group("an existing setup, checked without adopting it (as recipe import reads it)"),
        required=False,
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.validate.report import validate_target

    targets = [a for a in args.args if not is_override(a)]
    sets = [a for a in args.args if is_override(a)]
    if args.accelerate_config:
        if targets or args.all:
            raise RecipeError("give recipes, --all or --accelerate-config, not several")
        return _setup(args, sets)
    if args.all and targets:
        raise RecipeError("give recipes or --all, not both")
    if not args.all and not targets:
        raise RecipeError("nothing to validate (hint: recipe validate NAME|FILE... or --all)")
    reports = _every_source() if args.all else (validate_target(t, sets) for t in targets)
    worst = 0
    for report in reports:
        for line in report.lines():
            print(line)
        if not args.quiet:
            print(report.summary(), file=sys.stderr)
        worst = max(worst, report.exit_code)
    return worst


def _every_source():
    """`--all`: every file of every source, each recipe named with its source (a recipe that an
    earlier source shadows is still validated, as the one it is), and each source's index."""
    from registry.names import AXES
    from registry.sharing import sources, versions
    from registry.validate import CATALOG, ROOT
    from registry.validate.report import Report, _file_report, validate_target

    for source in sources.all_sources():

        def named(path: str, source=source) -> str:
            return path if source.name == "bundled" else f"{source.name}:{path}"

        files = [(("catalog", "gpus"), CATALOG)] + [((axis, p), ROOT) for axis in AXES for p in source.parts(axis)]
        for segments, ref in files:
            try:
                path = source.file(segments)
            except RecipeError as e:  # a file that links out of its source
                yield Report(named("/".join(segments)), failure=e)
                continue
            if path:
                yield _file_report(path, ref)
        for cell in source.overlays():
            yield validate_target(named("/".join(cell)))
        for name in source.free_standing():
            yield validate_target(named(name))
        try:
            lost = versions.unlisted(source)
            published = [v for name in versions.index(source) for v in versions.versions(source, name)]
        except RecipeError as e:  # a malformed index: the source's versions cannot be read at all
            yield Report(f"{source.name}:{versions.INDEX}", failure=e)
            continue
        if lost:
            yield Report(f"{source.name}:{versions.INDEX}", failure=lost)
        for version in published:
            try:
                versions.verified(version)
            except RecipeError as e:
                yield Report(version.qualified, failure=e)
                continue
            yield validate_target(version.qualified)


def _setup(args, overrides: list[str]) -> int:
    """Import the setup in memory, validate it, and point each problem at the team's own file."""
    import tempfile
    from pathlib import Path

    from registry.commands.import_ import setup_of
    from registry.resolve import importer
    from registry.validate.report import validate_target

    imported = importer.read(setup_of(args))
    with tempfile.TemporaryDirectory(prefix="recipe-validate-") as folder:
        dest = Path(folder) / "setup.yaml"
        dest.write_text(importer.render(imported, f"setup/{Path(args.accelerate_config).stem}", dest))
        report = validate_target(str(dest), overrides)
    report.target = imported.origin
    report.problems = list(imported.notes.conflicts) + report.problems
    decided = f"decided by the import of {imported.origin}"
    report.problems = [_located(p, imported.notes.located, str(dest), decided) for p in report.problems]
    if not args.quiet:
        for note in imported.notes:
            print(f"note: {note}", file=sys.stderr)
    for line in report.lines():
        print(line)
    if not args.quiet:
        print(report.summary(), file=sys.stderr)
    return report.exit_code


def _located(problem, located: dict, temporary: str, decided: str):
    """The problem at the key of the team's file its value came from; a value the import chose
    itself (the GPU, defaults for absent keys) says so instead of naming a temporary file."""
    import dataclasses

    from registry.doc import split

    def where(dotted: str, origin: str | None) -> str | None:
        path = split(dotted) if dotted else ()
        while path and path not in located:
            path = path[:-1]
        if path:
            return located[path]
        below = sorted(
            (v for k, v in located.items() if dotted and k[: len(split(dotted))] == split(dotted) and v),
            key=lambda origin: [int(p) if p.isdigit() else p for p in origin.rsplit(":", 2)],
        )
        if below:
            return below[0]  # a section the rule names as a whole: the first of its keys in the team's file
        return decided if origin and origin.startswith(temporary) else origin

    related = tuple((p, where(p, origin)) for p, origin in problem.related)
    return dataclasses.replace(problem, origin=where(problem.path, problem.origin), related=related)
