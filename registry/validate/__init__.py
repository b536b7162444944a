"""Validate a document: structure, declared invariants and computed checks, all reported as
Problems in one pass."""

from __future__ import annotations

from registry.errors import Problem
from registry.validate.problems import from_error
from registry.validate.schemas import CATALOG, RESOLVED, ROOT, validator


def validate(data: dict, origins: dict, ref: str = RESOLVED) -> list[Problem]:
    """Every problem of a document against a schema (default: a complete, composed recipe)."""
    problems: list[Problem] = []
    for error in validator(ref).iter_errors(data):
        problems.extend(from_error(error, data, origins))
    return sorted(set(problems), key=lambda p: (not p.is_error, p.path, p.rule))


__all__ = ["CATALOG", "RESOLVED", "ROOT", "Problem", "validate"]
