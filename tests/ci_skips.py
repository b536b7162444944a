"""Under CI (CI set and not false), a test that skips fails the run unless tests/allowed_skips.txt
lists it with a reason. A check that skips because CI did not build what it needs (a trainer's venv,
zsh, Chromium) would otherwise show as a green run that never checked anything.

tests/allowed_skips.txt holds one entry a line, `NODE_ID_PREFIX  # reason`, the reason required. A
prefix covers that node and everything under it: a file, a test with all its parameters
(`tests/test_x.py::test_y` covers `tests/test_x.py::test_y[zsh]`). The list can be another file
through the `allowed_skips` ini option (relative to the rootdir).

Loaded by tests/conftest.py; a pytest plugin of its own so that its tests can run it on a scratch
project (tests/test_ci_skips.py)."""

from __future__ import annotations

import os

import pytest

ALLOWED = pytest.StashKey[dict]()
FALSE = ("", "0", "false", "no", "off")


def in_ci(environ=os.environ) -> bool:
    return environ.get("CI", "").strip().lower() not in FALSE


def parse_allowed(text: str, source: str = "allowed_skips.txt") -> dict[str, str]:
    """{node id prefix: reason}; an entry without a reason is refused: the list says why each one may skip."""
    allowed = {}
    for number, line in enumerate(text.splitlines(), 1):
        entry, _, reason = line.partition("#")
        if not entry.strip():
            continue
        if not reason.strip():
            raise pytest.UsageError(
                f"{source}:{number}: `{entry.strip()}` has no reason (`NODE_ID  # why it may skip`)"
            )
        allowed[entry.strip()] = reason.strip()
    return allowed


def covers(prefix: str, node_id: str) -> bool:
    return node_id == prefix or (node_id.startswith(prefix) and node_id[len(prefix)] in ":[")


def pytest_addoption(parser):
    parser.addini("allowed_skips", "the tests that may skip under CI, with reasons", default="tests/allowed_skips.txt")


def pytest_configure(config):
    path = config.rootpath / config.getini("allowed_skips")
    text = path.read_text() if path.is_file() else ""
    config.stash[ALLOWED] = parse_allowed(text, str(path))


def turned_into_failure(config, report) -> None:
    """A skip under CI that the list does not allow becomes a failure that says how to fix it."""
    if not report.skipped or hasattr(report, "wasxfail") or not in_ci():
        return
    if any(covers(prefix, report.nodeid) for prefix in config.stash[ALLOWED]):
        return
    why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
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
