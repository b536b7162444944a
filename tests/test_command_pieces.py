"""Pieces of the verbs read by value in-process: completion of axis swaps, options parsed to their
types, the refusals of `search` and `tune`, the JSON of `list` and `validate`, where an imported
setup's problem is placed, doctor's closing line, and the pre-launch readers of a script's Python,
LeRobot's cache and a pretrained policy's config."""

from __future__ import annotations

import json
import shutil
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from registry.commands import _parser, completion, doctor, import_, list_, main
from registry.commands import validate as validate_verb
from registry.errors import Problem
from registry.names import AXES
from registry.run import environment
from registry.run.preflight import metadata


def parse(*argv: str):
    return _parser(argv[0]).parse_args(list(argv))


# --- completion and options ----------------------------------------------------------------------
def test_a_swap_is_completed_with_parts_only_after_an_axis_and_its_equals():
    assert completion._settings("backend") == [f"{axis}=" for axis in AXES]
    assert completion._settings("train=") == [f"{axis}=" for axis in AXES]
    parts = completion._settings("backend=")
    assert "backend=zero2" in parts and all(p.startswith("backend=") for p in parts)


def test_options_are_parsed_to_what_the_verbs_read(capsys):
    assert parse("tune", "tiny/cpu", "--warmup", "3").warmup == 3
    assert parse("source", "update", "team-a", "team-b").names == ["team-a", "team-b"]
    with pytest.raises(SystemExit):
        main(["cp", "--help"])
    assert "--force" in (shown := capsys.readouterr().out) and "replace DEST if it exists\n" in shown


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["search", "  "], "recipe: error: nothing to search for (hint: recipe search TEXT)"),
        (["tune", "train.steps=3"], "recipe: error: nothing to tune (hint: recipe tune tiny/cpu)"),
    ],
)
def test_what_a_verb_refuses_is_one_line(argv, says, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == says


def test_a_tune_target_that_is_no_target_names_the_forms_and_policies():
    from registry.errors import RecipeError
    from registry.run.tune import parse_target

    with pytest.raises(RecipeError) as raised:
        parse_target("nothing-here")
    from registry.sharing import sources

    said = str(raised.value)
    assert said.startswith("'nothing-here' is neither POLICY/HARDWARE, a cell nor a recipe file (hint: recipe tune")
    assert said.endswith(f"; policies: {', '.join(sources.part_names('policy'))})")


# --- JSON outputs ----------------------------------------------------------------------------------
def test_list_tables_in_json_are_indented_objects_keyed_by_the_header(capsys):
    list_.emit([["policy", "tiny", "a reference"]], ["AXIS", "PART", "SUMMARY"], "json")
    out = capsys.readouterr().out
    assert json.loads(out) == [{"axis": "policy", "part": "tiny", "summary": "a reference"}]
    assert out.startswith("[\n  {\n")
    list_.emit([["policy", "tiny", "x"]], ["AXIS", "PART", "SUMMARY"], "table")
    assert not capsys.readouterr().out.startswith("[")
    assert main(["list", "--policy", "tiny", "--format", "json"]) == 0
    assert capsys.readouterr().out.startswith("[\n  {\n")


def test_a_problem_in_json_names_the_source_of_a_team_rule_only():
    problem = Problem("error", "obs-history", "policy.n_obs_steps", "m", "a.yaml:1:1")
    assert validate_verb.problem_json(problem)["from"] is None
    team = Problem("error", "team-a:max-micro-batch", "train.micro_batch_size", "m", "a.yaml:1:1")
    assert validate_verb.problem_json(team)["from"] == "team-a"


def test_a_skipped_file_says_why_in_json():
    said = validate_verb.report_json(validate_verb._Skipped("notes.yaml", "no recipe file of a source tree"))
    assert said == {
        "target": "notes.yaml",
        "status": "skipped",
        "exit_code": 0,
        "errors": 0,
        "warnings": 0,
        "problems": [],
        "failure": None,
        "skipped": "no recipe file of a source tree",
    }


def test_an_imported_setups_problem_is_placed_at_the_teams_key():
    problem = Problem("error", "r", "backend.zero_stage", "m", "/tmp/import-x/recipe.yaml:3:1")
    located = {("backend",): "team.yaml:7:1", ("backend", "zero_stage"): "ds.json:2:5"}
    assert validate_verb._located(problem, located, "/tmp/import-x", "chosen").origin == "ds.json:2:5"
    nested = Problem("error", "r", "backend.offload.pin_memory", "m", "/tmp/import-x/recipe.yaml:3:1")
    assert validate_verb._located(nested, located, "/tmp/import-x", "chosen").origin == "team.yaml:7:1"
    chosen = Problem("error", "r", "hardware.gpu", "m", "/tmp/import-x/recipe.yaml:9:1")
    assert validate_verb._located(chosen, located, "/tmp/import-x", "chosen").origin == "chosen"


def test_a_validate_worker_ignores_ctrl_c(monkeypatch):
    """The parent reports the interrupt once; workers must not each print a traceback."""
    from registry.validate import verdicts

    monkeypatch.setattr(verdicts, "batched", lambda: None)
    before = signal.getsignal(signal.SIGINT)
    try:
        validate_verb._start_worker()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_trainers_arguments_given_as_a_list_are_one_string():
    args = parse("import", "--accelerate-config", "a.yaml", "--trainer", "lerobot", "-o", "r.yaml")
    args.trainer_args = ["--policy.type=act", "--steps=5"]  # as argparse leaves `--trainer-args=--`
    args.launch_args = "--num_processes 8"
    setup = import_.setup_of(args)
    assert setup.trainer_args == "--policy.type=act --steps=5" and setup.launch_args == "--num_processes 8"


def test_doctors_closing_line():
    ok = SimpleNamespace(errors=[], problems=[], facts=None, datasets=[])
    assert doctor._summary("tiny/ddp/cpu", ok) == "recipe: tiny/ddp/cpu: ready"
    warned = SimpleNamespace(errors=[1], problems=[1, 2, 3], facts=None, datasets=[])
    assert doctor._summary("x", warned) == "recipe: x: 1 error, 2 warnings"


# --- what the pre-launch checks read ----------------------------------------------------------------
def test_the_python_a_script_runs_under(tmp_path):
    script = tmp_path / "tool"
    script.write_text("#!/opt/env/bin/python3.12\nimport sys\n")
    assert environment.interpreter_of(str(script), {}) == "/opt/env/bin/python3.12"
    script.write_text("#!/bin/bash\necho\n")
    assert environment.interpreter_of(str(script), {}) is None
    script.write_text(f"#!/usr/bin/env {Path(sys.executable).name}\n")
    here = str(Path(sys.executable).parent)
    assert environment.interpreter_of(str(script), {"PATH": here}) == shutil.which(Path(sys.executable).name, path=here)


def test_lerobots_cache_follows_hf_home():
    assert metadata.lerobot_home({"HF_LEROBOT_HOME": "/a", "HF_HOME": "/b"}) == Path("/a")
    assert metadata.lerobot_home({"HF_HOME": "/b"}) == Path("/b/lerobot")
    assert metadata.lerobot_home({"XDG_CACHE_HOME": "/c"}) == Path("/c/huggingface/lerobot")


def test_a_bare_name_is_a_local_folder_not_a_hub_id(tmp_path):
    """Only OWNER/NAME is looked for in the hub cache; `mymodel` is a folder beside the run."""
    snapshot = tmp_path / "hub" / "models--mymodel" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"input_features": {"x": {"shape": [2]}}}))
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    assert metadata.pretrained_features("mymodel", tmp_path / "run", env) is None
    owned = tmp_path / "hub" / "models--team--mymodel" / "snapshots" / "abc"
    owned.mkdir(parents=True)
    (owned / "config.json").write_text(json.dumps({"input_features": {"x": {"shape": [2]}}}))
    found = metadata.pretrained_features("team/mymodel", tmp_path / "run", env)
    assert found is not None and found[0] == owned / "config.json"


def test_help_names_what_each_argument_takes(capsys):
    for argv, shown in (
        (["validate", "--help"], ["NAME|FILE|KEY=VALUE", "every bundled part, overlay and recipe"]),
        (["import", "--help"], ["GPU catalog name for the hardware section (default A100-80GB"]),
    ):
        with pytest.raises(SystemExit):
            main(argv)
        text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines at the terminal's width
        assert all(s in text for s in shown), (argv, text)


def test_the_lock_records_a_local_datasets_info_hash(tmp_path):
    from registry.compose import compose
    from registry.run import envlock

    (tmp_path / "data" / "meta").mkdir(parents=True)
    (tmp_path / "data" / envlock.INFO).write_text("{}")
    doc = compose("act/ddp/8xA100", [f"dataset.root={tmp_path / 'data'}"]).data
    said = envlock.dataset(doc, tmp_path)
    assert said["root"] == str(tmp_path / "data") and len(said["info_sha256"]) == 64
    assert envlock.dataset(compose("tiny/ddp/cpu").data, tmp_path) == {"source": "synthetic"}
