"""The section schemas in schemas/, joined through one referencing.Registry, and the one
cached validator for resolved recipes."""

from __future__ import annotations

from functools import cache

from registry.errors import RecipeError
from registry.files import SCHEMA_DIR, schema_documents

SECTIONS = ("recipe", "policy", "dataset", "backend", "hardware", "train", "trainer", "env", "launch", "results")
ROOT = "recipe.schema.json"
RESOLVED = ROOT + "#/$defs/resolved"  # a complete recipe: required sections and invariants
CATALOG = "catalog.schema.json"
RULE_META = "invariant.schema.json"  # the shape of one x-invariants entry
DIALECT = "https://json-schema.org/draft/2020-12/schema"


@cache
def documents() -> dict[str, dict]:
    """Every schema file, its rules checked against the rule meta-schema as it loads: a misspelt
    key in a rule is one error naming the file and the rule, not a crash in every validation."""
    from registry.validate import verdicts

    docs = schema_documents()
    if verdicts.rules_checked():  # these very files passed before (same paths, sizes, mtimes)
        return docs
    meta = _rule_checker(docs[RULE_META])
    for name, doc in docs.items():
        for where, rule in _rules(doc):
            _check_rule(meta, SCHEMA_DIR / name, where, rule)
    verdicts.mark_rules_checked()
    return docs


@cache
def computed_rules() -> list[dict]:
    """The rules that a computed check decides (`"compute": NAME`), from every schema file."""
    return [rule for doc in documents().values() for _, rule in _rules(doc) if "compute" in rule]


def _rules(node, where: str = ""):
    """(JSON pointer, rule) for every x-invariants entry in a schema document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "x-invariants" and isinstance(value, list):
                yield from ((f"{where}/{key}/{i}", rule) for i, rule in enumerate(value))
            else:
                yield from _rules(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _rules(value, f"{where}/{i}")


def _rule_checker(meta: dict):
    from registry.validate.checker import Checker
    from registry.validate.standard import STANDARD

    return Checker(meta, {}, STANDARD)


def _check_rule(meta, path, where: str, rule) -> None:
    from registry.validate.checker import best_match
    from registry.validate.checks import CHECKS

    error = best_match(meta.iter_errors(rule))
    ident = rule.get("id") if isinstance(rule, dict) else None
    message = error.message if error else None
    if not error and "compute" in rule and rule["compute"] not in CHECKS:
        message = f"unknown computed check {rule['compute']!r} (known: {', '.join(CHECKS)})"
    if message:
        named = f" ({ident})" if isinstance(ident, str) else ""
        raise RecipeError.at(str(path), "rule-file", f"{message}", path=f"{where.lstrip('/')}{named}")


@cache
def referable() -> dict[str, dict]:
    """Every schema file by name, as a `$ref` reads it: without its `$schema`, so that what a
    reference names is read with this project's keywords too (the ECMA-262 `pattern`, finite
    numbers, printable strings)."""
    return {name: {k: v for k, v in doc.items() if k != "$schema"} for name, doc in documents().items()}


def checker(schema):
    """A checker of a schema with this project's keywords, its references into schemas/."""
    from registry.validate.checker import Checker
    from registry.validate.keywords import KEYWORDS

    return Checker(schema, referable(), KEYWORDS)


@cache
def validator(ref: str = RESOLVED):
    return checker({"$ref": ref})


def joined() -> dict:
    """One self-contained schema: the root with every other file embedded under $defs.

    Each embedded file keeps its name as `$id`, so the relative `$ref`s between files resolve
    inside the bundle (JSON Schema 2020-12 compound documents).
    """
    docs = documents()
    bundle = dict(docs[ROOT])
    bundle["$id"] = ROOT
    defs = dict(bundle.get("$defs", {}))
    for name, doc in docs.items():
        if name != ROOT:
            defs[name] = {"$id": name, **{k: v for k, v in doc.items() if k != "$schema"}}
    bundle["$defs"] = defs
    return bundle
