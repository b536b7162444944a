"""What a rehearsal says when the trainer is done: the steps and their losses, the peak memory of
every rank beside `recipe estimate`, samples/s with its interval, and that weights and data were
synthetic. A loss that is not a finite number fails the rehearsal (docs/rehearsal.md)."""

from __future__ import annotations

import json
import math
import re
import shlex
import sys
import time
from pathlib import Path

from registry import untrusted, view
from registry.compose import Recipe
from registry.errors import Exit
from registry.files import write_atomic
from registry.run import interval
from registry.topology import world_size

GIB = 1024**3
REPORT = "rehearsal.json"
WARMUP_STEPS = 1  # the first update pays for compilation, allocation and the data loader's start
LOG_CAP = 256 * 1024 * 1024


def samples_per_step(doc: dict) -> int:
    r = view.of(doc)
    return int(r.train.micro_batch_size) * int(r.train.gradient_accumulation_steps or 1) * world_size(doc)


def losses(folder: Path, adapter) -> list[tuple[int, float, float | None]]:
    """(step, loss, gradient norm or None), one per logged step, from the trainer's own output."""
    if adapter.LOSS_LINE is None:  # the built-in trainer: metrics.jsonl
        found = []
        for line in _text(folder / "metrics.jsonl").splitlines():
            try:
                row = json.loads(line)  # NaN included: a loss that is not finite is the point
            except ValueError:
                continue
            if isinstance(row, dict) and "loss" in row and "step" in row:
                found.append((int(row["step"]), float(row["loss"]), row.get("grad_norm")))
        return found
    found = {}
    for match in re.finditer(adapter.LOSS_LINE, _text(folder / "launch.log")):
        found[int(match.group(1))] = (float(match.group(2)), _number(match.group(3)))
    return [(step, loss, norm) for step, (loss, norm) in sorted(found.items())]


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _text(path: Path) -> str:
    try:
        return untrusted.read_bytes(path, LOG_CAP).decode("utf-8", "replace")
    except (untrusted.Rejected, OSError):
        return ""


def ranks(folder: Path) -> list[dict]:
    """Each rank's record: the process of that rank that stepped (launchers step nothing)."""
    best: dict[int, dict] = {}
    for path in sorted(folder.glob("rank-*.json")):
        try:
            record = untrusted.read_json(path, 64 * 1024 * 1024)
        except (untrusted.Rejected, OSError, ValueError):
            continue
        if not isinstance(record, dict) or not isinstance(record.get("rank"), int):
            continue
        if record["rank"] not in best or _stepped(record) > _stepped(best[record["rank"]]):
            best[record["rank"]] = record
    return [best[r] for r in sorted(best)]


def _stepped(record: dict) -> tuple[bool, int]:
    """The training process of a rank, not its launcher: the one on a GPU, then the one that stepped
    (DeepSpeed skips the optimizer on a non-finite gradient: a rank may step nothing)."""
    return ("peak_allocated_bytes" in record, len(record.get("step_ends") or []))


def step_rates(records: list[dict], per_step: int, warmup: int) -> list[float]:
    """samples/s of each optimizer step after `warmup`, the slowest rank's step setting each (the
    ranks wait for it at the next collective); the first step has no start to time it from."""
    series = [r.get("step_ends") or [] for r in records]
    count = min((len(s) for s in series), default=0)
    durations = [max(s[i] - s[i - 1] for s in series) for i in range(warmup + 1, count)]
    return [per_step / d for d in durations if d > 0]


def throughput(records: list[dict], per_step: int) -> interval.Figure | None:
    """The rehearsal's own figure: step_rates after WARMUP_STEPS, once there are two or more."""
    rates = step_rates(records, per_step, WARMUP_STEPS)
    return interval.figure([rates]) if rates else None


PHASES = ("forward_backward", "entering_step", "step")


def phases(record: dict) -> dict[str, float] | None:
    """A rank's peak in each phase over its updates after the warm-up (GiB), where it was on a GPU;
    the first update is left out, as it allocates the optimizer's state and its buffers."""
    rows = [r for r in record.get("phases") or [] if isinstance(r, list) and len(r) == 3]
    rows = rows[WARMUP_STEPS:] or rows
    if not rows:
        return None
    return {
        name: round(max(r[i] for r in rows if isinstance(r[i], (int, float))) / GIB, 3)
        if any(isinstance(r[i], (int, float)) for r in rows)
        else None
        for i, name in enumerate(PHASES)
    }


