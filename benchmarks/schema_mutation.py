"""Mutation score of the rules in schemas/: each mutant changes one condition of one rule (its `when`
dropped, a branch of allOf/anyOf dropped, a `const` or bound moved, an enum member or a factor of a
product dropped, a comparison operator swapped, a `not` unwrapped, a not-applicable field dropped),
and the rule tests run against a scratch copy of the checkout holding the mutated schemas/. A
mutant is killed when a test fails. A benchmark, not a CI step (docs/mutation.md).

Usage:
    nice -n 19 python benchmarks/schema_mutation.py                      # every rule
    nice -n 19 python benchmarks/schema_mutation.py --rules global-batch-size memory-fit
    nice -n 19 python benchmarks/schema_mutation.py --list               # the mutants, not run

Each mutant first runs the tests that name its rule (`[rule-id]` in the test id), and only when
those pass, every rule test file (-x). Writes benchmarks/results/mutation/schemas.json."""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation import RESULTS, ROOT, equivalent_names, scratch_copy

RULE_TESTS = ["tests/test_invariants.py", "tests/test_rule_twins.py", "tests/test_bug_corpus.py"]
SWAPPED = {"==": "!=", "!=": "==", "<": "<=", "<=": "<", ">": ">=", ">=": ">"}
BOUNDS = {"minimum": "exclusiveMinimum", "exclusiveMinimum": "minimum", "maximum": "exclusiveMaximum"}
BOUNDS["exclusiveMaximum"] = "maximum"
COMBINATORS = ("allOf", "anyOf", "oneOf")


def moved(value):
    """A different value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "-mutated"
    return "mutated"


def condition_mutants(node, where: str):
    """(description, function that applies the change to a copy of node) for each mutant inside node."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _inside(node, i, item, f"{where}/{i}")
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        at = f"{where}/{key}"
        if key == "const":
            yield f"{at}: {value!r} -> {moved(value)!r}", _setter(key, moved(value))
        elif key == "enum" and isinstance(value, list) and len(value) > 1:
            for member in value:
                yield f"{at}: drop {member!r}", _setter(key, [m for m in value if m != member])
        elif key in BOUNDS and isinstance(value, (int, float)):
            yield f"{at}: {key} -> {BOUNDS[key]}", _renamer(key, BOUNDS[key])
        elif key == "op" and value in SWAPPED:
            yield f"{at}: {value} -> {SWAPPED[value]}", _setter(key, SWAPPED[value])
        elif key == "product" and isinstance(value, list):
            for i in range(len(value)):
                yield f"{at}: drop factor {i} ({json.dumps(value[i])})", _setter(key, value[:i] + value[i + 1 :])
        elif key == "not":
            yield f"{at}: unwrapped", _unwrap(key)
        elif key in COMBINATORS and isinstance(value, list) and len(value) > 1:
            for i in range(len(value)):
                yield f"{at}: drop branch {i}", _setter(key, value[:i] + value[i + 1 :])
        elif key == "x-where" and isinstance(value, dict) and len(value) > 1:
            for path in value:
                yield f"{at}: drop {path}", _setter(key, {p: v for p, v in value.items() if p != path})
        if isinstance(value, (dict, list)):
            yield from _inside(node, key, value, at)


def _inside(node, key, value, at):
    for description, change in condition_mutants(value, at):
        yield description, _nested(key, change)


def _setter(key, value):
    def change(node):
        node[key] = copy.deepcopy(value)

    return change


def _renamer(old, new):
    def change(node):
        node[new] = node.pop(old)

    return change


def _unwrap(key):
    def change(node):
        inner = node.pop(key)
        node.update(inner if isinstance(inner, dict) else {})

    return change


def _nested(key, change):
    def apply(node):
        change(node[key])

    return apply


def rule_mutants(rule: dict):
    """(description, change of the rule) for one rule of x-invariants."""
    if "when" in rule:
        yield "when: dropped (the rule applies to every recipe)", lambda r: r.pop("when")
    for part in ("when", "require"):
        if part in rule:
            yield from ((d, _nested(part, c)) for d, c in condition_mutants(rule[part], part))
    for field in rule.get("fields", {}):
        yield f"fields: drop {field}", lambda r, f=field: r["fields"].pop(f)


def all_mutants(only: set[str] | None):
    """[(mutant name, schema file name, rule index, rule id, description, change)]"""
    found = []
    for path in sorted((ROOT / "schemas").glob("*.schema.json")):
        rules = (
            json.loads(path.read_text(encoding="utf-8")).get("$defs", {}).get("invariants", {}).get("x-invariants", [])
        )
        for index, rule in enumerate(rules):
            if only and rule["id"] not in only:
                continue
            for n, (description, change) in enumerate(rule_mutants(rule), 1):
                found.append((f"{rule['id']}__{n}", path.name, index, rule["id"], description, change))
    return found


