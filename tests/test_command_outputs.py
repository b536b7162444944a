"""What the commands print and parse, run in-process through `registry.commands.main`: the
estimate's JSON and header, the import's report with the setup's own conflicts first, a team
rule file checked by name, the tune's bounds, the completion's versions and options, and the
JSON reader's one-line errors. tests/test_cli.py runs the same commands as processes."""

from __future__ import annotations

import json

import pytest

from registry import commands
from registry.compose import compose
from registry.errors import RecipeError
from registry.sharing import sources, versions


@pytest.fixture
def two_teams(tmp_path, monkeypatch):
    """Two folder sources on RECIPE_PATH: pi07/zero2/8xA100@1 in team-a, @1 and @2 in team-b."""
    for team in ("team-a", "team-b"):
        (tmp_path / team).mkdir()
    monkeypatch.setenv("RECIPE_PATH", f"team-a={tmp_path / 'team-a'}:team-b={tmp_path / 'team-b'}")
    team_a, team_b = sources.all_sources()[:2]
    for source in (team_a, team_b, team_b):  # team-b has a version 2 that team-a has not
        versions.publish(compose("pi07/zero2/8xA100"), source)


# --- completion ----------------------------------------------------------------------------------
def test_an_at_sign_completes_published_versions_of_the_source_named(two_teams):
    from registry.commands.completion import _names

    assert _names("team-a:pi07/zero2/8xA100@") == ["team-a:pi07/zero2/8xA100@1"]
    assert _names("team-b:pi07/zero2/8xA100@") == ["team-b:pi07/zero2/8xA100@1", "team-b:pi07/zero2/8xA100@2"]
    assert {"pi07/zero2/8xA100@1", "pi07/zero2/8xA100@2"} == set(_names("pi07/zero2/8xA100@"))


def test_the_zsh_script_offers_the_top_options(capsys):
    assert commands.main(["completion", "zsh"]) == 0
    assert "_recipe_top_options='-h --help --version'" in capsys.readouterr().out


def test_source_update_takes_accepted_versions():
    args = commands._parser().parse_args(["source", "update", "--accept", "team:a/b/c@2", "--accept", "x@1"])
    assert args.accept == ["team:a/b/c@2", "x@1"]


# --- estimate ------------------------------------------------------------------------------------
def test_the_estimates_json_names_the_accumulation(capsys):
    assert (
        commands.main(["estimate", "pi07/zero2/8xA100", "train.gradient_accumulation_steps=3", "--format", "json"]) == 0
    )
    said = json.loads(capsys.readouterr().out)
    assert said["gradient_accumulation_steps"] == 3 and said["micro_batch_size"] == 20


def test_a_trainer_that_makes_its_own_data_is_counted_at_the_parts_frames():
    from registry.commands.estimate import frame_source

    assert frame_source(compose("tiny/ddp/cpu").data) == {
        "from": "part",
        "pixels": None,
        "said": "the part's: the trainer makes its own data",
    }


def test_the_estimates_header_says_what_is_offloaded():
    from registry.estimate import describe

    assert describe(compose("pi07/zero2/8xA100").data) == "ZeRO-2 over 8 ranks on 8 x A100-80GB per node"
    assert describe(compose("ref-1b/zero3-offload/8xA100").data) == (
        "ZeRO-3 (offload optimizer cpu, parameters cpu) over 8 ranks on 8 x A100-80GB per node"
    )


# --- import and validate of a team's setup -------------------------------------------------------
CONFLICTED = "distributed_type: MULTI_GPU\nnum_processes: 6\nnum_machines: 4\nmain_process_ip: 10.0.0.1\n"


def test_the_import_reports_the_setups_own_conflicts_first(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text(CONFLICTED)
    commands.main(["import", "--accelerate-config", "a.yaml", "--gpu", "H100", "-o", "r.yaml"])
    out = capsys.readouterr().out.splitlines()
    assert "error[import-conflict]" in out[0] and "num_processes 6 is not a multiple of num_machines 4" in out[0]
    assert (tmp_path / "r.yaml").is_file()


def test_validate_of_a_setup_reports_at_the_teams_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text(CONFLICTED)
    assert commands.main(["validate", "--accelerate-config", "a.yaml", "--gpu", "H100"]) == 1
    out = capsys.readouterr().out
    assert "a.yaml:2:1: error[import-conflict]" in out


def test_a_broken_team_rule_file_is_named(tmp_path, capsys):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "mine.json").write_text("{")
    assert commands.main(["validate", str(rules / "mine.json")]) != 0
    captured = capsys.readouterr()
    assert str(rules / "mine.json") in captured.out + captured.err


def test_tune_refuses_a_global_batch_under_one(capsys):
    with pytest.raises(SystemExit) as stopped:  # refused at parsing (tests/test_rough_edges.py)
        commands.main(["tune", "tiny/ddp/cpu", "--global-batch", "0"])
    assert stopped.value.code == 2
    assert "argument --global-batch: '0': must be a whole number at least 1" in capsys.readouterr().err


# --- the JSON reader ----------------------------------------------------------------------------
def test_a_json_file_is_read_with_its_lines_and_refused_in_one_line(tmp_path):
    from registry.load import load_json

    (tmp_path / "c.json").write_text('{\n  "a": {"b": 1}\n}\n')
    loaded = load_json(tmp_path / "c.json", "trainer config")
    assert loaded.origins[("a", "b")] == f"{tmp_path / 'c.json'}:2:9"
    (tmp_path / "c.json").write_text('{"a": }')
    with pytest.raises(RecipeError) as raised:
        load_json(tmp_path / "c.json", "trainer config")
    assert raised.value.problem.message == "not a trainer config: Expecting value"


def test_history_shows_a_versions_rate_or_a_dash(capsys):
    from registry.commands import main

    assert main(["history", "pi07/zero2/8xA100"]) == 0

    def rate(out: str) -> str:  # the SAMPLES/S column, read where its header starts
        header, row = out.splitlines()[:2]
        return row[header.index("SAMPLES/S") :].split()[0]

    assert rate(capsys.readouterr().out) == "13.7"
    assert main(["history", "tiny/ddp/cpu"]) == 0
    assert rate(capsys.readouterr().out) == "-"  # measured nowhere: no rate
