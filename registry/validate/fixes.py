"""The settings a backend or GPU needs, applied at composition: a rule whose hint names a single
fix declares it as data (`"fix": {"policy.dtype": "float32"}` in its schema file), and a
composed recipe that breaks the rule only through values its parts set gets the fix, so that a
cell such as pi07/fsdp/4xH100 composes into a working recipe (docs/design.md, "Fixes").

A fix never overrides the user: a value set in the recipe file, the cell's own tuned overlay or
on the command line stays as written and the rule reports it. A fix is kept only where it makes
its rule hold; otherwise the rule reports the recipe as composed. The value's origin names the
rule and what it replaced, so `recipe show --origin` says where it came from.
"""

from __future__ import annotations

import json
from functools import cache

from registry.doc import MISSING, USER_LAYER, lookup, rank, split
from registry.errors import RecipeError
from registry.files import SCHEMA_DIR
from registry.load import display_path


@cache
def fix_rules() -> tuple[tuple[str, dict], ...]:
    """(schema file, rule) for every bundled rule that declares a fix, in file order."""
    from registry.validate.schemas import _rules, documents

    return tuple(
        (name, rule)
        for name, doc in documents().items()
        for _, rule in _rules(doc)
        if isinstance(rule.get("fix"), dict)
    )


def apply(data: dict, origins: dict) -> tuple[list[str], str | None]:
    """Apply every fix a composed document qualifies for, in place (values and origins): the ids
    of the rules whose fixes were applied, and the composition's key in the verdict cache (None:
    the cache is off). What the fixes did to a document is kept beside the verdicts
    (registry/validate/verdicts.py, keyed by the document, its origins, the schemas and the
    package), so a composition met before needs no schema checker; the fixed document follows
    from that key, so its verdict is kept under one derived from it."""
    from registry.validate import verdicts

    if not verdicts.enabled():
        return _apply(data, origins), None
    key = verdicts.key(data, origins, "fixes", ())
    kept = verdicts.recall(key)
    if kept is not None and isinstance(kept.get("changes"), list):
        for path, value, origin in kept["changes"]:
            _set(data, tuple(path), value)
            origins[tuple(path)] = origin
        return list(kept["applied"]), key
    applied = _apply(data, origins)
    verdicts.remember(key, {"applied": applied, "changes": _changes(applied, data, origins)})
    return applied, key


def _changes(applied: list[str], data: dict, origins: dict) -> list[list]:
    """[path, value, origin] of every value the applied fixes set (a fix sets only its own paths)."""
    fixing = {rule["id"]: rule["fix"] for _, rule in fix_rules()}
    paths = dict.fromkeys(tuple(split(dotted)) for rule_id in applied for dotted in fixing[rule_id])
    return [[list(path), lookup(data, path), origins.get(path)] for path in paths]


def _apply(data: dict, origins: dict) -> list[str]:
    """One fix may make another rule apply (a V100's fp16 under FSDP), so the rules are tried
    again until none changes the document."""
    from registry.validate.schemas import validator

    try:
        rules = fix_rules()
        check = validator()
    except RecipeError:
        return []  # a malformed schema file: validation reports it, in one line
    if not rules:
        return []
    applied: list[str] = []
    for _ in range(len(rules)):
        changed = False
        for schema, rule in rules:
            if rule["id"] in applied or _holds(check, rule, data):
                continue
            if _try(check, schema, rule, data, origins):
                applied.append(rule["id"])
                changed = True
        if not changed:
            break
    return applied


def _holds(check, rule: dict, data: dict) -> bool:
    from registry.validate import memo
    from registry.validate.keywords import applies

    if not applies(check, rule, data):
        return True
    require = rule["require"]  # memoised on the values it reads, as a rule's outcome is
    key = ("holds", memo.keep(check.__class__), id(require))
    return memo.outcome(None, (require,), data, lambda: check.evolve(schema=require).is_valid(data), None, check, key)


def _try(check, schema: str, rule: dict, data: dict, origins: dict) -> bool:
    """Set the rule's fix where no value in its way is the user's; undo it unless the rule then holds."""
    targets = [split(dotted) for dotted in rule["fix"]]
    if any(not _settable(data, origins, path) for path in targets):
        return False
    before = [(path, lookup(data, path), origins.get(path)) for path in targets]
    for path, value in zip(targets, rule["fix"].values()):
        _set(data, path, value)
    if not _holds(check, rule, data):
        for path, old, _ in before:
            _restore(data, path, old)
        return False
    where = display_path(SCHEMA_DIR / schema)
    for path, old, was in before:
        replaced = f", in place of {json.dumps(old)} from {was}" if old is not MISSING and was else ""
        origins[path] = f"{where}: fix of rule {rule['id']}{replaced}"
    return True


def _settable(data: dict, origins: dict, path: tuple) -> bool:
    """Whether a fix may set a path: every mapping on the way exists (or may be added) and the
    value there is not the user's."""
    node = data
    for key in path[:-1]:
        node = node.get(key, {}) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return False  # a malformed section is the schema's to report
    was = origins.get(path)
    return was is None or rank(origins, was)[0] < USER_LAYER


def _set(data: dict, path: tuple, value) -> None:
    node = data
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def _restore(data: dict, path: tuple, old) -> None:
    node = lookup(data, path[:-1])
    if old is MISSING:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = old
