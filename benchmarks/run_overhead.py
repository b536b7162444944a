"""What `recipe run` adds over running the launch.sh it writes: pairs, interleaved in one run,
of `recipe run CELL train.steps=S` (compose, validate, resolve, the pre-launch checks, the lock,
the supervision, the closing lines) and `bash launch.sh` in a copy of that run's folder (the
ranks alone, as a user who resolved once would start them).

    python benchmarks/run_overhead.py [--cell tiny/ddp/cpu] [--steps 5] [--pairs 9] [--out PATH]

Reported: each side's median wall time with its min and max, and the median of the per-pair
differences (recipe run minus launch.sh) with its min and max. The target: at most 0.2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ("launch.sh", "recipe.lock.yaml", "train_config.json", "accelerate.yaml", "deepspeed.json")


def timed(argv: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if r.returncode:
        sys.exit(f"{' '.join(argv)} exited {r.returncode}:\n{r.stderr[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cell", default="tiny/ddp/cpu")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--out", help="also write the result here (JSON)")
    args = ap.parse_args()
    py = sys.executable
    subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "registry")], check=True, capture_output=True)
    # launch.sh finds torchrun/accelerate as `recipe run` does: this interpreter's bin first
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(py).parent), os.environ.get("PATH", "")])}
    runs: dict[str, list[float]] = {"recipe run": [], "launch.sh": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs + 1):  # the first pair warms the page cache and is not counted
            folder = Path(tmp, f"run{i}")
            argv = [py, "-m", "registry", "run", args.cell, f"train.steps={args.steps}", "--output-dir", str(folder)]
            ran = timed(argv, ROOT, env)
            copy = Path(tmp, f"copy{i}")
            copy.mkdir()
            for name in BUNDLE:
                if (folder / name).exists():
                    shutil.copy2(folder / name, copy / name)
            alone = timed(["bash", "launch.sh"], copy, env)
            if i:
                runs["recipe run"].append(ran)
                runs["launch.sh"].append(alone)
    diffs = [a - b for a, b in zip(runs["recipe run"], runs["launch.sh"], strict=True)]
    result = {
        "benchmark": "run_overhead",
        "command": f"python benchmarks/run_overhead.py --cell {args.cell} --steps {args.steps} --pairs {args.pairs}",
        "cell": args.cell,
        "steps": args.steps,
        "pairs": args.pairs,
        "median_s": {k: round(statistics.median(v), 3) for k, v in runs.items()},
        "min_max_s": {k: [round(min(v), 3), round(max(v), 3)] for k, v in runs.items()},
        "overhead_s": {
            "median": round(statistics.median(diffs), 3),
            "min": round(min(diffs), 3),
            "max": round(max(diffs), 3),
        },
        "target_s": 0.2,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d"),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
