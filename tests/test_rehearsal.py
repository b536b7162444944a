"""`recipe run NAME --rehearse` (docs/rehearsal.md): the recipe's real trainer for a few steps, with
random weights and synthetic data made here, nothing fetched.

The pi07 cases run OpenTau's own train() on pi07's real classes (PI07LowLevelPolicy,
Gemma3WithExpertModel, the SpaceTime SigLIP encoder), tiny, in OpenTau's environment
(tests/upstream/opentau_env.sh), offline. At 14 backbone layers, transformers' zeroed multimodal
projector made the gradient norm nan at step 1, as at full size on a GPU
(benchmarks/results/pi07_rehearsal_1xH200.json); the rehearsal now draws such matrices at random
(docs/rehearsal.md, A gradient that is not finite), and a learning rate of 1e8 is its real failing case."""

import json
import math
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, USER_ENV, run_cli, side_venv_python

VENV = Path(USER_ENV.get("RECIPE_OPENTAU_VENV") or ROOT / ".venv-opentau")
BUILD = "bash tests/upstream/opentau_env.sh"
TINY = str(ROOT / "examples" / "pi07-tiny.yaml")  # run from tmp_path: the file by its path
DEEP = "policy.options.vlm_config.gemma{}.num_hidden_layers=14"
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "NO_PROXY": "*",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
}


def opentau_env() -> Path:
    side_venv_python(VENV, "OpenTau", BUILD, "RECIPE_OPENTAU_VENV")
    return VENV


def rehearse(tmp_path, *args, timeout=600):
    out = tmp_path / "rehearsal"
    done = run_cli("run", *args, "--rehearse", "--output-dir", str(out), cwd=tmp_path, env=OFFLINE, timeout=timeout)
    report = json.loads((out / "rehearsal.json").read_text()) if (out / "rehearsal.json").exists() else None
    return done, report, out


