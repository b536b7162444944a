"""Two-way field tables between a recipe and a foreign config: the accelerate yaml (with its
deepspeed_config and fsdp_config sections), the DeepSpeed JSON, OpenTau's TrainPipelineConfig and
lerobot-train's flags. One table per config says which recipe field is which foreign key;
`write` walks it to resolve a recipe, `Reader.read` walks the same rows to import a config.

Rows, in the order resolve writes them:
  Field     a recipe field <-> a foreign key, with converters where the spellings differ
  Const     a fixed foreign value; on import a different value is kept through the table's Extra
            row when it can hold it, else reported
  Computed  a foreign value derived from several recipe fields (batch products, process counts);
            import checks it against the imported recipe and never writes it back
  Section   a nested foreign mapping with a table of its own
  Keyed     a recipe mapping spread over foreign keys named <name><suffix>
  Extra     a free-form recipe mapping merged into the foreign config (backend.deepspeed_json,
            trainer.opentau.config, ...); import puts there what no other row claims
  Ignored   foreign keys the import leaves out on purpose, with the reason
  Rest      flag tables only: the recipe's list of verbatim flags

Nothing read is dropped silently: what neither a row nor an Extra row can hold becomes a note.
Recipe values are read through the typed view, so schema defaults apply; `unset` is what a row
writes for a field that has neither a value nor a schema default.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from itertools import pairwise
from typing import Any

from registry import view
from registry.doc import MISSING, join, lookup, merge, split
from registry.errors import Problem
from registry.trainers.base import flag_value


def _same(value):
    return value


@dataclass(frozen=True)
class Field:
    recipe: str  # dotted recipe path
    foreign: str  # dotted foreign path; in a flag table the flag name without its dashes
    to: Callable = _same  # recipe value -> foreign value
    back: Callable = _same  # foreign value (a flag's text) -> recipe value; MISSING: the value says nothing
    when: Callable | None = None  # resolve writes the key only where this holds for the recipe
    unset: Any = MISSING  # written when the recipe has no value and the schema no default
    derive: Callable | None = None  # (value, recipe) -> foreign value, for keys that read other fields too
    stated: bool = False  # written only when the recipe itself sets the field (schema defaults do not count)
    null: bool = False  # an explicit null in the recipe is written as null (the owner reads it as "none")
    absent: Any = MISSING  # imported when the key is missing but its mapping is there: the owner's default,
    # or a function of the imported recipe returning it (or MISSING)
    aliases: tuple[str, ...] = ()  # other spellings the owner accepts, read on import
    emit: bool = True  # False: a spelling import reads and resolve never writes
    exclusive: bool = False  # import reads the key only where `when` holds for the recipe imported so far
    note: str = ""  # said on import whenever the key is read
    alias_note: str = ""  # said on import when the key was read through one of its aliases


@dataclass(frozen=True)
class Const:
    foreign: str
    value: Any
    when: Callable | None = None
    why: str = ""  # set: a different foreign value is reported with this reason instead of kept


@dataclass(frozen=True)
class Computed:
    foreign: str
    value: Callable  # recipe -> foreign value
    reads: tuple[str, ...]  # recipe paths it derives from: import checks only once all were read
    what: str  # the derivation, for the note when a foreign value disagrees
    when: Callable | None = None
    # the owner refuses a config whose value disagrees (DeepSpeed's batch check): on import the
    # disagreement is an error in Notes.conflicts, with the owner's message, instead of a note
    raises: str = ""


@dataclass(frozen=True)
class Section:
    foreign: str
    table: Table
    when: Callable | None = None  # on import too: a section that does not apply goes to Extra


@dataclass(frozen=True)
class Keyed:
    recipe: str
    foreign: str  # the foreign mapping that holds the keys
    suffix: str
    when: Callable | None = None


@dataclass(frozen=True)
class Extra:
    recipe: str
    foreign: str = ""  # where it merges: a mapping, or in a flag table a flag prefix
    mode: str = "update"  # update: replaces keys of that mapping; deep: merges at every depth
    # (registry.doc.merge); scalars: replaces keys, but a mapping never replaces a written section
    when: Callable | None = None


@dataclass(frozen=True)
class Ignored:
    foreign: str  # a dotted path whose last part may be a glob
    why: str


@dataclass(frozen=True)
class Rest:
    recipe: str
    when: Callable | None = None


class Table:
    """Rows in the order resolve writes them. `flags`: a lerobot-train style flag list, values spelt as
    draccus reads them. `auto`: a foreign 'auto' means "filled in from another config" (accelerate
    with DeepSpeed), so import leaves it to that config."""

    def __init__(self, *rows, flags: bool = False, auto: bool = False):
        self.rows, self.flags, self.auto = rows, flags, auto

    def path(self, foreign: str) -> tuple:
        return (foreign,) if self.flags else split(foreign) if foreign else ()


def field(doc, path: str):
    """A recipe value through the typed view: the schema default where unset, else None; plain
    dicts and lists. A path the schema does not declare raises AttributeError."""
    node = view.of(doc)
    for key in path.split("."):
        node = getattr(node, key)
        if node is None:
            return None
    return view.plain(node)


def stated(path: str) -> Callable:
    """A `when` that holds where the recipe itself sets the field (to anything but null)."""
    return lambda doc: lookup(doc, path) not in (MISSING, None)


def value(row: Field, doc):
    """What resolve writes for a Field row, before `to`; MISSING where it writes nothing."""
    if row.null and lookup(doc, row.recipe) is None:
        return None
    if row.stated:
        found = lookup(doc, row.recipe)
        found = None if found is MISSING else view.plain(found)
    else:
        found = field(doc, row.recipe)
    if found is None and row.unset is not MISSING:
        found = copy.deepcopy(row.unset)
    if row.derive is not None:
        found = row.derive(found, doc)
    return MISSING if found is None else found


# ---- resolve: recipe -> foreign config


def write(table: Table, doc) -> dict:
    out: dict = {}
    _write(table, doc, out, ())
    return out


def write_flags(table: Table, doc) -> list[str]:
    out: list[str] = []
    for row in table.rows:
        if _skipped(row, doc):
            continue
        if isinstance(row, Rest):
            out += list(field(doc, row.recipe) or ())
        elif isinstance(row, Extra):
            out += [f"--{row.foreign}{k}={flag_value(v)}" for k, v in (field(doc, row.recipe) or {}).items()]
        else:
            found = _resolved(row, doc)
            if found is not MISSING:
                out.append(f"--{row.foreign}={flag_value(found)}")
    return out


def _skipped(row, doc) -> bool:
    return isinstance(row, Ignored) or not getattr(row, "emit", True) or (row.when is not None and not row.when(doc))


def _resolved(row, doc):
    if isinstance(row, Field):
        found = value(row, doc)
        return found if found is MISSING else row.to(found)
    if isinstance(row, Const):
        return copy.deepcopy(row.value)
    return row.value(doc)


def _write(table: Table, doc, out: dict, prefix: tuple) -> None:
    for row in table.rows:
        if _skipped(row, doc):
            continue
        path = prefix + table.path(row.foreign)
        if isinstance(row, Section):
            _node(out, path)
            _write(row.table, doc, out, path)
        elif isinstance(row, Keyed):
            node = _node(out, path)
            node.update({f"{name}{row.suffix}": v for name, v in (field(doc, row.recipe) or {}).items()})
        elif isinstance(row, Extra):
            node, extras = _node(out, path), field(doc, row.recipe) or {}
            if row.mode == "deep":
                merged = merge(node, extras)
                node.clear()
                node.update(merged)
            elif row.mode == "scalars":
                node.update({k: v for k, v in extras.items() if k not in node or not isinstance(v, dict)})
            else:
                node.update(extras)
        else:
            found = _resolved(row, doc)
            if found is not MISSING:
                _put(out, path, found)


def _node(doc: dict, path: tuple) -> dict:
    """The mapping at a path, created (with the lists on its way) where missing."""
    if not path:
        return doc
    if not isinstance(lookup(doc, path), dict):
        _put(doc, path, {})
    return lookup(doc, path)


def _put(doc: dict, path: tuple, item) -> None:
    node = doc
    for key, after in pairwise(path):
        if isinstance(node, list):
            node.extend([None] * (key + 1 - len(node)))
        elif key not in node:
            node[key] = None
        if not isinstance(node[key], (dict, list)):
            node[key] = [] if isinstance(after, int) else {}
        node = node[key]
    if isinstance(node, list):
        node.extend([None] * (path[-1] + 1 - len(node)))
    node[path[-1]] = item


# ---- import: foreign config -> recipe


def decode_flag(text: str):
    """A flag's value as `flag_value` would have spelt it (true, 8, [1,2], null), else the text."""
    try:
        found = json.loads(text)
    except ValueError:
        return text
    return found if flag_value(found) == text else text


