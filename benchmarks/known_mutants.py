"""Bugs made by hand that the suite once missed, kept as a regression list: each is applied alone to
a scratch copy of the checkout, the test files named with it run, and the bug must be caught.
Where mutmut's generated mutants (benchmarks/mutation.py) are many and slow, this list runs in a
few minutes (docs/mutation.md).

Usage: nice -n 19 python benchmarks/known_mutants.py [--bugs FILE] [--only NAME ...] [--out FILE]
Writes benchmarks/results/mutation/known.json and prints each bug's verdict. --bugs runs another
list instead: a Python file defining BUGS, made of this module's Bug (from known_mutants import Bug)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation import RESULTS, scratch_copy


@dataclass(frozen=True)
class Bug:
    name: str
    file: str
    old: str  # must occur exactly once in the file
    new: str
    tests: tuple[str, ...]


BUGS = [
    Bug(
        "boolean-as-integer",
        "registry/validate/keywords.py",
        "return isinstance(instance, int) and not isinstance(instance, bool)",
        "return isinstance(instance, int)",
        ("tests/test_rule_twins.py",),
    ),
    Bug(
        "sync-module-states-not-forced",
        "registry/resolve/fsdp.py",
        "derive=lambda sync, doc: bool(sync) or bool(value(CPU_RAM, doc)),",
        "derive=lambda sync, doc: bool(sync),",
        ("tests/test_resolved_values.py",),
    ),
    Bug(
        "bare-name-hash-unchecked",
        "registry/sharing/versions.py",
        "return verified(published[-1])",
        "return published[-1]",
        ("tests/test_guards.py",),
    ),
    Bug(
        "source-confinement-removed",
        "registry/sharing/sources.py",
        "if not path.resolve().is_relative_to(source.root.resolve()):",
        "if False:",
        ("tests/test_guards.py",),
    ),
    Bug(
        "recipe-file-confinement-removed",
        "registry/sharing/sources.py",
        "if not resolved.is_relative_to(root.resolve()):",
        "if False:",
        ("tests/test_guards.py",),
    ),
    Bug(
        "signal-exit-128-minus-n",
        "registry/run/supervise.py",
        "return 128 - failure if failure < 0 else failure",
        "return 128 + failure if failure < 0 else failure",
        ("tests/test_guards.py",),
    ),
    Bug(
        "global-batch-without-nodes",
        "schemas/train.schema.json",
        '{"path": "hardware.nodes", "default": 1}',  # a factor of a rule: dropped from its product
        "",
        ("tests/test_rule_twins.py",),
    ),
    Bug(
        "lerobot-flag-renamed",
        "registry/trainers/lerobot.py",
        'Field("train.checkpoint.every", "save_freq",',
        'Field("train.checkpoint.every", "save_frequency",',
        ("tests/test_resolved_values.py",),
    ),
]


def changed_text(original: str, bug: Bug) -> str | None:
    """The file with the bug in it; None when its text is not there exactly once. In a schema,
    old is a JSON value inside a list (a factor, a branch, an enum member), replaced by new's
    value or, when new is empty, dropped."""
    if not bug.file.endswith(".json"):
        return original.replace(bug.old, bug.new) if original.count(bug.old) == 1 else None
    target, found = json.loads(bug.old), []

    def walk(node):
        if isinstance(node, list):
            if target in node:
                found.append(node)
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for item in node.values():
                walk(item)

    doc = json.loads(original)
    walk(doc)
    if len(found) != 1:
        return None
    at = found[0].index(target)
    found[0][at : at + 1] = [json.loads(bug.new)] if bug.new else []
    return json.dumps(doc, indent=2) + "\n"


def load_bugs(path: Path) -> list[Bug]:
    """The BUGS list of the Python file at PATH (a hand list kept outside this one)."""
    spec = importlib.util.spec_from_file_location(f"bugs_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"known_mutants: {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not isinstance(getattr(module, "BUGS", None), list):
        raise SystemExit(f"known_mutants: {path}: defines no BUGS list")
    return module.BUGS


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bugs", type=Path, help="a Python file whose BUGS list is run instead of this one's")
    ap.add_argument("--only", nargs="+", help="these bugs only")
    ap.add_argument("--out", type=Path, default=RESULTS / "known.json")
    args = ap.parse_args()
    bugs = [b for b in (load_bugs(args.bugs) if args.bugs else BUGS) if not args.only or b.name in args.only]
    work = Path(tempfile.mkdtemp(prefix="recipe-known-mutants-"))
    results = []
    try:
        scratch_copy(work)
        for bug in bugs:
            path = work / bug.file
            original = path.read_text(encoding="utf-8")
            changed = changed_text(original, bug)
            if changed is None:
                results.append({"name": bug.name, "status": "stale (the code it changes moved)"})
                print(f"stale   {bug.name}", flush=True)
                continue
            path.write_text(changed, encoding="utf-8")
            started = time.monotonic()
            try:
                code = subprocess.run(
                    [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *bug.tests],
                    cwd=work,
                    capture_output=True,
                ).returncode
            finally:
                path.write_text(original, encoding="utf-8")
            status = "caught" if code not in (0, 5) else "missed"
            results.append({"name": bug.name, "file": bug.file, "tests": list(bug.tests), "status": status,
                            "seconds": round(time.monotonic() - started, 1)})  # fmt: skip
            print(f"{status:7} {bug.name}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    caught = sum(r["status"] == "caught" for r in results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["nice -n 19 python benchmarks/known_mutants.py", *sys.argv[1:]])
    summary = {"benchmark": "known_mutants", "command": command,
               "date": time.strftime("%Y-%m-%d"), "caught": caught, "of": len(results), "bugs": results}  # fmt: skip
    args.out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(f"caught {caught} of {len(results)} -> {args.out}")
    return 0 if caught == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