@pytest.mark.upstream
def test_tiny_pi07_rehearses_two_steps_on_cpu_with_nothing_fetched(tmp_path):
    done, report, out = rehearse(tmp_path, TINY, f"trainer.env={opentau_env()}", "--steps", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert report["steps"] == 2 and len(report["losses"]) == 2
    assert all(math.isfinite(v) for v in report["losses"] + report["grad_norms"])
    assert report["optimizer_steps"] == [2]  # the probe saw each update of the one rank
    assert report["max_rss_gib"][0] > 0.1
    assert "synthetic" in report["synthetic"] and "weights random" in report["synthetic"]
    assert "weights and data are synthetic" in done.stderr
    # what it trained on was made here, in OpenTau's own layout, and the trainer was pointed at it
    info = json.loads((out / "synthetic" / "dataset" / "meta" / "info.json").read_text())
    assert info["total_frames"] >= 100 and "observation.images.camera1" in info["features"]
    assert info["features"]["observation.images.camera0"]["shape"] == [112, 112, 3]
    config = json.loads((out / "run" / "opentau.json").read_text())
    assert config["policy"]["pretrained_path"] is None
    assert config["save_checkpoint"] is False
    assert config["policy"]["discrete_action_tokenizer_path"] == str(out / "synthetic" / "fast")
    assert config["dataset_mixture"]["datasets"][0]["root"] == str(out / "synthetic" / "dataset")


@pytest.mark.upstream
def test_a_deep_pi07_trains_once_no_weight_matrix_is_left_at_zero(tmp_path):
    """14 layers: with the projector transformers zeroes, the nan norm of step 1 (docs/rehearsal.md)."""
    deep = (DEEP.format("3_config.text_config"), DEEP.format("_expert_config"))
    done, report, _ = rehearse(tmp_path, TINY, f"trainer.env={opentau_env()}", "--steps", "2", *deep)
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(math.isfinite(n) for n in report["grad_norms"])
    assert report["drawn_zero_matrices"] == [
        "model.gemma3_with_expert.gemma3.model.multi_modal_projector.mm_input_projection_weight"
    ]
    assert "drawn at random instead" in done.stderr


@pytest.mark.upstream
def test_a_loss_that_is_not_finite_fails_the_rehearsal(tmp_path):
    lr = ("train.optimizer.lr=1.0e+8", "train.scheduler.peak_lr=1.0e+8", "train.scheduler.decay_lr=1.0e+8")
    done, report, _ = rehearse(tmp_path, TINY, f"trainer.env={opentau_env()}", "--steps", "3", *lr)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "rehearsal failed: the loss is nan at step 2" in done.stderr
    assert math.isfinite(report["losses"][0]) and not math.isfinite(report["losses"][1])


def test_the_built_in_trainer_rehearses_on_its_synthetic_episodes(tmp_path):
    done, report, _ = rehearse(tmp_path, "tiny/ddp/cpu", "--steps", "8", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(report["losses"]) == 8 and all(math.isfinite(v) for v in report["losses"])
    assert report["samples_per_s"] > 0 and report["samples_per_s_interval"]["steps"] == 6  # after one warm-up step
    assert len(report["optimizer_steps"]) == 2  # both ranks reported


def test_steps_goes_with_rehearse(tmp_path):
    done = run_cli("run", "tiny/ddp/cpu", "--steps", "3", cwd=tmp_path)
    assert done.returncode != 0 and "--steps goes with --rehearse" in done.stderr
    done = run_cli("run", "tiny/ddp/cpu", "--rehearse", "--steps", "0", cwd=tmp_path)
    assert done.returncode == 2 and "at least 1" in done.stderr


@pytest.mark.upstream
def test_doctor_asks_the_trainer_env_for_what_opentau_train_imports(tmp_path):
    import sys

    ready = run_cli("doctor", TINY, f"trainer.env={opentau_env()}", cwd=tmp_path, timeout=120)
    assert ready.returncode == 0 and "ready" in ready.stdout, ready.stdout[-2000:]
    # the project's own venv has torch and accelerate, not OpenTau nor what its train() imports
    lacking = run_cli("doctor", TINY, f"trainer.env={sys.prefix}", cwd=tmp_path, timeout=120)
    assert lacking.returncode == 1
    said = next(line for line in (lacking.stdout + lacking.stderr).splitlines() if "error[host-trainer-env]" in line)
    assert "has no opentau" in said and "wandb" in said and "gymnasium" in said and "accelerate or" not in said


def test_bench_measures_an_opentau_cell_through_its_rehearsal(tmp_path):
    """`recipe bench` of an OpenTau recipe: two launches of its rehearsal, the interval over both."""
    r = run_cli(
        "bench",
        str(TINY),
        f"trainer.env={opentau_env()}",
        "--steps",
        "2",
        "--warmup",
        "0",
        "--repeats",
        "2",
        "--format",
        "json",
        cwd=tmp_path,
        env=OFFLINE,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (row,) = json.loads(r.stdout)["results"]
    assert row["skipped"] is None and row["samples_per_s"] > 0
    assert row["samples_per_s_interval"]["launches"] == 2 and row["samples_per_s_interval"]["steps"] == 4


@pytest.mark.upstream
def test_tune_measures_an_opentau_recipe_through_its_rehearsal_keeping_accumulation(tmp_path):
    """`recipe tune` of an OpenTau recipe: each candidate one rehearsal launch at its own
    accumulation, and a tuned.yaml that validates and says how it was measured."""
    r = run_cli(
        "tune",
        str(TINY),
        f"trainer.env={opentau_env()}",
        *("--backends", "ddp", "--global-batch", "2", "--steps", "2", "--warmup", "0", "--tie-runs", "0"),
        *("--output-dir", "out"),
        cwd=tmp_path,
        env=OFFLINE,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    points = [json.loads(line) for line in (tmp_path / "out" / "points.jsonl").read_text().splitlines()]
    measured = {(p["micro_batch_size"], p["gradient_accumulation_steps"]) for p in points if p["status"] == "measured"}
    assert measured == {(2, 1), (1, 2)}, points
    assert all(p["samples_per_s"] > 0 and p["measured_allocated_gib"] > 0 for p in points)  # RSS on CPU
    tuned = yaml.safe_load((tmp_path / "out" / "tuned.yaml").read_text())
    assert tuned["recipe"]["name"] == "tuned/pi07-tiny"
    (result,) = tuned["results"]
    assert "rehearsed" in result["source"], result
    assert run_cli("validate", "out/tuned.yaml", cwd=tmp_path).returncode == 0
