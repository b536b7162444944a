"""Validation shared between documents that hold the same values: `recipe validate` over many
files that extend the same cells checks each distinct section once, and each rule once per
distinct set of the values it reads.

Two memos, both for this process only and keyed by the values themselves (their repr: exact for
what YAML and overrides produce, 1, 1.0, True and "1" all differ):
- a subschema under `properties` that accepted a mapping or list accepts it again (a section,
  train.optimizer, ...); one that rejected it is checked again, so every error is a fresh one.
  The checker keeps that one (registry/validate/standard.py, `properties`);
- here: a rule whose `when` and `require` read only dotted paths (x-where, x-compare and their
  combinations) has the same outcome for the same values at those paths. A rule that reads
  anything else (a `$ref` to an unknown scope, a keyword on the whole document) is never memoised.
"""

from __future__ import annotations

from registry.doc import MISSING, lookup, split

LIMIT = 100_000  # entries the memo holds at most
_COMBINATORS = ("allOf", "anyOf", "oneOf")
_NESTED = ("not", "if", "then", "else")
_NOTES = ("description", "$comment", "title")
_READS: dict[int, tuple[object, frozenset | None]] = {}  # id(schema) -> (schema kept alive, its paths)
_OUTCOMES: dict[tuple, object] = {}


def reads(schema, scope=None) -> frozenset | None:
    """The dotted paths a rule's subschema reads of the document, or None: it may read any of it.
    `scope`: the checker the rule is read with (registry/validate/checker.py), to follow a `$ref`
    to another schema file (a rule is always read in the same place, so its paths are worked out
    once)."""
    entry = _READS.get(id(schema))
    if entry is None or entry[0] is not schema:
        entry = (schema, _paths(schema, scope, 0))
        _READS[id(schema)] = entry
    return entry[1]


def _paths(schema, scope, depth: int) -> frozenset | None:
    if isinstance(schema, bool):
        return frozenset()
    if not isinstance(schema, dict):
        return None
    found: set[str] = set()
    for key, value in schema.items():
        if key == "x-where" and isinstance(value, dict):
            if _refers(value):
                return None  # a $ref resolves against the scope it is read in: not memoised
            found.update(value)
        elif key == "x-compare" and isinstance(value, dict):
            for side in ("left", "right"):
                found.update(_operand_paths(value.get(side)))
        elif key in _COMBINATORS and isinstance(value, list):
            for sub in value:
                inner = _paths(sub, scope, depth)
                if inner is None:
                    return None
                found.update(inner)
        elif key in _NESTED:
            inner = _paths(value, scope, depth)
            if inner is None:
                return None
            found.update(inner)
        elif key == "$ref" and isinstance(value, str):
            inner = _referred(value, scope, depth)
            if inner is None:
                return None
            found.update(inner)
        elif key not in _NOTES:
            return None
    return frozenset(found)


def _referred(ref: str, scope, depth: int) -> frozenset | None:
    """What a `$ref` in a rule reads: a schema file's definition (`backend.schema.json#/$defs/
    sharding`), followed where the rule is read; a reference relative to an unknown scope, or
    one no checker of ours resolves, may read anything."""
    if not hasattr(scope, "resolve") or depth >= 8 or (ref.startswith("#") and depth == 0):
        return None
    try:
        target, inner = scope.resolve(ref)
    except LookupError:
        return None
    return _paths(target, inner, depth + 1)


def _refers(node) -> bool:
    if isinstance(node, dict):
        return any(k in ("$ref", "$dynamicRef") or _refers(v) for k, v in node.items())
    return isinstance(node, list) and any(_refers(v) for v in node)


def _operand_paths(spec) -> list[str]:
    if isinstance(spec, str):
        return [spec]
    if isinstance(spec, dict):
        out = [spec["path"]] if isinstance(spec.get("path"), str) else []
        out += _operand_paths(spec.get("default"))
        for factor in spec.get("product", []) if isinstance(spec.get("product"), list) else []:
            out += _operand_paths(factor)
        return out
    return []


_PLANS: dict[tuple, tuple | None] = {}  # (kind, ids of schemas) -> the paths they read, split


def outcome(kind, schemas: tuple, instance, decide, seen: dict | None = None, scope=None, plan_key=None):
    """`decide()`, memoised on the values that `schemas` read of `instance` (kind: what is
    decided, and by what; the schemas are kept alive by their caller, the rule documents).
    `seen`: the values already read of this instance, path -> repr, for one caller's rules;
    `scope`: the checker the schemas are read with (reads); `plan_key`: (kind, *ids of schemas),
    where the caller keeps it."""
    if plan_key is None:
        plan_key = (kind, *map(id, schemas))
    plan = planned(plan_key, schemas, scope)
    if plan is None:
        return decide()
    key = key_of(plan_key, plan, instance, {} if seen is None else seen)
    found = _OUTCOMES.get(key, _UNPLANNED)
    if found is _UNPLANNED:
        found = remember(key, decide())
    return found


def planned(plan_key: tuple, schemas: tuple, scope=None) -> tuple | None:
    """The paths that `schemas` read, split and in order, worked out once per plan_key; None:
    they may read anything (never memoised)."""
    plan = _PLANS.get(plan_key, _UNPLANNED)
    if plan is _UNPLANNED:
        found = [reads(schema, scope) for schema in schemas]
        plan = None if None in found else tuple(split(p) for p in sorted(set().union(*found)))
        _PLANS[plan_key] = plan
    return plan


def key_of(plan_key: tuple, plan: tuple, instance, seen: dict) -> tuple:
    """What an outcome is memoised under: its plan_key and the repr of each value its plan reads
    (`seen`: those already read of this instance)."""
    values = [plan_key]
    known = seen.get
    for path in plan:
        shown = known(path)
        if shown is None:
            value = lookup(instance, path)
            shown = seen[path] = _MISSING if value is MISSING else repr(value)
        values.append(shown)
    return tuple(values)


def remembered(key: tuple):
    """The outcome kept under a key, or UNKNOWN."""
    return _OUTCOMES.get(key, UNKNOWN)


def remember(key: tuple, found):
    if len(_OUTCOMES) >= LIMIT:
        _OUTCOMES.clear()
    _OUTCOMES[key] = found
    return found


_MISSING = "<missing>"  # no repr of a value reads so
_UNPLANNED = UNKNOWN = object()


_KEPT: dict[int, object] = {}


def keep(thing) -> int:
    """id(thing), the thing kept alive so that its id names it for the life of the process."""
    _KEPT.setdefault(id(thing), thing)
    return id(thing)
