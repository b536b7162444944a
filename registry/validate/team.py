"""Team rules: rule files a source carries in SOURCE_ROOT/rules/*.json, each a JSON object
holding an `x-invariants` list in the bundled rules' format (schemas/invariant.schema.json).

A team's rules apply to the recipes of its source (the file being validated lies there) or, when
its config entry says `rules: everywhere`, to every recipe. They run beside the bundled rules and
only add problems: a team rule cannot drop, replace or soften a bundled one. Each fires as
`SOURCE:ID` (`error[team-a:max-micro-batch]`), so ids only need to be unique within a source;
an id equal to a bundled rule's is refused, as it would read as that rule."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from registry.errors import RecipeError
from registry.load import display_path

RULES_DIR = "rules"  # below the source's root (its recipes/ folder when it has one)
_TOP_KEYS = {"x-invariants", "$schema", "$comment", "title", "description"}
_OWN_SECTIONS = ("recipe", "results")  # compose takes these from the recipe's own file only
_LOCATION = re.compile(r"(.+):\d+:\d+")


@dataclass(frozen=True, eq=False)  # hashed by identity: cached while its files are unchanged
class TeamRules:
    source: str
    everywhere: bool
    rules: tuple[dict, ...]  # ids as `source:id`; the hint ends with the rule's `source` link
    files: dict  # namespaced id -> (file as displayed, JSON pointer), for errors found late


def active() -> list[TeamRules]:
    """Every source's rules, loaded and checked; [] at the cost of a stat per source when none
    carries a rules folder (and of nothing with the bundled recipes alone)."""
    return [_source_rules(name, everywhere, files) for name, everywhere, files in stamps()]


def stamps() -> tuple:
    """(source, everywhere, ((rule file, (mtime, size)), ...)) for each source with rule files:
    what the rules are made of, read without loading them."""
    from registry.sharing import sources

    found = []
    for source in sources.all_sources():
        if source.kind == "bundled":
            continue  # bundled rules live in schemas/
        folder = source.root / RULES_DIR
        try:
            stamp = folder.stat().st_mtime_ns
        except OSError:
            continue
        files = tuple(
            (sources.confined(source, f.relative_to(source.root)), _stamp(f)) for f in _listing(folder, stamp)
        )
        if files:
            found.append((source.name, source.rules_everywhere, files))
    return tuple(found)


def check_file(path: Path) -> None:
    """One rule file on its own (`recipe validate rules/x.json`): its shape, and ids unique in
    it and apart from the bundled rules'; RecipeError on the first fault."""
    path = Path(path).resolve()
    _source_rules("file", False, ((path, _stamp(path)),))


def errors(data: dict, origins: dict, structure_holds: bool) -> list:
    """The team rules' errors (registry/validate/checker.py's, as the bundled rules give) on a
    composed recipe."""
    teams = active()
    if not teams:
        return []
    owners = _owners(origins)
    chosen = tuple(t for t in teams if t.everywhere or t.source in owners)
    if not chosen:
        return []
    from registry.validate.keywords import computed

    check = _validator(chosen)
    rules = [r for t in chosen for r in t.rules]
    try:
        found = list(check.iter_errors(data))
        if structure_holds:  # computed checks read values as the schema's types
            found += computed(check, [r for r in rules if "compute" in r], data)
    except Exception as e:  # a team's subschema the meta-schema let through, e.g. an x-compare without "op"
        bad = _failing(rules, data, teams)
        raise RecipeError.at(bad[0], "rule-file", f"rule cannot be evaluated: {e!r}", path=bad[1]) from None
    return found


def _failing(rules: list, data: dict, teams: list[TeamRules]) -> tuple[str, str]:
    from registry.validate.keywords import computed

    for rule in rules:
        try:
            check = _checker([rule])
            list(check.iter_errors(data))
            list(computed(check, [rule] if "compute" in rule else [], data))
        except Exception:
            return next(t.files[rule["id"]] for t in teams if rule["id"] in t.files)
    return "team rules", ""


