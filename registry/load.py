"""Safe YAML loading that remembers where every value was written.

Only the YAML core types are accepted: explicit tags such as !!python/object/apply are
rejected before anything is constructed, and alias expansion is bounded so that a
"billion laughs" document fails fast instead of exhausting memory.

Plain scalars are typed as YAML 1.2's core schema types them, not as PyYAML's YAML 1.1 does:
only true/false are booleans, `yes`, `on`, `1:30`, `0x10`, `017` and `1_000` stay text, and a
numeric field given one of them fails its schema type with a hint (docs/failure-modes.md §35).
Hexadecimal and octal stay text too (YAML 1.2 would read them as numbers): no recipe field is
written that way, so each is more likely a slip than a number. NaN, infinity and terminal
control characters are refused where they are written (docs/failure-modes.md §34, §36).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

import yaml

from registry.errors import CONTROL, Exit, RecipeError, printable

MAX_BYTES = 1 << 20  # a recipe is a few KiB; anything near this is not a recipe
MAX_NODES = 20_000  # nodes after alias expansion
MAX_DEPTH = 64
INT_BOUND = 2**63  # a signed 64-bit integer, as DeepSpeed, torch and the trainers hold one

_CORE = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null")}
_TIMESTAMP = _CORE + "timestamp"  # an explicit !!timestamp keeps the written text: dates stay JSON-friendly


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's safe loader with YAML 1.2 core-schema resolution of plain scalars."""

    yaml_implicit_resolvers: ClassVar[dict] = {}


# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution), decimal integers only.
_RESOLVERS = [
    ("null", r"~|null|Null|NULL|", list("~nN") + [""]),
    ("bool", r"true|True|TRUE|false|False|FALSE", list("tTfF")),
    ("int", r"[-+]?(?:0|[1-9][0-9]*)", list("-+0123456789")),
    (
        "float",
        r"[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*|[0-9]+(?=[eE]))(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        list("-+.0123456789"),
    ),
    ("merge", r"<<", ["<"]),  # recognised only to be refused with a hint (`extends:`)
]
for _tag, _pattern, _first in _RESOLVERS:
    _Loader.add_implicit_resolver(_CORE + _tag, re.compile(rf"(?:{_pattern})\Z"), _first)
_BOOLS = {"true": True, "false": False}
_KINDS = {"null": "null", "bool": "a boolean", "int": "an integer", "float": "a number"}


def control_problem(text: str) -> str | None:
    """Why a string cannot be a recipe value, if it holds a terminal control character."""
    found = CONTROL.search(text)
    if not found:
        return None
    shown = printable(text, keep="")
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return f"'{shown}' holds control character U+{ord(found.group()):04X}, which a terminal would act on instead of showing"


CONTROL_HINT = "write it without; a recipe holds printable text (tabs and newlines aside)"

Path_ = tuple  # a location in a document: ("policy", "block_classes", 0)


@dataclass(frozen=True)
class Loaded:
    """One YAML document: its data and, for every key and list item, 'file:line:column'."""

    file: str  # as displayed in messages
    data: dict
    origins: dict[Path_, str]


def display_path(path: Path, resolved: bool = False) -> str:
    """A path relative to the working directory when it lies below it, else absolute.
    `resolved`: the path has its symlinks followed already."""
    path = Path(path) if resolved else Path(path).resolve()
    try:
        return str(path.relative_to(_resolved_cwd(os.getcwd())))
    except ValueError:
        return str(path)


@lru_cache(maxsize=64)
def _resolved_cwd(cwd: str) -> Path:
    return Path(cwd).resolve()


def load_cached(path: Path) -> Loaded:
    """load_file, parsed once per process for as long as the file is unchanged (and the working
    directory, which its origins are shown relative to)."""
    return load_resolved(Path(path).resolve())


def load_resolved(path: Path) -> Loaded:
    """load_cached for a path already resolved (symlinks followed), which it does not resolve again."""
    st = os.stat(path)
    return _load_cached(path, (st.st_mtime_ns, st.st_size), os.getcwd())


@lru_cache(maxsize=1024)
def _load_cached(path: Path, stamp: tuple[int, int], cwd: str) -> Loaded:
    return load_file(path, resolved=True)


