"""benchmarks/lerobot_memory.py's parts that need no GPU: reading LeRobot's logged peak, the report's
arithmetic, resuming (recorded configurations are skipped) and the deadline."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import lerobot_memory as bench

# Lines as lerobot_train.py 0.6.1 logs them (MetricsTracker's fields; tqdm's bar shares the line after \r)
LOG = (
    "INFO 2026-11-27 01:00:00 ot_train.py:641 step:5 smpl:80 ep:2 epch:0.40 loss:40.210 grdn:118.224 "
    "lr:1.0e-05 updt_s:0.041 data_s:0.004 smp/s:356 mem_gb:0.61\n"
    "Training:  33%|###       | 10/30 [00:02<00:04]\rINFO 2026-11-27 01:00:01 ot_train.py:641 step:10 smpl:160 "
    "ep:3 epch:0.80 loss:21.003 grdn:80.5 lr:1.0e-05 updt_s:0.040 data_s:0.003 smp/s:372 mem_gb:0.64\n"
    "INFO 2026-11-27 01:00:02 ot_train.py:641 step:15 smpl:240 ep:5 epch:1.20 loss:12.7 grdn:50.1 "
    "lr:1.0e-05 updt_s:0.040 data_s:0.003 smp/s:372 mem_gb:0.63\n"
)


def test_peak_is_the_largest_logged_mem_gb():
    assert bench.peak_mem_gb(LOG) == 0.64
    assert bench.peak_mem_gb(LOG.replace("mem_gb:0.64", "mem_gb:1.5")) == 1.5
    assert bench.peak_mem_gb("step:5 loss:1.0 xmem_gb:9.0\n") is None  # not LeRobot's field
    assert bench.peak_mem_gb("Traceback (most recent call last):\n") is None


def point(recipe: str, micro: int, measured, predicted) -> dict:
    return {
        "recipe": recipe,
        "micro_batch_size": micro,
        "measured_mem_gb": measured,
        "predicted_allocated_gib": predicted,
    }


def test_summary_math_and_acceptance():
    points = [
        point("act/ddp/2xH100", 4, 1.0, 1.10),  # +10%
        point("act/ddp/2xH100", 8, 2.0, 1.80),  # -10%, under
        point("act/ddp/2xH100", 16, 4.0, 4.20),  # +5%
    ]
    s = bench.summarise(points)
    assert s["count"] == 3 and s["unmeasured"] == 0
    assert s["median_abs_error"] == pytest.approx(0.10) and s["worst_abs_error"] == pytest.approx(0.10)
    assert s["under_predicted"] == 1 and s["outside_tolerance"] == 0 and s["accepted"]
    s = bench.summarise([*points, point("diffusion/ddp/2xH100", 4, 1.0, 1.2)])  # +20%
    assert s["worst_abs_error"] == pytest.approx(0.2) and s["outside_tolerance"] == 1 and not s["accepted"]
    s = bench.summarise([*points, point("diffusion/ddp/2xH100", 4, None, 1.2)])  # a run that logged nothing
    assert s["count"] == 3 and s["unmeasured"] == 1 and not s["accepted"]
    assert not bench.summarise([])["accepted"]


def test_report_writes_the_results_file(tmp_path, capsys):
    lines = tmp_path / "points.jsonl"
    rows = [point("act/ddp/2xH100", 4, 1.0, 1.5), point("act/ddp/2xH100", 4, 1.0, 1.05)]  # the later line wins
    lines.write_text("".join(json.dumps(r | {"host": "2xH100"}) + "\n" for r in rows) + '{"recipe": "cut')
    out = tmp_path / "result.json"
    assert bench.main(["report", str(lines), "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["host"] == "2xH100" and data["count"] == 1 and data["points"][0]["ratio"] == pytest.approx(1.05)
    assert "accepted" in capsys.readouterr().out


def test_recorded_configurations_are_skipped(tmp_path):
    out = tmp_path / "points.jsonl"
    out.write_text(json.dumps(point("act/ddp/2xH100", 8, 1.0, 1.0)) + "\n" + '{"recipe": "act/fsdp')
    todo = bench.plan(["act"], ["ddp", "fsdp"], [4, 8], bench.done_keys(out))
    assert todo == [("act/ddp/2xH100", 4), ("act/fsdp/2xH100", 4), ("act/fsdp/2xH100", 8)]
    assert bench.done_keys(tmp_path / "missing.jsonl") == set()


def test_measure_appends_resumes_and_stops_at_the_deadline(tmp_path, monkeypatch):
    ran = []

    def fake(cell, micro, args):
        ran.append((cell, micro))
        return point(cell, micro, 1.0, 1.0) | {"wall_s": 40.0}

    monkeypatch.setattr(bench, "measure_one", fake)
    monkeypatch.setattr(bench, "gpu_label", lambda gpus: "2xH100")
    out = tmp_path / "points.jsonl"
    argv = ["measure", "--env", "python3", "--dataset-root", str(tmp_path / "ds"), "--out", str(out)]
    argv += ["--policies", "act", "--backends", "ddp", "--micro", "4,8,16"]
    clock = iter(range(0, 1000, 30))  # each reading 30 s later
    monkeypatch.setattr(bench.time, "time", lambda: next(clock))
    bench.main([*argv, "--deadline-s", "100"])
    assert ran == [("act/ddp/2xH100", 4), ("act/ddp/2xH100", 8)]  # the third would end past 100 s
    bench.main(argv)
    assert ran[2:] == [("act/ddp/2xH100", 16)]  # resumed: only what was missing
    assert len(out.read_text().splitlines()) == 3


def test_toy_overrides_take_the_fixtures_96px_activations():
    fixture = json.loads((ROOT / "tests" / "data" / "policy_sizes.json").read_text())
    for policy in ("act", "diffusion"):
        toy = fixture["lerobot"]["policies"][policy]["activations_toy"]
        assert toy["image"] == [3, 96, 96]
        got = bench.toy_overrides(policy, fixture)
        assert "dataset.num_cams=1" in got
        assert f"policy.memory.activation_gib_per_frame={toy['activation_gib_per_frame_bf16']}" in got