def short(item) -> str:
    text = json.dumps(item) if isinstance(item, (dict, list, bool)) or item is None else repr(item)
    return text if len(text) <= 60 else text[:57] + "..."


class Notes(list):
    """What an import tells the user, and the Computed checks still waiting for a field that a
    file read later sets (deepspeed.json's steps_per_print needs the trainer config's steps)."""

    def __init__(self):
        super().__init__()
        self.waiting: list[tuple] = []  # (row, where, foreign value, file:line:column)
        self.located: dict[tuple, str] = {}  # recipe path -> file:line:column of the key it came from
        self.conflicts: list[Problem] = []  # what the owning library would refuse at launch
        self.accounted: set[tuple[str, tuple]] = set()  # (source, foreign path) a row read


class Reader:
    """One step of an import into `recipe` (a file, or a file and those it names). Every table
    read claims the foreign keys its rows name; what is left goes to the table's Extra rows or
    becomes a note. Owners' defaults for missing keys (`absent`) and the Computed checks wait for
    `finish`, so a key read later in the step wins over a default; with `Notes`, a check whose
    fields no file has set yet waits for the next step, and `finish(recipe, notes)` at the end of
    the import reports what never could be checked."""

    def __init__(self, recipe: dict, notes: list[str]):
        self.recipe, self.notes = recipe, notes
        self._origins: dict = {}
        self._pending: list[tuple[tuple, Any]] = []
        self._checks: list[tuple[Computed, str, Any]] = []

    def set(self, path: tuple, item, origin: str, where: tuple | None = None) -> None:
        old = lookup(self.recipe, path)
        if old is not MISSING and old != item:
            self.notes.append(f"{join(path)}: {origin} = {short(item)} replaces {short(old)} read before")
        _put(self.recipe, path, item)
        location = self._origins.get(where) if where is not None else None
        if location and isinstance(self.notes, Notes):
            self.notes.located[path] = location

    def finish(self) -> None:
        for path, absent in self._pending:
            found = absent(self.recipe) if callable(absent) else absent
            if found is not MISSING and lookup(self.recipe, path) is MISSING:
                _put(self.recipe, path, copy.deepcopy(found))
        self._pending.clear()
        checks, self._checks = self._checks, []
        if isinstance(self.notes, Notes):
            checks, self.notes.waiting = self.notes.waiting + checks, []
        for check in checks:
            if _check(self.recipe, self.notes, *check):
                continue
            if isinstance(self.notes, Notes):
                self.notes.waiting.append(check)
            else:
                _unchecked(self.recipe, self.notes, *check)

    def read(self, table: Table, foreign: dict, source: str, origins: dict | None = None) -> None:
        """Read `foreign` through `table`; `origins` (foreign path -> file:line:column) lets the
        recipe's problems point into the team's own file."""
        self._origins = origins or {}
        state = _State(table, foreign, source)
        self._rows(table, state, ())
        self._checks += [
            (row, f"{source} {join(path)}", found, self._origins.get(path)) for row, path, found in state.checks
        ]
        for path, item, why in state.kept:
            self._place(path, item, state, why)
        for path, item in _unclaimed(foreign, (), state):
            self._place(path, item, state, "")
        if isinstance(self.notes, Notes):
            self.notes.accounted |= {(source, path) for path in state.claimed}

    def _rows(self, table: Table, state: _State, prefix: tuple) -> None:
        for row in table.rows:
            path = prefix + table.path(row.foreign) if hasattr(row, "foreign") else prefix
            if isinstance(row, (Extra, Rest)):
                state.extras.append((path, row))
                state.containers.add(path)
            elif isinstance(row, Ignored):
                self._ignored(row, table, state, prefix)
            elif isinstance(row, Section):
                if isinstance(lookup(state.foreign, path), dict) and (row.when is None or row.when(self.recipe)):
                    state.containers.add(path)
                    self._rows(row.table, state, path)
            elif isinstance(row, Keyed):
                self._keyed(row, state, path)
            elif isinstance(row, Field):
                self._field(row, table, state, prefix, path)
            else:
                found = self._claim(state, path)
                if found is MISSING or (table.auto and found == "auto"):
                    continue
                if table.flags:
                    found = decode_flag(found)
                if isinstance(row, Computed):
                    state.checks.append((row, path, found))
                elif found != row.value:
                    state.kept.append((path, found, row.why))

    def _claim(self, state: _State, path: tuple):
        found = lookup(state.foreign, path)
        if found is not MISSING:
            state.claimed.add(path)
        return found

    def _field(self, row: Field, table: Table, state: _State, prefix: tuple, path: tuple) -> None:
        if row.exclusive and row.when is not None and not row.when(self.recipe):
            return
        spellings = [prefix + table.path(s) for s in (row.foreign, *row.aliases)]
        read = [(p, self._claim(state, p)) for p in spellings]
        # `key: null` in the owner's file means "not set" there, unless null is a value the recipe keeps
        read = [(p, found) for p, found in read if found is not MISSING and (found is not None or row.null)]
        if not read:
            if row.absent is not MISSING and isinstance(lookup(state.foreign, path[:-1]), dict):
                self._pending.append((split(row.recipe), row.absent))
            return
        where, found = read[0]
        for other, said in read[1:]:
            if said != found:
                self.notes.append(f"{state.source}: {join(other)} = {short(said)} ignored for {join(where)}")
        if table.auto and found == "auto":
            return
        if row.note:
            self.notes.append(f"{state.source} {join(where)}: {row.note}")
        if row.alias_note and where != spellings[0]:
            self.notes.append(f"{state.source} {join(where)}: {row.alias_note}")
        # a flag's text goes to the row's converter as written, else decoded as flag_value spells values
        try:
            converted = decode_flag(found) if table.flags and row.back is _same else row.back(found)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            converted = found  # not a value the owner reads either: validation reports its type at its line
        if converted is not MISSING:
            self.set(split(row.recipe), converted, f"{state.source} {join(where)}", where)

    def _keyed(self, row: Keyed, state: _State, path: tuple) -> None:
        node = lookup(state.foreign, path)
        if not isinstance(node, dict):
            return
        state.containers.add(path)
        for key, item in node.items():
            if isinstance(key, str) and key.endswith(row.suffix) and key != row.suffix:
                state.claimed.add(path + (key,))
                name = key[: -len(row.suffix)]
                self.set((*split(row.recipe), name), item, f"{state.source} {join(path + (key,))}", path + (key,))

    def _ignored(self, row: Ignored, table: Table, state: _State, prefix: tuple) -> None:
        *parent, pattern = table.path(row.foreign)
        node = lookup(state.foreign, prefix + tuple(parent))
        for key in list(node) if isinstance(node, dict) else ():
            if isinstance(key, str) and fnmatchcase(key, pattern):
                path = prefix + tuple(parent) + (key,)
                state.claimed.add(path)
                self.notes.append(f"{state.source} {join(path)}: not imported ({row.why})")

    def _place(self, path: tuple, item, state: _State, why: str) -> None:
        """A key no row maps: into the deepest Extra row that can hold it, else a note (at once when
        the row that claimed it says why it cannot be kept)."""
        flags = state.table.flags
        for base, row in [] if why else sorted(state.extras, key=lambda e: -len(e[0])):
            if flags and isinstance(row, Rest):
                kept = lookup(self.recipe, split(row.recipe))
                kept = [] if kept is MISSING else kept
                _put(self.recipe, split(row.recipe), [*kept, f"--{path[0]}={state.foreign[path[0]]}"])
                return
            if flags and path[0].startswith(row.foreign):
                name = path[0][len(row.foreign) :]
                self.set((*split(row.recipe), name), decode_flag(item), f"{state.source} --{path[0]}")
                return
            rest = path[len(base) :]
            if flags or path[: len(base)] != base or not rest:
                continue
            if len(rest) == 1 or (row.mode == "deep" and all(isinstance(k, str) for k in rest)):
                self.set((*split(row.recipe), *rest), item, f"{state.source} {join(path)}", path)
                return
        where = f"--{path[0]}" if flags else join(path)
        self.notes.append(f"{state.source} {where} = {short(item)}: {why or 'no recipe field holds it'}; not imported")


