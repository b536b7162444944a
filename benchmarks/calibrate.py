"""Measured vs predicted peak allocated memory per rank, for the memory-fit rule.

On a host with 2 GPUs: for each backend, reference policy size and micro batch, run
`recipe bench` (built-in trainer, 2 warm-up + 3 measured steps) and `recipe estimate` on the
same recipe, and report both with their ratio. Acceptance: every point within 15%.
Usage: python3 benchmarks/calibrate.py [--policies ref-100m,ref-1b] [--backends ...] [--micro 2,8]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def recipe(*args, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "registry", *args], cwd=ROOT, env=env, capture_output=True, text=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--policies", default="ref-100m,ref-1b")
    ap.add_argument("--backends", default="ddp,zero1,zero2,zero3,fsdp,fsdp2")
    ap.add_argument("--micro", default="2,8")
    ap.add_argument("--hardware", default="2xH100")
    args = ap.parse_args()
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0"}
    points = []
    for policy in args.policies.split(","):
        for backend in args.backends.split(","):
            for micro in args.micro.split(","):
                name = f"{policy}/{backend}/{args.hardware}"
                override = f"train.micro_batch_size={micro}"
                estimate = json.loads(recipe("estimate", name, override, "--format", "json", env=env).stdout)
                bench = recipe("bench", name, override, "--steps", "3", "--warmup", "2", "--allow-hardware-mismatch", env=env)
                row = next((l.split() for l in bench.stdout.splitlines() if l.startswith(name + " ")), None)
                measured = float(row[2]) if row and row[2] != "-" else None
                point = {"recipe": name, "micro_batch_size": int(micro), "predicted_allocated_gib": round(estimate["allocated_gib"], 2),
                         "measured_allocated_gib": measured, "measured_reserved_gib": float(row[3]) if measured else None,
                         "predicted_reserved_gib": round(estimate["reserved_gib"], 2),
                         "ratio": round(estimate["allocated_gib"] / measured, 3) if measured else None}
                points.append(point)
                print(json.dumps(point), flush=True)
    print(json.dumps({"benchmark": "calibrate", "date": time.strftime("%Y-%m-%d"), "points": points,
                      "within_15_percent": all(p["ratio"] and abs(p["ratio"] - 1) <= 0.15 for p in points)}, indent=2))


if __name__ == "__main__":
    main()
