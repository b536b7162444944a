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
EXIT_CODES = {0: "the recipes are the same", 1: "they differ (as diff(1))"}
EXAMPLES = """\
examples:
  recipe diff pi07/zero2/8xA100 pi07/fsdp/8xA100
  recipe diff tiny/ddp/cpu mine.yaml
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.compose import compose

    a, b = compose(args.a), compose(args.b)
    if args.format == "json":
        import sys

        from registry.commands.render import document

        found = changes(a, b)
        sys.stdout.write(document({"a": a.name, "b": b.name, "same": not found, "differences": found}))
        return Exit.INVALID if found else Exit.OK
    lines = differences(a, b)
    for line in lines:
        print(line)
    return Exit.INVALID if lines else Exit.OK  # as diff(1): 1 when the recipes differ


def leaves(data, prefix: tuple = ()) -> dict[tuple, object]:
    if isinstance(data, dict) and data:
        out = {}
        for key, value in data.items():
            out.update(leaves(value, prefix + (key,)))
        return out
    return {prefix: data}


def differing(a: Recipe, b: Recipe) -> tuple[dict, dict, list[tuple]]:
    """Both recipes' leaves, and the paths where they differ (recipe.name left out), in order."""
    left, right = leaves(a.data), leaves(b.data)
    paths = [
        path
        for path in sorted(set(left) | set(right), key=lambda p: tuple(str(x) for x in p))
        if not (path and path[0] == "recipe" and path[-1] == "name")
        and left.get(path, _ABSENT) != right.get(path, _ABSENT)
    ]
    return left, right, paths


def differences(a: Recipe, b: Recipe) -> list[str]:
    left, right, paths = differing(a, b)
    return [f"{join(path)}: {_side(left, a, path)} -> {_side(right, b, path)}" for path in paths]


def changes(a: Recipe, b: Recipe) -> list[dict]:
    """`--format json`: each difference as {path, a, b}; a side is {value, origin}, or null
    where that recipe does not set the path."""
    left, right, paths = differing(a, b)

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