def load_file(path: Path, resolved: bool = False) -> Loaded:
    """`resolved`: the path has its symlinks followed already."""
    shown = display_path(path, resolved)
    raw = _head(path, shown)
    if len(raw) > MAX_BYTES:
        raise RecipeError.at(shown, "size", f"larger than {MAX_BYTES} bytes; not a recipe file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecipeError(f"{shown}: not UTF-8 text (byte {e.start})", Exit.INVALID) from None
    return load_text(text, shown)


def _head(path: Path, shown: str) -> bytes:
    """Up to MAX_BYTES + 1 bytes of a regular file: a FIFO or a device named as a recipe would hang
    the open or read without end (docs/failure-modes.md §68)."""
    from registry import untrusted

    try:
        return untrusted.head(path, MAX_BYTES + 1)
    except untrusted.Rejected as e:
        raise RecipeError(f"{shown}: {str(e).removeprefix(f'{path}: ')}") from None


def load_json(path: Path, what: str) -> Loaded:
    """A JSON file (a DeepSpeed or trainer config) as JSON reads it, with file:line:column for
    its keys where the YAML reader can place them. Errors are one line naming the file."""
    shown = display_path(path)
    try:
        raw = _head(path, shown)
        text = raw.decode("utf-8")
    except RecipeError as e:
        why = str(e).removeprefix(f"{shown}: ").removeprefix("cannot read: ")
        raise RecipeError(f"{shown}: cannot read {what}: {why}", Exit.INVALID) from None
    except UnicodeDecodeError as e:
        raise RecipeError(f"{shown}: cannot read {what}: {e}", Exit.INVALID) from None
    if len(raw) > MAX_BYTES:
        raise RecipeError.at(shown, "size", f"larger than {MAX_BYTES} bytes; not a {what}")
    try:
        # Python's json reads NaN, Infinity and 1e999, which JSON has not: kept as markers, refused below
        data = json.loads(text, parse_constant=_NonFinite, parse_float=_finite_float)
    except RecursionError:
        raise RecipeError.at(shown, "json", f"not a {what}: nested too deeply") from None
    except ValueError as e:
        line, column = getattr(e, "lineno", 1), getattr(e, "colno", 1)
        raise RecipeError.at(f"{shown}:{line}:{column}", "json", f"not a {what}: {getattr(e, 'msg', e)}") from None
    if not isinstance(data, dict):
        raise RecipeError.at(shown, "json", f"not a {what}: the document is not a mapping")
    try:
        origins = _parse(text, shown, _Walker(shown, checked=False)).origins
    except RecipeError:
        origins = {}  # JSON the YAML reader cannot follow: problems point at the file itself
    try:
        faults = list(_json_faults(data, ()))
    except RecursionError:
        raise RecipeError.at(shown, "json", f"not a {what}: nested too deeply") from None
    for where, message, hint, rule in faults[:1]:
        at = next((origins[where[:n]] for n in range(len(where), 0, -1) if where[:n] in origins), shown)
        raise RecipeError.at(at, rule, message, path=".".join(map(str, where)), hint=hint)
    return Loaded(shown, data, origins)


class _NonFinite(str):
    """NaN, Infinity or an overflowing number as a JSON file spelt it."""


def _finite_float(text: str):
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def _json_faults(node, path: Path_):
    """(path, message, hint, rule) of each value in a JSON document that a recipe cannot hold."""
    if isinstance(node, _NonFinite):
        yield path, f"{node} is not a finite number", "JSON has no NaN or infinity; write a number", "type"
    elif isinstance(node, int) and not isinstance(node, bool) and not -INT_BOUND <= node < INT_BOUND:
        yield path, f"an integer of {len(str(abs(node)))} digits is out of range", f"at most {INT_BOUND - 1}", "type"
    elif isinstance(node, str) and control_problem(node):
        yield path, control_problem(node), CONTROL_HINT, "control-char"
    elif isinstance(node, dict):
        for key, value in node.items():
            if control_problem(key):
                yield path + (key,), control_problem(key), CONTROL_HINT, "control-char"
            yield from _json_faults(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _json_faults(value, path + (i,))


def load_text(text: str, file: str, *, allow_empty: bool = False) -> Loaded:
    """Parse one YAML mapping; every error is a RecipeError naming file:line:column."""
    return _parse(text, file, _Walker(file), allow_empty=allow_empty)


def _parse(text: str, file: str, walker: _Walker, *, allow_empty: bool = False) -> Loaded:
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
    data = walker.value(node, (), 0)
    if not isinstance(data, dict):
        raise RecipeError.at(walker.at(node), "yaml", f"the document must be a mapping, not {_kind(node)}")
    return Loaded(file, data, walker.origins)


def parse_value(text: str) -> object:
    """A YAML-typed scalar or collection from the command line (`key=value`)."""
    loaded = load_text(f"v: {text}" if text.strip() else "v: ''", "command line")
    return loaded.data["v"]


class _Walker:
    def __init__(self, file: str, checked: bool = True):
        self.file = file
        self.checked = checked  # False: only the origins are wanted (a JSON file checks its own values)
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
        value = self.scalar(node)
        if not self.checked:
            return value
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(node, "type", f"{node.value!r} is not a finite number", hint="recipes hold finite numbers")
        if isinstance(value, int) and not isinstance(value, bool) and not -INT_BOUND <= value < INT_BOUND:
            # no count, size or rate in a recipe is that large; past it every float conversion overflows
            self.fail(
                node, "type", f"an integer of {len(node.value)} digits is out of range", hint=f"at most {INT_BOUND - 1}"
            )
        if isinstance(value, str) and control_problem(value):
            self.fail(node, "control-char", control_problem(value), hint=CONTROL_HINT)
        return value

    def scalar(self, node: yaml.ScalarNode):
        """A scalar as its (YAML 1.2 core) tag says; an explicit tag must fit its text."""
        kind, text = node.tag[len(_CORE) :], node.value
        if kind == "str":
            return text
        if kind == "null" and text in ("~", "null", "Null", "NULL", ""):
            return None
        if kind == "bool" and text.lower() in _BOOLS:
            return _BOOLS[text.lower()]
        try:
            if kind == "int":  # decimal only: 0x10 and 017 resolve as text; !!int 1_0 or full-width
                if not re.fullmatch(r"[-+]?[0-9]+", text):  # digits are no YAML 1.2 integer either
                    raise ValueError("not a decimal integer")
                return int(text)
            if kind == "float":
                special = text.lower()  # .inf, -.inf, .nan: refused by value() with its own message
                if special.lstrip("+-") in (".inf", ".nan"):
                    return float(special.replace(".", ""))
                if not re.fullmatch(r"[-+]?(?:\.[0-9]+|[0-9]+\.?[0-9]*)(?:[eE][-+]?[0-9]+)?", text):
                    raise ValueError("not a decimal number")
                return float(text)
        except ValueError as e:  # an explicit tag on other text, or an integer past Python's 4300 digits
            why = f": {str(e).split(';')[0]}"
        else:
            why = ""
        self.fail(node, "type", f"{printable(text[:40], keep='')!r} is not {_KINDS[kind]}{why}")

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