def pytest(work: Path, args: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not gpu and not upstream"]
    return subprocess.run(command + args, cwd=work, capture_output=True, timeout=900).returncode


def test_ids(work: Path) -> list[str]:
    """Node ids of the rule test files, collected once on the unmutated copy."""
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *RULE_TESTS],
        cwd=work,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return [line for line in listed if "::" in line]


def own_tests(ids: list[str], rule_id: str) -> list[str]:
    """The tests parametrized by this rule: `[rule-id]` or `[rule-id-...]` in the test id."""
    return [i for i in ids if f"[{rule_id}]" in i or f"[{rule_id}-" in i]


def run_one(work: Path, mutant, collected: dict[str, list[str]]) -> dict:
    name, file, index, rule_id, description, change = mutant
    target = work / "schemas" / file
    original = (ROOT / "schemas" / file).read_text(encoding="utf-8")
    doc = json.loads(original)
    change(doc["$defs"]["invariants"]["x-invariants"][index])
    target.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    try:
        started = time.monotonic()
        mine = collected.get(rule_id, [])
        code = pytest(work, mine) if mine else 0
        phase = "own tests"
        if code in (0, 5):
            code, phase = pytest(work, RULE_TESTS), "all rule tests"
        status = "survived" if code == 0 else "killed"
    except subprocess.TimeoutExpired:
        status, phase = "timeout", "-"
    finally:
        target.write_text(original, encoding="utf-8")
    return {"name": name, "rule": rule_id, "change": description, "status": status, "by": phase,
            "seconds": round(time.monotonic() - started, 1)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rules", nargs="+", help="only these rule ids")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these mutants (names as --list prints them)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants tested side by side, each in its own copy")
    ap.add_argument("--list", action="store_true", help="print the mutants and stop")
    ap.add_argument("--time-limit", type=float, help="start no mutant after this many seconds")
    ap.add_argument(
        "--shuffle", type=int, metavar="SEED", help="test the mutants in a random order (a sample, with --time-limit)"
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "schemas.json")
    args = ap.parse_args()

    mutants = all_mutants(set(args.rules) if args.rules else None)
    if args.only:
        mutants = [m for m in mutants if m[0] in set(args.only)]
    if args.list:
        for name, file, _, _, description, _ in mutants:
            print(f"{name:50} {file:24} {description}")
        print(f"{len(mutants)} mutants")
        return 0
    if not mutants:
        raise SystemExit("schema_mutation: no rule matched")
    if args.shuffle is not None:
        random.Random(args.shuffle).shuffle(mutants)
    works = [Path(tempfile.mkdtemp(prefix="recipe-schema-mutation-")) for _ in range(max(1, args.jobs))]
    for work in works:
        scratch_copy(work)
    # the test ids of each rule, collected once on the unmutated copy
    ids = test_ids(works[0])
    collected = {m[3]: own_tests(ids, m[3]) for m in mutants}
    started = time.monotonic()
    results = []
    try:
        with ThreadPoolExecutor(len(works)) as pool:
            slots = [mutants[i :: len(works)] for i in range(len(works))]

            def run_slot(work, slot):
                for mutant in slot:
                    if args.time_limit and time.monotonic() - started > args.time_limit:
                        return  # the rest stay unchecked, and are counted as such
                    result = run_one(work, mutant, collected)
                    print(f"{result['status']:8} {result['name']:40} {result['change']}", flush=True)
                    results.append(result)

            list(pool.map(run_slot, works, slots))
    finally:
        for work in works:
            shutil.rmtree(work, ignore_errors=True)
    results.sort(key=lambda r: r["name"])
    equivalent = equivalent_names()
    counted = [r for r in results if r["name"] not in equivalent]
    killed = sum(r["status"] in ("killed", "timeout") for r in counted)
    survivors = [r for r in counted if r["status"] == "survived"]
    score = round(100 * killed / len(counted), 1) if counted else None
    out = {
        "benchmark": "schema_mutation",
        "command": " ".join(["nice -n 19 python benchmarks/schema_mutation.py", *map(shlex.quote, sys.argv[1:])]),
        "tests": RULE_TESTS,
        "date": time.strftime("%Y-%m-%d"),
        "seconds": round(time.monotonic() - started, 1),
        "mutants": len(results),
        "unchecked": len(mutants) - len(results),
        "equivalent": len(results) - len(counted),
        "killed": killed,
        "survived": len(survivors),
        "score": score,
        "survivors": survivors,
        "mutants_tested": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(
        f"schemas: score {score}% | killed {killed} | survived {len(survivors)} | {len(results)} mutants tested of {len(mutants)} -> {args.out}"
    )
    for r in survivors:
        print(f"  survived {r['name']}: {r['change']}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