@lru_cache(maxsize=32)
def _validator(chosen: tuple[TeamRules, ...]):
    return _checker([r for t in chosen for r in t.rules])


def _checker(rules: list):
    from registry.validate.schemas import checker

    return checker({"x-invariants": rules})


def _stamp(path: Path) -> tuple[int, int, int, int]:
    # ctime and inode too: an edit that keeps size and mtime (a restore, `touch -r`) still changes
    # the inode's ctime, and a file replaced by rename has another inode
    st = path.stat()
    return st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino


@lru_cache(maxsize=64)
def _listing(folder: Path, stamp: int) -> tuple[Path, ...]:
    return tuple(sorted(folder.glob("*.json")))


@lru_cache(maxsize=64)
def _source_rules(source: str, everywhere: bool, files: tuple) -> TeamRules:
    """One source's rules from its files (each stamped with mtime and size: edited, reloaded)."""
    seen: dict[str, tuple[str, str]] = {}
    rules = []
    bundled = _bundled_ids()
    for path, stamp in files:
        for where, rule in _load(path, stamp):
            ident = rule["id"]
            shown = display_path(path)
            if ident in bundled:
                raise RecipeError.at(
                    shown,
                    "rule-file",
                    f"rule id {ident!r} is a bundled rule's id; team rules add to the bundled rules, never replace one",
                    path=f"{where} ({ident})",
                    hint="pick an id of your own",
                )
            if ident in seen:
                raise RecipeError.at(
                    shown,
                    "rule-file",
                    f"rule id {ident!r} is also defined in {seen[ident][0]} ({seen[ident][1]})",
                    path=f"{where} ({ident})",
                    hint="rule ids are unique within a source",
                )
            seen[ident] = (shown, where)
            rules.append(_namespaced(source, rule))
    files_of = {f"{source}:{ident}": (shown, f"{where} ({ident})") for ident, (shown, where) in seen.items()}
    return TeamRules(source, everywhere, tuple(rules), files_of)


def _namespaced(source: str, rule: dict) -> dict:
    # the source's link rides in the hint: Problem.render shows the hint, not `source`
    link = rule["source"]
    hint = f"{rule['hint']}; see {link}" if rule.get("hint") else f"see {link}"
    return {**rule, "id": f"{source}:{rule['id']}", "hint": hint}


@lru_cache(maxsize=64)
def _load(path: Path, stamp: tuple[int, int]) -> tuple[tuple[str, dict], ...]:
    """(JSON pointer, rule) for each rule of one file, every rule checked against the rule
    meta-schema: a malformed file is one error naming it and the rule."""
    from registry.validate.schemas import _check_rule

    shown = display_path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RecipeError(f"{shown}: cannot read the rule file: {e.strerror}", 1) from None
    except UnicodeDecodeError as e:
        raise RecipeError(f"{shown}: not UTF-8 text (byte {e.start})", 1) from None
    except ValueError as e:
        where = f"{shown}:{getattr(e, 'lineno', 1)}:{getattr(e, 'colno', 1)}"
        raise RecipeError.at(where, "rule-file", f"not JSON: {getattr(e, 'msg', e)}") from None
    hint = 'a rule file is {"x-invariants": [RULE, ...]} (docs/rules.md §team-rules)'
    if not isinstance(doc, dict) or not isinstance(doc.get("x-invariants"), list):
        raise RecipeError.at(shown, "rule-file", "holds no x-invariants list", hint=hint)
    extra = sorted(set(doc) - _TOP_KEYS)
    if extra:
        raise RecipeError.at(shown, "rule-file", f"unknown key {extra[0]!r}", hint=hint)
    meta = _meta()
    out = []
    for i, rule in enumerate(doc["x-invariants"]):
        where = f"x-invariants/{i}"
        _check_rule(meta, shown, where, rule)
        if "fix" in rule:  # a fix changes what every recipe composes into: the bundled schemas' say only
            raise RecipeError.at(
                shown,
                "rule-file",
                "`fix` is for the bundled rules only: a team rule reports, it does not change recipes",
                path=f"{where} ({rule['id']})",
                hint="name the setting in the rule's hint",
            )
        for key in ("when", "require"):
            if key in rule:  # a bad subschema is this file's error, not a crash in every validation
                problem = next(_schema_errors(rule[key]), None)
                if problem:
                    at = "/".join(filter(None, [key, problem[0].strip("/")]))
                    raise RecipeError.at(shown, "rule-file", f"{at}: {problem[1]}", path=f"{where} ({rule['id']})")
        out.append((where, rule))
    return tuple(out)


