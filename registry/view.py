"""The typed view of a validated recipe: read-only sections with attribute access.

`view.of(doc).train.optimizer.lr` reads what the composed document holds. The document has
passed the schema, so types hold; `recipes/base.yaml` is composed under every recipe, so its keys
are present. A field the schema declares but the recipe leaves unset reads as the schema's
`default`, else None. A name the schema does not declare raises AttributeError: a misspelt field
fails where it is read instead of reading as a silent default. Defaults live in base.yaml and the
schemas only (docs/design.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache

from registry.doc import join
from registry.files import schema_documents

_UNSET = object()
_SECTION = object()  # the declared field is itself a mapping


class Section(Mapping):
    """One mapping of a recipe, read-only. Lists read as tuples, mappings as Sections."""

    __slots__ = ("_data", "_path")

    def __init__(self, data: Mapping, path: tuple = ()):
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        data = self._data
        if name in data:
            return _wrap(data[name], (*self._path, name))
        declared = _declared(_schema_path(self._path))
        if declared is None or name not in declared:
            raise AttributeError(f"{join((*self._path, name))} is not a recipe field")
        default = declared[name]
        if default is _SECTION:
            return Section({}, (*self._path, name))  # an unset section reads as empty, its fields as unset
        return None if default is _UNSET else _wrap(default, (*self._path, name))

    def __setattr__(self, name, value):
        raise AttributeError("a recipe view is read-only")

    def __getitem__(self, key: str):
        return _wrap(self._data[key], (*self._path, key))

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Section({join(self._path) or '<recipe>'}: {dict(self._data)!r})"

    def plain(self) -> dict:
        """A deep, mutable copy as plain dicts and lists (for emitters)."""
        return plain(self._data)


def raw(value):
    """The mapping or value a view reads, not copied: for reading only."""
    return value._data if isinstance(value, Section) else value


def of(doc: Mapping) -> Section:
    """The view of a composed document that the schema has accepted."""
    return doc if isinstance(doc, Section) else Section(doc)


def plain(value):
    if isinstance(value, Section):
        return value.plain()
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


_SCALARS = (str, int, float, bool, type(None))  # what most fields hold: no Mapping check (an ABC's is slow)


def _wrap(value, path: tuple):
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        return Section(value, path)
    if isinstance(value, list):
        return tuple(_wrap(v, (*path, i)) for i, v in enumerate(value))
    return value


def _schema_path(path: tuple) -> tuple:
    return tuple(p for p in path if not isinstance(p, int))


@cache
def _declared(path: tuple) -> dict | None:
    """Property name -> schema default (or _UNSET) at a path; None for free-form mappings."""
    docs = schema_documents()
    nodes = _resolve_all(docs, "recipe.schema.json", docs["recipe.schema.json"])
    for key in path:
        nodes = [
            sub
            for file, node in nodes
            for sub in _resolve_all(docs, file, node.get("properties", {}).get(key))
            if isinstance(sub[1], dict)
        ]
    found: dict = {}
    for file, node in nodes:
        for name, spec in node.get("properties", {}).items():
            if found.get(name, _UNSET) is _UNSET:
                found[name] = _default(docs, file, spec)
    return found or None


def _default(docs: dict, file: str, spec) -> object:
    branches = [node for _, node in _resolve_all(docs, file, spec)]
    for node in branches:
        if "default" in node:
            return node["default"]
    if any(node.get("type") == "object" or "properties" in node for node in branches):
        return _SECTION
    return _UNSET


def _resolve_all(docs: dict, file: str, node) -> list[tuple[str, dict]]:
    """A schema node and every subschema that can add properties to it, with $refs followed."""
    if not isinstance(node, dict):
        return []
    out = [(file, node)]
    ref = node.get("$ref")
    if ref:
        target_file, _, pointer = ref.partition("#")
        target_file = target_file or file
        target = docs[target_file]
        for part in filter(None, pointer.split("/")):
            target = target[part]
        out += _resolve_all(docs, target_file, target)
    for keyword in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(keyword, []):
            out += _resolve_all(docs, file, sub)
    for keyword in ("if", "then", "else"):
        out += _resolve_all(docs, file, node.get(keyword))
    return out
