"""The tests that two lists in tests/ treat specially, applied by one pytest plugin.

tests/allowed_skips.txt: under CI (CI set and not false), a test that skips fails the run unless this
list names it. A check that skips because CI did not build what it needs (a trainer's venv, zsh,
Chromium) would otherwise show as a green run that never checked anything.

tests/slow.txt: these tests get the `slow` marker, which the everyday run leaves out
(tests/quick.sh: `-m "not slow and not upstream"`); CI runs them all.

Both hold one entry a line, `NODE_ID_PREFIX  # reason`, the reason required. A prefix covers that
node and everything under it: a file, a test with all its parameters (`tests/test_x.py::test_y`
covers `tests/test_x.py::test_y[zsh]`). Either list can be another file through the `allowed_skips`
and `slow_tests` ini options (relative to the rootdir).

Loaded by tests/conftest.py; a plugin of its own so that its tests can run it on a scratch project
(tests/test_node_lists.py)."""

from __future__ import annotations

import os

import pytest

ALLOWED = pytest.StashKey[dict]()
SLOW = pytest.StashKey[dict]()
FALSE = ("", "0", "false", "no", "off")


def in_ci(environ=os.environ) -> bool:
    return environ.get("CI", "").strip().lower() not in FALSE


def parse_node_list(text: str, source: str) -> dict[str, str]:
    """{node id prefix: reason}; an entry without a reason is refused: a list says why of each test."""
    entries = {}
    for number, line in enumerate(text.splitlines(), 1):
        entry, _, reason = line.partition("#")
        if not entry.strip():
            continue
        if not reason.strip():
            raise pytest.UsageError(f"{source}:{number}: `{entry.strip()}` has no reason (`NODE_ID  # why`)")
        entries[entry.strip()] = reason.strip()
    return entries


def covers(prefix: str, node_id: str) -> bool:
    return node_id == prefix or (node_id.startswith(prefix) and node_id[len(prefix)] in ":[")


def listed(entries: dict[str, str], node_id: str) -> bool:
    return any(covers(prefix, node_id) for prefix in entries)


def pytest_addoption(parser):
    parser.addini("allowed_skips", "the tests that may skip under CI, with reasons", default="tests/allowed_skips.txt")
    parser.addini("slow_tests", "the tests tests/quick.sh leaves out, with reasons", default="tests/slow.txt")


def read_list(config, option: str) -> dict[str, str]:
    path = config.rootpath / config.getini(option)
    return parse_node_list(path.read_text() if path.is_file() else "", str(path))


def pytest_configure(config):
    config.stash[ALLOWED] = read_list(config, "allowed_skips")
    config.stash[SLOW] = read_list(config, "slow_tests")
    config.addinivalue_line("markers", "slow: left out of the everyday run, tests/quick.sh (listed in tests/slow.txt)")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if listed(config.stash[SLOW], item.nodeid):
            item.add_marker(pytest.mark.slow)


def turned_into_failure(config, report) -> None:
    """A skip under CI that the list does not allow becomes a failure that says how to fix it."""
    if not report.skipped or hasattr(report, "wasxfail") or not in_ci():
        return
    if listed(config.stash[ALLOWED], report.nodeid):
        return
    why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    why = why.removeprefix("Skipped: ")
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI: {why}\n"
        "A skipped check would pass as a green one: make .ci/run provide what it needs, or list the test "
        f"in {config.getini('allowed_skips')} with the reason it may skip."
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    turned_into_failure(item.config, outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    turned_into_failure(collector.config, outcome.get_result())
