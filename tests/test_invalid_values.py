"""Values the schemas refuse never reach the code that reads them as typed (issue 41's fuzz
campaign): `recipe doctor` reports an invalid recipe's errors and leaves the pre-flight, whose
checks read values as the schemas type them, until it is valid, as `recipe run` does; an integer
past 64 bits is refused where the recipe is read, YAML or JSON, since every float conversion of it
overflows downstream (docs/failure-modes.md §68)."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from registry.errors import RecipeError
from registry.load import INT_BOUND, load_file, parse_value

# each was a traceback in recipe doctor (TypeError, AttributeError, IndexError, OverflowError)
INVALID = [
    ("pi07/zero2/8xA100", "policy.pretrained_path=5"),
    ("act/ddp/cpu", "policy.memory=0"),
    ("act/ddp/cpu", "dataset=section"),
    ("diffusion/ddp/2xH100", "train.micro_batch_size==8"),
    ("pi07/zero2/8xA100", "dataset.drop_probs=section"),
    ("pi07/zero2/8xA100", "dataset.resolution=[1]"),
    ("act/ddp/cpu", "policy.memory.frame_shape=[[]]"),
]


@pytest.mark.parametrize(("cell", "override"), INVALID)
def test_doctor_of_an_invalid_recipe_says_its_errors_and_runs_no_check(cell, override):
    r = run_cli("doctor", cell, override, "trainer.env=venvs/none", timeout=60)
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-2000:]
    assert r.returncode == 1, r.stdout + r.stderr
    key = override.split("=")[0]
    assert "error[" in r.stdout and key in r.stdout, r.stdout
    assert "the pre-flight runs once it is valid" in r.stderr + r.stdout
    r = run_cli("doctor", cell, override, "--format", "json", timeout=60)
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["errors"] >= 1 and doc["datasets"] == [], doc


@pytest.mark.parametrize("value", [INT_BOUND, -INT_BOUND - 1, 10**400])
def test_an_integer_past_64_bits_is_refused_where_it_is_read(tmp_path, value):
    with pytest.raises(RecipeError, match="out of range"):
        parse_value(str(value))
    yaml_file = tmp_path / "r.yaml"
    yaml_file.write_text(f"train:\n  steps: {value}\n")
    with pytest.raises(RecipeError, match=r"r\.yaml:2:10: .*out of range"):
        load_file(yaml_file)
    json_file = tmp_path / "r.json"
    json_file.write_text(json.dumps({"train": {"steps": value}}))
    with pytest.raises(RecipeError, match="out of range"):
        load_file(json_file)


@pytest.mark.parametrize("value", [INT_BOUND - 1, -INT_BOUND, 0])
def test_an_integer_within_64_bits_is_read_as_written(tmp_path, value):
    assert parse_value(str(value)) == value
    (tmp_path / "r.yaml").write_text(f"train:\n  steps: {value}\n")
    assert load_file(tmp_path / "r.yaml").data == {"train": {"steps": value}}


def test_a_huge_count_on_the_command_line_is_one_usage_line():
    r = run_cli("run", "act/fsdp/8xV100", f"hardware.gpus_per_node={10**400}", "--dry-run", timeout=60)
    assert "Traceback" not in r.stderr and r.returncode == 2, r.stderr[-2000:]
    assert "hardware.gpus_per_node: an integer of 401 digits is out of range" in r.stdout + r.stderr


@pytest.mark.parametrize(
    ("kind", "said"), [("fifo", "a FIFO, not a regular file"), ("zero", "a device, not a regular file")]
)
def test_a_recipe_that_is_no_regular_file_is_said_as_what_it_is(tmp_path, kind, said):
    import os

    path = tmp_path / "r.yaml"
    os.mkfifo(path) if kind == "fifo" else path.symlink_to("/dev/zero")
    r = run_cli("validate", str(path), timeout=20)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"{path}: {said}" in r.stdout + r.stderr, r.stdout + r.stderr  # it was "no such file"
    with pytest.raises(RecipeError, match=said):
        load_file(path)  # the loader's own guard, for callers that do not check first
