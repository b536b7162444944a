"""How `recipe tune` measures a candidate: one `recipe bench` launch keeping its accumulation,
a failed run read for out-of-memory, and each run's line of points.jsonl."""

from __future__ import annotations

import time
from pathlib import Path

from registry.estimate import CUDA_CONTEXT_GIB
from registry.run.tune.search import Measure
from registry.run.tune.space import FAILED, MEASURED, OOM, Candidate, Point, Target

OOM_MARKERS = ("out of memory", "OutOfMemoryError")


def failure_kind(log_text: str) -> tuple[str, str]:
    """(OOM, line) for a run that ran out of GPU memory, else (FAILED, the log's last line)."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    for line in lines:
        if any(marker in line for marker in OOM_MARKERS):
            return OOM, line[:200]
    return FAILED, (lines[-1][:200] if lines else "no output")


def measure_with_bench(target: Target, sets: list[str], folder: Path, allow_mismatch: bool) -> Measure:
    from registry.run.bench import bench_one

    def measure(c: Candidate, warmup: int, steps: int) -> Point:
        where, base = target.args(c.backend, sets)
        outcome = bench_one(
            where,
            [*base, *c.overrides()],
            steps,
            warmup,
            allow_mismatch,
            echo=False,
            keep_accumulation=True,
            base=folder / "runs",
        )
        run_dir = str(outcome.run_dir) if outcome.run_dir else None
        if outcome.skipped is None:
            return Point(
                c,
                MEASURED,
                samples_per_s=outcome.samples_per_s,
                launches=outcome.rates,
                peak_allocated_gib=outcome.peak_allocated_gib,
                peak_reserved_gib=outcome.peak_reserved_gib,
                run_dir=run_dir,
                outcome=outcome,
            )
        if outcome.run_dir is None:
            return Point(c, FAILED, reason=outcome.skipped)
        if "exit code 130" in outcome.skipped or "exit code 143" in outcome.skipped:
            return Point(c, "interrupted", run_dir=run_dir)
        log = outcome.run_dir / "launch.log"
        if not log.exists():  # a rehearsal: its run folder is run/ inside (docs/rehearsal.md)
            log = outcome.run_dir / "run" / "launch.log"
        try:
            text = log.read_text(errors="replace")
        except OSError:
            text = outcome.skipped
        kind, line = failure_kind(text)
        return Point(c, kind, reason=line, run_dir=run_dir)

    return measure


def point_record(
    entry: dict, where: tuple[str, list[str]], capacity: float | None, command: str, hardware: str, versions: dict
) -> dict:
    """One line of points.jsonl: one run, its predicted peak memory beside the measured one, and
    what it composed (`where`: Target.args) so that benchmarks/grid.py evaluate can predict it again."""
    p, c = entry["point"], entry["point"].candidate
    reserved = entry["peak_reserved_gib"]
    return {
        "recipe": where[0],
        "overrides": where[1],
        "backend": c.backend,
        "micro_batch_size": c.micro_batch_size,
        "gradient_accumulation_steps": c.accumulation,
        "gradient_checkpointing": c.checkpointing,
        "status": entry["status"],
        "reason": entry["reason"] or None,
        "rung": entry["rung"],
        "warmup": entry["warmup"],
        "steps": entry["steps"],
        "samples_per_s": entry["samples_per_s"],  # this run's median step, and its interval
        "samples_per_s_interval": entry.get("interval"),
        "predicted_allocated_gib": p.predicted_gib,
        "predicted_fraction": p.predicted_fraction,
        "measured_allocated_gib": entry["peak_allocated_gib"],
        "measured_reserved_gib": reserved,
        "measured_fraction": (reserved + CUDA_CONTEXT_GIB) / capacity if capacity and reserved is not None else None,
        "capacity_gib": capacity,
        "hardware": hardware,
        "versions": versions,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": command,
        "run_dir": entry["run_dir"],
    }
