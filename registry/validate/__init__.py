"""Validate a document: structure, declared invariants and computed checks, all reported as
Problems in one pass."""

from __future__ import annotations

import sys

from registry import view
from registry.errors import Exit, Problem, RecipeError
from registry.validate import verdicts
from registry.validate.schemas import CATALOG, RESOLVED, ROOT, computed_rules, validator
from registry.view import Section

# The schema checks (checker, keywords, problems) load on the first verdict that
# is not on disk already (registry/validate/verdicts.py).


def validate(data: dict, origins: dict, ref: str = RESOLVED, composed: str | None = None) -> list[Problem]:
    """Every problem of a document against a schema (default: a complete, composed recipe).

    Computed checks (memory-fit, ...) run only when the structure holds: they read values as
    the types the schema promises, so a typo such as `micro_batch_size=16x` is one type error,
    not a crash inside the estimator."""
    if not verdicts.enabled():
        return _validate(data, origins, ref)
    teams = _team_stamps() if ref == RESOLVED else ()
    # `composed`: the Recipe.key of a document as compose returned it, which decides the document
    key = verdicts.derived(composed, ref, teams) if composed else verdicts.key(data, origins, ref, teams)
    problems = verdicts.get(key)
    if problems is None:
        problems = _validate(data, origins, ref)
        verdicts.put(key, problems)
    return list(problems)


def _team_stamps() -> tuple:
    if not _other_sources():
        return ()
    from registry.validate import team

    return team.stamps()


def _validate(data: dict, origins: dict, ref: str) -> list[Problem]:
    from registry.validate.keywords import computed
    from registry.validate.problems import STRUCTURAL, from_error

    check = validator(ref)
    errors = list(check.iter_errors(data))
    structure_holds = all(e.validator == "x-invariants" for e in errors)
    if ref == RESOLVED and structure_holds:
        errors += computed(check, computed_rules(), data)
    if ref == RESOLVED and _other_sources():  # their rules/*.json (registry/validate/team.py) only add problems
        from registry.validate import team

        errors += team.errors(data, origins, structure_holds)
    problems: list[Problem] = []
    for error in errors:
        problems.extend(from_error(error, data, origins))
    rejected = [p.path for p in problems if p.rule in STRUCTURAL]
    # an invariant over a value the schema already rejected adds noise, not news
    problems = [p for p in problems if p.rule in STRUCTURAL or not _touches(p, rejected)]
    return sorted(set(problems), key=lambda p: (not p.is_error, p.path, p.rule))


def _other_sources() -> bool:
    """Whether any source besides the bundled recipes is configured: only those carry team rules,
    and the bundled recipes alone do not even import that module."""
    from registry.sharing import sources

    return len(sources.all_sources()) > 1


def team_rules() -> None:
    """Load and check every source's rule files: RecipeError (one line) on a malformed one."""
    if _other_sources():
        from registry.validate import team

        team.active()


def _touches(problem: Problem, rejected: list[str]) -> bool:
    paths = [problem.path, *(path for path, _ in problem.related)]
    return any(path == bad or path.startswith(bad + ".") for path in paths for bad in rejected if bad)


def typed(data: dict, origins: dict, name: str) -> Section:
    """The typed view of a composed recipe whose structure the schema accepts (invariants may
    still fail: `recipe estimate` shows why a recipe does not fit). Structural problems go to
    stderr, then RecipeError."""
    from registry.validate.problems import STRUCTURAL

    problems = [p for p in validate(data, origins) if p.rule in STRUCTURAL]
    for problem in problems:
        print(problem.render(), file=sys.stderr)
    if problems:
        raise RecipeError(f"{name}: the schema rejects it (see above)", Exit.INVALID)
    return view.of(data)


def applicable_rules(data: dict, compute: str) -> list[dict]:
    """The computed rules of one kind (`"compute": NAME`) whose `when` holds for a document."""
    from registry.validate.keywords import applies

    check = validator(RESOLVED)
    return [rule for rule in computed_rules() if rule["compute"] == compute and applies(check, rule, data)]


__all__ = ["CATALOG", "RESOLVED", "ROOT", "Problem", "applicable_rules", "team_rules", "typed", "validate"]
