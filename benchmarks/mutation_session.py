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
import shutil
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


def forget_memos(package: str | None = None) -> None:
    """Empties every cache and memo table of the copy's own modules (registry, tests), or of PACKAGE's."""
    for module in list(sys.modules.values()):
        # the package's name first: cheaper than _ours' path check over every module loaded, and it
        # keeps this plugin's own tables (the map's parts) out of a per-test forgetting
        if (package and module.__name__.split(".")[0] != package) or not _ours(module):
            continue
        tables = memo_tables(module.__file__)
        for name, value in list(vars(module).items()):
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
            elif name in tables and isinstance(value, (dict, set)):
                value.clear()


def forget_package_state() -> None:
    """Empties registry's memo tables and the verdicts it keeps on disk (they hold what the fixes
    decided), without calling registry's code: while the map is made, a call would count as the
    test's own."""
    verdicts = sys.modules.get("registry.validate.verdicts")
    for connection in list(getattr(verdicts, "_OPEN", {}).values()):  # closed before the table is emptied
        connection.close()
    forget_memos("registry")
    if os.environ.get("XDG_CACHE_HOME"):  # this session's own (pytest_sessionstart, tests/conftest.py)
        shutil.rmtree(Path(os.environ["XDG_CACHE_HOME"], "recipe", "verdicts"), ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """While the map is made, no test finds what an earlier one memoised (docs/mutation.md)."""
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        forget_package_state()


def pytest_sessionstart(session):
    forget_memos()
    # Folders of this session's own: concurrent mutants never share a verdict kept on disk, and the
    # folders that the first run's end removed exist again.
    fresh = Path(tempfile.mkdtemp(prefix="session-", dir=ROOT.parent))  # the work folder, removed after the run
    for name in ISOLATED:
        (fresh / name.lower()).mkdir()
        os.environ[name] = str(fresh / name.lower())


# --- the map of tests to functions, made in pytest-xdist's workers (mutation_driver.py stats) ---
# mutmut makes it in one pytest process; over the whole suite that outlasts a call on the GPU host.
# Each worker records, as mutmut's own stats collector does, the functions each test ran (its
# subprocesses' included, in pytest_runtest_teardown above) and the test's duration, and writes
# them to MUTATION_STATS_OUT at its end; the driver merges them into mutmut's stats file.
_STATS_OUT = os.environ.get("MUTATION_STATS_OUT")
_tests_by_function: dict[str, set[str]] = {}
_durations: dict[str, float] = {}
_failed: set[str] = set()  # tests that fail unmutated, in the copy (one that reads the mutated source's text)


def _worker(config) -> str:
    return getattr(config, "workerinput", {}).get("workerid", "main")  # pytest-xdist's name of it


if _STATS_OUT and os.environ.get("MUTANT_UNDER_TEST") == "stats":
    # mutation_site/sitecustomize.py took this process for a test's subprocess (it starts with
    # "stats" set, which mutmut's own pytest process never does): its hits go to mutmut's table
    from mutmut.mutation import trampoline
    from mutmut.stats import record_trampoline_hit

    trampoline.record_trampoline_hit = record_trampoline_hit

if _STATS_OUT and os.environ.get("MUTATION_HITS"):
    # a hits folder per worker, so that no worker reads another's reports: set as the plugin loads
    # (pytest-xdist names the worker by then), before conftest.py or a test copies the environment
    _own = Path(os.environ["MUTATION_HITS"]) / os.environ.get("PYTEST_XDIST_WORKER", "main")
    _own.mkdir(parents=True, exist_ok=True)
    os.environ["MUTATION_HITS"] = str(_own)


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
    from mutmut.state import state

    state()._stats.update(subprocess_hits())
    if _STATS_OUT:  # the map is this plugin's to make (no mutmut stats collector in this process)
        for function in state()._stats:
            _tests_by_function.setdefault(function, set()).add(item.nodeid)
        state()._stats.clear()


def pytest_runtest_logstart(nodeid, location):
    if _STATS_OUT:
        _durations[nodeid] = 0.0


@pytest.hookimpl(tryfirst=True)  # a firstresult hook: pytest's own implementation ends the call
def pytest_runtest_makereport(item, call):
    if _STATS_OUT and call.when == "call":
        _durations[item.nodeid] = _durations.get(item.nodeid, 0.0) + call.duration


def pytest_runtest_logreport(report):
    if _STATS_OUT and report.failed:
        _failed.add(report.nodeid)


def pytest_sessionfinish(session):
    # (pytest-xdist's controller runs no test: the map is its workers')
    if _STATS_OUT and not session.config.pluginmanager.has_plugin("dsession"):
        import json

        made = {
            "tests_by_function": {k: sorted(v) for k, v in _tests_by_function.items()},
            "durations": _durations,
            "failed": sorted(_failed),
        }
        path = Path(_STATS_OUT) / f"{_worker(session.config)}.json"
        path.write_text(json.dumps(made), encoding="utf-8")