def finish(recipe: dict, notes: Notes) -> None:
    """The end of an import, after its last file: the checks that still wait, reported as not checked."""
    for check in notes.waiting:
        if not _check(recipe, notes, *check):
            _unchecked(recipe, notes, *check)
    notes.waiting = []


def _check(recipe: dict, notes: list[str], row: Computed, where: str, found, location: str | None = None) -> bool:
    """Compare a foreign Computed value with the recipe's derivation; False while a field it reads is unread."""
    if any(lookup(recipe, p) is MISSING for p in row.reads):
        return False
    try:
        expected = row.value(recipe)
    except (KeyError, TypeError, ValueError, AttributeError):
        return True  # a field of the wrong type: validation reports it
    if found == expected:
        return True
    text = f"{where} is {short(found)}, but {row.what} gives {short(expected)}"
    if row.raises and isinstance(notes, Notes):
        notes.conflicts.append(Problem("error", "import-conflict", "", text, location, row.raises))
    else:
        notes.append(f"{where} is {short(found)}, but the recipe derives it from {row.what}: {short(expected)}")
    return True


def _unchecked(recipe: dict, notes: list[str], row: Computed, where: str, found, location: str | None = None) -> None:
    missing = ", ".join(p for p in row.reads if lookup(recipe, p) is MISSING)
    why = f"not checked, no file read sets {missing}; resolve derives it from {row.what}"
    notes.append(f"{where} = {short(found)}: {why}")


class _State:
    def __init__(self, table: Table, foreign: dict, source: str):
        self.table, self.foreign, self.source = table, foreign, source
        self.claimed: set[tuple] = set()
        self.containers: set[tuple] = {()}
        self.extras: list[tuple[tuple, Extra | Rest]] = []
        self.checks: list[tuple[Computed, tuple, Any]] = []
        self.kept: list[tuple[tuple, Any, str]] = []


def _unclaimed(node, path: tuple, state: _State):
    """(path, value) of every foreign value under `path` that no row read."""
    if path in state.claimed:
        return
    known = state.claimed | state.containers
    inside = path in state.containers or any(len(p) > len(path) and p[: len(path)] == path for p in known)
    if inside and isinstance(node, dict):
        for key, item in node.items():
            yield from _unclaimed(item, (*path, key), state)
    elif inside and isinstance(node, list):
        for i, item in enumerate(node):
            yield from _unclaimed(item, (*path, i), state)
    elif path:
        yield path, node
