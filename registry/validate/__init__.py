"""Validate a document: structure, declared invariants and computed checks, all reported as
Problems in one pass."""

from __future__ import annotations

from registry.errors import Problem
from registry.validate.keywords import computed
from registry.validate.problems import STRUCTURAL, from_error
from registry.validate.schemas import CATALOG, RESOLVED, ROOT, computed_rules, validator


def validate(data: dict, origins: dict, ref: str = RESOLVED) -> list[Problem]:
    """Every problem of a document against a schema (default: a complete, composed recipe).

    Computed checks (memory-fit, ...) run only when the structure holds: they read values as
    the types the schema promises, so a typo such as `micro_batch_size=16x` is one type error,
    not a crash inside the estimator."""
    check = validator(ref)
    errors = list(check.iter_errors(data))
    if ref == RESOLVED and all(e.validator == "x-invariants" for e in errors):
        errors += computed(check, computed_rules(), data)
    problems: list[Problem] = []
    for error in errors:
        problems.extend(from_error(error, data, origins))
    rejected = [p.path for p in problems if p.rule in STRUCTURAL]
    # an invariant over a value the schema already rejected adds noise, not news
    problems = [p for p in problems if p.rule in STRUCTURAL or not _touches(p, rejected)]
    return sorted(set(problems), key=lambda p: (not p.is_error, p.path, p.rule))


def _touches(problem: Problem, rejected: list[str]) -> bool:
    paths = [problem.path, *(path for path, _ in problem.related)]
    return any(path == bad or path.startswith(bad + ".") for path in paths for bad in rejected if bad)


__all__ = ["CATALOG", "RESOLVED", "ROOT", "Problem", "validate"]
