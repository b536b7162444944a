"""`recipe validate`: check recipes against the schemas and invariants."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from registry.errors import Exit, RecipeError
from registry.names import is_override

NAME = "validate"
HELP = "check recipes against the schemas and invariants"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "every recipe is valid (warnings allowed)", 1: "a recipe is invalid"}
EXAMPLES = """\
examples:
  recipe validate pi07/zero2/8xA100 hardware=8xA100-40GB
  recipe validate --all -q
  recipe validate my-pi07.yaml --upstream      # and OpenTau's own parser and validate()
  recipe validate --accelerate-config A.yaml [--deepspeed-config D.json] [--trainer opentau --trainer-config C.json]
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        NAME,
        help=HELP,
        epilog=EXAMPLES,
    )
    p.add_argument("args", nargs="*", metavar="NAME|FILE|KEY=VALUE", help="recipes, then overrides applied to each")
    p.add_argument("--all", action="store_true", help="every bundled part, overlay and recipe")
    p.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    p.add_argument(
        "--hook",
        action="store_true",
        help="FILEs as a git hook passes them (.pre-commit-hooks.yaml): those that are no recipe files of "
        "a source tree (YAML beside a recipes/ folder, hidden files, .yml in a root layout) are skipped",
    )
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="json: one document with every report (stdout)"
    )
    p.add_argument(
        "--upstream",
        action="store_true",
        help="also run the trainer's own checks in its interpreter (OpenTau's parser and validate(), "
        "lerobot-train's): seconds per recipe",
    )
    from registry.commands.import_ import add_setup_arguments

    add_setup_arguments(
        p.add_argument_group("an existing setup, checked without adopting it (as recipe import reads it)"),
        required=False,
    )
    p.set_defaults(func=run)


def run(args) -> int:
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
    if args.all or not all(_is_rule_file(t) for t in targets):
        from registry.validate import team_rules

        team_rules()  # a malformed team rule file: one line before any report, not one per recipe
    reports = _every_source() if args.all else _targets(targets, sets, args.hook)
    if args.upstream:
        if args.all:
            raise RecipeError("--upstream asks a trainer per recipe: give recipes, not --all")
        reports = (_with_upstream(r, sets) for r in reports)
    if args.format == "json":
        return _print_json(list(reports))
    worst = 0
    for report in reports:
        if isinstance(report, _Skipped):
            if not args.quiet:
                print(f"{report.target}: skipped: {report.why}", file=sys.stderr)
            continue
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
    from registry.sharing import sources
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
        yield from _published(source)


def _published(source):
    """The source's index and every version it lists, each verified against its sha256."""
    from registry.sharing import versions
    from registry.validate.report import Report, validate_target

    try:
        lost = versions.unlisted(source)
        published = [v for name in versions.index(source) for v in versions.versions(source, name)]
    except RecipeError as e:  # a malformed index: the source's versions cannot be read at all
        yield Report(f"{source.name}:{versions.INDEX}", failure=e)
        return
    if lost:
        yield Report(f"{source.name}:{versions.INDEX}", failure=lost)
    for version in published:
        try:
            versions.verified(version)
        except RecipeError as e:
            yield Report(version.qualified, failure=e)
            continue
        yield validate_target(version.qualified)


@dataclass
class _Tree:
    """Where a recipe file lies: the source tree (a registered source, a folder named recipes/
    laid out like one, or a folder laid out like one at its root), the name it goes by, and the
    file's path in it without .yaml."""

    root: Path
    name: str | None
    rel: str
    at_root: bool = False  # found by ROOT_MARKERS: its other YAML may be anything


@dataclass
class _Skipped:
    """A file --hook was given that is no recipe file of a source tree."""

    target: str
    why: str
    exit_code: int = 0


# What marks a folder that has no recipes/ folder as a source laid out at its root.
ROOT_MARKERS = ("policy", "backend", "hardware", "catalog", "published", "rules", "tuned", "base.yaml", "index.yaml")


def _with_upstream(report, sets: list[str]):
    """The report with the trainer's own verdict added, for a recipe the registry found no error in
    (a refusal of ours comes first: the trainer would stop on it too, or on something it causes)."""
    if isinstance(report, _Skipped) or report.failure or report.errors:
        return report
    from registry.compose import compose
    from registry.validate.trainer_check import check

    report.problems += check(compose(report.target, sets))
    return report


