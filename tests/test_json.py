"""`--format json` on the read-only verbs: one document on stdout, stable keys, the same exit
codes as the text output (which stays the default)."""

import json

from conftest import run_cli

PROBLEM_KEYS = {"severity", "rule", "path", "message", "origin", "hint", "source", "related", "from"}
REPORT_KEYS = {"target", "status", "exit_code", "errors", "warnings", "problems", "failure"}


def as_json(*args, env=None):
    r = run_cli(*args, "--format", "json", env=env)
    assert "Traceback" not in r.stderr, r.stderr
    return r, json.loads(r.stdout)


def test_validate_json_has_every_field_of_a_problem():
    r, doc = as_json("validate", "pi07/zero2/8xA100", "policy.n_obs_steps=8")
    assert r.returncode == 1 and doc["exit_code"] == 1 and doc["valid"] is False
    (report,) = doc["reports"]
    assert set(report) == REPORT_KEYS and report["status"] == "invalid" and report["failure"] is None
    (problem,) = report["problems"]
    assert set(problem) == PROBLEM_KEYS
    assert problem["severity"] == "error" and problem["rule"] == "obs-history"
    assert problem["path"] == "policy.n_obs_steps" and problem["origin"] == "command line"
    assert problem["hint"].startswith("set both") and "failure-modes.md" in problem["source"]
    assert problem["related"] == [{"path": "dataset.n_obs_history", "origin": "recipes/pi07/zero2/8xA100.yaml:16:3"}]
    text = run_cli("validate", "pi07/zero2/8xA100", "policy.n_obs_steps=8")  # text stays the default
    assert text.stdout.startswith("command line: error[obs-history]")


