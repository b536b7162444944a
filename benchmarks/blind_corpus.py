"""Catch rate of a blind bug corpus (issue 43): each case of CORPUS_DIR/*.yaml (the format of
tests/data/bugs, gathered before any rule for it) judged as tests/test_bug_corpus.py judges its
own; prints caught, missed, refused twins and crashes as JSON. Run from tests/, with the checkout
to judge on PYTHONPATH (an older commit's worktree gives the "before" figure):

    cd tests && PYTHONPATH=.. python ../benchmarks/blind_corpus.py ../benchmarks/results/blind_corpus
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, ".")
import test_bug_corpus  # tests/ is the working folder


def main(folder: str) -> dict:
    cases = []
    for path in sorted(Path(folder).glob("*.yaml")):
        cases += yaml.safe_load(path.read_text())["cases"]
    out = {"n": len(cases), "caught": 0, "missed": [], "false_alarms": [], "crashed": []}
    for case in cases:
        try:
            broken, fixed = test_bug_corpus.judge(case["broken"]), test_bug_corpus.judge(case["fixed"])
        except Exception as e:  # a crash is a finding, counted, not a stop
            out["crashed"].append(f"{case['id']}: {type(e).__name__}: {str(e)[:150]}")
            continue
        if broken:
            out["caught"] += 1
        else:
            out["missed"].append(case["id"])
        if fixed:
            out["false_alarms"].append(f"{case['id']}: {fixed[0][:200]}")
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), indent=1))
