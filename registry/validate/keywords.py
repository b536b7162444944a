"""The custom JSON Schema keywords that carry cross-field invariants as data.

x-where      {"backend.kind": {"const": "fsdp"}, ...}: each dotted path (from the instance
             the keyword applies to) must match its subschema; a missing value reads as null.
x-compare    {"left": OPERAND, "op": "==", "right": OPERAND}: an operand is a dotted path,
             a literal, {"path": p, "default": OPERAND} or {"product": [OPERAND, ...]};
             a comparison with a missing operand does not apply.
x-sbatch-omits [NAME, ...]: a #SBATCH line that sets none of these long options, read as sbatch
             reads it (abbreviations, short letters, grouped letters: schemas/sbatch.json).
x-invariants [RULE, ...]: each rule has id, severity, message, hint, source and either
             `require` (a subschema) or `compute` (the name of a computed check), applied
             when the document matches `when`. Invariants are evaluated on the whole
             document, so every path in them is absolute.

Two standard keywords are read more strictly than jsonschema reads them (docs/failure-modes.md §33, §36):
pattern      with ECMA-262's `$` (the end of the string), as JSON Schema defines it; Python's
             `$` also matches before a final newline, which let `name\n` through every pattern.
type         a string holding a terminal control character is not a valid string.
"""

from __future__ import annotations

import math
import operator
import re
from functools import lru_cache

from registry import view
from registry.doc import MISSING, lookup, split
from registry.load import control_problem
from registry.validate import checks, memo, standard
from registry.validate.checker import Error, best_match

_OPS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def x_where(validator, spec, instance, schema):
    for dotted, subschema in spec.items():
        value = lookup(instance, dotted)
        for error in validator.descend(None if value is MISSING else value, subschema):
            error.path.extendleft(reversed(split(dotted)))
            error.message = f"{dotted}: {error.message}"
            yield error


def x_compare(validator, spec, instance, schema):
    left, right = _operand(instance, spec["left"]), _operand(instance, spec["right"])
    if left is MISSING or right is MISSING:
        return
    try:
        holds = _OPS[spec["op"]](left, right)
    except TypeError:
        return  # a wrong type is the structural schema's to report
    if not holds:
        path = _first_path(spec["left"]) or _first_path(spec["right"]) or ""
        yield Error(
            f"{_describe(spec['left'], left)} {spec['op']} {_describe(spec['right'], right)} does not hold",
            path=split(path) if path else (),
        )


def x_invariants(validator, rules, instance, schema):
    seen: dict = {}  # the values of this instance the rules read, each looked up once
    for rule, schemas, plan_key in _declared(rules, validator.__class__):
        # memo.outcome, written out: this loop runs for every rule of every recipe
        plan = memo.planned(plan_key, schemas, validator)
        if plan is None:
            path = _violated(validator, rule, instance)
        else:
            key = memo.key_of(plan_key, plan, instance, seen)
            path = memo.remembered(key)
            if path is memo.UNKNOWN:
                path = memo.remember(key, _violated(validator, rule, instance))
        if path is not None:
            yield _error(rule, path, instance)


_DECLARED: dict[tuple, list] = {}


def _declared(rules: list, cls) -> list:
    """The rules a schema decides itself (computed rules run in `computed`, once the types are
    known to hold), each with what memo.outcome needs, worked out once per rule list."""
    key = (memo.keep(rules), memo.keep(cls))
    if key not in _DECLARED:
        declared = []
        for rule in rules:
            if "compute" in rule:
                continue
            kind = ("violated", memo.keep(rule), id(cls))
            schemas = (*([rule["when"]] if "when" in rule else []), rule["require"])
            declared.append((rule, schemas, (kind, *map(id, schemas))))
        _DECLARED[key] = declared
    return _DECLARED[key]


def _violated(validator, rule: dict, instance) -> tuple | None:
    """Where a rule that applies fails (None: it does not apply, or it holds)."""
    if not applies(validator, rule, instance):
        return None
    errors = list(validator.descend(instance, rule["require"]))
    if not errors:
        return None
    at = rule.get("at")
    return split(at) if at else tuple(best_match(errors).absolute_path)