def test_validate_json_several_targets_and_exit_codes(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: [tiny/ddp/cpu]\ntrain: {micro_batch_size: lots}\n")
    r, doc = as_json("validate", "tiny/ddp/cpu", "act/fsdp/2xH100", str(bad))
    assert r.returncode == 1 and [x["status"] for x in doc["reports"]] == ["valid", "valid", "invalid"]
    warned = doc["reports"][1]
    assert warned["warnings"] >= 1 and {p["severity"] for p in warned["problems"]} == {"warning"}
    (problem,) = doc["reports"][2]["problems"]
    assert problem["origin"] == f"{bad}:2:9" and problem["rule"] == "type"
    r, doc = as_json("validate", "tiny/ddp/cpu", "nope/x/y")
    assert r.returncode == 2 and doc["exit_code"] == 2
    unknown = doc["reports"][1]
    assert unknown["status"] == "not validated" and "unknown recipe" in unknown["failure"] and unknown["problems"] == []
    r, doc = as_json("validate", str(tmp_path / "broken.yaml"))
    assert r.returncode == 2 and doc["reports"][0]["failure"]
    usage = run_cli("validate", "--format", "json")  # a usage error stays one line on stderr
    assert usage.returncode == 2 and usage.stdout == "" and usage.stderr.count("\n") == 1


def test_validate_json_of_a_malformed_file(tmp_path):
    f = tmp_path / "malformed.yaml"
    f.write_text("train: [1\n")
    r, doc = as_json("validate", str(f))
    assert r.returncode == 1
    (report,) = doc["reports"]
    assert report["status"] == "invalid" and report["failure"] and report["problems"][0]["origin"].startswith(str(f))


def test_validate_files_in_a_recipes_tree_are_validated_as_what_they_are():
    """A part, the base, the catalog and an overlay, given as files (as the pre-commit hook gives
    them), are each checked as --all checks them, not composed as free-standing recipes."""
    files = [
        "recipes/policy/pi07.yaml",
        "recipes/backend/zero2.yaml",
        "recipes/base.yaml",
        "recipes/catalog/gpus.yaml",
        "recipes/pi07/zero2/8xA100.yaml",
    ]
    r, doc = as_json("validate", *files)
    assert r.returncode == 0, doc
    assert [x["target"] for x in doc["reports"]] == files and all(x["status"] == "valid" for x in doc["reports"])


def test_diff_json():
    # --all: every difference, a default left out on one side too (tests/test_rough_edges.py)
    r, doc = as_json("diff", "pi07/zero2/8xA100", "pi07/fsdp/8xA100", "--all")
    assert r.returncode == 1 and set(doc) == {"a", "b", "same", "differences"} and doc["same"] is False
    by_path = {d["path"]: d for d in doc["differences"]}
    kind = by_path["backend.kind"]
    assert kind["a"]["value"] == "deepspeed" and kind["b"]["value"] == "fsdp"
    assert kind["a"]["origin"].startswith("recipes/backend/zero2.yaml:")
    assert by_path["backend.auto_wrap_policy"]["a"] is None  # absent on one side
    text = run_cli("diff", "pi07/zero2/8xA100", "pi07/fsdp/8xA100", "--all").stdout.splitlines()
    assert len(text) == len(doc["differences"])
    r, doc = as_json("diff", "tiny/ddp/cpu", "tiny/ddp/cpu")
    assert r.returncode == 0 and doc["same"] is True and doc["differences"] == []


def test_history_json(tmp_path):
    env = {"RECIPE_PATH": f"team-a={tmp_path / 'team-a'}", "RECIPE_CONFIG": str(tmp_path / "sources.yaml")}
    (tmp_path / "team-a").mkdir()
    assert run_cli("publish", "pi07/zero2/8xA100", "--replace", "--to", "team-a", env=env).returncode == 0
    r, doc = as_json("history", "pi07/zero2/8xA100", env=env)
    assert r.returncode == 0 and doc["name"] == "pi07/zero2/8xA100"
    v, shipped = doc["versions"]  # team-a's, then the bundled file as shipped
    assert shipped["version"] == "bundled:pi07/zero2/8xA100@1" and shipped["published"].startswith("shipped with")
    assert set(v) == {
        "version",
        "source",
        "number",
        "published",
        "sha256",
        "file",
        "samples_per_s",
        "peak_allocated_gib",
        "summary",
        "refused",  # null: the file is the one published and first seen
    }
    assert v["refused"] is None
    assert v["version"] == "team-a:pi07/zero2/8xA100@1" and v["number"] == 1 and len(v["sha256"]) == 64
    assert isinstance(v["samples_per_s"], float)
    none = run_cli("history", "tiny/ddp/8xA100", "--format", "json")  # an untuned cell has no version
    assert none.returncode == 2 and none.stdout == "" and none.stderr.count("\n") == 1


def test_estimate_json():
    r, doc = as_json("estimate", "pi07/zero2/8xA100")
    assert r.returncode == 0 and doc["recipe"] == "pi07/zero2/8xA100"
    assert {"breakdown_gib", "total_gib", "fraction", "peak_phase", "largest_micro_batch"} <= set(doc)
    r, doc = as_json("estimate", "tiny/ddp/cpu")  # nothing to estimate on CPU: a note, not a failure
    assert r.returncode == 0 and doc == {
        "recipe": "tiny/ddp/cpu",
        "device": "cpu",
        "note": "runs on CPU (hardware.gpu: null): no GPU memory to estimate",
    }


def test_show_json():
    r, doc = as_json("show", "tiny/ddp/cpu")
    assert r.returncode == 0 and doc["backend"]["kind"] == "ddp"


BENCH_KEYS = {
    "recipe",
    "skipped",
    "samples_per_s",
    "samples_per_s_interval",
    "peak_allocated_gib",
    "peak_reserved_gib",
    "shares",
    "phase_peaks_gib",
    "resident_gib",
    "micro_batch_size",
    "world_size",
    "run_dir",
    "recorded_in",
}


def test_bench_json_of_skipped_cells(tmp_path):
    """Cells that bench skips before training (a trainer without a rehearsal; invalid) go through
    the JSON path without launching anything."""
    r = run_cli("bench", "act/ddp/8xA100", "tiny/ddp/cpu", "train.micro_batch_size=0", "--format", "json", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr  # every cell skipped, as in text
    doc = json.loads(r.stdout)
    assert doc["steps"] == 20 and doc["warmup"] == 5
    assert [row["recipe"] for row in doc["results"]] == ["act/ddp/8xA100", "tiny/ddp/cpu"]
    assert all(set(row) == BENCH_KEYS for row in doc["results"])
    assert "lerobot" in doc["results"][0]["skipped"] and doc["results"][1]["skipped"].startswith("invalid")
    assert doc["results"][0]["samples_per_s"] is None and not list(tmp_path.iterdir())


def test_bench_row_of_a_measured_cell():
    from pathlib import Path

    from registry.commands.bench import outcome_json
    from registry.run.bench import Outcome

    shares = {"data": 0.1, "forward": 0.3, "backward": 0.5, "optimizer": 0.05, "other": 0.05}
    row = outcome_json(
        Outcome(
            "tiny/ddp/cpu",
            samples_per_s=123.4,
            peak_allocated_gib=0.5,
            peak_reserved_gib=0.75,
            shares=shares,
            micro_batch_size=8,
            world_size=2,
            run_dir=Path("runs/bench/x"),
        )
    )
    assert set(row) == BENCH_KEYS - {"recorded_in"} and row["skipped"] is None
    assert row["samples_per_s"] == 123.4 and row["shares"] == shares and row["run_dir"] == "runs/bench/x"
    json.dumps(row)
