"""The standard keywords of JSON Schema 2020-12 that the schema checker (registry/validate/checker.py)
implements, each as jsonschema checks it and with its message. Keywords the checker does not
implement (UNSUPPORTED) are refused in team rule files (registry/validate/team.py); annotations
and unknown keywords are ignored, as in jsonschema.

A mapping or list that a subschema under `properties` accepted is accepted again without
descending (keyed by its repr: 1, 1.0, True and "1" all differ)."""

from __future__ import annotations

import itertools
import re
from fractions import Fraction

from registry.validate import memo
from registry.validate.checker import Error, equal, is_type


def _unique(items: list) -> bool:
    return not any(equal(a, b) for a, b in itertools.combinations(items, 2))


def ref(checker, value, instance, schema):
    target, scope = checker.resolve(value)
    yield from scope.descend(instance, target)


def type_(checker, types, instance, schema):
    types = [types] if isinstance(types, str) else types
    if not any(is_type(instance, t) for t in types):
        yield Error(f"{instance!r} is not of type {', '.join(repr(t) for t in types)}")


def const(checker, value, instance, schema):
    if not equal(instance, value):
        yield Error(f"{value!r} was expected")


def enum(checker, values, instance, schema):
    if all(not equal(each, instance) for each in values):
        yield Error(f"{instance!r} is not one of {values!r}")


_ACCEPTED: set[tuple] = set()  # (id(subschema), id(keywords), repr(value)) a subschema under `properties` accepted
LIMIT = 100_000  # entries the memo holds at most: a long-lived process (recipe tune) starts afresh


def properties(checker, props, instance, schema):
    if not isinstance(instance, dict):
        return
    for name, subschema in props.items():
        if name not in instance:
            continue
        value = instance[name]
        if not isinstance(value, (dict, list)):
            yield from checker.descend(value, subschema, path=name, schema_path=name)
            continue
        # a subschema is always read in the scope of the file that holds it: its verdict is the
        # value's alone, for one set of keywords
        key = (memo.keep(subschema), memo.keep(checker._shared.keywords), repr(value))
        if key in _ACCEPTED:
            continue
        errors = list(checker.descend(value, subschema, path=name, schema_path=name))
        if not errors:
            if len(_ACCEPTED) >= LIMIT:
                _ACCEPTED.clear()
            _ACCEPTED.add(key)
        yield from errors


def _extras(instance: dict, schema: dict) -> list:
    known = schema.get("properties", {})
    patterns = "|".join(schema.get("patternProperties", {}))
    return [k for k in instance if k not in known and not (patterns and re.search(patterns, k))]


def additional_properties(checker, value, instance, schema):
    if not isinstance(instance, dict):
        return
    extras = _extras(instance, schema)
    if isinstance(value, dict):
        for extra in extras:
            yield from checker.descend(instance[extra], value, path=extra)
    elif not value and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            names = ", ".join(repr(e) for e in sorted(extras))
            patterns = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield Error(f"{names} {verb} not match any of the regexes: {patterns}")
        else:
            extras = sorted(extras, key=str)
            verb = "was" if len(extras) == 1 else "were"
            yield Error(
                f"Additional properties are not allowed ({', '.join(repr(e) for e in extras)} {verb} unexpected)"
            )


def pattern_properties(checker, patterns, instance, schema):
    if not isinstance(instance, dict):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if re.search(pattern, name):
                yield from checker.descend(value, subschema, path=name, schema_path=pattern)


def property_names(checker, subschema, instance, schema):
    if isinstance(instance, dict):
        for name in instance:
            yield from checker.descend(name, subschema)


def required(checker, names, instance, schema):
    if isinstance(instance, dict):
        for name in names:
            if name not in instance:
                yield Error(f"{name!r} is a required property")


def dependent_required(checker, table, instance, schema):
    if isinstance(instance, dict):
        for name, needed in table.items():
            if name in instance:
                for each in needed:
                    if each not in instance:
                        yield Error(f"{each!r} is a dependency of {name!r}")


def dependent_schemas(checker, table, instance, schema):
    if isinstance(instance, dict):
        for name, subschema in table.items():
            if name in instance:
                yield from checker.descend(instance, subschema, schema_path=name)


def _count(kind: str, bound_word: str, empty: str, few: str, many: str, below: bool):
    def check(checker, bound, instance, schema):
        if is_type(instance, kind) and (len(instance) < bound if below else len(instance) > bound):
            word = empty if bound == (1 if below else 0) else (few if below else many)
            yield Error(f"{instance!r} {word}")

    check.__name__ = bound_word
    return check


def items(checker, subschema, instance, schema):
    if not isinstance(instance, list):
        return
    prefix = len(schema.get("prefixItems", []))
    extra = len(instance) - prefix
    if extra <= 0:
        return
    if subschema is False:
        rest = instance[prefix:] if extra != 1 else instance[prefix]
        yield Error(f"Expected at most {prefix} {'items' if prefix != 1 else 'item'} but found {extra} extra: {rest!r}")
        return
    for index in range(prefix, len(instance)):
        yield from checker.descend(instance[index], subschema, path=index)


def prefix_items(checker, subschemas, instance, schema):
    if isinstance(instance, list):
        for (index, item), subschema in zip(enumerate(instance), subschemas):
            yield from checker.descend(item, subschema, path=index, schema_path=index)