def _schema_errors(schema):
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    error = best_match(Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(schema))
    if error is not None:
        yield "/".join(map(str, error.absolute_path)), error.message
    yield from _unsupported(schema, "")
    yield from _keyword_errors(schema, "")


def _unsupported(node, at: str):
    """Standard keywords the checker does not implement (registry/validate/standard.py): refused
    here, never checked otherwise than JSON Schema says."""
    from registry.validate.standard import UNSUPPORTED

    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _unsupported(item, f"{at}/{i}")
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in UNSUPPORTED:
            yield f"{at}/{key}", f"{key} is not supported in rule files (supported: the keywords of docs/rules.md)"
        elif key not in ("const", "enum", "default", "examples"):
            yield from _unsupported(value, f"{at}/{key}")


def _keyword_errors(node, at: str):
    """The project's keywords (registry/validate/keywords.py) that the JSON Schema meta-schema
    does not know: a misspelt `op` would otherwise fail inside every validation."""
    from registry.validate.keywords import _OPS

    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _keyword_errors(item, f"{at}/{i}")
    if not isinstance(node, dict):
        return
    compare = node.get("x-compare")
    if compare is not None:
        if not isinstance(compare, dict) or {"left", "op", "right"} - set(compare):
            yield f"{at}/x-compare", "needs left, op and right"
        elif compare["op"] not in _OPS:
            yield f"{at}/x-compare", f"op {compare['op']!r} is not one of {', '.join(_OPS)}"
    where = node.get("x-where")
    if where is not None and not (isinstance(where, dict) and all(isinstance(v, (dict, bool)) for v in where.values())):
        yield f"{at}/x-where", "maps dotted paths to subschemas"
    for key, value in node.items():
        if key not in ("x-compare", "x-where", "const", "enum", "default", "examples"):
            yield from _keyword_errors(value, f"{at}/{key}")


@cache
def _meta():
    from registry.validate.schemas import RULE_META, _rule_checker, documents

    return _rule_checker(documents()[RULE_META])


@cache
def _bundled_ids() -> frozenset[str]:
    from registry.validate.schemas import _rules, documents

    return frozenset(rule["id"] for doc in documents().values() for _, rule in _rules(doc))


def _owners(origins: dict) -> set[str]:
    """The sources a composed recipe is of: where its own file lies. Only that file gives the
    `recipe` and `results` sections; a file without them is known by the files composed."""
    own = {_file_of(o) for k, o in origins.items() if k and k[0] in _OWN_SECTIONS} - {None}
    files = own or {_file_of(o) for o in origins.values()} - {None}
    from registry.sharing import sources

    known = tuple(sources.all_sources())
    return {name for name in (_source_of(f, os.getcwd(), known) for f in files) if name}


def _file_of(origin) -> str | None:
    if not isinstance(origin, str):
        return None
    match = _LOCATION.fullmatch(origin)
    return match.group(1) if match else None  # "composed", "command line": no file


@lru_cache(maxsize=1024)
def _source_of(file: str, cwd: str, known: tuple) -> str | None:
    """The innermost of the sources `known` that holds a file (cached: resolving costs syscalls)."""
    path = Path(cwd, file).resolve()
    inside = [s for s in known if path.is_relative_to(s.root.resolve())]
    return max(inside, key=lambda s: len(s.root.resolve().parts)).name if inside else None