def _targets(targets: list[str], overrides: list[str], hook: bool = False):
    """Names, and files. A file in a source tree (what `git commit` hands the pre-commit hook) is
    validated as what it is there, as --all does: a part or the base on its own, the GPU catalog
    against its schema, a tuned overlay composed as its cell, a published version verified; a
    tree that is not a source yet is searched first, so its own parts compose its recipes.
    `hook`: a file that is no recipe file of a source tree is skipped."""
    from registry.sharing import sources

    layouts: dict = {}  # folder -> its tree's root, name and layout (files of one folder share them)
    trees = {t: _tree_of(t, layouts) for t in targets}
    _search_first([tree for tree in trees.values() if tree is not None])
    jobs = [(target, trees[target], overrides, hook) for target in targets]
    with sources.pinned():  # one state of the sources for the whole command, read once
        workers = _workers(len(jobs))
        if workers < 2:
            for job in jobs:
                yield from _each(job)
            return
        import gc
        import multiprocessing

        # The workers' collector leaves what they inherit alone: scanning it would copy every
        # page of it into each worker (copy-on-write).
        gc.freeze()
        # forked after the imports and the sources are read; reports come back in order
        # Ctrl-C is the parent's to handle (one line, exit 130): workers ignore it and are terminated
        pool = multiprocessing.get_context("fork").Pool(workers, initializer=_start_worker)
        try:
            for reports in pool.imap(_each, jobs, chunksize=max(1, len(jobs) // (workers * 8))):
                yield from reports
            pool.close()  # the workers exit on their own, writing the verdicts they hold
            pool.join()
        finally:
            pool.terminate()


def _start_worker() -> None:
    import signal

    from registry.validate import verdicts

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    verdicts.batched()  # a transaction per BATCH verdicts, the rest written as the worker exits


# Below this many targets a validate call runs in one process: forking costs more than it saves.
PARALLEL_FROM = 200


def _workers(targets: int) -> int:
    """How many processes validate the targets: one per processor this process may run on (at
    most 8), for a call with PARALLEL_FROM targets or more where fork exists."""
    import os

    if targets < PARALLEL_FROM or not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
        return 1
    return min(8, len(os.sched_getaffinity(0)))


def _each(job: tuple) -> list:
    """The reports of one target (a published index has several)."""
    from registry.validate.report import validate_target

    target, tree, overrides, hook = job
    skipped = _not_a_recipe(target, tree) if hook and Path(target).is_file() else None
    if _is_rule_file(target):
        return [_rule_file(target)]
    if skipped:
        return [_Skipped(target, skipped)]
    if tree is None or not _named(target, tree):  # checked as a file on its own
        return [validate_target(target, overrides)]
    return _in_tree(target, tree, overrides)


def _not_a_recipe(target: str, tree: _Tree | None) -> str | None:
    """Why a file a hook passes is no recipe file of a source tree (None: it is one)."""
    from registry.sharing.sources import hidden

    if tree is None:
        return "not in a source tree (recipes/, or a folder laid out like one)"
    if hidden(tree.rel):
        return "hidden files are no recipes"
    if tree.at_root and Path(target).suffix != ".yaml":
        return "a source reads .yaml files only"
    return None


def _named(target: str, tree: _Tree) -> bool:
    """Whether a file of a tree is one its source reads as a recipe (a .yml file, or one in a
    hidden folder, is found by no name there)."""
    from registry.sharing.sources import hidden

    return Path(target).suffix == ".yaml" and not hidden(tree.rel)


def _is_rule_file(target: str) -> bool:
    if not target.endswith(".json"):
        return False
    from registry.validate.team import RULES_DIR

    return Path(target).parent.name == RULES_DIR and Path(target).is_file()


def _rule_file(target: str):
    """A team's rule file (SOURCE/rules/NAME.json) checked as it would load."""
    from registry.validate import team
    from registry.validate.report import Report

    try:
        team.check_file(Path(target))
    except RecipeError as e:
        return Report(target, failure=e)
    return Report(target)


def _tree_of(target: str, layouts: dict | None = None) -> _Tree | None:
    from registry.names import looks_like_file

    given = Path(target)
    if not looks_like_file(target) or not given.is_file():
        return None
    layouts = {} if layouts is None else layouts
    if given.is_symlink():
        path = given.resolve()
    else:  # resolving the folder once serves all its files (a hook passes hundreds)
        folder = layouts.get(("folder", given.parent))
        if folder is None:
            folder = layouts[("folder", given.parent)] = given.parent.resolve()
        path = folder / given.name
    key = ("tree", path.parent)
    if key not in layouts:
        layouts[key] = _tree_root(path, layouts)
    found = layouts[key]
    if found is None:
        return None
    root, name, at_root = found
    return _Tree(root, name, path.relative_to(root).with_suffix("").as_posix(), at_root)


def _tree_root(path: Path, layouts: dict) -> tuple[Path, str | None, bool] | None:
    """The root of the source tree a resolved file lies in, the source's name (None: not a
    source yet) and whether it is laid out at its root; the same for every file of a folder."""
    from registry.sharing import sources

    try:
        root = sources.root_of(path, resolved=True)
    except RecipeError:  # broken sources: the target's own validation says so
        return None
    if root is not None:
        return root.path, root.name, False
    folder = next((p for p in path.parents if p.name == "recipes"), None)
    if folder is not None:
        return folder, None, False
    folder = _root_layout(path, layouts)
    return None if folder is None else (folder, None, True)


def _root_layout(path: Path, seen: dict) -> Path | None:
    """The nearest folder above a file that is a source laid out at its root, as a team's
    repository may be: no recipes/ folder (a folder with one is that folder's source, which the
    file is not in), and one of ROOT_MARKERS. Looked for up to the repository's top (.git).
    `seen`: each folder's answer, for the files of one command (many share their folders)."""
    folder = path.parent
    if folder not in seen:
        if (folder / "recipes").is_dir():
            seen[folder] = None
        elif any((folder / marker).exists() for marker in ROOT_MARKERS):
            seen[folder] = folder
        elif (folder / ".git").exists() or folder.parent == folder:
            seen[folder] = None
        else:
            seen[folder] = _root_layout(folder, seen)
    return seen[folder]


def _search_first(trees: list[_Tree]) -> None:
    """Trees that are no source yet become the first sources of this process (RECIPE_PATH)."""
    import os

    from registry.sharing import sources

    taken = {s.name for s in sources.all_sources()}
    named: dict[Path, str] = {}
    for tree in trees:
        if tree.name is not None:
            continue
        if tree.root not in named:
            name = next(
                n for n in (f"worktree-{i}" if i else "worktree" for i in range(len(trees) + 1)) if n not in taken
            )
            taken.add(name)
            named[tree.root] = name
        tree.name = named[tree.root]
    if named:
        entries = [f"{name}={root}" for root, name in named.items()]
        os.environ["RECIPE_PATH"] = os.pathsep.join(entries + [e for e in [os.environ.get("RECIPE_PATH")] if e])


def _in_tree(target: str, tree: _Tree, overrides: list[str]) -> list:
    from registry.names import AXES
    from registry.sharing import sources
    from registry.sharing.sources import BASE
    from registry.validate import CATALOG, ROOT
    from registry.validate.report import Report, _file_report, validate_target

    segments = tree.rel.split("/")
    qualifier = "" if tree.name == "bundled" else f"{tree.name}:"
    if tree.rel == "catalog/gpus":
        report = _file_report(Path(target), CATALOG)
    elif tree.rel == BASE or (len(segments) == 2 and segments[0] in AXES):
        report = _file_report(Path(target), ROOT)  # a part is checked alone: overrides do not apply
    elif tree.rel == "index":  # the index, and every version it lists
        source = next(s for s in sources.all_sources() if s.name == tree.name)
        return [Report(target), *_published(source)]
    elif segments[0] == "published" and len(segments) >= 3 and segments[-1].isdigit():
        report = validate_target(f"{qualifier}{'/'.join(segments[1:-1])}@{segments[-1]}", overrides)
    else:
        report = validate_target(qualifier + tree.rel, overrides)
    report.target = target
    return [report]


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
    if args.format == "json":
        return _print_json([report], notes=[str(note) for note in imported.notes])
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
    # reported at a related value's place (registry/validate/problems.py locate): that value's key
    at = next((p for p, origin in problem.related if origin and origin == problem.origin), problem.path)
    return dataclasses.replace(problem, origin=where(at, problem.origin), related=related)


def problem_json(problem) -> dict:
    """One problem, every field of it: severity, rule, path, message, origin (file:line:column or
    "command line"), hint, source (the failure mode it guards against), the related fields, and
    for a team rule (its id reads SOURCE:ID) `from`: the source whose rules/ folder holds it."""
    out = {
        "severity": problem.severity,
        "rule": problem.rule,
        "path": problem.path,
        "message": problem.message,
        "origin": problem.origin,
        "hint": problem.hint,
        "source": problem.source,
        "related": [{"path": path, "origin": origin} for path, origin in problem.related],
    }
    # bundled rule ids never hold a colon (schemas/invariant.schema.json); a team rule's reads SOURCE:ID
    out["from"] = problem.rule.partition(":")[0] if ":" in problem.rule else None
    return out


def report_json(report) -> dict:
    """One target's verdict. A target that could not be composed has `failure` (the one line the
    text output prints) and, where the failure is a problem in a file, that problem; a file --hook
    skipped has status `skipped` and why in `skipped`."""
    if isinstance(report, _Skipped):
        empty = {"errors": 0, "warnings": 0, "problems": [], "failure": None}
        return {"target": report.target, "status": "skipped", "exit_code": 0, **empty, "skipped": report.why}
    failure = report.failure
    problems = [failure.problem] if failure is not None and failure.problem else report.problems
    if failure is not None:
        status = "invalid" if failure.exit_code == Exit.INVALID else "not validated"
    else:
        status = "invalid" if report.errors else "valid"
    return {
        "target": report.target,
        "status": status,
        "exit_code": report.exit_code,
        "errors": sum(p.is_error for p in problems),
        "warnings": sum(not p.is_error for p in problems),
        "problems": [problem_json(p) for p in problems],
        "failure": failure.render(prefix=report.target) if failure is not None else None,
    }


def _print_json(reports: list, notes: list[str] | None = None) -> int:
    from registry.commands.render import document

    worst = max((r.exit_code for r in reports), default=0)
    doc = {"exit_code": worst, "valid": worst == 0, "reports": [report_json(r) for r in reports]}
    if notes is not None:
        doc["notes"] = notes
    sys.stdout.write(document(doc))
    return worst
