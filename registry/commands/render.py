"""Printing resolved recipes: YAML (optionally with each value's origin as a comment), JSON,
and plain tables."""

from __future__ import annotations

import json

import yaml


def scalar(value) -> str:
    """One value in YAML flow style, on one line."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, sort_keys=False)
    return text.strip().removesuffix("...").strip()


def to_yaml(data: dict, origins: dict | None = None) -> str:
    if origins is None:
        return yaml.safe_dump(data, sort_keys=False, width=100)
    lines: list[str] = []
    _mapping(data, (), 0, lines, origins, dash=False)
    return "\n".join(lines) + "\n"


def to_json(data: dict, origins: dict | None = None) -> str:
    if origins is None:
        return json.dumps(data, indent=2) + "\n"
    flat = {
        ".".join(str(p) for p in path): origin for path, origin in sorted(origins.items(), key=lambda kv: _key(kv[0]))
    }
    return json.dumps({"recipe": data, "origins": flat}, indent=2) + "\n"


def document(data) -> str:
    """A verb's `--format json` output: one JSON document on stdout. Non-ASCII and control
    characters are escaped, so echoed names never act on the terminal."""
    return json.dumps(data, indent=2, default=str) + "\n"


def _key(path: tuple):
    return tuple((0, p) if isinstance(p, int) else (1, p) for p in path)


def _note(origins: dict, path: tuple) -> str:
    origin = origins.get(path)
    return f"  # {origin}" if origin else ""


def _nested(value) -> bool:
    return (isinstance(value, dict) and bool(value)) or (
        isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)
    )


def _mapping(node: dict, path: tuple, indent: int, lines: list, origins: dict, dash: bool) -> None:
    for i, (key, value) in enumerate(node.items()):
        pad = " " * indent
        if dash and i == 0:
            pad = " " * (indent - 2) + "- "
        here = path + (key,)
        if _nested(value):
            lines.append(f"{pad}{key}:{_note(origins, here)}")
            _block(value, here, indent + 2, lines, origins)
        else:
            lines.append(f"{pad}{key}: {scalar(value)}{_note(origins, here)}")


def _block(value, path: tuple, indent: int, lines: list, origins: dict) -> None:
    if isinstance(value, dict):
        _mapping(value, path, indent, lines, origins, dash=False)
        return
    for i, item in enumerate(value):
        here = path + (i,)
        if isinstance(item, dict) and item:
            _mapping(item, here, indent + 2, lines, origins, dash=True)
        else:
            lines.append(f"{' ' * indent}- {scalar(item)}{_note(origins, here)}")


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]

    def fmt(r):
        return "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()

    return "\n".join([fmt(header)] + [fmt(r) for r in rows]) + "\n"