def pattern(validator, spec, instance, schema):
    if isinstance(instance, str) and not ecma_pattern(spec).search(instance):
        yield Error(f"{instance!r} does not match {spec!r}")


@lru_cache(maxsize=256)
def ecma_pattern(spec: str) -> re.Pattern:
    """A schema pattern with `$` outside brackets read as ECMA-262 reads it: the end of the string."""
    out, i, in_class = [], 0, False
    while i < len(spec):
        c = spec[i]
        if c == "\\":
            out.append(spec[i : i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(r"\Z" if c == "$" and not in_class else c)
        i += 1
    return re.compile("".join(out))


def type_(validator, types, instance, schema):
    yield from standard.type_(validator, types, instance, schema)
    if isinstance(instance, str) and "string" in ([types] if isinstance(types, str) else types):
        why = control_problem(instance)
        if why:  # shown raw it would hide text from a reviewer; it reaches launch.sh too
            yield Error(why, validator="control-char")


def x_sbatch_omits(validator, names, instance, schema):
    """A `#SBATCH` line (the text after the prefix) that sets none of the long options `names`, as
    sbatch's getopt_long reads it: `--ntasks-per-n=8` and `-n8` set --ntasks-per-node and --ntasks
    as surely as their full spellings (docs/clusters.md)."""
    if not isinstance(instance, str):
        return
    from registry.validate.engines import line_options

    for option, _ in line_options(instance):
        if option.removeprefix("--") in names:
            yield Error(f"{instance!r} sets {option}", validator="x-sbatch-omits")
            return


# The project's keywords (above), over the standard ones the checker implements
PROJECT = {
    "x-sbatch-omits": x_sbatch_omits,
    "x-where": x_where,
    "x-compare": x_compare,
    "x-invariants": x_invariants,
    "pattern": pattern,
    "type": type_,
}
KEYWORDS = {**standard.STANDARD, **PROJECT}


def computed(validator, rules: list[dict], doc: dict):
    """The computed rules' errors on a document whose types the schema has accepted."""
    recipe = view.of(doc)
    seen: dict = {}  # the values the rules' `when` read, each looked up once (the document stays as it is)
    for rule in rules:
        if applies(validator, rule, doc, seen):
            for finding in checks.run(rule, recipe):
                yield _error({**rule, **finding.rule_fields()}, finding.path, doc)


def applies(validator, rule: dict, instance, seen: dict | None = None) -> bool:
    """Whether a rule's `when` holds. `seen`: values of this instance already read (memo.outcome)."""
    if "when" not in rule:
        return True
    when = rule["when"]
    plan_key = ("applies", memo.keep(validator.__class__), id(when))
    plan = memo.planned(plan_key, (when,), validator)  # memo.outcome, written out as in x_invariants
    if plan is None:
        return validator.evolve(schema=when).is_valid(instance)
    key = memo.key_of(plan_key, plan, instance, {} if seen is None else seen)
    found = memo.remembered(key)
    if found is memo.UNKNOWN:
        found = memo.remember(key, validator.evolve(schema=when).is_valid(instance))
    return found


def _error(rule: dict, path: tuple, instance) -> Error:
    return Error(rule["message"], validator="x-invariants", validator_value=rule, path=path, instance=instance)


def _operand(doc, spec):
    if isinstance(spec, str):
        return lookup(doc, spec)
    if isinstance(spec, dict) and "path" in spec:
        value = lookup(doc, spec["path"])
        if value is MISSING or value is None:
            return _operand(doc, spec["default"]) if "default" in spec else MISSING
        return value
    if isinstance(spec, dict) and "product" in spec:
        factors = [_operand(doc, f) for f in spec["product"]]
        if any(f is MISSING or not isinstance(f, (int, float)) for f in factors):
            return MISSING
        return math.prod(factors)
    return spec  # a literal


def _first_path(spec) -> str | None:
    if isinstance(spec, str):
        return spec
    if isinstance(spec, dict):
        if "path" in spec:
            return spec["path"]
        for factor in spec.get("product", []):
            found = _first_path(factor)
            if found:
                return found
    return None


def _describe(spec, value) -> str:
    if isinstance(spec, str):
        return f"{spec} ({value!r})"
    return repr(value)
