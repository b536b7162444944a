"""Pieces of `recipe run`, `bench`, `tune` and the trainer, in-process and value by value: the
pooled outcome of several launches, the bench table, the tune plot and progress lines, what the
data preflight sees, the package probe, and checkpoint pruning. tests/test_run.py, test_tune.py
and test_train.py run them whole."""

from __future__ import annotations

import re
from pathlib import Path

from registry import view
from registry.compose import compose
from registry.run import bench, plot
from registry.run.bench import Outcome
from registry.run.tune import MEASURED, OOM, Candidate, Point, Search

# --- bench ---------------------------------------------------------------------------------------


def test_one_launch_is_its_own_outcome_and_several_pool_their_phases():
    one = Outcome("a", samples_per_s=10.0, phase_peaks_gib={"forward": 2.0}, shares={"forward": 1.0}, rates=[[10.0]])
    assert bench.repeated([one]) is one
    two = Outcome("a", samples_per_s=12.0, phase_peaks_gib={"forward": 3.0}, shares={"forward": 0.5}, rates=[[12.0]])
    pooled = bench.repeated([one, two])
    assert pooled.phase_peaks_gib == {"forward": 3.0} and pooled.shares == {"forward": 0.75}
    assert pooled.rates == [[10.0], [12.0]] and pooled.samples_per_s == 11.0


def test_a_skipped_cell_is_a_row_of_dashes():
    text = bench.report([Outcome("tiny/ddp/2xH100", skipped="no GPU here")])
    row = next(line for line in text.splitlines() if line.startswith("tiny/ddp/2xH100 "))
    assert set(row.split()[1:]) == {"-"} and len(row.split()) == 4 + len(bench.PHASES) + 2
    assert "tiny/ddp/2xH100: skipped: no GPU here" in text


