"""Classes of behaviour no other test pinned (issue 41): an import without an accelerate yaml,
LeRobot's own defaults on import, the quoting of every shell line the registry emits, the
LeRobot optimizer flags per type, and the item a bare `--resume` (or another sort) picks."""

from __future__ import annotations

import shlex

import yaml
from conftest import run_cli

from registry.compose import compose
from registry.resolve import importer, resolve

YAML = "compute_environment: LOCAL_MACHINE\ndistributed_type: NO\nmixed_precision: 'no'\nnum_machines: 1\nnum_processes: 1\n"
ACT = "--policy.type=act --dataset.repo_id=lerobot/aloha_sim_insertion_human --policy.push_to_hub=false"


def _exec_flags(bundle) -> list[str]:
    """The trainer's flags on launch.sh's exec line: what follows `-m <the training module>`."""
    argv = shlex.split(next(line for line in bundle.files["launch.sh"].splitlines() if line.startswith("exec ")))
    return argv[argv.index("-m") + 2 :]


def _yaml(tmp_path):
    (tmp_path / "a.yaml").write_text(YAML)
    return tmp_path / "a.yaml"


def _written(result, tmp_path, name="r.yaml"):
    path = tmp_path / name
    path.write_text(importer.render(result, "t/" + path.stem, path))
    return path


# ---- 1. an import without --accelerate-config


def test_a_lerobot_import_needs_no_accelerate_yaml(tmp_path):
    """Without the yaml the import takes what `accelerate launch` does without a config file (one
    process per GPU it sees, one machine, mixed_precision no), with one note; --launch-args still
    names the count."""
    r = run_cli("import", "--trainer", "lerobot", "--trainer-args", ACT, "-o", "r.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if line.startswith("note: accelerate:")]
    assert len(said) == 1 and "no --accelerate-config" in said[0] and "1 assumed" in said[0], r.stderr
    doc = yaml.safe_load((tmp_path / "r.yaml").read_text())
    assert doc["backend"] == {"kind": "ddp", "mixed_precision": "no"}
    assert (doc["hardware"]["gpus_per_node"], doc["hardware"]["nodes"]) == (1, 1)
    accelerate = yaml.safe_load(resolve(compose(str(tmp_path / "r.yaml"))).files["accelerate.yaml"])
    assert (accelerate["distributed_type"], accelerate["num_processes"]) == ("NO", 1)

    r = run_cli(
        "import", "--trainer", "lerobot", "--trainer-args", ACT, "--launch-args", "--num_processes 2",
        "-o", "two.yaml", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if line.startswith("note: accelerate:")]
    assert len(said) == 1 and "assumed" not in said[0] and "one machine" in said[0]
    accelerate = yaml.safe_load(resolve(compose(str(tmp_path / "two.yaml"))).files["accelerate.yaml"])
    assert (accelerate["distributed_type"], accelerate["num_processes"]) == ("MULTI_GPU", 2)


def test_a_deepspeed_json_without_its_yaml_is_one_line(tmp_path):
    (tmp_path / "ds.json").write_text("{}")
    r = run_cli("import", "--deepspeed-config", "ds.json", "-o", "r.yaml", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--deepspeed-config needs --accelerate-config" in r.stderr and not (tmp_path / "r.yaml").exists()


# ---- 2. LeRobot's own defaults on import


def test_flags_at_lerobots_defaults_are_dropped_or_carried_with_one_note(tmp_path):
    """Spelt-out defaults the recipe gives anyway are not written; those it would not give (the
    recipe's base has num_workers 2, log_every 10) are written; one note lists every one; and the
    imported recipe resolves to the flags LeRobot ran with."""
    spelt = "--wandb.enable=false --batch_size=8 --steps=100000 --seed=1000 --log_freq=200 --save_freq=20000"
    result = importer.read(importer.Setup(_yaml(tmp_path), trainer="lerobot", trainer_args=f"{ACT} {spelt}"))
    train = result.recipe.get("train", {})
    for gone in ("micro_batch_size", "steps", "seed"):
        assert gone not in train, gone
    assert "wandb" not in result.recipe["trainer"]["lerobot"]
    assert (train["log_every"], train["num_workers"], train["checkpoint"]["every"]) == (200, 4, 20000)
    said = [n for n in result.notes if "LeRobot's defaults" in n]
    assert len(said) == 1, result.notes
    dropped, carried = said[0].split("; written, as the recipe alone would give another value: ")
    for flag in ("--batch_size=8", "--steps=100000", "--seed=1000", "--wandb.enable=false"):
        assert flag in dropped and flag not in carried, flag
    assert "--log_freq=200 (given; the recipe alone gives 10)" in carried
    assert "--num_workers=4 (not given; the recipe alone gives 2)" in carried
    flags = _exec_flags(resolve(compose(str(_written(result, tmp_path)))))
    for ran in spelt.split() + ["--num_workers=4"]:
        assert ran in flags, ran


def test_a_flag_off_lerobots_default_is_an_ordinary_override(tmp_path):
    setup = importer.Setup(_yaml(tmp_path), trainer="lerobot", trainer_args=f"{ACT} --steps=500 --num_workers=3")
    result = importer.read(setup)
    assert (result.recipe["train"]["steps"], result.recipe["train"]["num_workers"]) == (500, 3)
    said = " ".join(n for n in result.notes if "LeRobot's defaults" in n)
    assert "--steps" not in said and "--num_workers" not in said
