"""The pre-flight rules as data (schemas/preflight.json): their ids, severities, messages, hints
and sources, the trainers' own defaults the checks compare with, and the driver each CUDA major
release needs. A check's Finding becomes a Problem here, reported at the recipe's line like
every other rule's."""

from __future__ import annotations

import json
from functools import cache

from registry.doc import join, origin_of, split
from registry.errors import Problem, RecipeError
from registry.files import SCHEMA_DIR
from registry.validate.checks import Finding

FILE = SCHEMA_DIR / "preflight.json"


@cache
def document() -> dict:
    """preflight.json, each rule checked against the rule meta-schema as it loads (once per
    installed state of the schemas and package: registry/validate/verdicts.py keeps the mark)."""
    from registry.validate import verdicts

    try:
        doc = json.loads(FILE.read_text(encoding="utf-8"))
        if verdicts.rules_checked("preflight"):
            return doc
        from registry.validate.checker import best_match
        from registry.validate.schemas import _rule_checker

        meta = _rule_checker(json.loads((SCHEMA_DIR / "invariant.schema.json").read_text(encoding="utf-8")))
    except (OSError, ValueError) as e:
        raise RecipeError(f"{FILE}: cannot load the pre-flight rules: {e}") from None
    for i, rule in enumerate(doc.get("rules") or ()):
        error = best_match(meta.iter_errors(rule))
        if error or "compute" not in rule or "at" not in rule:
            why = error.message if error else "a pre-flight rule names its check (compute) and field (at)"
            raise RecipeError.at(str(FILE), "rule-file", why, path=f"rules/{i}")
    verdicts.mark_rules_checked("preflight")
    return doc


def rules() -> dict[str, dict]:
    return {rule["id"]: rule for rule in document()["rules"]}


def upstream(trainer: str, policy_type: str | None) -> dict:
    """The trainer's own defaults for a policy type ({} where none are recorded)."""
    table = document().get("upstream", {}).get(trainer, {})
    return {**table.get("*", {}), **table.get(str(policy_type), {})}


def oldest_driver(cuda: str) -> str | None:
    """The oldest Linux driver that runs a CUDA release (its major's minor-version compatibility)."""
    return document().get("cuda_drivers", {}).get(cuda.split(".")[0])


def problem(rule_id: str, finding: Finding, origins: dict) -> Problem:
    """A check's finding as the Problem every rule reports: at the finding's path (else the
    rule's `at`), where that path was set, with the rule's hint unless the finding has its own."""
    rule = rules()[rule_id]
    path = tuple(finding.path) if finding.path else split(rule["at"])
    return Problem(
        finding.severity,
        rule_id,
        join(path),
        finding.message,
        origin_of(origins, path),
        finding.hint or rule.get("hint"),
        (),
        rule["source"],
    )