# --- tune ----------------------------------------------------------------------------------------
def measured(backend: str, micro: int, rate: float, gib: float = 3.0) -> Point:
    return Point(Candidate(backend, micro, 16 // micro), MEASURED, samples_per_s=rate, peak_allocated_gib=gib)


def test_the_plot_spans_its_micro_batches_and_keeps_every_mark_inside():
    points = [measured("ddp", 1, 10.0), measured("ddp", 4, 30.0), measured("zero2", 2, 20.0)]
    points.append(Point(Candidate("zero2", 8, 2), OOM))
    text = plot.svg(points, 80.0, "x/y")
    height = float(re.search(r'height="([\d.]+)"', text).group(1))
    xs = sorted({float(x) for x in re.findall(r'<circle cx="([\d.]+)"', text)})
    assert xs[0] == plot.MARGIN and xs[-1] < plot.WIDTH - plot.MARGIN  # 1 at the left; 8 (oom) at the right
    assert max(float(y) for y in re.findall(r' y="([\d.]+)"', text)) < height  # the legend too
    line = float(re.search(r'<line [^>]* y1="([\d.]+)"', text).group(1))
    label = float(re.search(r'y="([\d.]+)" text-anchor="end" fill="#c00">GPU capacity 80 GiB', text).group(1))
    assert label == line - 4  # the capacity's label sits on its line


def noisy(rates: dict):
    def measure(c: Candidate, warmup: int, steps: int) -> Point:
        got = Point(c, MEASURED, peak_allocated_gib=2.0, peak_reserved_gib=2.0, launches=[rates[c.backend]])
        got.samples_per_s = got.figure.median
        return got

    return measure


def test_the_progress_says_each_run_and_a_pooled_figure_after_two_launches():
    lines, logged = [], []
    rates = {"ddp": [100.0, 101.0, 99.0], "zero2": [95.0, 96.0, 94.0]}
    search = Search([Point(Candidate(b, 8, 2)) for b in rates], warmup=0, steps=3, tie_runs=2, progress=lines.append)
    search.logged = logged.append
    search.run(noisy(rates))
    done = [line for line in lines if "running" not in line]
    assert done[0].startswith("rung 0: ddp mb8x2: ") and ", peak 2.00 GiB" in done[0]
    assert "over its launches" not in done[0]
    assert any("over its launches" in line for line in done[2:])  # the second launch of one
    assert [e["interval"] is not None for e in logged] == [True] * len(logged)
    assert logged[0]["interval"] == noisy(rates)(Candidate("ddp", 8, 2), 0, 3).figure.json()


def test_a_spent_budget_is_said():
    lines, now = [], [0.0]

    def measure(c, warmup, steps):
        now[0] += 60
        return noisy({"ddp": [10.0], "zero2": [20.0]})(c, warmup, steps)

    points = [Point(Candidate(b, 4, 4)) for b in ("ddp", "zero2")]
    Search(points, warmup=0, steps=1, budget_s=30, clock=lambda: now[0], progress=lines.append).run(measure)
    assert lines[-1] == "budget spent: launching nothing more"


def test_nothing_measured_has_no_verdict():
    from registry.run import tune

    assert tune.verdict(Search([], warmup=0, steps=1), None) == ""


# --- the data preflight ------------------------------------------------------------------------
def test_the_frame_a_policy_sees_is_its_crop_else_its_resize():
    from registry.run.preflight import data
    from registry.run.preflight.metadata import Camera, DatasetMeta

    meta = DatasetMeta(Path("info.json"), 30.0, 10, 1000, (Camera("top", 480, 640),))
    recipe = view.of(compose("act/ddp/8xA100").data)
    assert data._pair([96, 128]) == (96, 128) and data._pair([96]) is None
    assert data.frame_pixels(meta, data.Policy(recipe, {"resize_shape": [96, 128]})) == 96 * 128
    assert data.frame_pixels(meta, data.Policy(recipe, {"crop_shape": [84, 84], "resize_shape": [96, 128]})) == 84 * 84
    assert data.frame_pixels(meta, data.Policy(recipe, {})) == 480 * 640


def test_a_history_longer_than_the_episodes_is_said_at_n_obs_steps():
    from registry.run.preflight import data
    from registry.run.preflight.metadata import DatasetMeta

    meta = DatasetMeta(Path("info.json"), 30.0, 10, 50, ())  # 5 frames an episode
    recipe = view.of(compose("act/ddp/8xA100", ["policy.n_obs_steps=8", "policy.chunk_size=4"]).data)
    found = data.episode_length(meta, data.Policy(recipe, {}))
    assert [f.path for f in found] == [("policy", "n_obs_steps")]


# --- the package probe ---------------------------------------------------------------------------
class Metadata:
    """importlib.metadata's answers for the probe: versions by distribution name."""

    class PackageNotFoundError(Exception):
        pass

    def __init__(self, versions: dict):
        self.versions = versions

    def version(self, name):
        if name not in self.versions:
            raise self.PackageNotFoundError(name)
        return self.versions[name]

    def distribution(self, name):
        raise self.PackageNotFoundError(name)


def test_the_nccl_wheel_torch_would_load_is_named():
    from registry.run import probe

    assert probe._nccl(Metadata({"nvidia-nccl-cu12": "2.27.3"})) == "2.27.3"
    assert probe._nccl(Metadata({})) is None


def test_a_requirement_without_a_specifier_is_met():
    from registry.run import probe

    assert probe._satisfies("1.0", "") is True and probe._satisfies("1.0", " ") is True
    assert probe._satisfies("1.0", ">=2") is False and probe._satisfies("2.1", ">=2") is True


# --- the trainer's checkpoints ------------------------------------------------------------------
def test_pruning_keeps_the_newest_checkpoints_and_nothing_else_is_touched(tmp_path):
    from registry.train import checkpoint

    for name in ("000002", "000004", "000006", ".000008", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / "000010").write_text("a file, not a checkpoint")
    checkpoint._prune(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".000008", "000004", "000006", "000010", "notes"]


def test_the_tuned_file_extends_the_cell_with_the_picks_batch_and_its_measurement(tmp_path):
    import yaml

    from registry.run.tune import Target, report

    doc = compose("tiny/zero2/cpu").data
    outcome = Outcome("tiny/zero2/cpu", samples_per_s=50.0, micro_batch_size=4, gradient_accumulation_steps=2)
    outcome.doc, outcome.rates, outcome.shares = doc, [[49.0, 50.0, 51.0]], {"forward": 1.0}
    best = Point(Candidate("zero2", 4, 2), MEASURED, samples_per_s=50.0, peak_allocated_gib=0.5, launches=[[50.0]])
    best.peak_reserved_gib, best.steps, best.outcome = 0.6, 3, outcome
    path = report.write_overlay(tmp_path, Target("tiny/cpu", "tiny", "cpu"), best, "recipe tune tiny/cpu", None)
    written = yaml.safe_load(path.read_text())
    assert written["extends"] == ["tiny/zero2/cpu"] and written["recipe"]["name"] == "tuned/tiny/zero2/cpu"
    assert written["train"] == {"micro_batch_size": 4, "gradient_accumulation_steps": 2}
    assert written["results"][0]["gradient_accumulation_steps"] == 2 and written["results"][0]["steps"] == 3


def test_a_tune_that_measures_nothing_exits_1_and_leaves_its_table(tmp_path, monkeypatch, capsys):
    from registry.run import tune

    def failing(target, sets, folder, allow_mismatch):
        return lambda c, warmup, steps: Point(c, tune.FAILED, reason="boom")

    monkeypatch.setattr(tune, "measure_with_bench", failing)
    args = ("tiny/cpu", [], ["ddp"], 8, None, 0, 1, str(tmp_path / "out"), None, False, "recipe tune tiny/cpu")
    assert tune.main(*args) == 1
    assert "recipe tune: nothing measured; see" in capsys.readouterr().err
    assert (tmp_path / "out" / "table.txt").is_file() and not (tmp_path / "out" / "tuned.yaml").exists()


# --- where the data preflight looks for a dataset's info.json ----------------------------------
def test_a_datasets_info_is_looked_for_at_its_root_else_its_revisions_snapshot(tmp_path):
    import os

    from registry.run.preflight.metadata import INFO, candidates, find

    hub = tmp_path / "home" / "hub" / "datasets--org--set"
    for snapshot in ("old", "new", "pinned"):
        (hub / "snapshots" / snapshot).mkdir(parents=True)
    os.utime(hub / "snapshots" / "old", (1, 1))
    env = {"HF_LEROBOT_HOME": str(tmp_path / "home")}
    cached = tmp_path / "home" / "org" / "set" / INFO
    newest_first = [hub / "snapshots" / s / INFO for s in ("pinned", "new", "old")]
    os.utime(hub / "snapshots" / "new", (2, 2))
    os.utime(hub / "snapshots" / "pinned", (3, 3))
    assert candidates({"repo_id": "org/set"}, tmp_path, env) == [cached, *newest_first]
    (hub / "refs").mkdir()
    (hub / "refs" / "v2.0").write_text("old\n")
    (hub / "refs" / "main").write_text("new\n")
    assert candidates({"repo_id": "org/set", "revision": "v2.0"}, tmp_path, env)[1:] == [
        hub / "snapshots" / "old" / INFO
    ]
    assert candidates({"repo_id": "org/set"}, tmp_path, env)[1:] == [hub / "snapshots" / "new" / INFO]
    # a root is taken from the folder the trainer runs in
    (tmp_path / "run" / "data" / "meta").mkdir(parents=True)
    (tmp_path / "run" / "data" / INFO).write_text(
        '{"fps": 30, "total_episodes": 2, "total_frames": 100, "features": {}}'
    )
    assert find({"root": "data"}, tmp_path / "run", env).episodes == 2


def test_bench_says_what_record_does(capsys):
    import pytest

    from registry import commands

    with pytest.raises(SystemExit):
        commands.main(["bench", "--help"])
    assert "append the results, with provenance, to each recipe's own file" in " ".join(capsys.readouterr().out.split())


def test_bench_records_the_command_as_typed(monkeypatch):
    import sys

    from registry import commands
    from registry.run import bench as module

    seen = []
    monkeypatch.setattr(module, "main", lambda *args: seen.append(args[6]) or 0)
    argv = ["recipe", "bench", "tiny/ddp/cpu", "train.steps=3", "--steps", "2"]
    monkeypatch.setattr(sys, "argv", argv)
    assert commands.main(argv[1:]) == 0
    assert seen == ["recipe bench tiny/ddp/cpu train.steps=3 --steps 2"]


def test_the_synthetic_data_phases_span_a_full_turn():
    import torch

    from registry.train.data import Synthetic

    phase = Synthetic(compose("tiny/ddp/cpu").data, torch.device("cpu")).phase
    assert 0.0 <= float(phase.min()) < 1.0 and 5.0 < float(phase.max()) < 6.28


# --- tune's records ---------------------------------------------------------------------------------
def test_a_candidate_that_breaks_two_rules_is_pruned_naming_both():
    from registry.run.tune.space import Candidate, judge, parse_target

    sets = ["backend.mixed_precision=fp16", "policy.n_obs_steps=100000"]
    checked = judge(parse_target("tiny/cpu"), Candidate("ddp", 4, 1), sets)
    assert (checked.point.status, checked.point.reason) == ("pruned", "invalid: cpu-half-precision, obs-history")


def test_the_results_and_points_name_every_field_a_reader_takes():
    """results.json's candidates and points.jsonl's lines, key by key (benchmarks/grid.py and the
    catalog read them by these names)."""
    from registry.run.tune import MEASURED
    from registry.run.tune.measure import point_record
    from registry.run.tune.report import results_json
    from registry.run.tune.space import Candidate, Point

    best = Point(Candidate("zero2", 4, 2), MEASURED, samples_per_s=50.0, peak_allocated_gib=0.5, launches=[[50.0]])
    said = results_json([best], best, {"target": "tiny/cpu"})
    assert said["winner"] == said["candidates"][0] and said["target"] == "tiny/cpu"
    assert list(said["winner"]) == [
        *("backend", "micro_batch_size", "gradient_accumulation_steps", "gradient_checkpointing", "status"),
        *("reason", "rung", "steps", "samples_per_s", "samples_per_s_interval", "peak_allocated_gib"),
        *("peak_reserved_gib", "predicted_allocated_gib", "predicted_fraction", "run_dir"),
    ]
    assert said["winner"]["backend"] == "zero2" and said["winner"]["samples_per_s_interval"] is not None
    entry = {
        "point": best,
        "status": MEASURED,
        "reason": "",
        "rung": 0,
        "warmup": 2,
        "steps": 3,
        "samples_per_s": 50.0,
        "interval": {"low": 49.0, "high": 51.0},
        "peak_allocated_gib": 0.5,
        "peak_reserved_gib": 0.6,
        "run_dir": "runs/x",
    }
    line = point_record(entry, ("tiny/zero2/cpu", []), None, "recipe tune tiny/cpu", "cpu", {})
    assert line["samples_per_s_interval"] == {"low": 49.0, "high": 51.0} and line["backend"] == "zero2"
    assert list(line) == [
        *("recipe", "overrides", "backend", "micro_batch_size", "gradient_accumulation_steps"),
        *("gradient_checkpointing", "status", "reason", "rung", "warmup", "steps", "samples_per_s"),
        *("samples_per_s_interval", "predicted_allocated_gib", "predicted_fraction", "measured_allocated_gib"),
        *("measured_reserved_gib", "measured_fraction", "capacity_gib", "hardware", "versions", "date"),
        *("command", "run_dir"),
    ]
    assert line["measured_fraction"] is None and line["run_dir"] == "runs/x"


# --- what the run records about this host and its data -----------------------------------------------
def test_a_host_without_a_hardware_name_says_why_and_what_to_add(monkeypatch, capsys):
    from types import SimpleNamespace

    from registry.run import machine

    monkeypatch.setattr(machine, "gpus", lambda: [SimpleNamespace(name="NVIDIA FOO 12GB")] * 2)
    monkeypatch.setattr(machine, "hardware_name", lambda host: None)
    assert machine.print_hardware_name() == 2
    assert capsys.readouterr().err == (
        "no hardware name for this host: NVIDIA FOO 12GB: not one catalog entry"
        " (hint: add the card to catalog/gpus.yaml, with its device_names)\n"
    )
    monkeypatch.setattr(machine, "gpus", lambda: [])
    assert machine.print_hardware_name() == 2
    assert capsys.readouterr().err == "no hardware name for this host: nvidia-smi found no GPU\n"


def test_the_datasets_info_is_hashed_where_the_trainer_reads_it(tmp_path):
    import hashlib

    from registry.run import envlock

    (tmp_path / "run" / "data" / "meta").mkdir(parents=True)
    info = tmp_path / "run" / "data" / envlock.INFO
    info.write_text('{"fps": 50}')
    assert envlock._info_hash(tmp_path / "run", "data") == hashlib.sha256(b'{"fps": 50}').hexdigest()
    assert envlock._info_hash(tmp_path / "elsewhere", str(tmp_path / "run" / "data")) == envlock._info_hash(
        tmp_path / "run", "data"
    )
    assert envlock._info_hash(tmp_path, "none") == f"not found (no {envlock.INFO} under dataset.root)"


def test_the_progress_bar_counts_steps(tmp_path, monkeypatch, capsys):
    from registry.train import metrics

    monkeypatch.setenv(metrics.TERMINAL, "80")
    log = metrics.Log(tmp_path / "metrics.jsonl", main=True, total_steps=4, progress=True)
    try:
        assert log.bar is not None and log.bar.unit == "step" and log.bar.total == 4
    finally:
        log.close()
