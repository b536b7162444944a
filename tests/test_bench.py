"""`recipe bench` on this CPU host: a real matrix, the measuring conditions, and --record."""

import yaml
from conftest import run_cli

from registry.run.bench import summarize


def test_cpu_matrix_side_by_side(tmp_path):
    r = run_cli(
        "bench",
        "tiny/{ddp,zero2,fsdp}/cpu",
        "--steps",
        "4",
        "--warmup",
        "1",
        "train.gradient_accumulation_steps=4",
        cwd=None,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["RECIPE", "SAMPLES/S", "ALLOC", "GiB"]
    rows = {line.split()[0]: line.split() for line in lines[1:4]}
    for name in ("tiny/ddp/cpu", "tiny/zero2/cpu"):
        assert float(rows[name][1]) > 0 and float(rows[name][2]) > 0
        shares = [int(x.rstrip("%")) for x in rows[name][4:9]]
        assert 98 <= sum(shares) <= 102  # the phase table adds up to 100%
    assert "tiny/fsdp/cpu: skipped: invalid: fsdp-needs-gpu" in r.stdout


def test_summarize_adds_up():
    records = [
        {
            "step": s,
            "loss": 1.0,
            "samples_per_s": 100.0,
            "step_time_s": 0.1,
            "peak_allocated_gib": 1.0 + s,
            "peak_reserved_gib": 2.0,
            "phases_s": {"data": 0.01, "forward": 0.03, "backward": 0.05, "optimizer": 0.005},
        }
        for s in range(1, 6)
    ]
    out = summarize(records, warmup=2)
    assert abs(sum(out["shares"].values()) - 1) < 1e-9 and abs(out["shares"]["other"] - 0.05) < 1e-9
    assert abs(out["samples_per_s"] - 100.0) < 1e-9 and out["peak_allocated_gib"] == 6.0


def test_record_appends_results_with_provenance(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text(
        "# yaml-language-server: $schema=x\nrecipe: {name: team/mine}\nextends: [tiny/ddp/cpu]\ntrain: {steps: 7}\n"
    )
    r = run_cli("bench", str(f), "--steps", "3", "--warmup", "1", "--record", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    text = f.read_text()
    assert text.startswith(
        "# yaml-language-server: $schema=x\nrecipe: {name: team/mine}\n"
    )  # the file is kept, not rewritten
    entry = yaml.safe_load(text)["results"][0]
    assert entry["gradient_accumulation_steps"] == 1 and entry["samples_per_s"] > 0 and entry["steps"] == 3
    assert (
        entry["hardware"].startswith("CPU")
        and "torch" in entry["versions"]
        and entry["command"].startswith("recipe bench")
    )
    assert abs(sum(entry["phases"].values()) - 1) < 0.01
    assert run_cli("validate", str(f)).returncode == 0
    again = run_cli("bench", str(f), "--steps", "3", "--warmup", "1", "--record", timeout=600)
    assert again.returncode == 0 and len(yaml.safe_load(f.read_text())["results"]) == 2


def test_bench_refuses_bad_patterns():
    assert run_cli("bench", "tiny/*/nowhere").returncode == 2
    assert run_cli("bench", "tiny/*").returncode == 2
