"""Dotted paths into a recipe document: `policy.block_classes.0`."""

from __future__ import annotations

MISSING = object()


def split(dotted: str) -> tuple:
    return tuple(int(s) if s.isdigit() else s for s in dotted.split("."))


def join(path) -> str:
    return ".".join(str(p) for p in path)


def lookup(doc, path):
    """The value at a dotted path or a path tuple, or MISSING."""
    node = doc
    for key in split(path) if isinstance(path, str) else path:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            return MISSING
    return node


def origin_of(origins: dict, path: tuple) -> str | None:
    """Where a path was set: its own origin, else its nearest ancestor's."""
    for n in range(len(path), 0, -1):
        found = origins.get(tuple(path[:n]))
        if found:
            return found
    return None
