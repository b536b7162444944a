"""Plain-data documents: dotted paths (`policy.block_classes.0`), look-ups, leaves and the merge
that composition uses."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

MISSING = object()
# `{dotted.path}` in a rule's message or hint and in a command trainer's argument templates
PLACEHOLDER = re.compile(r"\{([A-Za-z_][\w.]*)\}")


@lru_cache(maxsize=4096)
def split(dotted: str) -> tuple:
    return tuple(int(s) if s.isdigit() else s for s in dotted.split("."))


def join(path) -> str:
    return ".".join(str(p) for p in path)


def lookup(doc, path):
    """The value at a dotted path or a path tuple, or MISSING."""
    node = doc
    for key in split(path) if isinstance(path, str) else path:
        if type(node) is dict:  # the common case, without an ABC check
            if key not in node:
                return MISSING
            node = node[key]
        elif (isinstance(node, Mapping) and key in node) or (
            isinstance(node, (list, tuple)) and isinstance(key, int) and 0 <= key < len(node)
        ):
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


@dataclass
class Recipe:
    """A composed recipe (registry/compose): its document, each value's origin, and what made it.
    Kept here, below composition, so that resolution and validation name it without composing."""

    name: str
    data: dict
    origins: dict[tuple, str]
    inputs: list[Path] = field(default_factory=list)  # files merged, in order
    overrides: list[str] = field(default_factory=list)
    tuned: bool = False
    fixed: list[str] = field(default_factory=list)  # rules whose fix composition applied
    # the composition's key in the verdict cache (registry/validate/verdicts.py): what validate
    # keys the verdict of this document by, as composed and not changed since (None: no cache)
    key: str | None = None


# A layer's standing when one problem involves values set in several layers: the highest is
# where the problem is reported (registry/validate/problems.py, docs/design.md "Errors").
BASE_LAYER, PART_LAYER, RECIPE_LAYER, USER_LAYER = range(4)
_AT = re.compile(r"(.*):\d+:\d+")


class Origins(dict):
    """path -> where it was set ('file:line:column', 'command line', ...), as a plain dict; a
    composed recipe's also knows the layers those files are. `rank(origin)` is (standing, order):
    the user's own layers (the file validated, their files outside the bundled recipes and git
    sources, the command line) above a tuned overlay or recipe, above a part, above the base;
    among the user's own the outermost (later in merge order) first. Worked out on the first
    call only, so a recipe whose problems name one place each costs nothing."""

    def __init__(self, items=(), layers: Callable[[], dict[str, tuple[int, int]]] | None = None):
        super().__init__(items)
        self._layers = layers
        self._ranks: dict[str, tuple[int, int]] | None = None

    def rank(self, origin: str) -> tuple[int, int]:
        if self._ranks is None:
            self._ranks = self._layers() if self._layers else {}
        at = _AT.fullmatch(origin)
        return self._ranks.get(at.group(1) if at else origin, (BASE_LAYER, 0))


def rank(origins: dict, origin: str) -> tuple[int, int]:
    """An origin's standing among a document's (Origins.rank); every origin of a plain dict ranks the same."""
    return origins.rank(origin) if isinstance(origins, Origins) else (BASE_LAYER, 0)


def merge(base: dict, layer: dict) -> dict:
    """OmegaConf.merge's semantics on plain data, returning new containers: mappings merge key
    by key; lists, scalars and null replace. OmegaConf itself costs about 10 ms per recipe
    here against 0.03 ms (benchmarks/README.md), more than the whole validation budget;
    tests/test_compose.py pins this function to OmegaConf.merge on every bundled cell."""
    out = dict(base)
    for key, value in layer.items():
        if isinstance(value, dict):
            out[key] = merge(out[key] if isinstance(out.get(key), dict) else {}, value)
        else:
            out[key] = _copy(value)
    return out


def _copy(value):
    """copy.deepcopy for what documents hold (scalars, lists and mappings), without its memo."""
    if type(value) in _ATOMS:
        return value
    if type(value) is list:
        return [_copy(v) for v in value]
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    return copy.deepcopy(value)


_ATOMS = frozenset({str, int, float, bool, type(None)})


def exists(data, path: tuple) -> bool:
    """Whether a path tuple names a value in the document."""
    node = data
    for key in path:
        if (isinstance(node, dict) and key in node) or (
            isinstance(node, list) and isinstance(key, int) and key < len(node)
        ):
            node = node[key]
        else:
            return False
    return True


def leaves(value, prefix: tuple = ()):
    """Every path below `prefix` in a value, mappings and lists alike, parents first."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield prefix + (k,)
            yield from leaves(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield prefix + (i,)
            yield from leaves(v, prefix + (i,))
