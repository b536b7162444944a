"""Every combination of bundled parts is either valid or rejected by named invariants."""

import json

import pytest
from conftest import cell_names

from registry.files import SCHEMA_DIR

CELLS = cell_names()
RULE_IDS = {
    rule["id"]
    for path in SCHEMA_DIR.glob("*.schema.json")
    for rule in json.loads(path.read_text()).get("$defs", {}).get("invariants", {}).get("x-invariants", [])
}


@pytest.mark.parametrize("cell", CELLS)
def test_cell_is_valid_or_rejected_by_a_named_rule(matrix, cell):
    report = matrix[cell].report
    assert report.failure is None, str(report.failure)
    structural = [p.render() for p in report.problems if p.is_error and p.rule not in RULE_IDS]
    assert not structural  # parts never compose into a malformed recipe


@pytest.mark.parametrize(
    "cell, rule",
    [
        ("pi07/ddp/8xA100", "memory-fit"),
        ("act/zero2/8xA100", "lerobot-no-deepspeed"),
        ("act/fsdp2/4xH100", "lerobot-no-fsdp2"),
        ("diffusion/fsdp2/2xH100", "lerobot-no-fsdp2"),
        ("pi05/zero2/8xV100", "bf16-compute-capability"),  # a bfloat16 model: fp16 alone does not help
        ("tiny/fsdp/cpu", "fsdp-needs-gpu"),
    ],
)
def test_known_rejections(matrix, cell, rule):
    assert rule in {p.rule for p in matrix[cell].report.problems if p.is_error}


@pytest.mark.parametrize(
    "cell",
    [
        "pi07/zero2/8xA100",
        "pi07/fsdp/8xA100",
        "act/fsdp/2xH100",
        "act/fsdp-grad-op/4xH100",
        "tiny/ddp/cpu",
        "tiny/zero3/cpu",
        "tiny/zero3-offload/cpu",
        "ref-1b/fsdp2/2xH100",
        "smolvla/fsdp/8xH100",
        "pi05/zero2/8xH100",
        "pi07/fsdp/4xH100",  # the fixes of registry/validate/fixes.py
        "pi07/fsdp/8xH100",
        "pi07/zero3/8xA100",
        "act/ddp/8xV100",
    ],
)
def test_known_valid(matrix, cell):
    report = matrix[cell].report
    assert report.exit_code == 0, report.lines()


def test_matrix_has_both_outcomes(matrix):
    codes = [matrix[c].report.exit_code for c in CELLS]
    assert codes.count(0) > 100 and codes.count(1) > 100
