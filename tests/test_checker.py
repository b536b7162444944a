"""The project's schema checker (registry/validate/checker.py, its keywords in standard.py) against jsonschema itself: where the
project re-implements a library, it is tested against the library.

Two layers, both deterministic (seeded):

1. The engine. `checker.Checker` with the standard keywords (standard.STANDARD, `pattern` read as
   ECMA-262 reads it) against a jsonschema Draft 2020-12 validator with the same stricter types and
   pattern, built with jsonschema's own machinery (validators.extend, a referencing.Registry of the
   schema files). For every (schema, instance): each error's message, validator, validator_value,
   instance, schema, absolute path and schema path, in order, and recursively the context of
   anyOf/oneOf errors; and `best_match`'s choice. Cases: hand-written schemas covering every keyword
   of standard.STANDARD (each against its own instances and a set of probes of every type), seeded
   random schemas and instances, and the section schemas in schemas/ (the project's keywords
   stripped) over composed bundled cells, the recipes of tests/test_invariants.py that break or keep
   each rule, and seeded mutations of all of them.
2. The pipeline. `registry.validate._validate` as it is, against the same call with the validator it
   uses replaced by a jsonschema validator hosting the project's keywords (keywords.PROJECT, written
   to run inside jsonschema too): the Problems must be equal. On the reference side the memo of rule
   outcomes (registry/validate/memo.py) is bypassed, so it decides every rule afresh; on the
   checker's side both memos stay warm across documents, as in a long `recipe validate`.

Where both sides raise the same exception, they agree: that is no difference between the checkers
(a few mutated recipes crash the computed memory-fit check that both sides share).

One liberty with the reference: jsonschema's `additionalProperties` walks a *set* of the extra keys
when its value is a schema, so its errors come in hash order (another order per PYTHONHASHSEED);
the reference here puts them back in the order of the instance's keys, the checker's order.

Known mismatches are tests of their own, named test_mismatch_*, and fail until the project decides.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import json
import math
import pprint
import random
import re

import pytest
import referencing
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import best_match as reference_best_match
from referencing.jsonschema import DRAFT202012

import registry.validate
from registry.compose import compose
from registry.doc import MISSING, lookup
from registry.sharing import sources
from registry.validate import RESOLVED, ROOT, _validate, checker, memo, standard
from registry.validate.keywords import KEYWORDS, PROJECT, ecma_pattern
from registry.validate.keywords import pattern as project_pattern
from registry.validate.schemas import referable

SEED = 20260
SHOWN = 4  # mismatches shown in full in a failure message (all are counted)


# --- the reference: jsonschema with the project's stricter types ---------------------------
def _is_integer(_, value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(_, value) -> bool:
    return _is_integer(_, value) or (isinstance(value, float) and math.isfinite(value))


TYPE_CHECKER = Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number})
_JSONSCHEMA_ADDITIONAL = Draft202012Validator.VALIDATORS["additionalProperties"]


def _ecma_pattern(validator, spec, instance, schema):
    """jsonschema's `pattern`, with `$` the end of the string (ECMA-262)."""
    if validator.is_type(instance, "string") and not ecma_pattern(spec).search(instance):
        yield ValidationError(f"{instance!r} does not match {spec!r}")


def _additional_properties(validator, value, instance, schema):
    """jsonschema's own `additionalProperties`, its errors in the order of the instance's keys (it
    walks a set of the extra keys: hash order, which changes with PYTHONHASHSEED)."""
    errors = list(_JSONSCHEMA_ADDITIONAL(validator, value, instance, schema))
    if isinstance(value, dict) and isinstance(instance, dict):
        order = {key: i for i, key in enumerate(instance)}
        errors.sort(key=lambda e: order[e.path[0]])
    yield from errors


Reference = validators.extend(
    Draft202012Validator,
    {"pattern": _ecma_pattern, "additionalProperties": _additional_properties},
    type_checker=TYPE_CHECKER,
)
Hosted = validators.extend(Reference, PROJECT)  # the project's keywords, run inside jsonschema

ENGINE = {**standard.STANDARD, "pattern": project_pattern}  # the checker's side of layer 1
PROJECT_KEYWORDS = ("x-where", "x-compare", "x-invariants")


def _registry(documents: dict) -> referencing.Registry:
    return referencing.Registry().with_resources(
        (name, DRAFT202012.create_resource(doc)) for name, doc in documents.items()
    )


