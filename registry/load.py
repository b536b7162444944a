"""Safe YAML loading that remembers where every value was written.

Only the YAML core types are accepted: explicit tags such as !!python/object/apply are
rejected before anything is constructed, and alias expansion is bounded so that a
"billion laughs" document fails fast instead of exhausting memory.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from registry.errors import Exit, RecipeError

MAX_BYTES = 1 << 20  # a recipe is a few KiB; anything near this is not a recipe
MAX_NODES = 20_000  # nodes after alias expansion
MAX_DEPTH = 64

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CORE = "tag:yaml.org,2002:"
_EXPONENT = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)[eE][-+]?\d+")
_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null")}
_TIMESTAMP = _CORE + "timestamp"  # kept as the written text: dates stay JSON-friendly
_constructor = yaml.constructor.SafeConstructor()

Path_ = tuple  # a location in a document: ("policy", "block_classes", 0)


@dataclass(frozen=True)
class Loaded:
    """One YAML document: its data and, for every key and list item, 'file:line:column'."""

    file: str  # as displayed in messages
    data: dict
    origins: dict[Path_, str]


def display_path(path: Path) -> str:
    """A path relative to the working directory when it lies below it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def load_cached(path: Path) -> Loaded:
    """load_file, parsed once per process for as long as the file is unchanged."""
    st = os.stat(path)
    return _load_cached(Path(path).resolve(), (st.st_mtime_ns, st.st_size))


@lru_cache(maxsize=1024)
def _load_cached(path: Path, stamp: tuple[int, int]) -> Loaded:
    return load_file(path)


def load_file(path: Path) -> Loaded:
    shown = display_path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise RecipeError(f"{shown}: cannot read: {e.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise RecipeError.at(shown, "size", f"larger than {MAX_BYTES} bytes; not a recipe file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecipeError(f"{shown}: not UTF-8 text (byte {e.start})", Exit.INVALID) from None
    return load_text(text, shown)


def load_json(path: Path, what: str) -> Loaded:
    """A JSON file (a DeepSpeed or trainer config) as JSON reads it, with file:line:column for
    its keys where the YAML reader can place them. Errors are one line naming the file."""
    shown = display_path(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RecipeError(f"{shown}: cannot read {what}: {getattr(e, 'strerror', None) or e}", Exit.INVALID) from None
    try:
        data = json.loads(text)
    except ValueError as e:
        line, column = getattr(e, "lineno", 1), getattr(e, "colno", 1)
        raise RecipeError.at(f"{shown}:{line}:{column}", "json", f"not a {what}: {getattr(e, 'msg', e)}") from None
    if not isinstance(data, dict):
        raise RecipeError.at(shown, "json", f"not a {what}: the document is not a mapping")
    try:
        origins = load_text(text, shown).origins
    except RecipeError:
        origins = {}  # JSON the YAML reader cannot follow: problems point at the file itself
    return Loaded(shown, data, origins)


def load_text(text: str, file: str, *, allow_empty: bool = False) -> Loaded:
    """Parse one YAML mapping; every error is a RecipeError naming file:line:column."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as e:
        raise _yaml_error(file, e) from None
    except yaml.YAMLError as e:
        raise RecipeError.at(file, "yaml", str(e)) from None
    finally:
        loader.dispose()
    if node is None:
        if allow_empty:
            return Loaded(file, {}, {})
        raise RecipeError.at(file, "empty", "the file is empty", hint="a recipe is a YAML mapping")
    walker = _Walker(file)
    data = walker.value(node, (), 0)
    if not isinstance(data, dict):
        raise RecipeError.at(walker.at(node), "yaml", f"the document must be a mapping, not {_kind(node)}")
    return Loaded(file, data, walker.origins)


def parse_value(text: str) -> object:
    """A YAML-typed scalar or collection from the command line (`key=value`)."""
    loaded = load_text(f"v: {text}" if text.strip() else "v: ''", "command line")
    return loaded.data["v"]


class _Walker:
    def __init__(self, file: str):
        self.file = file
        self.origins: dict[Path_, str] = {}
        self.nodes = 0

    def at(self, node: yaml.Node) -> str:
        m = node.start_mark
        return f"{self.file}:{m.line + 1}:{m.column + 1}"

    def fail(self, node: yaml.Node, what: str, message: str, hint: str | None = None):
        raise RecipeError.at(self.at(node), what, message, hint=hint)

    def value(self, node: yaml.Node, path: Path_, depth: int):
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self.fail(node, "yaml", f"the document expands to more than {MAX_NODES} nodes (an alias bomb?)")
        if depth > MAX_DEPTH:
            self.fail(node, "yaml", f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.MappingNode):
            if node.tag != _CORE + "map":
                self.fail(node, "yaml-tag", f"tag {node.tag!r} is not allowed", hint="recipes use plain YAML")
            return self.mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _CORE + "seq":
                self.fail(node, "yaml-tag", f"tag {node.tag!r} is not allowed", hint="recipes use plain YAML")
            items = []
            for i, item in enumerate(node.value):
                self.origins[path + (i,)] = self.at(item)
                items.append(self.value(item, path + (i,), depth + 1))
            return items
        if node.tag == _TIMESTAMP:
            return node.value
        if node.tag not in _SCALAR_TAGS:
            self.fail(node, "yaml-tag", f"tag {node.tag!r} is not allowed", hint="recipes use plain YAML")
        if node.tag == _CORE + "str" and not node.style and _EXPONENT.fullmatch(node.value):
            value = float(node.value)  # YAML 1.2 reads `lr: 3e-4` as a number; PyYAML's YAML 1.1 as text
        else:
            value = _constructor.construct_object(node)
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(node, "type", f"{node.value!r} is not a finite number", hint="recipes hold finite numbers")
        return value

    def mapping(self, node: yaml.MappingNode, path: Path_, depth: int) -> dict:
        out: dict = {}
        seen: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _CORE + "merge":
                self.fail(key_node, "yaml", "merge keys (<<) are not supported", hint="use `extends:`")
            key = self.value(key_node, path, depth + 1)
            if not isinstance(key, str):
                self.fail(key_node, "yaml", f"key {key!r} must be a string", hint="quote it")
            if key in seen:
                self.fail(key_node, "duplicate-key", f"key {key!r} already set at line {seen[key].start_mark.line + 1}")
            seen[key] = key_node
            self.origins[path + (key,)] = self.at(key_node)
            out[key] = self.value(value_node, path + (key,), depth + 1)
        return out


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return "a scalar"


def _yaml_error(file: str, e: yaml.MarkedYAMLError) -> RecipeError:
    mark = e.problem_mark or e.context_mark
    where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file
    text = " ".join(str(x) for x in (e.context, e.problem) if x)
    return RecipeError.at(where, "yaml", text)
