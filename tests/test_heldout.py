"""benchmarks/grid.py evaluate: held-out points are those the estimator was not fitted on (another
recipe, micro batch or accumulation than the calibration files'); the error is
|predicted / measured - 1|, summarised as count, median, worst and under-predictions, overall, per
backend and apart for accumulation 1 and above it, each judged by its own bar."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "heldout_points.json"


@pytest.fixture(scope="module")
def grid():
    spec = importlib.util.spec_from_file_location("grid", ROOT / "benchmarks" / "grid.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def points():
    return json.loads(FIXTURE.read_text())["points"]


def test_calibration_set_is_the_fitted_points(grid):
    keys = grid.calibration_keys()
    assert len(keys) == 36 + 48  # accumulation 1; accumulation > 1 (ref-100m's grid, ref-1b at 8 x 4)
    assert ("ref-100m/ddp/2xH100", 2, 1) in keys and ("ref-1b/fsdp2/2xH100", 16, 1) in keys
    assert ("ref-100m/zero3/2xH100", 1, 32) in keys and ("ref-1b/zero3-offload/2xH100", 8, 4) in keys
    assert ("ref-1b/fsdp-grad-op/2xH100", 4, 1) not in keys and ("ref-100m/ddp/2xH100", 4, 1) not in keys
    assert ("ref-100m/ddp/2xH100", 32, 1) not in keys  # the grid's accumulation-1 points stay held out
    assert not {k for k in keys if k[2] > 1 and k[1] in (3, 6, 12)}  # the held-out accumulation grid


def test_picks_out_held_out_points(grid):
    kept, left = grid.heldout(points(), grid.calibration_keys())
    assert [(p["recipe"], p["micro_batch_size"], grid.accumulation(p)) for p in kept] == [
        ("ref-100m/ddp/2xH100", 4, 1),  # calibrated backend, other micro batch
        ("ref-100m/zero3-offload/2xH100", 2, 1),  # calibrated micro batch, other backend
        ("ref-1b/fsdp-grad-op/2xH100", 4, 1),
        ("ref-1b/zero2/2xH100", 12, 1),
        ("ref-1b/zero2/2xH100", 4, 8),  # calibrated pair at accumulation 1, not at 8
    ]
    # ref-100m ddp 2 and ref-1b fsdp 16 (accumulation 1), ref-1b ddp 8 x 4 (accumulation calibration)
    assert left == {"calibration": 3, "not measured": 2}


def test_median_worst_and_under_predictions(grid):
    kept, _ = grid.heldout(points(), grid.calibration_keys())
    guesses = {  # ratios 1.05, 1.10, 1.20, 0.95, 0.90
        ("ref-100m/ddp/2xH100", 1): 2.1,
        ("ref-100m/zero3-offload/2xH100", 1): 4.4,
        ("ref-1b/fsdp-grad-op/2xH100", 1): 12.0,
        ("ref-1b/zero2/2xH100", 1): 19.0,
        ("ref-1b/zero2/2xH100", 8): 12.6,
    }
    rows = grid.errors(kept, lambda p: guesses[p["recipe"], grid.accumulation(p)])
    overall = grid.stats(rows)
    assert overall["count"] == 5
    assert overall["median"] == pytest.approx(0.10)
    assert overall["worst"] == pytest.approx(0.20)
    assert overall["worst_point"] == "ref-1b/fsdp-grad-op/2xH100 micro 4 accumulation 1"
    assert overall["over_5_percent"] == 3  # 0.05 itself is not over
    assert overall["under_predicted"] == 2 and overall["under_rate"] == pytest.approx(0.4)
    assert overall["under_5_percent"] == 1 and overall["worst_under"] == pytest.approx(0.10)
    assert grid.stats([r for r in rows if r["backend"] == "zero2"])["worst"] == pytest.approx(0.10)
    assert grid.stats([])["count"] == 0


@pytest.mark.parametrize(
    ("group", "median", "worst", "under", "met"),
    [
        ("accumulation 1", 0.05, 0.10, 3, True),  # issue 15's bar: no limit on under-predictions
        ("accumulation 1", 0.051, 0.10, 0, False),
        ("accumulation > 1", 0.03, 0.08, 0, True),
        ("accumulation > 1", 0.031, 0.08, 0, False),
        ("accumulation > 1", 0.03, 0.081, 0, False),
        ("accumulation > 1", 0.01, 0.04, 1, False),  # one point under by more than 5%
    ],
)
def test_each_group_has_its_own_bar(grid, group, median, worst, under, met):
    summary = {"count": 24, "median": median, "worst": worst, "under_5_percent": under}
    assert grid.judge(group, summary, 24)["met"] is met
    assert grid.judge(group, {**summary, "count": 23}, 24)["met"] is False


def test_evaluate_writes_the_report(grid, tmp_path, capsys):
    out = tmp_path / "heldout.json"
    code = grid.main(["evaluate", str(FIXTURE), "--output", str(out), "--min-points", "1"])
    report = json.loads(out.read_text())
    assert report["overall"]["count"] == 5 and set(report["by_backend"]) == {
        "ddp",
        "zero3-offload",
        "fsdp-grad-op",
        "zero2",
    }
    assert report["groups"]["accumulation 1"]["count"] == 4 and report["groups"]["accumulation > 1"]["count"] == 1
    assert set(report["acceptance"]["groups"]) == {"accumulation 1", "accumulation > 1"}
    assert code == (0 if report["acceptance"]["met"] else 1)
    assert "held out: 5 points" in capsys.readouterr().out


def test_committed_report_meets_both_bars(grid, tmp_path):
    """benchmarks/results/heldout.json recomputed from the committed measurements: the estimator
    change that breaks a held-out point fails here, not only on the next GPU session."""
    results = ROOT / "benchmarks" / "results"
    sources = [
        results / "grid_2xH100_heldout.json",
        results / "grid_2xH100_ref-100m.json",
        results / "tune_2xH100_ref-1b_partial" / "points.jsonl",
        results / "grid_4xH200_accumulation.json",
        results / "grid_4xH200_accumulation_4ranks.json",
    ]
    out = tmp_path / "heldout.json"
    assert grid.main(["evaluate", *map(str, sources), "--output", str(out)]) == 0
    report = json.loads(out.read_text())
    many = report["groups"]["accumulation > 1"]
    assert many["count"] >= 54 and many["under_5_percent"] == 0
    assert {r["recipe"].split("/")[2] for r in report["points"]} >= {"2xH100", "4xH100"}
    assert {r["backend"] for r in report["points"] if r["gradient_accumulation_steps"] > 1} == set(
        grid.BACKENDS.split(",")
    )
    assert {r["recipe"].split("/")[0] for r in report["points"] if r["gradient_accumulation_steps"] > 1} == {
        "ref-100m",
        "ref-1b",
    }


def test_grid_keeps_the_global_batch(grid):
    configs = grid.configs(["ref-1b"], ["ddp", "fsdp"], [1, 2, 4, 8, 16, 32], "2xH100", 64, 0, 2)
    assert [(c["micro_batch_size"], c["gradient_accumulation_steps"]) for c in configs[:6]] == [
        (1, 32),
        (2, 16),
        (4, 8),
        (8, 4),
        (16, 2),
        (32, 1),
    ]
    assert all(c["global_batch"] == 64 for c in configs)
    shards = [grid.shard(configs, f"{i}/4") for i in range(4)]
    assert sorted(grid.key(c) for s in shards for c in s) == sorted(map(grid.key, configs))
    assert "indivisible" in grid.configs(["ref-1b"], ["ddp"], [3], "2xH100", 64, 0, 2)[0]


def _grid_point(backend, micro, sps, wall=40.0, status="ok"):
    return {
        "policy": "ref-1b",
        "backend": backend,
        "micro_batch_size": micro,
        "gradient_accumulation_steps": 64 // (micro * 2),
        "samples_per_s": sps,
        "wall_s": wall,
        "status": status,
    }


@pytest.mark.parametrize(
    ("pick", "tune_wall", "ooms", "met"),
    [
        (("zero2", 16), 200.0, 0, True),  # 96% of the best, 200 s of the grid's 800 s, no OOM
        (("zero2", 8), 200.0, 0, False),  # 50% of the best
        (("zero2", 16), 201.0, 0, False),  # just over a quarter of the grid's wall time
        (("zero2", 16), 100.0, 2, False),  # two out-of-memory runs of one backend
    ],
)
def test_a_tune_run_is_judged_against_the_grid(grid, pick, tune_wall, ooms, met):
    points = [_grid_point("ddp", 16, 100.0, 200.0), _grid_point("zero2", 16, 96.0, 200.0)]
    points += [_grid_point("zero2", 8, 50.0, 100.0)] + [_grid_point("fsdp", m, 10.0, 100.0) for m in (1, 2, 4)]
    tune = {
        "winner": {"backend": pick[0], "micro_batch_size": pick[1], "gradient_accumulation_steps": 64 // (pick[1] * 2)},
        "candidates": [{"backend": "ddp", "micro_batch_size": 16, "status": "oom"} for _ in range(ooms)],
    }
    verdict = grid.judge_tune({"points": points}, tune, tune_wall, "ref-1b")
    assert verdict["met"] is met
    assert verdict["grid_best"]["backend"] == "ddp" and verdict["grid_wall_s"] == 800.0
    # added checkpointing is outside the grid; a configuration tune could run that the grid lacks
    # is not: the grid's best is then a bound, never met
    tune["candidates"].append({"backend": "ddp", "micro_batch_size": 16, "gradient_checkpointing": True})
    assert grid.judge_tune({"points": points}, tune, tune_wall, "ref-1b")["grid_missing"] == []
    tune["candidates"].append({"backend": "fsdp", "micro_batch_size": 32, "status": "pruned"})
    partial = grid.judge_tune({"points": points}, tune, tune_wall, "ref-1b")
    assert partial["grid_missing"] == ["fsdp mb32"] and partial["met"] is False


def _with_interval(point, lower, upper):
    return {
        **point,
        "samples_per_s_interval": {"lower": lower, "upper": upper, "confidence": 0.95, "launches": 1, "steps": 8},
    }


@pytest.mark.parametrize(
    ("pick_interval", "met", "resolved"),
    [
        ((85.0, 97.0), True, False),  # 0.90x by the medians, but the upper bound reaches 0.95 x 95: not shown slower
        ((80.0, 88.0), False, True),  # even its upper bound is under 0.95x the best's lower: shown slower
        ((98.0, 101.0), True, True),  # its lower bound is 0.95x the best's upper or more: shown within 5%
    ],
)
def test_accept_judges_the_pick_by_intervals(grid, pick_interval, met, resolved):
    """The pick passes unless its interval shows it below 0.95x the best: pick upper >= 0.95 x best
    lower. `ratio_bounds` are [pick lower / best upper, pick upper / best lower]."""
    best = _with_interval(_grid_point("ddp", 16, 100.0, 200.0), 95.0, 103.0)
    pick = _with_interval(_grid_point("zero2", 16, 90.0, 200.0), *pick_interval)
    points = [best, pick, *(_grid_point("fsdp", m, 10.0, 100.0) for m in (1, 2, 4, 8))]
    tune = {"winner": {"backend": "zero2", "micro_batch_size": 16, "gradient_accumulation_steps": 2}, "candidates": []}
    verdict = grid.judge_tune({"points": points}, tune, 100.0, "ref-1b")
    assert verdict["met"] is met and verdict["ratio_resolved"] is resolved
    lo, hi = pick_interval
    assert verdict["ratio_bounds"] == [round(lo / 103.0, 4), round(hi / 95.0, 4)]
    assert verdict["grid_within_noise_of_best"] == (["zero2 mb16x2"] if hi >= 95.0 else [])


def test_merge_names_the_configurations_within_noise_of_the_fastest(grid):
    points = [
        {**_with_interval(_grid_point("ddp", 16, 100.0), 95.0, 103.0), "measured_steps": 8},
        {**_with_interval(_grid_point("zero2", 16, 97.0), 93.0, 99.0), "measured_steps": 8},
        {**_with_interval(_grid_point("zero3", 16, 80.0), 78.0, 82.0), "measured_steps": 8},
        _grid_point("fsdp", 16, 10.0),  # from before intervals: a point
    ]
    assert grid.within_noise(points) == {
        "ref-1b": {"fastest": "ddp mb16x2", "within_noise": ["zero2 mb16x2"], "resolved": False}
    }


def test_repeated_launches_pool_their_steps(grid):
    def launch(rates, wall):
        figure = grid.interval.figure([rates])
        return {
            "status": "ok",
            "samples_per_s": figure.median,
            "samples_per_s_interval": figure.json(),
            "step_rates": [rates],
            "measured_steps": len(rates),
            "step_spread": 0.1,
            "wall_s": wall,
            "peak_allocated_gib": 1.0,
            "peak_reserved_gib": 2.0,
            "run_dir": f"runs/grid/{wall}",
        }

    one = grid.repeated([launch([10.0, 11.0, 12.0, 13.0, 14.0, 15.0], 30.0)])
    both = grid.repeated([one, launch([20.0, 21.0, 22.0], 40.0)])
    assert both["launches"] == 2 and both["measured_steps"] == 9 and both["wall_s"] == 35.0
    assert both["samples_per_s"] == 14.0 and both["samples_per_s_interval"]["upper"] == 21.0  # the 2nd launch's median
    assert both["run_dirs"] == ["runs/grid/30.0", "runs/grid/40.0"]
    assert grid.repeated([one, {"status": "oom"}]) == {"status": "oom"}


def test_a_tune_points_file_counts_each_configuration_once(grid, tmp_path, capsys):
    """recipe tune's points.jsonl: a configuration measured again counts by its last measured run
    (a later failure keeps the earlier figure); a line without `recipe` (older tunes) and a cut-off
    last line (a host lost mid-write) are skipped and said; a broken line inside is one error."""

    def line(micro, status, gib, **extra):
        return json.dumps(
            {
                "recipe": "ref-1b/zero2/2xH100",
                "overrides": ["launch.main_process_port=29641"],
                "backend": "zero2",
                "micro_batch_size": micro,
                "gradient_accumulation_steps": 32 // micro,
                "gradient_checkpointing": False,
                "status": status,
                "measured_allocated_gib": gib,
                "hardware": "2 x NVIDIA H100 80GB HBM3",
                **extra,
            }
        )

    old = json.dumps({"backend": "ddp", "micro_batch_size": 32, "status": "measured"})
    path = tmp_path / "points.jsonl"
    path.write_text("\n".join([line(32, "measured", 35.0), line(32, "measured", 35.5), line(32, "failed", None)]))
    fitted = line(16, "measured", 22.0, gradient_accumulation_steps=1)
    path.write_text(
        path.read_text() + "\n" + fitted + "\n" + line(8, "measured", 17.0) + "\n" + old + '\n{"recipe": "ref-'
    )
    points, host = grid.load_points(path)
    assert host == "2 x NVIDIA H100 80GB HBM3"
    assert sorted((p["micro_batch_size"], p["measured_allocated_gib"]) for p in points) == [
        (8, 17.0),
        (16, 22.0),
        (32, 35.5),
    ]
    assert "2 line(s) skipped" in capsys.readouterr().err
    kept, left = grid.heldout(points, grid.calibration_keys())
    # zero2 at 16 x 1 and at 8 x 4 were fitted; 32 x 1 was not
    assert [p["micro_batch_size"] for p in kept] == [32] and left["calibration"] == 2
    path.write_text(line(32, "measured", 35.0) + "\nnot json\n" + line(16, "measured", 22.0))
    with pytest.raises(SystemExit, match=r"points\.jsonl:2: not a JSON line"):
        grid.load_points(path)


def test_a_tune_point_is_predicted_as_it_was_composed(grid):
    """current_prediction composes the point's overrides and added checkpointing, not the bare cell."""
    bare = {"recipe": "pi07/zero2/8xA100", "micro_batch_size": 8}  # pi07 checkpoints by default
    off = {**bare, "overrides": ["policy.gradient_checkpointing=false"]}
    assert grid.current_prediction(off) > grid.current_prediction(bare)
    assert grid.current_prediction({**off, "gradient_checkpointing": True}) == grid.current_prediction(bare)
    assert grid.current_prediction({**bare, "overrides": ["backend=fsdp"]}) != grid.current_prediction(bare)