def _strip(node):
    """A deep copy without the project's keywords (new objects: nothing shared with the real ones,
    whose `properties` verdicts the checker memoises by subschema)."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in PROJECT_KEYWORDS}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


# schema files a hand-written `$ref` names besides schemas/: relative references inside another
# file, and pointer tokens escaped (~1, ~0, %20)
SYNTHETIC = {
    "defs.json": {
        "$defs": {
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "name": {"type": "string", "pattern": "^[a-z]+$"},
            "pair": {
                "type": "array",
                "prefixItems": [{"$ref": "#/$defs/name"}, {"$ref": "#/$defs/port"}],
                "items": False,
            },
            "a/b": {"const": 1},
            "a~b": {"const": 2},
            "a b": {"const": 3},
            "tree": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}},
                "additionalProperties": False,
            },
        }
    }
}
STRIPPED = {**{name: _strip(doc) for name, doc in referable().items()}, **SYNTHETIC}
STRIPPED_REGISTRY = _registry(STRIPPED)
PROJECT_REGISTRY = _registry(referable())


# --- comparing errors ------------------------------------------------------------------------
def shape(error) -> dict:
    """What is compared of an error; reprs, so that True, 1 and 1.0 (and 0 and "0") differ."""
    return {
        "message": error.message,
        "validator": error.validator,
        "validator_value": repr(error.validator_value),
        "instance": repr(error.instance),
        "schema": repr(error.schema),
        "path": [repr(p) for p in error.absolute_path],
        "schema_path": [repr(p) for p in error.schema_path],
        "context": [shape(e) for e in error.context],
    }


def _outcome(validator, instance, best) -> dict:
    try:
        errors = list(validator.iter_errors(instance))
    except Exception as e:  # both sides raising alike agrees (an int too large for a float, say)
        return {"raised": f"{type(e).__name__}: {e}"}
    chosen = best(errors)
    return {"errors": [shape(e) for e in errors], "best_match": shape(chosen) if chosen is not None else None}


def engine_outcomes(schema, instance, documents=STRIPPED, registry=STRIPPED_REGISTRY, keywords=ENGINE):
    """(the checker's, jsonschema's) errors and best match of one instance against one schema."""
    ours = _outcome(checker.Checker(schema, documents, keywords), instance, checker.best_match)
    theirs = _outcome(Reference(schema, registry=registry), instance, reference_best_match)
    return ours, theirs


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _clipped(node):
    if isinstance(node, str):
        return _clip(node)
    if isinstance(node, dict):
        return {k: _clipped(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_clipped(v) for v in node]
    return node


def report(label: str, what: str, ours, theirs) -> str:
    """One mismatch: the case, both sides in full (long reprs clipped) and their diff."""
    mine = pprint.pformat(_clipped(ours), width=140, sort_dicts=False).splitlines()
    other = pprint.pformat(_clipped(theirs), width=140, sort_dicts=False).splitlines()
    whole = [pprint.pformat(side, width=140, sort_dicts=False).splitlines() for side in (theirs, ours)]
    diff = "\n".join(difflib.unified_diff(*whole, "jsonschema", "checker", lineterm="", n=2))  # unclipped
    return (
        f"--- {label}\n{what}\nchecker:\n" + "\n".join(mine) + "\njsonschema:\n" + "\n".join(other) + f"\ndiff:\n{diff}"
    )


def fail_on(mismatches: list[str], compared: int, what: str) -> None:
    if mismatches:
        shown = "\n\n".join(mismatches[:SHOWN])
        pytest.fail(
            f"{len(mismatches)} of {compared} {what} differ from jsonschema; the first {SHOWN}:\n\n{shown}",
            pytrace=False,
        )


def _dump(value) -> str:
    return _clip(json.dumps(value, default=repr), 2000)


def engine_mismatches(cases, **kw) -> list[str]:
    found = []
    for label, schema, instance in cases:
        ours, theirs = engine_outcomes(schema, instance, **kw)
        if ours != theirs:
            found.append(
                report(label, f"schema:   {_dump(schema)}\ninstance: {_clip(repr(instance), 2000)}", ours, theirs)
            )
    return found


# --- layer 1: hand-written schemas, every keyword of standard.STANDARD -----------------------
NAN, INF = float("nan"), float("inf")
PROBES = [
    None,
    True,
    False,
    0,
    1,
    -1,
    1.0,
    8.0,
    -0.0,
    1.5,
    2**70,
    NAN,
    INF,
    "",
    "a",
    "ab\n",
    "ĳ",
    "x\x1b",
    [],
    [1],
    [True, 1],
    {},
    {"a": 1},
]

HAND = [
    # type
    ({"type": "integer"}, []),
    ({"type": "number"}, [-INF, 10**400]),
    ({"type": ["integer", "null"]}, []),
    ({"type": ["string", "boolean", "array", "object"]}, []),
    ({"type": []}, []),
    # const, enum: True is not 1, 1 is 1.0, in lists and mappings too
    ({"const": 1}, ["1", [1]]),
    ({"const": True}, []),
    ({"const": 0}, [0.0]),
    ({"const": None}, []),
    (
        {"const": [1, {"a": [True]}]},
        [[1, {"a": [1]}], [1.0, {"a": [True]}], [True, {"a": [True]}], [1, {"a": [True], "b": 1}]],
    ),
    (
        {"const": {"a": 1, "b": [1.0]}},
        [{"b": [1], "a": 1}, {"a": True, "b": [1]}, {"a": 1}, {"a": 1, "b": [1], "c": 0}],
    ),
    ({"enum": [1, "1", None]}, []),
    ({"enum": [True, False]}, [0.0]),
    ({"enum": [[1, 2], {"a": None}, [True]]}, [[1, 2], [1.0, 2.0], [1], [True], {"a": None}, {"a": False}]),
    ({"enum": []}, []),
    # properties, additionalProperties (false, true, a schema), patternProperties, propertyNames
    (
        {"properties": {"a": {"type": "integer"}, "b": {"type": "object", "properties": {"c": {"const": 1}}}}},
        [{"a": 1.0, "b": {"c": 2}}, {"b": {"c": 1}}, {"b": {"c": True}}, {"b": [], "a": "x"}],
    ),
    ({"properties": {"a": {}}, "additionalProperties": False}, [{"b": 1}, {"b": 1, "c": 2, "a": 0}, {"C": 1, "b": 2}]),
    ({"properties": {"a": {"type": "string"}}, "additionalProperties": True}, [{"a": 1, "b": 2}]),
    (
        {"additionalProperties": {"type": "string"}},
        [{"a": "x", "b": 1, "c": None, "d": "y", "e": 2.5, "f": [], "g": True}],
    ),
    ({"additionalProperties": {"minimum": 2, "type": "integer"}}, [{"z": 1, "y": 0.5, "x": 3, "w": "s"}]),
    (
        {
            "patternProperties": {"^x-": {"type": "string"}, "[0-9]$": {"type": "integer"}},
            "additionalProperties": False,
        },
        [{"x-a": 1, "k1": "s", "z": 1, "y": 2}, {"x-1": 1}, {"z": 1}, {"x-b": "s", "k2": 2}],
    ),
    ({"patternProperties": {"^a": True}, "additionalProperties": {"type": "null"}}, [{"ab": 1, "b": 1, "c": None}]),
    ({"patternProperties": {"b": False}}, [{"abc": 1, "a": 1}]),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, [{"ab": 1, "Ab": 2, "a\n": 3}]),
    ({"propertyNames": {"maxLength": 2, "not": {"const": "no"}}}, [{"abc": 1, "no": 2, "ok": 3}]),
    ({"propertyNames": False}, [{"a": 1, "b": 2}]),
    ({"required": ["a", "b"]}, [{"a": 1}, {"b": None, "a": None}, ["a", "b"]]),
    ({"required": []}, []),
    ({"dependentRequired": {"a": ["b", "c"], "b": []}}, [{"a": 1}, {"a": 1, "b": 2}, {"b": 1}]),
    (
        {"dependentSchemas": {"a": {"required": ["b"], "properties": {"b": {"type": "string"}}}, "c": False}},
        [{"a": 1}, {"a": 1, "b": 2}, {"c": 1}, {"c": 1, "a": 1, "b": "x"}],
    ),
    # min/maxProperties: the 0 and 1 boundaries have messages of their own
    *(
        ({keyword: bound}, [{"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}])
        for keyword in ("minProperties", "maxProperties")
        for bound in (0, 1, 2)
    ),
    # arrays: items, prefixItems, items false, contains with min/maxContains, min/maxItems, uniqueItems
    ({"items": {"type": "integer"}}, [[1, 2.0, True, "x", None]]),
    ({"prefixItems": [{"type": "string"}, {"type": "number"}]}, [["a", 1], [1, "a"], ["a"], ["a", 1, None]]),
    ({"prefixItems": [{"type": "string"}], "items": False}, [["a"], ["a", 1], ["a", 1, 2], [1]]),
    ({"prefixItems": [{}, {}], "items": False}, [[1, 2, 3], [1, 2, 3, 4]]),
    ({"items": False}, [[1, 2]]),
    ({"prefixItems": [{"const": 1}], "items": {"type": "string"}}, [[1, "a", 2], [2], [True, 3]]),
    ({"contains": {"type": "integer"}}, [["a"], ["a", 1], [1.0], [True]]),
    ({"contains": {"type": "integer"}, "minContains": 2}, [[1, 2], ["a", 1, "b"], [1, 2, 3]]),
    ({"contains": {"type": "integer"}, "maxContains": 1}, [[1, 2], [1, "a"], [1, 2, 3], ["a"]]),
    ({"contains": {"type": "integer"}, "minContains": 0}, [["a"]]),
    ({"contains": {"type": "integer"}, "minContains": 0, "maxContains": 0}, [["a"], [1]]),
    ({"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3}, [[1, 2, 3, 4], [1, "a"], [1, 2, 3]]),
    ({"contains": False}, [[1]]),
    ({"minContains": 2, "maxContains": 0}, [[1]]),
    *(({keyword: bound}, [[1], [1, 2], [1, 2, 3]]) for keyword in ("minItems", "maxItems") for bound in (0, 1, 2)),
    (
        {"uniqueItems": True},
        [
            [1, 1],
            [1, True],
            [True, True],
            [1, 1.0],
            [0, False],
            [0, -0.0],
            ["1", 1],
            [None, None],
            [[], {}],
            [1, 2, 3, 1],
            [[1], [True]],
            [[1], [1.0]],
            [{"a": 1}, {"a": 1.0}],
            [{"a": 1}, {"a": True}],
            [{"a": 1, "b": 2}, {"b": 2, "a": 1}],
            [NAN, NAN],
            [float("nan"), float("nan")],
            ["a", "b", "a"],
        ],
    ),
    ({"uniqueItems": False}, [[1, 1]]),
    # strings: min/maxLength (code points), pattern with ECMA-262's `$`
    *(
        ({keyword: bound}, ["ab", "abc", "ĳĳ", "😀😀"])
        for keyword in ("minLength", "maxLength")
        for bound in (0, 1, 2, 3)
    ),
    ({"pattern": "^[a-z]+$"}, ["abc", "abc\n", "ab1"]),
    ({"pattern": "a$|^b"}, ["xa", "xa\n", "bx", "c"]),
    ({"pattern": "[$]"}, ["$", "b"]),
    ({"pattern": "\\$"}, ["$", "x"]),
    ({"pattern": "^a\\d{2}"}, ["a12x", "a1"]),
    # numbers: bounds at their edges, multipleOf (int, float, a huge int with a float factor)
    *(
        ({keyword: bound}, [bound, bound - 1, bound + 0.5, -0.0, 2**70, -(2**70)])
        for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        for bound in (0, 1, 1.5, -2)
    ),
    ({"multipleOf": 2}, [4, 5, 4.0, 4.5, 2**70, 2**70 + 1, 1e308]),
    ({"multipleOf": 0.1}, [0.3, 0.7, 0.5, 10**30, 2**70, 3]),
    ({"multipleOf": 0.5}, [1e308, 2.5, 2**70 + 1, 10**300, 10**400]),  # 10**400: both raise OverflowError
    ({"multipleOf": 1e-300}, [10**20, 1.0, 1e300]),
    ({"multipleOf": 1.5}, [3, 4.5, 4, 2**70]),
    ({"multipleOf": 3}, [9.0, 1e308, 2**71]),
    # combinators
    ({"allOf": [{"type": "integer"}, {"minimum": 2}, {"maximum": 1}]}, [0, 3, 1.5]),
    ({"anyOf": [{"type": "string", "pattern": "^a"}, {"type": "integer", "minimum": 5}]}, ["abc", "b", 3, 7, 5.5]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}, {"type": "number"}]}, [-1.5, 2.5]),
    (
        {"oneOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["c"]}]},
        [{"a": 1, "b": 1}, {"a": 1, "b": 1, "c": 1}],
    ),
    ({"oneOf": [True, True, False]}, []),
    ({"oneOf": [False, {"type": "null"}]}, []),
    ({"anyOf": [False, {"type": "null"}]}, []),
    (
        {
            "anyOf": [
                {"properties": {"a": {"type": "integer"}}},
                {"properties": {"a": {"anyOf": [{"type": "string"}, {"minimum": 3}]}}, "required": ["b"]},
                {"type": "array", "items": {"oneOf": [{"type": "string"}, {"maxLength": 1}]}},
            ]
        },
        [{"a": 1.5}, {"a": 2}, {"a": 2, "b": 0}, ["ab", 1, "c"]],
    ),
    ({"not": {"type": "string"}}, []),
    ({"not": {}}, []),
    ({"not": False}, []),
    ({"not": {"not": {"const": 1}}}, []),
    ({"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"type": "string"}}, [3, 7]),
    ({"if": {"required": ["a"]}, "then": {"required": ["b"]}}, [{"a": 1}, {"a": 1, "b": 1}]),
    ({"if": False, "else": {"const": 1}}, []),
    ({"if": True, "then": False, "else": True}, []),
    ({"then": {"const": 1}, "else": {"const": 2}}, []),
    ({"else": False, "if": {"type": "string"}}, []),
    # boolean schemas
    (True, []),
    (False, []),
    ({"properties": {"a": False, "b": True}, "items": False}, [{"a": 1, "b": 1}]),
    # $ref: to #/$defs, to another file (whose own refs read it), escaped tokens, with siblings, recursion
    (
        {
            "$defs": {"x": {"type": "integer", "minimum": 1}},
            "properties": {"a": {"$ref": "#/$defs/x"}},
            "items": {"$ref": "#/$defs/x"},
        },
        [{"a": 0}, [1, 0, "a"]],
    ),
    ({"$ref": "defs.json#/$defs/pair"}, [["ab", 80], ["Ab", 0], ["ab", 80, 1], ["ab"]]),
    ({"$ref": "defs.json#/$defs/a~1b"}, []),
    ({"$ref": "defs.json#/$defs/a~0b"}, []),
    ({"$ref": "defs.json#/$defs/a%20b"}, []),
    ({"$ref": "defs.json#/$defs/tree"}, [{"v": 1, "kids": [{"v": "x"}, {"kids": [{"v": 1.5, "w": 0}]}]}]),
    ({"$ref": "#/$defs/x", "$defs": {"x": {"minimum": 5}}, "maximum": 3, "type": "integer"}, [4, 6, 2]),
    (
        {
            "type": "integer",
            "$ref": "#/$defs/x",
            "$defs": {"x": {"minimum": 5, "$ref": "#/$defs/y"}, "y": {"maximum": 3}},
        },
        [4],
    ),
    ({"$ref": "train.schema.json#/properties/optimizer"}, [{"lr": 0, "betas": [0.9, 1], "type": "adamx", "eps": NAN}]),
    ({"$ref": "recipe.schema.json#/$defs/meta"}, [{"name": "a/b\n", "version": 0, "tags": ["x", "Y"], "other": 1}]),
    (
        {"$defs": {"list": {"type": "array", "items": {"$ref": "#/$defs/list"}}}, "$ref": "#/$defs/list"},
        [[[[1]]], [[], [[]]]],
    ),
    # keywords neither implements (annotations, format without a format checker, unknown ones)
    ({"format": "email", "title": "t", "x-foo": 1, "default": 3, "examples": [1], "$comment": "c"}, ["not an email"]),
]


# Known mismatches: jsonschema's `uniqueItems` sorts the items when they sort and compares only
# neighbours, so a duplicate that sorts apart from its twin goes unseen: [[1], [True], [1]] ([1] and
# [True] sort as equals, JSON tells them apart), or a NaN between two 1s (NaN sorts nowhere). The
# checker compares every pair and reports them; jsonschema 4.26 reports nothing.
UNIQUE_ITEMS_MISMATCHES = [
    ({"uniqueItems": True}, [[1], [True], [1]]),
    ({"uniqueItems": True}, [[0], [False], [0]]),
    ({"uniqueItems": True}, [[1, True], [True, 1], [1, True]]),
    ({"type": "array", "items": {"type": "array"}, "uniqueItems": True}, [["a", 1], ["a", True], ["a", 1]]),
    ({"uniqueItems": True}, [1, float("nan"), 1]),
    ({"uniqueItems": True}, [NAN, 1, NAN]),  # the same NaN object twice: `is` makes it equal to itself
    ({"type": "array", "items": {"type": "number"}, "uniqueItems": True}, [2, NAN, 1, 2]),
]


def test_unique_items_compares_every_pair_where_jsonschema_misses_some():
    """A deliberate difference: JSON Schema asks for items unique under JSON equality, and the
    checker compares every pair; jsonschema 4.26 sorts the items and compares neighbours only, so
    it misses these duplicates. Asserted on both sides: a jsonschema that finds them shows here."""
    for schema, instance in UNIQUE_ITEMS_MISMATCHES:
        ours = [e.message for e in checker.Checker(schema, {}, standard.STANDARD).iter_errors(instance)]
        assert f"{instance!r} has non-unique elements" in ours, (schema, instance, ours)
        theirs = [e.message for e in Draft202012Validator(schema).iter_errors(instance)]
        assert not any("non-unique" in m for m in theirs), (schema, instance, theirs)


def test_every_keyword_jsonschema_checks_is_implemented_or_refused():
    """What the checker leaves out is refused in team rule files and used by no schema file, and
    `format` is an annotation in both (jsonschema checks it only with a format checker)."""
    left_out = set(Draft202012Validator.VALIDATORS) - set(standard.STANDARD)
    assert left_out <= standard.UNSUPPORTED | {"format"}
    used = {k for doc in referable().values() for k in _keywords_used(doc)}
    assert not used & (standard.UNSUPPORTED | {"format"})


_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas", "x-where")
_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_ONE = ("items", "additionalProperties", "propertyNames", "contains", "not", "if", "then", "else")


def _keywords_used(schema) -> set:
    """The keywords of a schema and of its subschemas (not the names of its properties)."""
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        if key in _MAPS and isinstance(value, dict):
            subschemas = list(value.values())
        elif key in _LISTS and isinstance(value, list):
            subschemas = value
        elif key in _ONE:
            subschemas = [value]
        elif key == "x-invariants" and isinstance(value, list):
            subschemas = [rule[part] for rule in value for part in ("when", "require") if part in rule]
        else:
            subschemas = []
        for subschema in subschemas:
            found |= _keywords_used(subschema)
    return found


def hand_cases():
    for i, (schema, instances) in enumerate(HAND):
        for j, instance in enumerate(instances + PROBES):
            yield f"hand[{i}] instance[{j}]", schema, instance


def test_hand_written_schemas_every_standard_keyword():
    cases = list(hand_cases())
    used = {k for _, schema, _ in cases for k in _keywords_used(schema)}
    assert set(standard.STANDARD) <= used, f"no case uses {sorted(set(standard.STANDARD) - used)}"
    fail_on(engine_mismatches(cases), len(cases), "hand-written (schema, instance) pairs")


# --- layer 1: seeded random schemas and instances ---------------------------------------------
NAMES = ("a", "b", "c")
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
PATTERNS = ("^a", "a$", "^[ab]*$", "b", "^$", "[$]", "\\d", "^.$")
SCALARS = (None, True, False, 0, 1, 2, -1, 0.0, 1.0, 2.0, 0.5, 3, 2**70, NAN, "", "a", "ab", "b\n", "ba", "1", "\x07")
BOUNDS = (0, 1, 2, -1, 0.5, 1.0, 2.5)
REFS = ("#/$defs/d0", "#/$defs/d1", "defs.json#/$defs/port", "defs.json#/$defs/name", "defs.json#/$defs/pair")


def random_value(rng: random.Random, depth: int = 3):
    r = rng.random()
    if depth <= 0 or r < 0.5:
        return rng.choice(SCALARS)
    if r < 0.75:
        items = [random_value(rng, depth - 1) for _ in range(rng.randint(0, 4))]
        if items and rng.random() < 0.3:  # a duplicate (uniqueItems), or its twin with 1 for True
            twin = copy.deepcopy(rng.choice(items))
            items.insert(rng.randint(0, len(items)), twin)
        return items
    return {rng.choice(NAMES + ("d", "x-1")): random_value(rng, depth - 1) for _ in range(rng.randint(0, 4))}


def _schemas(rng, depth, refs, n):
    return [random_schema(rng, depth, refs) for _ in range(n)]


GENERATORS = {
    "type": lambda rng, d, refs: {
        "type": rng.choice(TYPES) if rng.random() < 0.6 else rng.sample(TYPES, rng.randint(1, 3))
    },
    "const": lambda rng, d, refs: {"const": random_value(rng, 2)},
    "enum": lambda rng, d, refs: {"enum": [random_value(rng, 2) for _ in range(rng.randint(1, 4))]},
    "properties": lambda rng, d, refs: {
        "properties": {n: random_schema(rng, d, refs) for n in rng.sample(NAMES, rng.randint(1, 3))}
    },
    "additionalProperties": lambda rng, d, refs: {
        "additionalProperties": rng.choice([False, True, random_schema(rng, d, refs)])
    },
    "patternProperties": lambda rng, d, refs: {
        "patternProperties": {p: random_schema(rng, d, refs) for p in rng.sample(PATTERNS, rng.randint(1, 2))}
    },
    "propertyNames": lambda rng, d, refs: {
        "propertyNames": rng.choice(
            [{"pattern": rng.choice(PATTERNS)}, {"maxLength": 1}, {"enum": ["a", "b"]}, random_schema(rng, d, refs)]
        )
    },
    "required": lambda rng, d, refs: {"required": rng.sample(NAMES, rng.randint(0, 3))},
    "dependentRequired": lambda rng, d, refs: {
        "dependentRequired": {rng.choice(NAMES): rng.sample(NAMES, rng.randint(0, 2))}
    },
    "dependentSchemas": lambda rng, d, refs: {"dependentSchemas": {rng.choice(NAMES): random_schema(rng, d, refs)}},
    "minProperties": lambda rng, d, refs: {"minProperties": rng.randint(0, 3)},
    "maxProperties": lambda rng, d, refs: {"maxProperties": rng.randint(0, 3)},
    "items": lambda rng, d, refs: {"items": rng.choice([False, random_schema(rng, d, refs)])},
    "prefixItems": lambda rng, d, refs: {"prefixItems": _schemas(rng, d, refs, rng.randint(1, 3))},
    "contains": lambda rng, d, refs: {
        "contains": random_schema(rng, d, refs),
        **({"minContains": rng.randint(0, 2)} if rng.random() < 0.4 else {}),
        **({"maxContains": rng.randint(0, 2)} if rng.random() < 0.4 else {}),
    },
    "minItems": lambda rng, d, refs: {"minItems": rng.randint(0, 3)},
    "maxItems": lambda rng, d, refs: {"maxItems": rng.randint(0, 3)},
    "uniqueItems": lambda rng, d, refs: {"uniqueItems": rng.random() < 0.8},
    "minLength": lambda rng, d, refs: {"minLength": rng.randint(0, 3)},
    "maxLength": lambda rng, d, refs: {"maxLength": rng.randint(0, 3)},
    "pattern": lambda rng, d, refs: {"pattern": rng.choice(PATTERNS)},
    "minimum": lambda rng, d, refs: {"minimum": rng.choice(BOUNDS)},
    "maximum": lambda rng, d, refs: {"maximum": rng.choice(BOUNDS)},
    "exclusiveMinimum": lambda rng, d, refs: {"exclusiveMinimum": rng.choice(BOUNDS)},
    "exclusiveMaximum": lambda rng, d, refs: {"exclusiveMaximum": rng.choice(BOUNDS)},
    "multipleOf": lambda rng, d, refs: {"multipleOf": rng.choice((2, 3, 0.5, 0.1, 1.5))},
    "allOf": lambda rng, d, refs: {"allOf": _schemas(rng, d, refs, rng.randint(1, 3))},
    "anyOf": lambda rng, d, refs: {"anyOf": _schemas(rng, d, refs, rng.randint(1, 3))},
    "oneOf": lambda rng, d, refs: {"oneOf": _schemas(rng, d, refs, rng.randint(1, 3))},
    "not": lambda rng, d, refs: {"not": random_schema(rng, d, refs)},
    "if": lambda rng, d, refs: {
        "if": random_schema(rng, d, refs),
        **({"then": random_schema(rng, d, refs)} if rng.random() < 0.7 else {}),
        **({"else": random_schema(rng, d, refs)} if rng.random() < 0.7 else {}),
    },
    "$ref": lambda rng, d, refs: {"$ref": rng.choice(refs)} if refs else {"type": rng.choice(TYPES)},
}
assert set(GENERATORS) == set(standard.STANDARD), "a standard keyword the random schemas never use"


def random_schema(rng: random.Random, depth: int, refs: tuple = ()):
    if depth <= 0 or rng.random() < 0.15:
        return rng.choice(
            [True, False, {}, {"type": rng.choice(TYPES)}, {"minimum": 1}, {"const": rng.choice(SCALARS)}]
        )
    schema: dict = {}
    for keyword in rng.sample(sorted(GENERATORS), rng.randint(1, 3)):
        schema.update(GENERATORS[keyword](rng, depth - 1, refs))
    return schema


def random_cases(count: int, per_schema: int):
    rng = random.Random(SEED)
    for i in range(count):
        defs = {"d0": random_schema(rng, 2), "d1": random_schema(rng, 2)}  # no refs: no endless recursion
        body = random_schema(rng, 4, REFS)
        schema = {"$defs": defs, **body} if isinstance(body, dict) else {"$defs": defs, "allOf": [body]}
        for j in range(per_schema):
            yield f"random schema {i} instance {j} (seed {SEED})", schema, random_value(rng)


def test_random_schemas_and_instances():
    cases = list(random_cases(2000, 6))
    fail_on(engine_mismatches(cases), len(cases), "random (schema, instance) pairs")


# --- the bundled recipes and seeded mutations of them -----------------------------------------
REPLACEMENTS = (
    None,
    True,
    False,
    0,
    -1,
    1.5,
    8.0,
    2**64,
    "x",
    "",
    "name\n",
    "a\x1b[2J",
    [],
    {},
    [1, "a", 1],
    {"k": 1},
    NAN,
    INF,
)


def _nodes(node, path=()):
    """(path, value) of every value below a document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, key), value
            yield from _nodes(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*path, index), value
            yield from _nodes(value, (*path, index))


