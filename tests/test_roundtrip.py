"""Resolve -> import -> resolve gives the same files, for every valid bundled cell whose trainer
`recipe import` reads (OpenTau, LeRobot): one field table per config drives both directions."""

import contextlib
import io
import json
import shlex

import pytest
import yaml
from conftest import bundled_matrix

from registry.commands import main
from registry.compose import compose
from registry.resolve import resolve
from registry.resolve.lock import LOCK

IMPORTABLE = ("opentau", "lerobot")


def listed_cells() -> list[str]:
    """Every cell `recipe list --all` shows."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["list", "--all"]) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split()[0] == "NAME"
    return [line.split()[0] for line in lines[1:] if line.strip() and not line.startswith("(")]


CELLS = [
    c
    for c, cell in bundled_matrix().items()
    if cell.report.exit_code == 0 and cell.recipe.data["trainer"]["kind"] in IMPORTABLE
]


def trainer_flags(script: str) -> list[str]:
    """The trainer's flags on launch.sh's exec line: what follows `-m <the training module>`."""
    argv = shlex.split(next(line for line in script.splitlines() if line.startswith("exec ")))
    module = next(i for i, token in enumerate(argv) if token.startswith("lerobot."))
    return [token for token in argv[module + 1 :] if token != "$@"]  # launch.sh passes its own arguments on


def test_every_importable_cell_is_covered(matrix):
    """Every valid importable cell that `recipe list --all` shows is tested (the list is read here,
    not at collection, where every xdist worker would build it)."""
    assert sorted(listed_cells()) == sorted(matrix)  # so CELLS, drawn from the matrix, is what users see
    kinds = {matrix[c].recipe.data["trainer"]["kind"] for c in CELLS}
    assert kinds == set(IMPORTABLE) and len(CELLS) > 150
    assert {"pi07/zero2/8xA100", "pi07/fsdp/8xA100", "act/ddp/8xA100"} <= set(CELLS)


@pytest.mark.parametrize("cell", CELLS)
def test_resolve_import_resolve_is_byte_identical(tmp_path, capsys, matrix, cell):
    doc = matrix[cell].recipe.data
    first = matrix[cell].bundle.files
    out = tmp_path / "first"
    out.mkdir()
    for name, text in first.items():
        (out / name).write_text(text)

    dest = tmp_path / "imported.yaml"
    args = ["import", "--accelerate-config", str(out / "accelerate.yaml"), "--name", cell, "-o", str(dest)]
    if doc["hardware"]["gpu"]:
        args += ["--gpu", doc["hardware"]["gpu"]["name"]]  # the yaml says how many processes, not which GPU
    if doc["trainer"]["kind"] == "opentau":
        args += ["--trainer", "opentau", "--trainer-config", str(out / "opentau.json")]
    else:
        args += ["--trainer", "lerobot", "--trainer-args", shlex.join(trainer_flags(first["launch.sh"]))]
    code = main(args)
    said = capsys.readouterr()
    assert code == 0, said.out + said.err  # the imported recipe validates
    # every key of a resolved file has a row: the import places all of it; the flags at LeRobot's own
    # defaults are listed in one note, dropped or carried (registry/trainers/lerobot_defaults.py)
    defaults = "note: lerobot-train flags at LeRobot's defaults: "
    notes = [line for line in said.err.splitlines() if line.startswith("note:")]
    assert [line for line in notes if not line.startswith(defaults)] == []

    # launch.sh exports the recipe's environment, which no file the import reads carries
    env = [f"env.{k}={json.dumps(str(v))}" for k, v in doc["env"].items()]
    second = resolve(compose(str(dest), env)).files
    assert list(second) == list(first)
    for name, text in first.items():
        if name == LOCK:  # its inputs are the imported file, not the parts: the outputs must agree
            assert yaml.safe_load(second[name])["outputs"] == yaml.safe_load(text)["outputs"]
        else:
            assert second[name] == text, name


def test_import_places_or_reports_every_key(tmp_path, capsys):
    """What no row maps lands in the recipe's pass-through sections or in a note; computed values
    are checked once the file that sets their inputs has been read."""
    (tmp_path / "a.yaml").write_text(
        "distributed_type: DEEPSPEED\nnum_processes: 4\ngpu_ids: all\nmachine_rank: 1\n"
        "deepspeed_config: {deepspeed_config_file: ds.json}\n"
    )
    ds = {
        "train_batch_size": 64,
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": "auto",
        "bf16": {"enabled": True},
        "optimizer": {"type": "AdamW"},
        "zero_optimization": {
            "stage": 3,
            "stage3_max_live_parameters": 1e9,
            "gather_16bit_weights_on_model_save": True,
        },
        "steps_per_print": 101,
    }
    (tmp_path / "ds.json").write_text(json.dumps(ds))
    trainer = {
        "dataset_mixture": {"datasets": [{"repo_id": "a/b"}, {"repo_id": "c/d"}], "max_frames": 7},
        "policy": {"type": "pi05", "optimizer_lr": 1e-4, "tokenizer_max_length": 48},
        "batch_size": 12,
        "dataloader_batch_size": 4,
        "gradient_accumulation_steps": 2,
        "steps": 100,
        "val_freq": 10,
    }
    (tmp_path / "c.json").write_text(json.dumps(trainer))
    dest = tmp_path / "r.yaml"
    args = ["--trainer", "opentau", "--trainer-config", str(tmp_path / "c.json"), "-o", str(dest)]
    main(["import", "--accelerate-config", str(tmp_path / "a.yaml"), *args])
    said = capsys.readouterr()
    notes = [line for line in said.err.splitlines() if line.startswith("note:")]
    recipe = yaml.safe_load(dest.read_text())
    assert recipe["backend"]["accelerate"] == {"gpu_ids": "all"}
    assert recipe["backend"]["deepspeed_json"] == {"optimizer": {"type": "AdamW"}}
    assert recipe["backend"]["zero3_save_16bit_model"] is True  # DeepSpeed's other spelling
    assert recipe["trainer"]["opentau"]["config"] == {"val_freq": 10}
    assert recipe["policy"]["options"] == {"tokenizer_max_length": 48}
    assert recipe["dataset"]["options"] == {"max_frames": 7}
    for text in (
        "a.yaml machine_rank",
        "ds.json zero_optimization.stage3_max_live_parameters",
        "c.json policy.optimizer_lr",
        "c.json dataset_mixture.datasets.1",
    ):
        assert any(text in note for note in notes), text
    # what DeepSpeed and OpenTau refuse at start-up is an error of the import, not a note
    assert "error[import-conflict] ds.json train_batch_size is 64, but train.micro_batch_size" in said.out  # 4 x 2 x 4
    assert "error[import-conflict] c.json batch_size is 12, but train.micro_batch_size" in said.out
    assert not any("steps_per_print" in note for note in notes)  # 100 + 1, once c.json gave the steps
