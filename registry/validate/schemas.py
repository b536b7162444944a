"""The section schemas in schemas/, joined through one referencing.Registry, and the one
cached validator for resolved recipes."""

from __future__ import annotations

import json
from functools import cache

from registry.errors import RecipeError
from registry.files import SCHEMA_DIR

SECTIONS = ("recipe", "policy", "dataset", "backend", "hardware", "train", "trainer", "env", "launch", "results")
ROOT = "recipe.schema.json"
RESOLVED = ROOT + "#/$defs/resolved"  # a complete recipe: required sections and invariants
CATALOG = "catalog.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


@cache
def documents() -> dict[str, dict]:
    docs = {}
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        try:
            docs[path.name] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise RecipeError(f"{path}: cannot load schema: {e}") from None
    return docs


@cache
def registry():
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    return Registry().with_resources((name, DRAFT202012.create_resource(doc)) for name, doc in documents().items())


@cache
def validator_class():
    from jsonschema import Draft202012Validator, validators

    from registry.validate.keywords import KEYWORDS

    return validators.extend(Draft202012Validator, KEYWORDS)


@cache
def validator(ref: str = RESOLVED):
    return validator_class()({"$ref": ref}, registry=registry())


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
