"""`recipe diff A B`: the resolved recipes' differences, each with where both sides set it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from registry.doc import join
from registry.errors import Exit

if TYPE_CHECKING:
    from registry.compose import Recipe

NAME = "diff"
HELP = "differences between two resolved recipes, with both origins"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {
    0: "the recipes train the same (with --all: are the same)",
    1: "they differ (as diff(1))",
}
EXAMPLES = """\
examples:
  recipe diff pi07/zero2/8xA100 pi07/fsdp/8xA100
  recipe diff tiny/ddp/cpu mine.yaml
  recipe diff pi07/zero2/8xA100 imported.yaml --all
"""

# What describes a recipe rather than what it trains: its name, summary, owners and version, its
# measured results, and the sizes and coefficients the memory estimate reads. Left out of the
# default answer, which is "what would train differently" (docs/commands.md, recipe diff).
METADATA = (("recipe",), ("results",), ("backend", "memory"), ("policy", "memory"))


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--all",
        action="store_true",
        help="every difference of the resolved documents, metadata (recipe, results, the estimate's sizes) and"
        " a section set empty against one left out included; default: only what would train differently",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.compose import compose

    a, b = compose(args.a), compose(args.b)
    if args.format == "json":
        import sys

        from registry.commands.render import document

        found = changes(a, b, args.all)
        sys.stdout.write(document({"a": a.name, "b": b.name, "same": not found, "differences": found}))
        return Exit.INVALID if found else Exit.OK
    lines = differences(a, b, args.all)
    for line in lines:
        print(line)
    if not args.all:
        _said_left_out(a, b, len(lines))
    return Exit.INVALID if lines else Exit.OK  # as diff(1): 1 when the recipes differ


def leaves(data, prefix: tuple = ()) -> dict[tuple, object]:
    if isinstance(data, dict) and data:
        out = {}
        for key, value in data.items():
            out.update(leaves(value, prefix + (key,)))
        return out
    return {prefix: data}


def differing(a: Recipe, b: Recipe, everything: bool = True) -> tuple[dict, dict, list[tuple]]:
    """Both recipes' leaves, and the paths where they differ (recipe.name left out), in order.
    Without `everything`, only what would train differently: METADATA left out, and a value one
    side leaves out read as the default it gets (base.yaml's or the schema's), an empty section or
    list as one left out."""
    left, right = leaves(a.data), leaves(b.data)
    paths = [
        path
        for path in sorted(set(left) | set(right), key=lambda p: tuple(str(x) for x in p))
        if not (path and path[0] == "recipe" and path[-1] == "name")
        and left.get(path, _ABSENT) != right.get(path, _ABSENT)
    ]
    if not everything:
        paths = [
            p for p in paths if not any(p[: len(m)] == m for m in METADATA) and _trained(left, p) != _trained(right, p)
        ]
    return left, right, paths


def _trained(values: dict, path: tuple):
    """The value a run gets at `path`: the one set, else the default; empty reads as unset."""
    from registry.validate.checks import default

    value = values.get(path, _ABSENT)
    if value is _ABSENT:
        value = default(path)
    return None if value == {} or value == [] else value


def _said_left_out(a: Recipe, b: Recipe, shown: int) -> None:
    import sys

    hidden = len(differing(a, b)[2]) - shown
    if hidden:
        sys.stdout.flush()  # after the differences shown, where both go to one pipe
        one = hidden == 1
        print(
            f"recipe diff: {hidden} more difference{'' if one else 's'} that change{'s' if one else ''} nothing in"
            " the training (recipe metadata, results, the estimate's sizes, a default or empty section written out):"
            f" --all shows {'it' if one else 'them'}",
            file=sys.stderr,
        )


def differences(a: Recipe, b: Recipe, everything: bool = True) -> list[str]:
    left, right, paths = differing(a, b, everything)
    return [f"{join(path)}: {_side(left, a, path)} -> {_side(right, b, path)}" for path in paths]


def changes(a: Recipe, b: Recipe, everything: bool = True) -> list[dict]:
    """`--format json`: each difference as {path, a, b}; a side is {value, origin}, or null
    where that recipe does not set the path."""
    left, right, paths = differing(a, b, everything)

    def side(values: dict, recipe: Recipe, path: tuple) -> dict | None:
        if path not in values:
            return None
        return {"value": values[path], "origin": recipe.origins.get(path, "composed")}

    return [{"path": join(path), "a": side(left, a, path), "b": side(right, b, path)} for path in paths]


_ABSENT = object()


def _side(values: dict, recipe: Recipe, path: tuple) -> str:
    from registry.commands.render import scalar

    if path not in values:
        return "(absent)"
    return f"{scalar(values[path])} ({recipe.origins.get(path, 'composed')})"
