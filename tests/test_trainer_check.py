"""`recipe validate --upstream`: the trainer's own parser and validate() on what resolve writes,
run by the trainer's interpreter (registry/validate/trainer_check.py), each refusal at the user's
own line with the library's words; a recipe the trainer accepts gets no problem from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, USER_ENV, lerobot_python, run_cli, side_venv_python

pytestmark = pytest.mark.upstream


def opentau_env() -> str:
    venv = USER_ENV.get("RECIPE_OPENTAU_VENV") or str(ROOT / ".venv-opentau")
    side_venv_python(Path(venv), "OpenTau", "bash tests/upstream/opentau_env.sh", "RECIPE_OPENTAU_VENV")
    return venv


def lerobot_env() -> str:
    return str(lerobot_python().parent.parent)


def test_lerobot_refuses_a_backbone_its_config_does_not_take_at_the_users_line(tmp_path):
    env = f"trainer.env={lerobot_env()}"
    r = run_cli(
        "validate", "act/ddp/8xA100", env, "policy.options.vision_backbone=vit_b_16", "--upstream", cwd=tmp_path
    )
    assert r.returncode == 1, r.stdout + r.stderr
    (line,) = r.stdout.strip().splitlines()
    assert line.startswith("command line: error[lerobot-refuses] policy.options.vision_backbone: lerobot 0.6.1 refuses")
    assert "`vision_backbone` must be one of the ResNet variants. Got vit_b_16." in line
    twin = run_cli(
        "validate", "act/ddp/8xA100", env, "policy.options.vision_backbone=resnet34", "--upstream", cwd=tmp_path
    )
    assert twin.returncode == 0 and twin.stdout == "", twin.stdout + twin.stderr


def test_opentau_refuses_a_value_its_parser_cannot_read_and_takes_the_bundled_cell(tmp_path):
    env = f"trainer.env={opentau_env()}"
    r = run_cli("validate", "pi07/zero2/8xA100", env, "policy.options.dropout=high", "--upstream", cwd=tmp_path)
    assert r.returncode == 1 and "error[opentau-refuses]" in r.stdout, r.stdout + r.stderr
    assert "could not convert string to float: 'high'" in r.stdout
    ok = run_cli("validate", "pi07/zero2/8xA100", env, "--upstream", cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout == "", ok.stdout + ok.stderr


def test_without_the_trainers_interpreter_the_check_is_said_not_run(tmp_path):
    r = run_cli("validate", "pi07/zero2/8xA100", "trainer.env=/nowhere", "--upstream", cwd=tmp_path)
    assert r.returncode == 0 and "warning[upstream-check] trainer.env: no opentau interpreter to ask" in r.stdout, (
        r.stdout
    )
    assert run_cli("validate", "--all", "--upstream").returncode == 2


def test_doctor_asks_the_trainer_too(tmp_path):
    import json

    env = f"trainer.env={lerobot_env()}"
    r = run_cli(
        "doctor", "act/ddp/8xA100", env, "policy.options.vision_backbone=vit_b_16", "--format", "json", cwd=tmp_path
    )
    rules = [p["rule"] for p in json.loads(r.stdout)["problems"]]
    assert r.returncode == 1 and "lerobot-refuses" in rules, r.stdout + r.stderr