def test_the_figures_users_read_are_the_reports():
    """`recipe estimate --help` and docs/estimator.md quote benchmarks/results/heldout.json: a new
    measurement that changes them fails here until the text follows."""
    from registry.commands.estimate import EXAMPLES

    report = json.loads((ROOT / "benchmarks" / "results" / "heldout.json").read_text())
    page = (ROOT / "docs" / "estimator.md").read_text()
    for group, label in (("accumulation 1", "accumulation 1:  "), ("accumulation > 1", "accumulation 2-8:")):
        g = report["groups"][group]
        line = f"{label} {g['count']} points, median {g['median']:.1%}, worst {g['worst']:.1%}"
        assert line in EXAMPLES
        row = f"| {g['count']} | {g['median']:.1%} | {g['worst']:.1%} (over) | {g['under_predicted']} of {g['count']} |"
        assert row in page, row
        assert g["under_5_percent"] == 0


def test_merge_names_the_host_that_measured(grid, tmp_path):
    """merge runs wherever the parts were copied to: the grid's hardware is the measuring host's,
    as its points recorded it, not the merging machine's ("no GPU" on a laptop)."""
    part = tmp_path / "grid-0.jsonl"
    point = {**_grid_point("ddp", 16, 100.0), "recipe": "ref-1b/ddp/2xH200", "host": "4 x NVIDIA H200"}
    part.write_text(json.dumps(point) + "\n")
    out = tmp_path / "grid.json"
    assert grid.main(["merge", str(part), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["hardware"] == "4 x NVIDIA H200"
