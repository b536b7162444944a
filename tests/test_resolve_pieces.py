"""Pieces of resolve and import read by value in-process: which launcher a recipe gets, a Kubernetes
job's name from a name with punctuation at its ends, what each value of a recipe is used by, and
what the accelerate import writes (a CPU job, a DeepSpeed file given apart, the precision accelerate
refuses beside that file, the checkpoint a ZeRO-3 setup writes)."""

from __future__ import annotations

import hashlib
import json

import pytest

from registry.compose import compose
from registry.resolve import accelerate, fields, kubernetes, launch

GPU = "H100-SXM"


# --- the launcher (docs/failure-modes.md §25) ---------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "launcher"),
    [
        ([], "accelerate"),
        (["trainer.lerobot.api=parallelism"], "torchrun"),  # LeRobot's parallelism API refuses accelerate yamls
        (["trainer.lerobot.api=parallelism", "launch.launcher=accelerate"], "accelerate"),  # the recipe's choice wins
        (["launch.launcher=torchrun"], "torchrun"),
    ],
)
def test_the_launcher_a_lerobot_recipe_gets(overrides, launcher):
    assert launch.launcher(compose("act/ddp/8xA100", overrides).data) == launcher


# --- Kubernetes names ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("_exp/a_", "exp-a"),  # punctuation at either end is no part of the label
        ("9lives/x", "r-9lives-x"),  # a label starts with a letter
        ("-/9-", "r-9"),
    ],
)
def test_a_job_name_from_a_name_with_punctuation_at_its_ends(name, label):
    doc = compose("pi07/zero2/8xA100").data
    doc["recipe"]["name"] = name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    assert kubernetes.job_name(doc) == f"{label}-{digest}"


# --- what uses each value (resolve/fields.py) ---------------------------------------------------
def test_a_value_no_trainer_reads_is_classed_not_applicable_with_its_rule():
    used = fields.uses(compose("act/ddp/8xA100").data)
    assert used[("policy", "use_torch_compile")] == (
        "not applicable",
        "lerobot-policy-compile: ACT has no compile_model",
    )
    assert used[("train", "micro_batch_size")][0] == "trainer"


# --- the accelerate import ----------------------------------------------------------------------
def test_a_multi_cpu_job_is_a_cpu_recipe_without_use_cpu(tmp_path):
    (tmp_path / "a.yaml").write_text("distributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 2\n")
    recipe, _ = accelerate.import_config(tmp_path / "a.yaml", GPU)
    assert recipe["hardware"] == {"gpu": None, "gpus_per_node": 0, "processes_per_node": 2, "nodes": 2}


def _deepspeed_setup(tmp_path, zero: dict) -> tuple:
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": zero}))
    (tmp_path / "a.yaml").write_text(
        "distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  zero3_init_flag: true\n"
    )
    return tmp_path / "a.yaml", tmp_path / "ds.json"


def test_a_deepspeed_file_given_apart_is_read(tmp_path):
    """--deepspeed-config D.json: the file the yaml does not name is read all the same."""
    path, ds = _deepspeed_setup(tmp_path, {"stage": 2})
    renamed = ds.rename(tmp_path / "elsewhere.json")
    recipe, _ = accelerate.import_config(path, GPU, deepspeed_json=renamed)
    assert recipe["backend"]["kind"] == "deepspeed" and recipe["backend"]["zero_stage"] == 2


@pytest.mark.parametrize("gathers", [True, False])
def test_what_a_zero3_setup_saves_is_what_the_recipe_says(tmp_path, gathers):
    zero = {"stage": 3, "stage3_gather_16bit_weights_on_model_save": gathers}
    path, ds = _deepspeed_setup(tmp_path, zero)
    recipe, notes = accelerate.import_config(path, GPU, deepspeed_json=ds)
    assert recipe["train"]["checkpoint"]["consolidated"] is gathers
    said = [n for n in notes if n.startswith("train.checkpoint.consolidated")]
    assert said == (
        []
        if gathers
        else [
            "train.checkpoint.consolidated: false, as the setup does not gather 16-bit weights on save"
            " under ZeRO-3 (its checkpoints are sharded: save_state)"
        ]
    )


def test_a_zero2_setup_says_nothing_of_its_checkpoint(tmp_path):
    path, ds = _deepspeed_setup(tmp_path, {"stage": 2, "stage3_gather_16bit_weights_on_model_save": False})
    recipe, notes = accelerate.import_config(path, GPU, deepspeed_json=ds)
    assert recipe["backend"]["zero_stage"] == 2 and "checkpoint" not in recipe.get("train", {})
    assert not [n for n in notes if n.startswith("train.checkpoint")]


def test_the_yamls_precision_beside_a_deepspeed_file_is_kept_as_written(tmp_path):
    """accelerate refuses mixed_precision in the yaml beside a deepspeed_config_file; the import keeps
    it where the rule reports it at its line. The same value as a launch flag is not refused."""
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}))
    text = "distributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: bf16\n"
    (tmp_path / "a.yaml").write_text(text + "deepspeed_config:\n  deepspeed_config_file: ds.json\n")
    recipe, notes = accelerate.import_config(tmp_path / "a.yaml", GPU)
    assert recipe["backend"]["accelerate"] == {"mixed_precision": "bf16"}
    assert notes.located[("backend", "accelerate", "mixed_precision")] == f"{tmp_path / 'a.yaml'}:3:1"
    (tmp_path / "a.yaml").write_text(
        text.replace("mixed_precision: bf16\n", "") + "deepspeed_config:\n  deepspeed_config_file: ds.json\n"
    )
    recipe, _ = accelerate.import_config(tmp_path / "a.yaml", GPU, launch={"mixed_precision": "bf16"})
    assert "accelerate" not in recipe["backend"]