def _at(doc, path):
    for key in path:
        doc = doc[key]
    return doc


def mutate(doc: dict, rng: random.Random) -> tuple[dict, list[str]]:
    """A copy with one to three seeded changes, and what they were."""
    doc = copy.deepcopy(doc)
    said = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        nodes = list(_nodes(doc))
        path, value = rng.choice(nodes)
        parent = _at(doc, path[:-1])
        kind = rng.choice(("replace", "replace", "replace", "delete", "add-key", "tweak"))
        if kind == "replace":
            new = copy.deepcopy(rng.choice(REPLACEMENTS))
            parent[path[-1]] = new
            said.append(f"{list(path)}: {value!r} -> {new!r}")
        elif kind == "delete":
            del parent[path[-1]]
            said.append(f"{list(path)}: deleted")
        elif kind == "add-key":
            target, where = (value, path) if isinstance(value, dict) else (parent, path[:-1])
            if isinstance(target, dict):
                key = rng.choice(("unknown", "x-extra", "Lr", "steps2", "a b"))
                target[key] = copy.deepcopy(rng.choice(REPLACEMENTS))
                said.append(f"{[*where, key]}: added {target[key]!r}")
        elif isinstance(value, str):
            parent[path[-1]] = value + rng.choice(("\n", "$", "X", " "))
            said.append(f"{list(path)}: {value!r} -> {parent[path[-1]]!r}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            parent[path[-1]] = rng.choice((value + 0.5, -value, value * 1.0, 0))
            said.append(f"{list(path)}: {value!r} -> {parent[path[-1]]!r}")
        elif isinstance(value, list) and value:
            value.append(copy.deepcopy(value[0]))  # a duplicate item (uniqueItems)
            said.append(f"{list(path)}: appended a copy of item 0")
    return doc, said


def _cells() -> list[str]:
    return ["/".join(c) for c in itertools.product(*(sources.part_names(a) for a in ("policy", "backend", "hardware")))]


def _rule_targets(node, found: dict) -> dict:
    """dotted path -> the literals the rules compare it with (const, enum, bounds), from every
    x-where and x-compare in the schema files."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "x-where" and isinstance(value, dict):
                for dotted, subschema in value.items():
                    found.setdefault(dotted, []).extend(_literals(subschema))
            elif key == "x-compare" and isinstance(value, dict):
                for side in ("left", "right"):
                    operand = value.get(side)
                    for dotted in [operand] if isinstance(operand, str) else []:
                        found.setdefault(dotted, [])
            _rule_targets(value, found)
    elif isinstance(node, list):
        for value in node:
            _rule_targets(value, found)
    return found


def _literals(node) -> list:
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "const":
                out.append(value)
            elif key == "enum" and isinstance(value, list):
                out.extend(value)
            elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") and isinstance(
                value, (int, float)
            ):
                out.extend((value, value - 1, value + 1))
            else:
                out.extend(_literals(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(_literals(value))
    return out


def mutate_rules(doc: dict, rng: random.Random, targets: dict, pool: dict) -> tuple[dict, list[str]]:
    """A copy with one to four values that the rules read set to what the rules compare them with,
    or to what another cell has there, or unset."""
    doc = copy.deepcopy(doc)
    said = []
    for _ in range(rng.randint(1, 4)):
        dotted = rng.choice(sorted(targets))
        path = dotted.split(".")
        node = doc
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        choices = targets[dotted] + pool.get(dotted, []) + [None, "<unset>"]
        new = copy.deepcopy(rng.choice(choices))
        if new == "<unset>":
            node.pop(path[-1], None)
            said.append(f"{dotted}: unset")
        else:
            node[path[-1]] = new
            said.append(f"{dotted}: {new!r}")
    return doc, said


def _breaking_cases() -> list[tuple[str, list[str]]]:
    """(recipe, overrides) from tests/test_invariants.py: for every rule, a recipe that breaks only
    it and one that keeps it."""
    from test_invariants import CASES

    return [(target, overrides) for target, breaking, passing in CASES.values() for overrides in (breaking, passing)]


_DOCUMENTS: list = []


def documents() -> list[tuple[str, dict, dict]]:
    """(label, document, origins): composed cells (a seeded sample, each policy and backend in it),
    a recipe that breaks each rule and one that keeps it (tests/test_invariants.py), and seeded
    mutations of each: of any value, and of the values the rules read."""
    if _DOCUMENTS:
        return _DOCUMENTS
    rng = random.Random(SEED)
    names = _cells()
    chosen = sorted(set(rng.sample(names, 90)) | {n for n in names if n.startswith(("tiny/", "pi07/zero2/"))})[:130]
    composed = [(name, [], compose(name)) for name in chosen]
    composed += [(target, overrides, compose(target, overrides)) for target, overrides in _breaking_cases()]
    targets = _rule_targets(referable(), {})
    pool: dict = {}
    for _, _, recipe in composed:
        for dotted in targets:
            value = lookup(recipe.data, dotted)
            if value is not MISSING:
                pool.setdefault(dotted, []).append(value)
    for name, overrides, recipe in composed:
        label = " ".join([name, *overrides])
        _DOCUMENTS.append((label, recipe.data, recipe.origins))
        for _ in range(2 if not overrides else 1):
            data, said = mutate(recipe.data, rng)
            _DOCUMENTS.append((f"{label} with {'; '.join(said)}", data, recipe.origins))
        data, said = mutate_rules(recipe.data, rng, targets, pool)
        _DOCUMENTS.append((f"{label} with {'; '.join(said)}", data, recipe.origins))
    return _DOCUMENTS


def test_section_schemas_over_bundled_and_mutated_recipes():
    docs = documents()
    cases = [(label, {"$ref": ref}, data) for label, data, _ in docs for ref in (RESOLVED, ROOT)]
    assert len({label.split(" ")[0] for label, _, _ in docs}) >= 100  # distinct cells
    fail_on(engine_mismatches(cases), len(cases), "(schema, recipe) pairs")


# --- layer 2: the whole pipeline, the project's keywords included ----------------------------
def _reference_problems(monkeypatch, data, origins, ref, called: list):
    """_validate with the validator replaced by a jsonschema one hosting the project's keywords, and
    every rule decided afresh (no memo)."""

    def hosted(ref: str = RESOLVED):
        called.append(ref)
        return Hosted({"$ref": ref}, registry=PROJECT_REGISTRY)

    with monkeypatch.context() as patch:
        patch.setattr(registry.validate, "validator", hosted)
        patch.setattr(memo, "planned", lambda plan_key, schemas, scope=None: None)  # nothing is memoised
        return _validate(copy.deepcopy(data), origins, ref)


def pipeline_mismatches(monkeypatch, docs, refs=(RESOLVED, ROOT), outcomes=None) -> tuple[list[str], int]:
    found, compared = [], 0
    for label, data, origins in docs:
        for ref in refs:
            ours = _problems(_validate, copy.deepcopy(data), origins, ref)
            called: list = []
            theirs = _problems(_reference_problems, monkeypatch, data, origins, ref, called)
            assert called == [ref], "the reference validator was not the one used"
            compared += 1
            if outcomes is not None:
                outcomes.append(ours)
            if ours != theirs:
                found.append(report(f"{label} against {ref}", "", ours, theirs))
    return found, compared


def _problems(function, *args) -> list | str:
    """The Problems as dicts; a crash as its text (both sides crashing alike agrees: the computed checks
    they share, not the schema checker, raised)."""
    try:
        return [problem.__dict__ for problem in function(*args)]
    except Exception as e:
        return f"raised {type(e).__name__}: {e}"


def test_pipeline_problems_equal_jsonschema_hosting_the_project_keywords(monkeypatch):
    docs = documents()
    outcomes: list = []
    found, compared = pipeline_mismatches(monkeypatch, docs, outcomes=outcomes)
    rules = {p["rule"] for problems in outcomes if isinstance(problems, list) for p in problems}
    assert len(rules) >= 60, f"the documents hardly exercise the rules: {sorted(rules)}"
    fail_on(found, compared, "(recipe, schema) validations")


# --- the comparisons can fail -----------------------------------------------------------------
def _changed_message(function):
    def changed(*args):
        for error in function(*args):
            error.message += " (changed)"
            yield error

    return changed


def test_the_engine_comparison_sees_a_changed_message_and_order():
    schema, instance = {"properties": {"a": {"minimum": 2}, "b": {"type": "string"}}}, {"a": 1, "b": 1}
    assert not engine_mismatches([("as is", schema, instance)])
    changed = {**ENGINE, "minimum": _changed_message(ENGINE["minimum"])}
    assert engine_mismatches([("changed", schema, instance)], keywords=changed)
    reordered = {"properties": dict(reversed(schema["properties"].items()))}  # the same errors, the other way round
    ours = _outcome(checker.Checker(reordered, STRIPPED, ENGINE), instance, checker.best_match)
    theirs = _outcome(Reference(schema, registry=STRIPPED_REGISTRY), instance, reference_best_match)
    assert sorted(map(repr, ours["errors"])) == sorted(map(repr, theirs["errors"])) and ours != theirs


def test_the_pipeline_comparison_sees_a_changed_message(monkeypatch):
    recipe = compose("tiny/ddp/cpu")
    data = copy.deepcopy(recipe.data)
    data["train"]["steps"] = 0  # minimum 1
    docs = [("tiny/ddp/cpu with train.steps 0", data, recipe.origins)]
    assert pipeline_mismatches(monkeypatch, docs, (RESOLVED,)) == ([], 1)
    changed = checker.Checker(
        {"$ref": RESOLVED}, referable(), {**KEYWORDS, "minimum": _changed_message(KEYWORDS["minimum"])}
    )
    monkeypatch.setattr(registry.validate, "validator", lambda ref=RESOLVED: changed)
    found, _ = pipeline_mismatches(monkeypatch, docs, (RESOLVED,))
    assert found and "(changed)" in found[0]


def test_reference_pattern_is_ecma():
    assert re.search("^a$", "a\n") and not ecma_pattern("^a$").search("a\n")
    assert list(Reference({"pattern": "^a$"}).iter_errors("a\n"))


# --- what the comparison with jsonschema does not reach (mutation survivors of checker.py) ------
def test_references_that_name_nothing_say_what_is_missing():
    with pytest.raises(LookupError, match=r"unresolvable \$ref 'nope.json#/x': no schema named 'nope.json'"):
        checker.Checker({"$ref": "nope.json#/x"}, {}, standard.STANDARD).is_valid(1)
    with pytest.raises(LookupError, match=r"unresolvable \$ref '#/\$defs/missing': no 'missing' in it"):
        checker.Checker({"$ref": "#/$defs/missing", "$defs": {}}, {}, standard.STANDARD).is_valid(1)
    with pytest.raises(TypeError, match="a schema is an object or a boolean, not 5"):
        checker.Checker(5, {}, standard.STANDARD).is_valid(1)


def test_a_reference_into_a_list_and_one_read_in_another_files_scope():
    documents = {"a.json": {"$defs": {"x": {"type": "string"}, "pair": [{"type": "integer"}, {"type": "string"}]}}}
    root = checker.Checker({"$ref": "a.json#/$defs/pair/1"}, documents, standard.STANDARD)
    assert root.is_valid("s") and not root.is_valid(1)
    # a checker evolved in a.json's scope reads "#" as a.json, not as the root schema
    _, scope = root.resolve("a.json#/$defs/x")
    assert scope.evolve({"$ref": "#/$defs/x"}).is_valid("s")
    assert not scope.evolve({"$ref": "#/$defs/x"}).is_valid(1)


def test_multiple_of_overflowing_a_float_is_decided_exactly():
    """1.6e308 / 0.75 is past a float's range: the fraction 4 * 1.6e308 / 3 is no integer, as
    jsonschema says; 1.5e308's is."""
    schema = {"multipleOf": 0.75}
    ours = [e.message for e in checker.Checker(schema, {}, standard.STANDARD).iter_errors(1.6e308)]
    theirs = [e.message for e in Draft202012Validator(schema).iter_errors(1.6e308)]
    assert ours == theirs == ["1.6e+308 is not a multiple of 0.75"]
    assert checker.Checker(schema, {}, standard.STANDARD).is_valid(1.5e308)
