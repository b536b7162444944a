"""Validation shared between documents that hold the same values: `recipe validate` over many
files that extend the same cells checks each distinct section once, and each rule once per
distinct set of the values it reads.

Two memos, both for this process only and keyed by the values themselves (their repr: exact for
what YAML and overrides produce, 1, 1.0, True and "1" all differ):
- a subschema under `properties` that accepted a mapping or list accepts it again (a section,
  train.optimizer, ...); one that rejected it is checked again, so every error is a fresh one;
- a rule whose `when` and `require` read only dotted paths (x-where, x-compare and their
  combinations) has the same outcome for the same values at those paths. A rule that reads
  anything else (a `$ref`, a keyword on the whole document) is never memoised.
"""

from __future__ import annotations

from jsonschema import Draft202012Validator

from registry.doc import MISSING, lookup, split

_REF = Draft202012Validator.VALIDATORS["$ref"]

LIMIT = 100_000  # entries each memo holds at most
_ACCEPTED: set[tuple] = set()  # (id(subschema), repr(value)) that the subschema accepted
_COMBINATORS = ("allOf", "anyOf", "oneOf")
_NESTED = ("not", "if", "then", "else")
_NOTES = ("description", "$comment", "title")
_READS: dict[int, tuple[object, frozenset | None]] = {}  # id(schema) -> (schema kept alive, its paths)
_OUTCOMES: dict[tuple, object] = {}


def properties(validator, properties, instance, schema):
    """`properties`, as jsonschema checks it, except that a mapping or list value a subschema
    accepted before is accepted again without descending (a subschema is always read in the scope
    of the schema file that holds it, so its verdict is the value's alone)."""
    if not validator.is_type(instance, "object"):
        return
    for prop, subschema in properties.items():
        if prop not in instance:
            continue
        value = instance[prop]
        if not isinstance(value, (dict, list)):
            yield from validator.descend(value, subschema, path=prop, schema_path=prop)
            continue
        key = (keep(subschema), repr(value))
        if key in _ACCEPTED:
            continue
        errors = list(validator.descend(value, subschema, path=prop, schema_path=prop))
        if not errors:
            if len(_ACCEPTED) >= LIMIT:  # a long-lived process (recipe tune) starts afresh
                _ACCEPTED.clear()
            _ACCEPTED.add(key)
        yield from errors


_RESOLVED: dict[tuple, object] = {}  # (registry, base URI, $ref) -> what it resolved to


def ref(validator, ref, instance, schema):
    """`$ref`, as jsonschema checks it, with each reference resolved once per registry and base
    URI (resolving one parses URLs and walks its JSON pointer: a third of a validation). What
    resolving also carries, the dynamic scope, only $dynamicRef reads: the bundled schemas hold
    none (`static`), else every reference is resolved as jsonschema resolves it."""
    resolver = getattr(validator, "_resolver", None)
    if getattr(validator, "_ref_resolver", None) is not None or resolver is None or not static(resolver._registry):
        yield from _REF(validator, ref, instance, schema)
        return
    key = (keep(resolver._registry), resolver._base_uri, ref)
    resolved = _RESOLVED.get(key)
    if resolved is None:
        try:
            resolved = resolver.lookup(ref)
        except Exception:  # unresolvable: jsonschema raises it as it does
            yield from _REF(validator, ref, instance, schema)
            return
        if resolved.resolver._base_uri.startswith(META):
            yield from _REF(validator, ref, instance, schema)
            return
        _RESOLVED[key] = resolved
    yield from validator.descend(instance, resolved.contents, resolver=resolved.resolver)


_STATIC: dict[int, bool] = {}


def static(registry) -> bool:
    """Whether no schema of a registry but the meta-schemas reads or anchors the dynamic scope
    ($dynamicRef, $recursiveRef and their anchors)."""
    key = keep(registry)
    if key not in _STATIC:
        import json

        ours = [registry[uri].contents for uri in registry if not uri.startswith(META)]
        text = json.dumps(ours, default=str)
        _STATIC[key] = not any(word in text for word in ("$dynamic", "$recursive"))
    return _STATIC[key]


# jsonschema's own meta-schemas, in every registry: they use $dynamicRef, so a reference into
# one is resolved afresh each time (this project's schemas never make one)
META = "https://json-schema.org/"


def reads(schema, resolver=None) -> frozenset | None:
    """The dotted paths a rule's subschema reads of the document, or None: it may read any of it.
    `resolver`: where the rule is read, to follow a `$ref` to another schema file (a rule is
    always read in the same place, so its paths are worked out once)."""
    entry = _READS.get(id(schema))
    if entry is None or entry[0] is not schema:
        entry = (schema, _paths(schema, resolver, 0))
        _READS[id(schema)] = entry
    return entry[1]


def _paths(schema, resolver, depth: int) -> frozenset | None:
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
                inner = _paths(sub, resolver, depth)
                if inner is None:
                    return None
                found.update(inner)
        elif key in _NESTED:
            inner = _paths(value, resolver, depth)
            if inner is None:
                return None
            found.update(inner)
        elif key == "$ref" and isinstance(value, str):
            inner = _referred(value, resolver, depth)
            if inner is None:
                return None
            found.update(inner)
        elif key not in _NOTES:
            return None
    return frozenset(found)


def _referred(ref: str, resolver, depth: int) -> frozenset | None:
    """What a `$ref` in a rule reads: a schema file's definition (`backend.schema.json#/$defs/
    sharding`), followed where the rule is read; a reference relative to an unknown scope, or
    into a meta-schema, may read anything."""
    if resolver is None or depth >= 8 or (ref.startswith("#") and depth == 0):
        return None
    try:
        resolved = resolver.lookup(ref)
    except Exception:
        return None
    if resolved.resolver._base_uri.startswith(META):
        return None
    return _paths(resolved.contents, resolved.resolver, depth + 1)


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


def outcome(kind, schemas: tuple, instance, decide, seen: dict | None = None, resolver=None):
    """`decide()`, memoised on the values that `schemas` read of `instance` (kind: what is
    decided, and by what; the schemas are kept alive by their caller, the rule documents).
    `seen`: the values already read of this instance, path -> repr, for one caller's rules;
    `resolver`: where the schemas are read (reads)."""
    plan_key = (kind, *map(id, schemas))
    if plan_key in _PLANS:
        plan = _PLANS[plan_key]
    else:
        found = [reads(schema, resolver) for schema in schemas]
        plan = None if None in found else tuple(split(p) for p in sorted(set().union(*found)))
        _PLANS[plan_key] = plan
    if plan is None:
        return decide()
    if seen is None:
        seen = {}
    values = []
    for path in plan:
        if path not in seen:
            value = lookup(instance, path)
            seen[path] = _MISSING if value is MISSING else repr(value)
        values.append(seen[path])
    key = (plan_key, *values)
    if key not in _OUTCOMES:
        if len(_OUTCOMES) >= LIMIT:
            _OUTCOMES.clear()
        _OUTCOMES[key] = decide()
    return _OUTCOMES[key]


_MISSING = "<missing>"  # no repr of a value reads so


_KEPT: dict[int, object] = {}


def keep(thing) -> int:
    """id(thing), the thing kept alive so that its id names it for the life of the process."""
    _KEPT.setdefault(id(thing), thing)
    return id(thing)
