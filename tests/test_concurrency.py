"""Many `recipe` processes at once on one shared place (issue 41), CI-sized: 8 concurrent publishers
into one directory source and 8 concurrent one-step runs into one runs/ parent, checked as
benchmarks/concurrency.py checks its 16 (which also covers a git source)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import concurrency


def test_eight_publishers_number_one_to_eight_and_lose_nothing(tmp_path):
    result = concurrency.publish_dir(8, tmp_path / "dir")
    assert result["problems"] == [], result
    assert result["exit_0"] == 8 and result["versions"] == 8
    # the checks see a damaged source: a file changed under its index entry, a temporary file left
    source = tmp_path / "dir" / "team"
    (source / "published" / concurrency.NAME / "3.yaml").write_text("train: {steps: 1}\n")
    (source / "index.yaml.tmp").write_text("")
    problems: list[str] = []
    concurrency.check_index(source, {i: 100 + i for i in range(8)}, problems)
    assert any("3.yaml's sha256" in p for p in problems), problems
    assert concurrency.leftovers(source) == ["index.yaml.tmp"]


def test_eight_runs_at_once_get_eight_folders_of_their_own(tmp_path):
    result = concurrency.runs(8, tmp_path / "runs")
    assert result["problems"] == [], result
    assert result["exit_0"] == 8 and result["run_folders"] == 8
