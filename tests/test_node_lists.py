"""tests/node_lists.py: under CI a skip tests/allowed_skips.txt does not allow fails the run, elsewhere
skips stay skips; tests/slow.txt's tests are marked `slow`. Each case runs pytest with the plugin on a
scratch project, as CI runs the suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from node_lists import covers, in_ci, parse_node_list

SCRATCH_TESTS = """
import pytest

def test_passes():
    pass

def test_needs_zsh():
    pytest.skip("zsh is not installed")

@pytest.mark.skipif(True, reason="no chromium binary")
def test_needs_chromium():
    pass

@pytest.mark.parametrize("gpus", [1, 2])
def test_listed(gpus):
    pytest.skip("needs GPUs")

@pytest.mark.xfail(reason="known", strict=True)
def test_known_bug():
    assert False
"""
LISTED = "test_scratch.py::test_listed  # the scratch project's GPU test\n"
SLOW = "test_scratch.py::test_needs  # not a node: a prefix ends at :: or [\ntest_scratch.py::test_passes  # slow\n"


def run_scratch(tmp_path: Path, ci: str | None, *args: str) -> tuple[dict[str, int], str]:
    (tmp_path / "test_scratch.py").write_text(SCRATCH_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nallowed_skips = skips.txt\nslow_tests = slow.txt\n")
    (tmp_path / "skips.txt").write_text(LISTED)
    (tmp_path / "slow.txt").write_text(SLOW)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci is not None else {})
    env["PYTHONPATH"] = str(Path(__file__).parent)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "node_lists",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rf",
            *args,
            "test_scratch.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    summary = done.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}
    return counts, done.stdout


def test_under_ci_an_unlisted_skip_fails_and_a_listed_one_stays_a_skip(tmp_path):
    counts, out = run_scratch(tmp_path, "true")
    # the two unlisted skips fail: a call-time skip as a failure, a skipif mark as an error at set-up;
    # the listed family and the xfail stay as they are
    assert counts == {"failed": 1, "error": 1, "passed": 1, "skipped": 2, "xfailed": 1}, out
    assert "skipped under CI: zsh is not installed" in out and "skipped under CI: no chromium binary" in out
    assert "list the test in skips.txt with the reason" in out


@pytest.mark.parametrize("ci", [None, "false", "0"])
def test_outside_ci_skips_stay_skips(tmp_path, ci):
    counts, out = run_scratch(tmp_path, ci)
    assert counts == {"passed": 1, "skipped": 4, "xfailed": 1}, out


def test_ci_values():
    assert in_ci({"CI": "true"}) and in_ci({"CI": "1"}) and in_ci({"CI": "yes"})
    assert not in_ci({}) and not in_ci({"CI": "false"}) and not in_ci({"CI": ""}) and not in_ci({"CI": "0"})


def test_a_prefix_covers_its_node_and_what_lies_under_it():
    prefix = "tests/test_x.py::test_y"
    assert covers(prefix, prefix) and covers(prefix, prefix + "[zsh]") and covers("tests/test_x.py", prefix)
    assert not covers(prefix, "tests/test_x.py::test_y_other") and not covers(prefix, "tests/test_x.py")


def test_slow_tests_are_left_out_of_the_everyday_run(tmp_path):
    counts, out = run_scratch(tmp_path, None, "-m", "not slow")
    assert counts == {"skipped": 4, "xfailed": 1, "deselected": 1}, out  # test_passes only
    counts, out = run_scratch(tmp_path, None, "-m", "slow")
    assert counts == {"passed": 1, "deselected": 5}, out


def test_a_list_needs_a_reason_for_each_entry():
    assert parse_node_list("# header\n\na::b  # why\n", "list.txt") == {"a::b": "why"}
    with pytest.raises(pytest.UsageError, match=r"list\.txt:2: `a::c` has no reason"):
        parse_node_list("a::b  # why\na::c\n", "list.txt")


@pytest.mark.parametrize("name", ["allowed_skips.txt", "slow.txt"])
def test_the_projects_lists_name_tests_that_exist(name):
    """Every entry names a test file that exists, and a test function in it where it names one (a
    renamed test would otherwise leave an entry that covers nothing)."""
    root = Path(__file__).resolve().parent.parent
    for prefix in parse_node_list((root / "tests" / name).read_text(), name):
        file, _, test = prefix.partition("::")
        assert (root / file).is_file(), prefix
        assert not test or f"def {test.split('[')[0]}(" in (root / file).read_text(), prefix
