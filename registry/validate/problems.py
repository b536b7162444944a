"""Problems: one line each, naming where the value was set, the rule, the path and the fix."""

from __future__ import annotations

import difflib
import math
import re

from registry.doc import MISSING, PLACEHOLDER, join, lookup, origin_of, rank
from registry.errors import Problem, printable
from registry.load import CONTROL_HINT
from registry.names import AXES
from registry.validate.checker import Error, best_match

# Structural keywords -> rule ids in messages.
_RULES = {
    "additionalProperties": "unknown-key",
    "type": "type",
    "enum": "enum",
    "const": "enum",
    "required": "required",
    "minimum": "range",
    "maximum": "range",
    "exclusiveMinimum": "range",
    "exclusiveMaximum": "range",
    "pattern": "pattern",
    "minItems": "length",
    "maxItems": "length",
    "minLength": "length",
    "uniqueItems": "duplicate",
    "propertyNames": "key-name",
    "control-char": "control-char",  # keywords.type_: a string a terminal would not show as written
}
STRUCTURAL = frozenset(_RULES.values()) | {"schema"}  # rule ids of the structural keywords


def from_error(error: Error, doc: dict, origins: dict) -> list[Problem]:
    if error.validator == "x-invariants":
        return [_invariant(error, doc, origins)]
    if error.validator in ("oneOf", "anyOf") and isinstance(error.schema.get("x-expected"), str):
        # the spellings a library's lax parsing also takes (schemas/*.upstream.schema.json): one
        # message for the field, not the branch that came closest
        path = tuple(error.absolute_path)
        said = f"{_show_instance(error.instance)} is not {error.schema['x-expected']}"
        return [Problem("error", _RULES["type"], join(path), said, origin_of(origins, path), None)]
    if error.validator in ("oneOf", "anyOf") and error.context:
        # the branch of the value's own type says what is wrong with it (a pattern, a range)
        fitting = [e for e in error.context if e.validator != "type" or e.relative_path]
        error = best_match(fitting or error.context)
    path = tuple(error.absolute_path)
    rule = _RULES.get(error.validator, "schema")
    if error.validator == "additionalProperties":
        return [_unknown_key(error, path, key, origins) for key in _extra_keys(error)]
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        return [
            Problem("error", rule, join(path + (k,)), "is required", origin_of(origins, path), _default_hint(error, k))
            for k in missing
        ]
    if "propertyNames" in error.schema_path:
        key = error.instance
        said, hint = f"key {key!r} is not allowed here ({_short(error)})", None
        if error.validator == "enum":
            names = [str(v) for v in error.validator_value]
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
            if isinstance(error.schema.get("x-expected"), str):  # a library's own list of names
                said = f"key {key!r} is not {error.schema['x-expected']}"
            elif len(names) > 12:
                said = f"key {key!r} is not allowed here (not one of the {len(names)} names it takes)"
        return [Problem("error", "key-name", join(path + (key,)), said, origin_of(origins, path + (key,)), hint)]
    message = _short(error)
    hint = None
    if (
        error.validator == "type"
        and isinstance(error.instance, (int, float))
        and "string" in _as_list(error.validator_value)
    ):
        hint = "quote the value"
    if error.validator == "type" and isinstance(error.instance, float) and not math.isfinite(error.instance):
        hint = "recipes hold finite numbers (JSON has no NaN or infinity)"
    whole = isinstance(error.instance, float) and math.isfinite(error.instance) and error.instance.is_integer()
    if error.validator == "type" and whole and "integer" in _as_list(error.validator_value):
        hint = f"an integer is written without a point: write {int(error.instance)}"
    if error.validator == "type" and isinstance(error.instance, str):
        hint = _yaml11_hint(error.instance, _as_list(error.validator_value)) or _swap_hint(path, error, doc)
    if error.validator == "control-char":
        hint = CONTROL_HINT
    if error.validator == "enum":
        close = difflib.get_close_matches(str(error.instance), [str(v) for v in error.validator_value], n=1)
        hint = f"did you mean {close[0]!r}?" if close else None
    return [Problem("error", rule, join(path), message, origin_of(origins, path), hint)]


def _invariant(error: Error, doc: dict, origins: dict) -> Problem:
    rule = error.validator_value
    path = tuple(error.path)
    related = tuple((p, origins.get(_tuple(p))) for p in rule.get("related") or ())
    origin, related = locate(path, related, origins)
    return Problem(
        rule["severity"],  # required by the rule meta-schema
        rule["id"],
        join(path),
        _fill(rule["message"], doc),
        origin,
        _fill(rule["hint"], doc) if rule.get("hint") else None,
        related,
        rule.get("source"),
    )


def locate(path: tuple, related: tuple, origins: dict) -> tuple[str | None, tuple]:
    """Where a problem over several values is reported: the place the user can change. Of the
    origins of its path and its related paths, the one in the user's own layer (the file
    validated, a file of theirs it extends, the command line; the outermost of those), else in the
    most specific layer (a tuned overlay or recipe, then a part, then the base); a tie keeps the
    rule's order, its own path first (registry.doc.Origins.rank). When that is a related path's
    origin, the path itself joins `related` first, so every place stays in the message. An unset
    path is reported at the section that holds it, as any problem is."""
    origin = origin_of(origins, path)
    candidates = [o for o in (origin, *(o for _, o in related)) if o]
    if len(set(candidates)) < 2:
        return (candidates[0] if candidates else None), related
    best = max(candidates, key=lambda o: rank(origins, o))  # max keeps the first of equals
    if origin is None or best == origin:
        return best, related
    return best, ((join(path), origins.get(path)), *related)  # None: "is not set"


