"""The schema checker: JSON Schema 2020-12 as the schemas in schemas/ and team rule files use it,
without jsonschema's import (80 ms of a 110 ms `recipe validate`; docs/design.md, "Speed").

Each subschema is planned once (its keywords, in the order written, with their functions), each
`$ref` resolved once per scope, and a mapping or list a subschema under `properties` accepted is
accepted again without descending (keyed by its repr: 1, 1.0, True and "1" all differ).

Errors carry what jsonschema's ValidationError carries (message, validator, validator_value,
instance, schema, path, schema_path, context) and `best_match` picks one as jsonschema's does:
the messages, paths and choices are jsonschema's, checked by tests/test_checker.py against
jsonschema itself. Keywords the checker does not implement (SUPPORTED lists those it does) are
refused in team rule files (registry/validate/team.py); annotations and unknown keywords are
ignored, as in jsonschema.
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from collections import deque
from fractions import Fraction

_UNSET = object()


class Error:
    """One validation error, shaped as jsonschema's ValidationError."""

    __slots__ = (
        "context",
        "instance",
        "message",
        "parent",
        "path",
        "schema",
        "schema_path",
        "validator",
        "validator_value",
    )

    def __init__(
        self, message, validator=_UNSET, validator_value=_UNSET, instance=_UNSET, schema=_UNSET, path=(), context=()
    ):
        self.message = message
        self.validator = validator
        self.validator_value = validator_value
        self.instance = instance
        self.schema = schema
        self.path = deque(path)
        self.schema_path = deque()
        self.context = list(context)
        self.parent = None
        for error in self.context:
            error.parent = self

    def _set(self, **fields) -> None:
        for name, value in fields.items():
            if name in self.__slots__ and getattr(self, name) is _UNSET:
                setattr(self, name, value)

    @property
    def relative_path(self) -> deque:
        return self.path

    @property
    def absolute_path(self) -> deque:
        if self.parent is None:
            return self.path
        path = deque(self.path)
        path.extendleft(reversed(self.parent.absolute_path))
        return path

    def _matches_type(self) -> bool:
        try:
            expected = self.schema["type"]
        except (KeyError, TypeError):
            return False
        return any(is_type(self.instance, t) for t in ([expected] if isinstance(expected, str) else expected))

    def __repr__(self) -> str:
        return f"<Error {self.validator!r} at {list(self.absolute_path)}: {self.message!r}>"


WEAK = frozenset(("anyOf", "oneOf"))


def relevance(error) -> tuple:
    """jsonschema's order of relevance: deeper, then earlier, then not a weak keyword, then an
    error on a value of the subschema's own type."""
    return (-len(error.path), error.path, error.validator not in WEAK, False, not error._matches_type())


def best_match(errors):
    """The most relevant error, descending into a combinator's context while one of its errors
    is more relevant than the rest (jsonschema.exceptions.best_match)."""
    best = max(errors, key=relevance, default=None)
    if best is None:
        return None
    while best.context:
        smallest = heapq.nsmallest(2, best.context, key=relevance)
        if len(smallest) == 2 and relevance(smallest[0]) == relevance(smallest[1]):
            return best
        best = smallest[0]
    return best


def _finite_number(instance) -> bool:
    """JSON's numbers: NaN and infinity are not numbers in a recipe (JSON has neither)."""
    if isinstance(instance, float):
        return math.isfinite(instance)
    return isinstance(instance, int) and not isinstance(instance, bool)


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # an integer is an int: JSON Schema also counts 8.0, which then reaches a launcher as
    # `--num_processes 16.0` or a batch product as a float (docs/failure-modes.md §34)
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": _finite_number,
}


def is_type(instance, name: str) -> bool:
    try:
        return _TYPES[name](instance)
    except KeyError:
        raise ValueError(f"unknown type {name!r}") from None


