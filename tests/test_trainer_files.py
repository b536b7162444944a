"""What the OpenTau and LeRobot adapters write for their trainers, read back from the resolved
files: the optimizer fields each optimizer has, the program from the trainer's environment, and
the free-form options passed through as flags with their values."""

from __future__ import annotations

import json

from registry.compose import compose
from registry.resolve import resolve


def opentau_optimizer(*overrides: str) -> dict:
    return json.loads(resolve(compose("pi07/zero2/8xA100", list(overrides))).files["opentau.json"])["optimizer"]


def test_sgd_gets_no_adam_betas_or_eps():
    assert set(opentau_optimizer("train.optimizer.type=sgd")) == {"type", "lr", "weight_decay", "grad_clip_norm"}
    adamw = opentau_optimizer()
    assert adamw["betas"] == [0.9, 0.95] and adamw["eps"] == 1e-08


def exec_line(name: str, *overrides: str) -> str:
    script = resolve(compose(name, list(overrides))).files["launch.sh"]
    return next(line for line in script.splitlines() if line.startswith("exec "))


def test_opentau_train_comes_from_the_trainers_environment_unless_given_as_a_path():
    assert exec_line("pi07/zero2/8xA100", "trainer.env=/x/venv").startswith("exec /x/venv/bin/opentau-train ")
    given = exec_line("pi07/zero2/8xA100", "trainer.env=/x/venv", "trainer.opentau.program=/opt/bin/opentau-train")
    assert given.startswith("exec /opt/bin/opentau-train ")
    relative = exec_line("pi07/zero2/8xA100", "trainer.env=/x/venv", "trainer.opentau.program=tools/opentau-train")
    assert relative.startswith("exec tools/opentau-train ")  # a path of the team's, as given
    assert exec_line("pi07/zero2/8xA100").startswith("exec opentau-train ")


def test_lerobot_options_reach_its_flags_with_their_values():
    line = exec_line("act/ddp/8xA100", "policy.options.temporal_ensemble_coeff=0.01", "dataset.options.episodes=[0,1]")
    assert " --policy.temporal_ensemble_coeff=0.01 " in line
    assert " '--dataset.episodes=[0,1]' " in line


# --- what the import reads back -----------------------------------------------------------------
def test_a_value_read_twice_or_under_two_spellings_is_said(tmp_path):
    """The yaml's inline zero_stage, then the JSON's: the later replaces it, with a note naming
    where; of two spellings of one DeepSpeed key, the first is taken and the other said ignored."""
    from registry.resolve import accelerate

    (tmp_path / "a.yaml").write_text(
        "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 2\n"
    )
    zero = {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True, "gather_16bit_weights_on_model_save": False}
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": zero}))
    recipe, notes = accelerate.import_config(tmp_path / "a.yaml", "H100-SXM", tmp_path / "ds.json")
    assert recipe["backend"]["zero_stage"] == 3 and recipe["backend"]["zero3_save_16bit_model"] is True
    assert list(notes) == [
        "backend.zero_stage: ds.json zero_optimization.stage = 3 replaces 2 read before",
        "ds.json: zero_optimization.gather_16bit_weights_on_model_save = false ignored for"
        " zero_optimization.stage3_gather_16bit_weights_on_model_save",
    ]


def test_an_opentau_config_without_a_policy_section_imports(tmp_path):
    from registry.resolve import importer

    (tmp_path / "a.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    (tmp_path / "c.json").write_text(json.dumps({"policy": None, "steps": 10}))
    setup = importer.Setup(accelerate=tmp_path / "a.yaml", trainer="opentau", trainer_config=tmp_path / "c.json")
    imported = importer.read(setup)
    assert imported.recipe["policy"] == {"type": "unknown"} and imported.recipe["train"]["steps"] == 10


# --- the reader's own rules (registry/trainers/mapping.py) --------------------------------------
def test_a_list_index_past_the_end_pads_with_nulls_up_to_it():
    from registry.trainers import mapping

    doc = {"a": [1]}
    mapping._put(doc, ("a", 2), "x")
    mapping._put(doc, ("b", 1, "c"), 5)
    assert doc == {"a": [1, None, "x"], "b": [None, {"c": 5}]}


def test_what_an_extra_row_replaces_and_what_nothing_holds_are_said():
    from registry.trainers.mapping import Extra, Field, Notes, Reader, Table

    recipe, notes = {}, Notes()
    reader = Reader(recipe, notes)
    table = Table(Field("a.b", "x"), Extra("a", "extra"))
    reader.read(table, {"x": 1, "extra": {"b": 2}, "zzz": 3}, "src.json", {("x",): "src.json:1:2"})
    reader.finish()
    assert recipe == {"a": {"b": 2}}
    assert list(notes) == [
        "a.b: src.json extra.b = 2 replaces 1 read before",
        "src.json zzz = 3: no recipe field holds it; not imported",
    ]


def test_a_value_read_without_a_line_is_not_located_and_auto_is_a_value_unless_the_table_says():
    from registry.trainers.mapping import Field, Notes, Reader, Table

    for table, expected in (
        (Table(Field("a.b", "x")), {"a": {"b": "auto"}}),
        (Table(Field("a.b", "x"), auto=True), {}),
    ):
        recipe, notes = {}, Notes()
        reader = Reader(recipe, notes)
        reader.read(table, {"x": "auto"}, "src.json", {})  # no origins: a value with no line to name
        reader.finish()
        assert recipe == expected and notes.located == {} and list(notes) == []