def finish(recipe: Recipe, folder: Path, code: int, steps: int, adapter) -> int:
    run_dir = folder / "run"
    logged = losses(run_dir, adapter)
    records = ranks(folder / "ranks")
    per_step = samples_per_step(recipe.data)
    speed = throughput(records, per_step)
    estimated, estimated_phases = _estimate(recipe)
    peaks = [r["peak_allocated_bytes"] / GIB for r in records if "peak_allocated_bytes" in r]
    bad = [(s, "loss", v) for s, v, _ in logged if not math.isfinite(v)]
    bad += [(s, "gradient norm", n) for s, _, n in logged if isinstance(n, float) and not math.isfinite(n)]
    result = {
        "recipe": recipe.name,
        "command": shlex.join(["recipe", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "synthetic": adapter.note(),
        "exit_code": code,
        "steps": steps,
        "losses": [v for _, v, _ in logged],
        "grad_norms": [n for _, _, n in logged],
        "optimizer_steps": [len(r.get("step_ends") or []) for r in records],
        "drawn_zero_matrices": sorted({n for r in records for n in r.get("drawn_zero_matrices") or []}),
        "peak_allocated_gib": [round(p, 3) for p in peaks],
        "peak_reserved_gib": [round(r["peak_reserved_bytes"] / GIB, 3) for r in records if "peak_reserved_bytes" in r],
        "devices": sorted({r["device"] for r in records if "device" in r}),
        "max_rss_gib": [round(r["max_rss_bytes"] / GIB, 3) for r in records],
        "phase_peaks_gib": [phases(r) for r in records if "peak_allocated_bytes" in r],
        "estimate_allocated_gib": round(estimated, 3) if estimated is not None else None,
        "estimate_phases_gib": estimated_phases,
        "samples_per_step": per_step,
        "samples_per_s": round(speed.median, 3) if speed else None,
        "samples_per_s_interval": speed.json() if speed else None,
    }
    write_atomic(folder / REPORT, json.dumps(result, indent=2, allow_nan=True) + "\n")
    for line in _lines(result, logged, peaks, estimated, speed):
        print(f"recipe: rehearsal: {line}", file=sys.stderr)
    if code != 0:
        return code
    if not logged:
        print(
            f"recipe: rehearsal failed: the trainer logged no loss (hint: see {run_dir / 'launch.log'})",
            file=sys.stderr,
        )
        return Exit.INVALID
    if bad:
        step, what, value = min(bad, key=lambda b: (b[0], b[1] != "loss"))  # the loss first, at one step
        print(
            f"recipe: rehearsal failed: the {what} is {value} at step {step}"
            + (
                ": the update is skipped or corrupts the weights (docs/rehearsal.md, A gradient that is not finite)"
                if what != "loss"
                else ""
            ),
            file=sys.stderr,
        )
        return Exit.INVALID
    return Exit.OK


def _estimate(recipe: Recipe) -> tuple[float | None, dict | None]:
    """The estimate's peak allocated, and its two phases by name (GiB), as the rank phases are named."""
    from registry import estimate as memory
    from registry.errors import RecipeError
    from registry.validate import typed

    doc = typed(recipe.data, recipe.origins, recipe.name)
    try:
        est = memory.estimate(doc)
    except RecipeError:  # an input it needs is unset: said as no estimate, not a failed rehearsal
        return None, None
    if est is None or not est.finite:
        return None, None
    by_phase = {"forward_backward": memory.FORWARD, "step": memory.STEP}
    return est.allocated_gib, {k: round(memory.allocated(est.phases[v]), 3) for k, v in by_phase.items()}


def _lines(result: dict, logged, peaks: list[float], estimated: float | None, speed) -> list[str]:
    lines = [
        f"weights and data are synthetic ({result['synthetic']}): the losses say the training path works, not how well"
    ]
    if result["drawn_zero_matrices"]:
        names = result["drawn_zero_matrices"]
        lines.append(
            f"{len(names)} weight matri{'ces' if len(names) > 1 else 'x'} the library initialises to exactly zero drawn"
            f" at random instead, as no checkpoint has them ({', '.join(names[:3])}{' ...' if len(names) > 3 else ''})"
        )
    if logged:
        shown = ", ".join(f"{v:.4g}" for _, v, _ in logged[:12]) + (" ..." if len(logged) > 12 else "")
        lines.append(f"{len(logged)} steps logged; losses {shown}")
    if peaks:
        beside = f"; recipe estimate says {estimated:.2f} GiB" if estimated is not None else ""
        if estimated:
            beside += f" ({(max(peaks) - estimated) / estimated:+.1%} measured against it)"
        lines.append("peak allocated per rank " + ", ".join(f"{p:.2f}" for p in peaks) + f" GiB{beside}")
        first = next((p for p in result["phase_peaks_gib"] if p), None)
        if first and first["forward_backward"] is not None and first["step"] is not None:
            said = result["estimate_phases_gib"]
            est = f" (estimate {said['forward_backward']:.2f} and {said['step']:.2f})" if said else ""
            lines.append(
                f"rank 0 by phase after the warm-up: forward/backward {first['forward_backward']:.2f} GiB,"
                f" optimizer step {first['step']:.2f} GiB{est}; {first['entering_step']:.2f} GiB held as it starts"
            )
    elif result["max_rss_gib"]:
        lines.append(
            "CPU: peak resident memory per rank " + ", ".join(f"{g:.2f}" for g in result["max_rss_gib"]) + " GiB"
        )
    if speed and speed.steps < 2:
        lines.append(
            f"throughput {speed.median:.3g} samples/s from {speed.steps} step after {WARMUP_STEPS} warm-up step:"
            " too few for an interval (hint: --steps 8 or more)"
        )
    elif speed:
        lines.append(f"throughput {speed.text()} after {WARMUP_STEPS} warm-up step")
    return lines
