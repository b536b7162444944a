"""The bug corpus's verdicts recomputed with the libraries' own code (issue 25): every case of
tests/data/bugs/*.yaml that says `verdict_by: deepspeed` or `verdict_by: accelerate` and ships an
accelerate yaml is run through tests/corpus_verdicts.py, as the real-config corpus is: the broken
side must be refused by accelerate or DeepSpeed, its corrected twin accepted. Cases judged by their
thread (a hang, a GPU kernel, an mpirun launch) are not recomputed here."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from test_bug_corpus import CASES

UPSTREAM = ("deepspeed", "accelerate")
RECOMPUTED = sorted(
    i
    for i, c in CASES.items()
    if c.get("verdict_by") in UPSTREAM and "accelerate" in c["broken"] and "accelerate" in c["fixed"]
)


def upstream(config: dict) -> dict:
    corpus_verdicts = pytest.importorskip("corpus_verdicts")
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "accelerate.yaml").write_text(config["accelerate"])
        if "deepspeed" in config:
            (folder / "ds_config.json").write_text(config["deepspeed"])
        entry = {"files": ["accelerate.yaml"], "launch_args": config.get("launch_args", "")}
        return corpus_verdicts.verdict(folder, entry)


def test_cases_are_recomputed():
    assert len(RECOMPUTED) >= 10, RECOMPUTED


@pytest.mark.parametrize("case_id", RECOMPUTED)
def test_the_library_refuses_the_mistake_and_accepts_the_twin(case_id):
    case = CASES[case_id]
    broken, fixed = upstream(case["broken"]), upstream(case["fixed"])
    assert not broken["accepted"], f"{case['verdict_by']} accepts the broken side of {case_id}"
    assert fixed["accepted"], f"{case_id}: the twin is refused at {fixed['stage']}: {fixed['error']}"