def _fill(template: str, doc: dict) -> str:
    def value(match):
        found = lookup(doc, match.group(1))
        return "unset" if found is MISSING else _show(found)

    return PLACEHOLDER.sub(value, template)


def _show(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return printable(str(value), keep="")  # a value in a message must not act on the terminal


# What YAML 1.1 (PyYAML, older tools) made of a text that recipes read as YAML 1.2 text
# (registry/load.py): the hint says what to write instead (docs/failure-modes.md §35).
_YAML11_BOOLS = {w: w in ("yes", "on", "y") for w in ("yes", "no", "on", "off", "y", "n")}
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?")
_RADIX = re.compile(r"[-+]?0([xX][0-9a-fA-F_]+|[oO][0-7_]+|[bB][01_]+)|[-+]?[0-9][0-9_]*_[0-9_]*(\.[0-9_]*)?")


def _yaml11_hint(text: str, types: list) -> str | None:
    said = f"`{printable(text, keep='')}` is text in a recipe (YAML 1.2)"
    if "boolean" in types and text.lower() in _YAML11_BOOLS:
        return f"{said}; write {'true' if _YAML11_BOOLS[text.lower()] else 'false'}"
    if not {"integer", "number"} & set(types):
        return None
    if _SEXAGESIMAL.fullmatch(text):
        sign, digits = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
        value = 0.0
        for part in digits.replace("_", "").split(":"):
            value = value * 60 + float(part)
        value *= sign
        return f"{said}, not a base-60 number; write {int(value) if value.is_integer() else value}"
    if _RADIX.fullmatch(text):
        value = float(text.replace("_", "")) if "." in text else int(text, 0)
        return f"{said}; write {value}"
    if re.fullmatch(r"[-+]?0[0-9]+", text):
        return (
            f"{said}; write {int(text)} without the leading zero (YAML 1.1 read it as octal {int(text, 8)})"
            if re.fullmatch(r"[-+]?0[0-7]+", text)
            else f"{said}; write {int(text)}"
        )
    return None


def _tuple(dotted: str) -> tuple:
    return tuple(int(s) if s.isdigit() else s for s in dotted.split("."))


def _extra_keys(error: Error) -> list[str]:
    known = error.schema.get("properties", {})
    patterns = [re.compile(p) for p in error.schema.get("patternProperties", {})]
    return [k for k in error.instance if k not in known and not any(p.search(k) for p in patterns)]


def _swap_hint(path: tuple, error: Error, doc: dict) -> str | None:
    """`backend: fsdp` in a file: the command line's axis swap (`backend=fsdp`) written as a
    section. A file names its parts in `extends`; the hint shows that form, as a cell where
    the file names all three axes so."""
    if len(path) != 1 or path[0] not in AXES or "object" not in _as_list(error.validator_value):
        return None
    named = {axis: doc.get(axis) for axis in AXES}
    said = f"{path[0]}={printable(error.instance, keep='')} is the command line's swap; in a file, {path[0]} holds settings"
    if all(isinstance(v, str) for v in named.values()):
        cell = printable("/".join(named.values()), keep="")
        return f"a recipe file names its cell in extends: write `extends: [{cell}]` instead ({said})"
    part = printable(f"{path[0]}/{error.instance}", keep="")
    return f"a recipe file names its parts in extends: write `extends: [..., {part}]` instead ({said})"


def _unknown_key(error: Error, path: tuple, key: str, origins: dict) -> Problem:
    known = list(error.schema.get("properties", {}))
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    nested = _flattened(error.instance.get(key), known)
    if nested:  # `backend.fsdp.use_orig_params`: a level too deep
        shown = ", ".join(join(path + (k,)) for k in nested)
        hint = (
            f"did you mean {shown}? ({key!r} is no section of {join(path) or 'the recipe'}: its keys go right under it)"
        )
    elif close:
        hint = f"did you mean {close[0]!r}?"
    else:
        hint = f"known keys: {', '.join(known)}"
    return Problem("error", "unknown-key", join(path + (key,)), "unknown key", origin_of(origins, path + (key,)), hint)


def _flattened(value, known: list[str]) -> list[str]:
    """The keys of an unknown key's mapping that are (or are close to) the parent's own keys."""
    if not isinstance(value, dict):
        return []
    found = []
    for inner in value:
        match = inner if inner in known else next(iter(difflib.get_close_matches(str(inner), known, n=1)), None)
        if match and match not in found:
            found.append(match)
    return found[:3]


def _default_hint(error: Error, key: str) -> str | None:
    described = error.schema.get("properties", {}).get(key, {}).get("description")
    return described


def _short(error: Error) -> str:
    v = error.validator
    if v == "type":
        return f"{_show_instance(error.instance)} is not of type {' or '.join(_as_list(error.validator_value))}"
    if v in ("enum", "const"):
        allowed = error.validator_value if v == "enum" else [error.validator_value]
        return f"{_show_instance(error.instance)} is not one of {', '.join(_show_instance(a) for a in allowed)}"
    if v == "pattern" and error.schema.get("description"):
        return f"{_show_instance(error.instance)} is not valid: {error.schema['description']}"
    return error.message


def _show_instance(value) -> str:
    text = repr(value) if isinstance(value, str) else _show(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]