def equal(one, two) -> bool:
    """JSON equality: True is not 1, [1] is not (1,) only by length and items."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, (list, tuple)) and isinstance(two, (list, tuple)):
        return len(one) == len(two) and all(equal(a, b) for a, b in zip(one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(k in two and equal(v, two[k]) for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return one == two


def _unique(items: list) -> bool:
    return not any(equal(a, b) for a, b in itertools.combinations(items, 2))


class Checker:
    """Validates instances against one schema, read in the scope of one schema document.

    `documents`: schema file name -> document, what a `$ref` names; `base`: the document the
    schema is read in ("" for a schema of its own, whose "#" is itself); `keywords`: keyword ->
    function(checker, value, instance, schema) yielding Errors, jsonschema's signature."""

    def __init__(self, schema, documents: dict, keywords: dict, base: str = "", _shared=None):
        self.schema = schema
        self.base = base
        self._shared = _shared or _Shared(documents, keywords, schema)

    def iter_errors(self, instance):
        return self.descend(instance, self.schema)

    def is_valid(self, instance) -> bool:
        return next(self.iter_errors(instance), None) is None

    def evolve(self, schema) -> Checker:
        return Checker(schema, None, None, self.base, self._shared)

    def descend(self, instance, schema, path=None, schema_path=None):
        if schema is True:
            return
        if schema is False:
            yield Error(f"False schema does not allow {instance!r}", None, None, instance, schema)
            return
        for keyword, function, value in self._shared.plan(schema):
            for error in function(self, value, instance, schema):
                error._set(validator=keyword, validator_value=value, instance=instance, schema=schema)
                if keyword not in ("if", "$ref"):
                    error.schema_path.appendleft(keyword)
                if path is not None:
                    error.path.appendleft(path)
                if schema_path is not None:
                    error.schema_path.appendleft(schema_path)
                yield error

    def resolve(self, ref: str) -> tuple[object, Checker]:
        """What a `$ref` read here names, and a checker in its document's scope; LookupError
        where it names nothing."""
        return self._shared.resolve(self, ref)


class _Shared:
    """What every checker evolved from one root shares: the plans and the resolved references."""

    def __init__(self, documents: dict, keywords: dict, root):
        self.documents = documents
        self.keywords = keywords
        self.root = root
        self.plans: dict[int, tuple] = {}
        self.refs: dict[tuple[str, str], tuple] = {}
        self.scopes: dict[str, Checker] = {}

    def plan(self, schema) -> list:
        entry = self.plans.get(id(schema))
        if entry is None or entry[0] is not schema:
            if not isinstance(schema, dict):
                raise TypeError(f"a schema is an object or a boolean, not {schema!r}")
            get = self.keywords.get
            entry = (schema, [(k, get(k), v) for k, v in schema.items() if get(k) is not None])
            self.plans[id(schema)] = entry
        return entry[1]

    def resolve(self, checker: Checker, ref: str) -> tuple[object, Checker]:
        key = (checker.base, ref)
        found = self.refs.get(key)
        if found is None:
            name, _, pointer = ref.partition("#")
            name = name or checker.base
            if name:
                if name not in self.documents:
                    raise LookupError(f"unresolvable $ref {ref!r}: no schema named {name!r}")
                target = self.documents[name]
            else:
                target = self.root
            for token in filter(None, pointer.split("/")) if pointer else ():
                token = _unescape(token)
                try:
                    target = target[int(token)] if isinstance(target, list) else target[token]
                except (KeyError, IndexError, ValueError, TypeError):
                    raise LookupError(f"unresolvable $ref {ref!r}: no {token!r} in it") from None
            scope = self.scopes.get(name)
            if scope is None:
                scope = self.scopes[name] = Checker(self.root, None, None, name, self)
            found = self.refs[key] = (target, scope)
        return found


def _unescape(token: str) -> str:
    from urllib.parse import unquote

    return unquote(token).replace("~1", "/").replace("~0", "~")


# jsonschema's keywords, each as jsonschema checks it and with its message


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
        key = (_keep(subschema), _keep(checker._shared.keywords), repr(value))
        if key in _ACCEPTED:
            continue
        errors = list(checker.descend(value, subschema, path=name, schema_path=name))
        if not errors:
            if len(_ACCEPTED) >= LIMIT:
                _ACCEPTED.clear()
            _ACCEPTED.add(key)
        yield from errors


_KEPT: dict[int, object] = {}


def _keep(thing) -> int:
    _KEPT.setdefault(id(thing), thing)
    return id(thing)


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