def contains(checker, subschema, instance, schema):
    if not isinstance(instance, list):
        return
    least, most = schema.get("minContains", 1), schema.get("maxContains", len(instance))
    inner = checker.evolve(subschema)
    matches = 0
    for each in instance:
        if inner.is_valid(each):
            matches += 1
            if matches > most:
                yield Error(f"Too many items match the given schema (expected at most {most})", "maxContains", most)
                return
    if matches < least:
        if not matches:
            yield Error(f"{instance!r} does not contain items matching the given schema")
        else:
            text = f"Too few items match the given schema (expected at least {least} but only {matches} matched)"
            yield Error(text, "minContains", least)


def unique_items(checker, value, instance, schema):
    if value and isinstance(instance, list) and not _unique(instance):
        yield Error(f"{instance!r} has non-unique elements")


def pattern(checker, spec, instance, schema):
    if isinstance(instance, str) and not re.search(spec, instance):
        yield Error(f"{instance!r} does not match {spec!r}")


def _bound(message: str, fails):
    def check(checker, bound, instance, schema):
        if is_type(instance, "number") and fails(instance, bound):
            yield Error(message.format(instance=instance, bound=bound))

    return check


def multiple_of(checker, factor, instance, schema):
    if not is_type(instance, "number"):
        return
    if isinstance(factor, float):
        quotient = instance / factor
        try:
            failed = int(quotient) != quotient
        except OverflowError:
            failed = (Fraction(instance) / Fraction(factor)).denominator != 1
    else:
        failed = instance % factor
    if failed:
        yield Error(f"{instance!r} is not a multiple of {factor}")


def all_of(checker, subschemas, instance, schema):
    for index, subschema in enumerate(subschemas):
        yield from checker.descend(instance, subschema, schema_path=index)


def any_of(checker, subschemas, instance, schema):
    found = []
    for index, subschema in enumerate(subschemas):
        errors = list(checker.descend(instance, subschema, schema_path=index))
        if not errors:
            return
        found.extend(errors)
    yield Error(f"{instance!r} is not valid under any of the given schemas", context=found)


def one_of(checker, subschemas, instance, schema):
    found, first_valid, rest = [], None, iter(enumerate(subschemas))
    for index, subschema in rest:
        errors = list(checker.descend(instance, subschema, schema_path=index))
        if not errors:
            first_valid = subschema
            break
        found.extend(errors)
    else:
        yield Error(f"{instance!r} is not valid under any of the given schemas", context=found)
    more = [each for _, each in rest if checker.evolve(each).is_valid(instance)]
    if more:
        more.append(first_valid)
        yield Error(f"{instance!r} is valid under each of {', '.join(repr(s) for s in more)}")


def not_(checker, subschema, instance, schema):
    if checker.evolve(subschema).is_valid(instance):
        yield Error(f"{instance!r} should not be valid under {subschema!r}")


def if_(checker, condition, instance, schema):
    if checker.evolve(condition).is_valid(instance):
        if "then" in schema:
            yield from checker.descend(instance, schema["then"], schema_path="then")
    elif "else" in schema:
        yield from checker.descend(instance, schema["else"], schema_path="else")


STANDARD = {
    "$ref": ref,
    "type": type_,
    "const": const,
    "enum": enum,
    "properties": properties,
    "additionalProperties": additional_properties,
    "patternProperties": pattern_properties,
    "propertyNames": property_names,
    "required": required,
    "dependentRequired": dependent_required,
    "dependentSchemas": dependent_schemas,
    "minProperties": _count(
        "object", "minProperties", "should be non-empty", "does not have enough properties", "", True
    ),
    "maxProperties": _count("object", "maxProperties", "is expected to be empty", "", "has too many properties", False),
    "items": items,
    "prefixItems": prefix_items,
    "contains": contains,
    "minItems": _count("array", "minItems", "should be non-empty", "is too short", "", True),
    "maxItems": _count("array", "maxItems", "is expected to be empty", "", "is too long", False),
    "uniqueItems": unique_items,
    "minLength": _count("string", "minLength", "should be non-empty", "is too short", "", True),
    "maxLength": _count("string", "maxLength", "is expected to be empty", "", "is too long", False),
    "pattern": pattern,
    "minimum": _bound("{instance!r} is less than the minimum of {bound!r}", lambda v, b: v < b),
    "maximum": _bound("{instance!r} is greater than the maximum of {bound!r}", lambda v, b: v > b),
    "exclusiveMinimum": _bound("{instance!r} is less than or equal to the minimum of {bound!r}", lambda v, b: v <= b),
    "exclusiveMaximum": _bound(
        "{instance!r} is greater than or equal to the maximum of {bound!r}", lambda v, b: v >= b
    ),
    "multipleOf": multiple_of,
    "allOf": all_of,
    "anyOf": any_of,
    "oneOf": one_of,
    "not": not_,
    "if": if_,
}

# Standard keywords that change how a schema is checked and that the checker does not implement:
# a team rule file using one is refused (registry/validate/team.py), never checked differently.
UNSUPPORTED = frozenset(
    ("$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary")
    + ("unevaluatedProperties", "unevaluatedItems", "dependencies", "additionalItems")
)
