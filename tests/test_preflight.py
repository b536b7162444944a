"""Pre-flight against the dataset (docs/preflight.md §dataset): twins made with LeRobot's own API
(tests/data/datasets/, by tests/upstream/dataset_fixtures.py) checked against ACT, diffusion and
SmolVLA recipes; `recipe doctor`, `recipe run`'s refusal and its waiver, `recipe estimate` at the
dataset's image size."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, lerobot_python, run_cli

from registry import estimate as memory
from registry import view
from registry.compose import compose
from registry.run import preflight
from registry.run.preflight import metadata

DATASETS = ROOT / "tests" / "data" / "datasets"
ACT, DIFFUSION, SMOLVLA = "act/ddp/2xH100", "diffusion/ddp/2xH100", "smolvla/ddp/2xH100"
ACT_AT_10_FPS = ["dataset.action_freq=10", "policy.chunk_size=20", "policy.n_action_steps=20"]


def found(target: str, twin: str | None, overrides=(), env=None) -> preflight.Report:
    extra = [f"dataset.root={DATASETS / twin}"] if twin else []
    recipe = compose(target, [*extra, *overrides])
    report = preflight.Report()
    preflight.check_dataset(recipe.data, recipe.origins, ROOT, env if env is not None else {}, report)
    return report


def rules_of(report: preflight.Report, severity: str | None = None) -> set[str]:
    return {p.rule for p in report.problems if severity is None or p.severity == severity}


# --- each policy: one twin matches, each mismatch is reported by its rule ----------------------
MATCHING = [
    (ACT, "toy", ACT_AT_10_FPS),
    (DIFFUSION, "toy", []),
    (DIFFUSION, "toy", ["policy.options.crop_shape=[84,84]"]),
    (SMOLVLA, "two-cameras", []),
]


@pytest.mark.parametrize(("target", "twin", "overrides"), MATCHING)
def test_the_matching_twin_passes_every_dataset_rule(target, twin, overrides):
    report = found(target, twin, overrides)
    assert report.problems == [], [p.render() for p in report.problems]
    assert report.notes == [] and [m.path for m in report.datasets] == [DATASETS / twin / "meta" / "info.json"]


MISMATCHES = [
    (ACT, "two-cameras", ACT_AT_10_FPS, "dataset-cameras", "error"),
    (ACT, "toy", [], "dataset-fps", "error"),
    (ACT, "few-frames", ACT_AT_10_FPS, "dataset-frames", "warning"),
    (ACT, "few-frames", ACT_AT_10_FPS, "dataset-episode-length", "warning"),
    (DIFFUSION, "two-cameras", [], "dataset-cameras", "error"),
    (DIFFUSION, "small-image", ["policy.options.crop_shape=[84,84]"], "dataset-image-size", "error"),
    (DIFFUSION, "mixed-cameras", ["dataset.num_cams=2"], "dataset-image-size", "error"),
    (DIFFUSION, "fps-30", [], "dataset-fps", "error"),
    (DIFFUSION, "few-frames", [], "dataset-frames", "error"),
    (SMOLVLA, "toy", [], "dataset-cameras", "error"),
    (SMOLVLA, "wide-state", ["dataset.num_cams=1"], "dataset-state-size", "error"),
    (SMOLVLA, "wide-state", ["dataset.num_cams=1"], "dataset-action-size", "error"),
    (SMOLVLA, "two-cameras", ["policy.options.max_state_dim=8"], "dataset-state-size", "error"),
]


@pytest.mark.parametrize(("target", "twin", "overrides", "rule", "severity"), MISMATCHES)
def test_each_mismatch_is_reported_by_its_rule(target, twin, overrides, rule, severity):
    report = found(target, twin, overrides)
    hits = [p for p in report.problems if p.rule == rule]
    assert hits and all(p.severity == severity for p in hits), [p.render() for p in report.problems]
    info = str(DATASETS / twin / "meta" / "info.json")
    for p in hits:
        assert info in p.message and p.hint and p.source.startswith("docs/preflight.md §")
        assert p.origin  # at the recipe's line (or the command line) that sets the value


def test_findings_point_at_the_line_that_sets_the_value():
    (fps,) = found(ACT, "toy").problems[:1]
    assert fps.rule == "dataset-fps" and fps.path == "dataset.action_freq"
    text = (ROOT / "recipes" / "policy" / "act.yaml").read_text().splitlines()
    line = int(fps.origin.split(":")[1])
    assert fps.origin.startswith("recipes/policy/act.yaml:") and text[line - 1].strip().startswith("action_freq:")
    (crop,) = [p for p in found(DIFFUSION, "small-image", ["policy.options.crop_shape=[84,84]"]).problems]
    assert crop.origin == "command line" and crop.path == "policy.options.crop_shape"
    assert "observation.images.top is 64 x 64 and the policy crops 84 x 84" in crop.message


def test_the_messages_say_what_fails_and_how_to_fix_it():
    (fps,) = [p for p in found(ACT, "toy").problems if p.rule == "dataset-fps"]
    assert "recorded at 10 fps and the recipe assumes dataset.action_freq 50" in fps.message
    assert "a chunk of 100 actions spans 10.00 s instead of 2.00 s" in fps.message
    assert "set dataset.action_freq=10" in fps.hint
    (frames,) = [p for p in found(DIFFUSION, "few-frames").problems if p.rule == "dataset-frames"]
    assert "leave no frame to sample" in frames.message and "less the last 7" in frames.message
    (state,) = [
        p for p in found(SMOLVLA, "wide-state", ["dataset.num_cams=1"]).problems if p.rule == "dataset-state-size"
    ]
    assert "observation.state has 40 values" in state.message and "max_state_dim 32" in state.message
    assert "policy.options.max_state_dim=40" in state.hint


def test_opentau_resamples_so_only_upsampling_is_a_warning():
    tau = ["dataset.root=" + str(DATASETS / "toy"), "dataset.num_cams=1"]
    down = found("pi07/zero2/8xA100", None, [*tau, "dataset.action_freq=5"])
    assert "dataset-fps" not in rules_of(down)
    up = found("pi07/zero2/8xA100", None, [*tau, "dataset.action_freq=20"])
    assert rules_of(up, "warning") >= {"dataset-fps"} and "dataset-fps" not in rules_of(up, "error")
    assert "dataset-frames" not in rules_of(
        found("pi07/zero2/8xA100", None, [f"dataset.root={DATASETS / 'few-frames'}"])
    )


def test_a_dataset_not_on_this_disk_is_one_note_not_an_error(tmp_path):
    report = found(ACT, None, env={"HF_LEROBOT_HOME": str(tmp_path)})
    assert report.problems == [] and len(report.notes) == 1
    assert "lerobot/aloha_sim_transfer_cube_human: no local meta/info.json" in report.notes[0]
    assert "not downloaded" in report.notes[0]
    assert found("tiny/ddp/cpu", None).notes == []  # the built-in trainer makes its own data


def test_the_local_hugging_face_cache_is_read_without_a_root(tmp_path):
    home = tmp_path / "lerobot"
    (home / "local" / "toy" / "meta").mkdir(parents=True)
    shutil.copyfile(DATASETS / "toy" / "meta" / "info.json", home / "local" / "toy" / "meta" / "info.json")
    report = found(ACT, None, ["dataset.repo_id=local/toy", *ACT_AT_10_FPS], env={"HF_LEROBOT_HOME": str(home)})
    assert report.problems == [] and report.datasets[0].path == home / "local" / "toy" / "meta" / "info.json"
    # LeRobot 0.6.1's own hub cache: datasets--ORG--NAME/snapshots/<commit>, the revision's ref naming it
    hub = home / "hub" / "datasets--local--cams"
    (hub / "snapshots" / "abc123" / "meta").mkdir(parents=True)
    (hub / "refs").mkdir()
    (hub / "refs" / "v3.0").write_text("abc123")
    shutil.copyfile(
        DATASETS / "two-cameras" / "meta" / "info.json", hub / "snapshots" / "abc123" / "meta" / "info.json"
    )
    env = {"HF_LEROBOT_HOME": str(home)}
    report = found(ACT, None, ["dataset.repo_id=local/cams", "dataset.revision=v3.0", *ACT_AT_10_FPS], env=env)
    assert rules_of(report) == {"dataset-cameras"}


@pytest.mark.parametrize(
    ("text", "why"),
    [("{not json", "not JSON"), ('{"fps": 10}', "no `features` mapping"), ("[]", "no `features` mapping")],
)
def test_a_broken_info_json_is_a_note(tmp_path, text, why):
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "info.json").write_text(text)
    report = found(ACT, None, [f"dataset.root={tmp_path}"])
    assert report.problems == [] and len(report.notes) == 1 and why in report.notes[0]


def test_a_pretrained_checkpoints_cameras_and_sizes_are_checked(tmp_path):
    config = {
        "type": "act",
        "input_features": {
            "observation.images.front": {"type": "VISUAL", "shape": [3, 96, 96]},
            "observation.state": {"type": "STATE", "shape": [6]},
        },
        "output_features": {"action": {"type": "ACTION", "shape": [6]}},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    report = found(ACT, "toy", [*ACT_AT_10_FPS, f"policy.pretrained_path={tmp_path}"])
    messages = [p.message for p in report.problems if p.path == "policy.pretrained_path"]
    assert {p.rule for p in report.problems} == {"dataset-cameras", "dataset-state-size", "dataset-action-size"}
    assert any("trained on cameras observation.images.front" in m for m in messages)
    assert any("observation.state of 6 values" in m and "has 14" in m for m in messages)


# --- memory at the dataset's image size --------------------------------------------------------
def write_info(folder: Path, height: int, width: int) -> Path:
    info = json.loads((DATASETS / "toy" / "meta" / "info.json").read_text())
    info["features"]["observation.images.top"]["shape"] = [height, width, 3]
    (folder / "meta").mkdir(parents=True)
    (folder / "meta" / "info.json").write_text(json.dumps(info))
    return folder


def test_activations_scale_with_the_datasets_image_size(tmp_path):
    recipe = view.of(compose(ACT).data)
    part = memory.estimate(recipe)
    small = memory.estimate(recipe, 96 * 96)
    assert small.per_sample_gib == pytest.approx(part.per_sample_gib * 96 * 96 / (480 * 640))
    assert memory.estimate(view.of(compose("pi07/zero2/8xA100").data), 96 * 96) == memory.estimate(
        view.of(compose("pi07/zero2/8xA100").data)
    )  # no frame_shape: OpenTau resizes every image, the dataset's size changes nothing


def test_a_step_that_fits_at_the_parts_size_but_not_the_datasets_is_an_error(tmp_path):
    largest = memory.estimate(view.of(compose(ACT).data)).largest_micro_batch
    big = write_info(tmp_path / "big", 960, 1280)  # four times the part's 480 x 640
    at = [f"dataset.root={big}", *ACT_AT_10_FPS, f"train.micro_batch_size={largest}"]
    [said] = [p for p in found(ACT, None, at).problems if p.rule == "dataset-memory-fit"]
    assert said.severity == "error" and said.path == "train.micro_batch_size"  # the value to lower
    assert "dataset-memory-fit" not in rules_of(found(ACT, None, [*at[:-1], f"train.micro_batch_size={largest // 8}"]))
    assert "dataset-memory-fit" not in rules_of(
        found(ACT, "toy", [*ACT_AT_10_FPS, f"train.micro_batch_size={largest}"])
    )


def test_recipe_estimate_says_which_image_size_it_used(tmp_path):
    toy = DATASETS / "toy"
    r = run_cli("estimate", ACT, f"dataset.root={toy}", "--format", "json")
    assert r.returncode == 0, r.stderr
    frames = json.loads(r.stdout)["frames"]
    assert frames["from"] == "dataset" and frames["pixels"] == 96 * 96 and frames["path"] == str(toy / "meta/info.json")
    r = run_cli("estimate", ACT, env={"HF_LEROBOT_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "activations per frame: the part's 480 x 640 (policy.memory.frame_shape); dataset not read:" in r.stdout


# --- recipe doctor and recipe run --------------------------------------------------------------
def standin_env(tmp_path: Path) -> Path:
    from test_run import make_trainer_env

    return make_trainer_env(tmp_path / "lerobot-env")


CPU_ACT = ["act/ddp/cpu", "hardware.processes_per_node=1", *ACT_AT_10_FPS]


def test_doctor_reports_one_line_each_and_exits_1_on_an_error(tmp_path):
    venv = standin_env(tmp_path)
    args = [*CPU_ACT, f"trainer.env={venv}", f"dataset.root={DATASETS / 'two-cameras'}"]
    r = run_cli("doctor", *args, timeout=120)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.strip().splitlines()
    assert "error[dataset-cameras] dataset.num_cams:" in lines[0] and "has 2 cameras" in lines[0]
    assert lines[-1].startswith("recipe: act/ddp/cpu: 1 error") and "two-cameras/meta/info.json" in lines[-1]
    ok = run_cli("doctor", *CPU_ACT, f"trainer.env={venv}", f"dataset.root={DATASETS / 'toy'}", "--format", "json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    doc = json.loads(ok.stdout)
    assert (
        doc["ok"]
        and doc["errors"] == 0
        and doc["datasets"][0]["cameras"] == [{"name": "observation.images.top", "height": 96, "width": 96}]
    )
    assert doc["host"]["trainer"]["packages"]["lerobot"] == "0.6.1"


def test_doctor_of_a_gpu_cell_needs_no_dataset(tmp_path):
    r = run_cli("doctor", "tiny/ddp/2x1xH100", "--format", "json", env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    doc = json.loads(r.stdout)
    assert r.returncode == (0 if doc["ok"] else 1)
    assert doc["datasets"] == [] and not [n for n in doc["notes"] if n.startswith("dataset")]
    assert doc["host"]["trainer"]["packages"]["torch"]  # the built-in trainer: this interpreter, asked in process
    if not doc["host"]["gpus"]:  # a CPU host: one finding, the GPUs
        assert [p["rule"] for p in doc["problems"]] == ["host-gpus"]


def test_doctor_reads_a_run_folder_and_refuses_bad_input(tmp_path):
    folder = tmp_path / "resolved"
    assert run_cli("resolve", *CPU_ACT, "-o", str(folder)).returncode == 0
    r = run_cli("doctor", str(folder), "--format", "json")
    assert json.loads(r.stdout)["recipe"] == "act/ddp/cpu"
    bad = run_cli("doctor", "no/such/cell")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_run_refuses_a_mismatch_before_launching_unless_waived(tmp_path):
    venv = standin_env(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    args = ["run", *CPU_ACT, f"trainer.env={venv}", "train.steps=2", f"dataset.root={DATASETS / 'two-cameras'}"]
    refused = run_cli(*args, "--output-dir", str(tmp_path / "refused"), env={"STANDIN_OUT": str(out)}, timeout=120)
    assert refused.returncode == 1, refused.stderr
    assert "error[dataset-cameras]" in refused.stderr and "pre-flight: 1 error; nothing was launched" in refused.stderr
    assert "--waive dataset-cameras=" in refused.stderr
    assert not (tmp_path / "refused").exists() and not list(out.iterdir())
    reason = "the policy reads the top camera only"
    waived = run_cli(
        *args, "--output-dir", str(tmp_path / "run"), "--waive", f"dataset-cameras={reason}",
        env={"STANDIN_OUT": str(out)}, timeout=120,
    )  # fmt: skip
    assert waived.returncode == 0, waived.stderr
    assert f"[waived: {reason}]" in waived.stderr and list(out.glob("rank-*.json"))
    kept = json.loads((tmp_path / "run" / preflight.RECORD).read_text())
    assert kept["waived"] == {"dataset-cameras": reason} and kept["problems"][0]["rule"] == "dataset-cameras"


@pytest.mark.parametrize(
    ("waiver", "said"), [("nope=x", "'nope' is not a pre-flight rule"), ("dataset-fps=", "give the reason")]
)
def test_a_waiver_names_a_rule_and_a_reason(waiver, said):
    r = run_cli("run", "tiny/ddp/cpu", "--waive", waiver, "--dry-run")
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_doctor_imports_no_torch_for_a_cpu_recipe():
    code = "import sys; from registry.commands import main; main(['doctor', 'tiny/ddp/cpu']); print('torch' in sys.modules)"
    r = subprocess.run(
        [os.sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env={**os.environ}, timeout=60
    )
    assert r.stdout.strip().splitlines()[-1] == "False", r.stdout + r.stderr


# --- the fixtures are LeRobot's own ------------------------------------------------------------
@pytest.mark.upstream
def test_the_twins_are_what_lerobot_writes(tmp_path):
    python = lerobot_python()  # tests/upstream/lerobot_env.sh builds it (lerobot 0.6.1 with its dataset extra)
    done = subprocess.run(
        [python, str(ROOT / "tests" / "upstream" / "dataset_fixtures.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for committed in sorted(DATASETS.glob("*/meta/info.json")):
        made = tmp_path / committed.relative_to(DATASETS)
        assert json.loads(made.read_text()) == json.loads(committed.read_text()), committed


def test_the_metadata_reader_reads_each_twin():
    toy = metadata.read(DATASETS / "toy" / "meta" / "info.json")
    assert (toy.fps, toy.episodes, toy.frames, toy.version) == (10.0, 4, 200, "v3.0")
    assert [(c.name, c.height, c.width) for c in toy.cameras] == [("observation.images.top", 96, 96)]
    assert toy.vectors["observation.state"] == 14 and toy.vectors["action"] == 14
    assert len(metadata.read(DATASETS / "two-cameras" / "meta" / "info.json").cameras) == 2


def test_a_malformed_preflight_rule_is_one_error_naming_the_file(tmp_path, monkeypatch):
    """The pre-flight rules are checked against the rule meta-schema once per installed state of the
    schema files (a mark beside the verdicts): an edited file is checked again."""
    from registry import files
    from registry.errors import RecipeError
    from registry.run.preflight import rules as preflight_rules
    from registry.validate import verdicts

    folder = tmp_path / "schemas"
    shutil.copytree(files.SCHEMA_DIR, folder)
    doc = json.loads((folder / "preflight.json").read_text())
    doc["rules"][0]["mesage"] = doc["rules"][0].pop("message")
    (folder / "preflight.json").write_text(json.dumps(doc))
    monkeypatch.setattr(files, "SCHEMA_DIR", folder)
    monkeypatch.setattr(preflight_rules, "FILE", folder / "preflight.json")
    for cached in (preflight_rules.document, verdicts._installation):
        cached.cache_clear()
    try:
        with pytest.raises(RecipeError, match=r"preflight\.json"):
            preflight_rules.document()
    finally:
        monkeypatch.undo()
        for cached in (preflight_rules.document, verdicts._installation):
            cached.cache_clear()
    assert preflight_rules.rules()  # the installed file, checked or marked, loads again
