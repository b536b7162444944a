"""pytest plugin for mutation runs (benchmarks/mutation.py loads it with `-p`): every test session
starts as a fresh interpreter would.

mutmut forks each mutant's test session from a process that already ran the tests once, unmutated,
to map functions to tests. What that run memoised (functools caches, the validator's memo tables,
the verdicts kept on disk under the session's XDG_CACHE_HOME) would otherwise answer for the
mutated code, and a mutant would survive without being tested (docs/mutation.md)."""

from __future__ import annotations

import ast
import functools
import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path.cwd().resolve()  # mutmut runs the tests from its copy of the checkout
ISOLATED = ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")


def _ours(module) -> bool:
    path = getattr(module, "__file__", None)
    # absolute only: a few extension modules (torch's) carry a bare file name, not a path
    return bool(path) and path.endswith(".py") and os.path.isabs(path) and Path(path).is_relative_to(ROOT)


@functools.cache
def memo_tables(path: str) -> frozenset[str]:
    """Names a module binds, at its top level, to an empty `{}` or `set()`: tables it fills as it
    runs (verdicts._SEEN, memo._OUTCOMES, ...), not constants."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else getattr(node, "target", None)
        )
        value = getattr(node, "value", None)
        empty = (isinstance(value, ast.Dict) and not value.keys) or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "set"
            and not value.args
        )
        if isinstance(target, ast.Name) and empty and not target.id.startswith("mutants_"):  # mutmut's own tables
            names.add(target.id)
    return frozenset(names)


def forget_memos() -> None:
    """Empties every cache and memo table of the copy's own modules (registry, tests)."""
    for module in list(sys.modules.values()):
        if not _ours(module):
            continue
        tables = memo_tables(module.__file__)
        for name, value in list(vars(module).items()):
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
            elif name in tables and isinstance(value, (dict, set)):
                value.clear()


def pytest_sessionstart(session):
    forget_memos()
    # Folders of this session's own: concurrent mutants never share a verdict kept on disk, and the
    # folders that the first run's end removed exist again.
    fresh = Path(tempfile.mkdtemp(prefix="session-", dir=ROOT.parent))  # the work folder, removed after the run
    for name in ISOLATED:
        (fresh / name.lower()).mkdir()
        os.environ[name] = str(fresh / name.lower())


def subprocess_hits() -> set[str]:
    """The functions the tests' `recipe ...` subprocesses ran since the last call, as they reported
    them at exit (mutation_site/sitecustomize.py); each report is read once."""
    folder = os.environ.get("MUTATION_HITS")
    found: set[str] = set()
    if not folder or not os.path.isdir(folder):
        return found
    for report in Path(folder).glob("*.hits"):
        try:
            found |= set(filter(None, report.read_text(encoding="utf-8").splitlines()))
            report.unlink()
        except OSError:  # taken by another reader: counted there
            continue
    return found


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item):
    """Before mutmut's own teardown hook maps the functions this test ran to it, the ones its
    subprocesses ran join them (only while mutmut maps: "stats")."""
    if os.environ.get("MUTANT_UNDER_TEST") != "stats":
        return
    hits = subprocess_hits()
    if hits:
        from mutmut.state import state

        state()._stats.update(hits)
