"""Measured vs predicted peak allocated memory per rank, for `recipe estimate` and memory-fit.

Measure (on a host with 2 GPUs): for each reference policy, backend and micro batch, run the
built-in trainer as `recipe bench` does (2 warm-up + 3 measured steps) and keep the worst rank's
peak allocated memory, overall and per phase, and what stays allocated between steps:

    python3 benchmarks/calibrate.py measure --out points.jsonl [--policies ...] [--backends ...] [--micro 2,8,16]

Several measure processes may share the GPUs (give each its own --port): allocated memory is
per process, so only their speed suffers.

Compare (anywhere, no GPU): predict every measured point with the current estimator and report
the ratio; acceptance is every point within 15%.

    python3 benchmarks/calibrate.py compare benchmarks/results/calibrate_2xH200.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOLERANCE = 0.15


def measure(args) -> None:
    from registry.run.bench import bench_one, host, versions

    for policy in args.policies.split(","):
        for backend in args.backends.split(","):
            for micro in args.micro.split(","):
                name = f"{policy}/{backend}/{args.hardware}"
                overrides = [f"train.micro_batch_size={micro}", f"launch.main_process_port={args.port}"]
                outcome = bench_one(name, overrides, steps=3, warmup=2, allow_mismatch=True, echo=False)
                point = {"recipe": name, "micro_batch_size": int(micro)}
                if outcome.skipped:
                    point["error"] = outcome.skipped
                else:
                    point.update(
                        {
                            "measured_allocated_gib": round(outcome.peak_allocated_gib, 3),
                            "measured_reserved_gib": round(outcome.peak_reserved_gib, 3),
                            "resident_gib": round(outcome.resident_gib, 3),
                            "phase_peaks_gib": {k: round(v, 3) for k, v in outcome.phase_peaks_gib.items()},
                            "hardware": host(),
                            "versions": versions(),
                        }
                    )
                print(json.dumps(point), flush=True)
                with args.out.open("a") as f:
                    f.write(json.dumps(point) + "\n")


def predicted(point: dict) -> float:
    from registry.compose import compose
    from registry.estimate import estimate

    doc = compose(point["recipe"], [f"train.micro_batch_size={point['micro_batch_size']}"]).data
    return estimate(doc).allocated_gib


def compare(args) -> int:
    data = json.loads(args.results.read_text())
    rows, worst = [], 0.0
    for point in data["points"]:
        guess = predicted(point)
        ratio = guess / point["measured_allocated_gib"]
        worst = max(worst, abs(ratio - 1))
        rows.append((point["recipe"], point["micro_batch_size"], point["measured_allocated_gib"], guess, ratio))
    print(f"{'RECIPE':<24} {'MICRO':>5} {'MEASURED GiB':>12} {'PREDICTED GiB':>13} {'RATIO':>6}")
    for name, micro, measured, guess, ratio in rows:
        flag = "" if abs(ratio - 1) <= TOLERANCE else "  <- outside 15%"
        print(f"{name:<24} {micro:>5} {measured:>12.2f} {guess:>13.2f} {ratio:>6.3f}{flag}")
    print(f"{len(rows)} points on {data['hardware']}; worst |predicted/measured - 1| = {worst:.1%}")
    return 0 if worst <= TOLERANCE else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="verb", required=True)
    m = sub.add_parser("measure", help="run the matrix on this host's GPUs")
    m.add_argument("--policies", default="ref-100m,ref-1b")
    m.add_argument("--backends", default="ddp,zero1,zero2,zero3,fsdp,fsdp2")
    m.add_argument("--micro", default="2,8,16")
    m.add_argument("--hardware", default="2xH100", help="hardware part whose GPU count matches this host")
    m.add_argument("--port", type=int, default=29500, help="rendezvous port, distinct per concurrent process")
    m.add_argument("--out", type=Path, required=True, help="JSON-lines file each point is appended to")
    c = sub.add_parser("compare", help="predict the measured points with the current estimator")
    c.add_argument("results", type=Path)
    args = ap.parse_args()
    if args.verb == "measure":
        measure(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
