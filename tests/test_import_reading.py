"""`recipe import` read in-process: each refusal of a team's files as one problem at its line
(rule, path, message and hint by value), the launch flags accelerate takes beside --config_file,
and what the import writes into the recipe where no file says it (docs/failure-modes.md §12,
§31). tests/test_import_faults.py drives the same refusals through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry.errors import Exit, Problem, RecipeError
from registry.load import Loaded
from registry.resolve import accelerate, importer
from registry.trainers.mapping import Notes

GPU = "H100-SXM"
DEEPSPEED = "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: {}\n"


def refusal(tmp_path: Path, text: str, **kwargs) -> RecipeError:
    (tmp_path / "a.yaml").write_text(text)
    with pytest.raises(RecipeError) as raised:
        accelerate.import_config(tmp_path / "a.yaml", GPU, **kwargs)
    assert raised.value.exit_code == Exit.INVALID
    return raised.value


# --- the accelerate yaml -------------------------------------------------------------------------
def test_a_distributed_type_that_is_no_name_is_refused_at_its_line(tmp_path):
    said = refusal(tmp_path, "num_processes: 2\ndistributed_type: [FSDP]\n").problem
    assert said == Problem(
        "error",
        "import-value",
        "distributed_type",
        "['FSDP'] is not a distributed_type name (known: NO, MULTI_GPU, MULTI_CPU, DEEPSPEED, FSDP)",
        f"{tmp_path / 'a.yaml'}:2:1",
    )


@pytest.mark.parametrize("kind", ["MULTI_GPU", "DEEPSPEED", "FSDP"])
def test_a_distributed_job_without_num_processes_is_refused(tmp_path, kind):
    said = refusal(tmp_path, f"distributed_type: {kind}\n").problem
    assert said.rule == "import-value" and said.origin == str(tmp_path / "a.yaml")
    assert said.message.startswith("no num_processes: accelerate launch refuses it")
    assert said.hint == "give the launch's flags with --launch-args '--num_processes N --num_machines M'"
    (tmp_path / "a.yaml").write_text("mixed_precision: bf16\n")  # no distributed_type: one process, no count
    recipe, _ = accelerate.import_config(tmp_path / "a.yaml", GPU)
    assert recipe["hardware"] == {"gpu": GPU, "gpus_per_node": 1, "nodes": 1}
    recipe, _ = accelerate.import_config(tmp_path / "a.yaml", GPU, launch={"num_processes": 4})
    assert recipe["hardware"]["gpus_per_node"] == 4  # a flag counts as the yaml's key


def test_a_count_that_is_a_template_is_refused_at_its_line():
    loaded = Loaded("a.yaml", {"num_processes": "${NUM_GPUS}"}, {("num_processes",): "a.yaml:2:16"})
    with pytest.raises(RecipeError) as raised:
        accelerate._count(loaded, "num_processes")
    assert raised.value.problem == Problem(
        "error",
        "import-value",
        "num_processes",
        "'${NUM_GPUS}' is not a whole number, and accelerate launch needs one",
        "a.yaml:2:16",
        "fill in the template first (this is the value accelerate would be given)",
    )


def test_a_missing_deepspeed_file_is_named_with_the_flag_that_gives_it(tmp_path):
    said = refusal(tmp_path, DEEPSPEED.format("nope.json"))
    assert str(said) == (
        f"{tmp_path / 'a.yaml'}: deepspeed_config_file 'nope.json': no such file next to the yaml"
        " (hint: pass it with --deepspeed-config D.json)"
    )
    too_long = refusal(tmp_path, DEEPSPEED.format("a" * 5000))
    assert str(too_long) == f"{tmp_path / 'a.yaml'}: deepspeed_config_file: cannot look it up: File name too long"


def test_a_broken_deepspeed_json_is_named_as_the_deepspeed_config(tmp_path):
    (tmp_path / "ds.json").write_text('{"a": ')
    said = refusal(tmp_path, DEEPSPEED.format("ds.json")).problem
    assert said.message == "not a DeepSpeed config: Expecting value" and said.origin.endswith("ds.json:1:7")


def test_what_the_yaml_sets_is_located_at_its_line(tmp_path):
    (tmp_path / "f.yaml").write_text(
        "distributed_type: FSDP\nnum_processes: 8\nmixed_precision: bf16\nfsdp_config:\n  fsdp_version: 2\n"
    )
    _, notes = accelerate.import_config(tmp_path / "f.yaml", GPU)
    at = f"{tmp_path / 'f.yaml'}"
    assert notes.located == {("backend", "mixed_precision"): f"{at}:3:1", ("backend", "version"): f"{at}:5:3"}


# --- keys accelerate refuses beside a deepspeed_config_file (docs/failure-modes.md §12) ----------
SECTION = {"deepspeed_config_file": "ds.json", "zero_stage": 2, "zero3_init_flag": True}
ORIGINS = {("deepspeed_config", "zero_stage"): "a.yaml:5:3", ("mixed_precision",): "a.yaml:2:1"}


def test_refused_keys_are_kept_as_the_team_wrote_them_at_their_line():
    data = {"distributed_type": "DEEPSPEED", "mixed_precision": "bf16", "deepspeed_config": dict(SECTION)}
    recipe, notes = {}, Notes()
    rest = accelerate._keep_refused(data, ORIGINS, recipe, notes, frozenset(data))
    assert recipe == {"backend": {"accelerate": {"deepspeed_config": {"zero_stage": 2}, "mixed_precision": "bf16"}}}
    assert notes.located == {
        ("backend", "accelerate", "deepspeed_config", "zero_stage"): "a.yaml:5:3",
        ("backend", "accelerate", "mixed_precision"): "a.yaml:2:1",
    }
    assert rest == {
        "distributed_type": "DEEPSPEED",
        "deepspeed_config": {"deepspeed_config_file": "ds.json", "zero3_init_flag": True},
    }


@pytest.mark.parametrize(
    "data",
    [
        {"distributed_type": "FSDP", "deepspeed_config": dict(SECTION)},  # not a DeepSpeed launch
        {"distributed_type": "DEEPSPEED", "deepspeed_config": {"zero_stage": 2}},  # no file beside them
        {"distributed_type": "DEEPSPEED", "deepspeed_config": "ds.json"},  # no section
    ],
)
def test_nothing_is_refused_where_accelerate_refuses_nothing(data):
    recipe, notes = {}, Notes()
    assert accelerate._keep_refused(data, ORIGINS, recipe, notes, frozenset(data)) is data
    assert recipe == {} and notes.located == {}


def test_a_conflict_without_a_line_is_said_at_the_file():
    said = accelerate._launch_conflicts({"num_machines": 2}, {}, "acc.yaml", 4, 2, False)
    assert [p.origin for p in said] == ["acc.yaml"]


# --- accelerate launch flags given beside --config_file ------------------------------------------
def test_launch_flags_in_both_spellings():
    assert accelerate.launch_flags("--num_processes 8 --num-machines=2 --mixed_precision bf16") == {
        "num_processes": 8,
        "num_machines": 2,
        "mixed_precision": "bf16",
    }
    assert accelerate.launch_flags("") == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("--Xnum_processes 2", "--launch-args: '--Xnum_processes' is not one of --num_processes, --num_machines,"),
        ("-num_processes 2", "--launch-args: '-num_processes' is not one of"),
        ("--num_processes", "--launch-args: --num_processes needs a value"),
        ("--num_processes eight", "--launch-args: --num_processes 'eight' is not a int"),
    ],
)
def test_launch_flags_accelerate_would_not_take(text, says):
    with pytest.raises(RecipeError) as raised:
        accelerate.launch_flags(text)
    assert str(raised.value).startswith(says)


# --- the trainer's config and what the import decides -------------------------------------------
def test_an_opentau_policy_type_that_is_no_name_is_refused_at_its_line(tmp_path):
    (tmp_path / "a.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    (tmp_path / "c.json").write_text(json.dumps({"policy": {"type": ["pi07"], "n_obs_steps": 1}}))
    setup = importer.Setup(accelerate=tmp_path / "a.yaml", trainer="opentau", trainer_config=tmp_path / "c.json")
    with pytest.raises(RecipeError) as raised:
        importer.read(setup)
    assert raised.value.problem == Problem(
        "error", "import-value", "policy.type", "['pi07'] is not a policy type name", f"{tmp_path / 'c.json'}:1:13"
    )


def test_a_team_script_is_a_command_trainer_of_an_unknown_policy(tmp_path):
    (tmp_path / "a.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    result = importer.read(importer.Setup(accelerate=tmp_path / "a.yaml", gpu="H100", program="fit.py"))
    assert result.recipe["trainer"] == {"kind": "command", "command": {"program": "fit.py"}}
    assert result.recipe["policy"] == {"type": "unknown"} and result.part is None
    result = importer.read(importer.Setup(accelerate=tmp_path / "a.yaml", gpu="H100"))
    assert result.recipe["trainer"] == {"kind": "command", "command": {"program": "train.py"}}
    assert result.notes[0] == (
        "trainer.command.program: the training script is not named; train.py is written (--program)"
    )


def test_a_value_the_team_sets_is_not_reset_for_another_trainers_part():
    """pi05's part (OpenTau's) sets attention_implementation; a LeRobot import that extends it gets
    null there with a note, unless the team set a value of its own, which validation judges."""
    recipe, notes = {"trainer": {"kind": "lerobot"}, "policy": {"attention_implementation": "sdpa"}}, Notes()
    importer._unset_what_the_trainer_cannot_take(recipe, "pi05", notes)
    assert recipe["policy"]["attention_implementation"] == "sdpa"
    assert not any(n.startswith("policy.attention_implementation") for n in notes)
    recipe, notes = {"trainer": {"kind": "lerobot"}}, Notes()
    importer._unset_what_the_trainer_cannot_take(recipe, "pi05", notes)
    assert recipe["policy"]["attention_implementation"] is None
    assert (
        "policy.attention_implementation: the pi05 part's 'eager' has no lerobot counterpart; null here"
        in "\n".join(notes)
    )
