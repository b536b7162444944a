"""The GPU an import assumes without --gpu is said in its notes (docs/failure-modes.md §60), and a
T4 named with --gpu is read (fp16 accepted, bf16 refused: compute capability 7.5)."""

from __future__ import annotations

from registry.resolve import importer
from registry.validate.report import validate_target

YAML = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmixed_precision: {}\nnum_machines: 1\nnum_processes: 2\n"


def _import(tmp_path, precision: str, gpu: str | None):
    (tmp_path / "a.yaml").write_text(YAML.format(precision))
    result = importer.read(importer.Setup(accelerate=tmp_path / "a.yaml", gpu=gpu))
    path = tmp_path / "recipe.yaml"
    path.write_text(importer.render(result, "t/gpu", path))
    return result, [p.rule for p in validate_target(str(path)).problems if p.is_error]


def test_the_assumed_gpu_is_noted(tmp_path):
    result, errors = _import(tmp_path, "bf16", None)
    assert any(n.startswith("hardware.gpu: no --gpu given, so A100-80GB is assumed") for n in result.notes)
    assert result.recipe["hardware"]["gpu"] == "A100-80GB" and not errors


def test_a_named_gpu_is_not_noted_and_t4_is_read(tmp_path):
    result, errors = _import(tmp_path, "fp16", "T4")
    assert not any(n.startswith("hardware.gpu:") for n in result.notes)
    assert result.recipe["hardware"]["gpu"] == "T4" and not errors
    assert _import(tmp_path, "bf16", "T4")[1] == ["bf16-compute-capability"]
    assert _import(tmp_path, "fp16", "Tesla T4")[0].recipe["hardware"]["gpu"] == "T4"  # as nvidia-smi names it


def test_a_part_written_for_another_trainer_is_not_held_against_the_import(tmp_path):
    """LeRobot's pi05 extends the pi05 part, written for OpenTau: its attention_implementation has no
    lerobot-train counterpart, so the import resets it to null with a note instead of a refusal. A
    value the team itself sets is still judged."""
    (tmp_path / "a.yaml").write_text(YAML.format("bf16"))
    flags = "--policy.type=pi05 --dataset.repo_id=lerobot/aloha_sim_insertion_human --policy.push_to_hub=false"
    setup = importer.Setup(accelerate=tmp_path / "a.yaml", trainer="lerobot", trainer_args=flags)
    result = importer.read(setup)
    assert result.part == "pi05" and result.recipe["policy"]["attention_implementation"] is None
    assert any(n.startswith("policy.attention_implementation: the pi05 part's 'eager'") for n in result.notes)
    path = tmp_path / "recipe.yaml"
    path.write_text(importer.render(result, "t/pi05", path))
    assert [p.rule for p in validate_target(str(path)).problems if p.is_error] == []
    edited = path.read_text().replace("attention_implementation: null", "attention_implementation: sdpa")
    path.write_text(edited)
    assert "lerobot-not-applicable" in [p.rule for p in validate_target(str(path)).problems if p.is_error]
    act = importer.read(
        importer.Setup(
            accelerate=tmp_path / "a.yaml",
            trainer="lerobot",
            trainer_args="--policy.type=act --policy.push_to_hub=false",
        )
    )
    assert not any("counterpart" in n for n in act.notes)  # LeRobot's own part: nothing to reset
