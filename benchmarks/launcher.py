"""How long a launch takes before the first rank starts: launch.sh running accelerate's launch
module (the default) against accelerate's console script (RECIPE_ACCELERATE_CLI=1), alternating,
in one run folder.

    python3 benchmarks/launcher.py --cell ref-100m/ddp/2xH100 --pairs 3 -o benchmarks/results/launcher_2xH100.json

Each launch trains the cell for 6 steps without checkpoints. Reported per side: the median of
`startup_s.launcher` (launch.sh started -> rank 0's process started, from metrics.jsonl) and of
the whole launch's wall time, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from registry.train import LAUNCHED_AT  # noqa: E402 (torch-free: the names the trainer reads)

SIDES = {"module": {}, "console script": {"RECIPE_ACCELERATE_CLI": "1"}}


def once(folder: Path, extra: dict[str, str]) -> dict:
    (folder / "metrics.jsonl").unlink(missing_ok=True)
    began = time.time()
    env = {**os.environ, **extra, LAUNCHED_AT: repr(began)}
    done = subprocess.run(["bash", "launch.sh"], cwd=folder, env=env, capture_output=True, text=True)
    wall = time.time() - began
    if done.returncode:
        raise SystemExit(f"launch failed (exit {done.returncode}): {done.stderr[-1000:]}")
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return {"wall_s": round(wall, 2), "launcher_s": records[0]["startup_s"]["launcher"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cell", default="ref-100m/ddp/2xH100")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--folder", type=Path, default=ROOT / "runs" / "launcher")
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()
    from registry.run.bench import host, versions

    sets = ["train.steps=6", "train.log_every=1", "train.checkpoint={every: 0, consolidated: false, resumable: false}"]
    resolved = subprocess.run(
        [sys.executable, "-m", "registry", "resolve", args.cell, *sets, "-o", str(args.folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if resolved.returncode:
        raise SystemExit(resolved.stderr.strip())
    runs: dict[str, list[dict]] = {side: [] for side in SIDES}
    for i in range(args.pairs):
        order = list(SIDES) if i % 2 == 0 else list(reversed(SIDES))  # neither side always first
        for side in order:
            runs[side].append(once(args.folder, SIDES[side]))
            print(side, runs[side][-1], flush=True)
    medians = {
        side: {k: statistics.median(r[k] for r in got) for k in ("launcher_s", "wall_s")} for side, got in runs.items()
    }
    report = {
        "benchmark": "launcher",
        "date": time.strftime("%Y-%m-%d"),
        "hardware": host(),
        "versions": versions(),
        "command": "python3 benchmarks/launcher.py " + " ".join(sys.argv[1:]),
        "cell": args.cell,
        "runs": runs,
        "medians": medians,
        "wall_ratio_module_to_script": round(medians["module"]["wall_s"] / medians["console script"]["wall_s"], 3),
    }
    text = json.dumps(report, indent=1) + "\n"
    if args.output:
        args.output.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
