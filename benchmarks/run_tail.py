"""How long a finished built-in run takes to hand back: from the trainer's `end` record in
metrics.jsonl to the return of `recipe run`, and the whole call, over repeated runs of one CPU
recipe (docs/trainer.md, "Leaving"). Prints medians and ranges as JSON.

    python benchmarks/run_tail.py [--recipe tiny/ddp/cpu] [--runs 5] [--out PATH]"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from emit import emit, host  # benchmarks/, the script's own folder

ROOT = Path(__file__).resolve().parent.parent


def once(recipe: str, folder: Path) -> tuple[float, float]:
    started = time.time()
    r = subprocess.run(
        [sys.executable, "-m", "registry", "run", recipe, "train.steps=24", "--output-dir", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    ended = time.time()
    if r.returncode != 0:
        sys.exit(f"run_tail: {recipe} failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    end = next(rec["time"] for rec in reversed(records) if rec.get("event") == "end")
    return ended - started, ended - end


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default="tiny/ddp/cpu")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", help="also write the result here (JSON)")
    args = ap.parse_args()
    totals, tails = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            total, tail = once(args.recipe, Path(tmp, f"run{i}"))
            totals.append(total)
            tails.append(tail)
            print(f"run {i + 1}/{args.runs}: {total:.2f} s, {tail:.2f} s after the end record", file=sys.stderr)
    result = {
        "benchmark": "run_tail",
        "recipe": args.recipe,
        "runs": args.runs,
        "median_total_s": round(statistics.median(totals), 2),
        "total_min_max_s": [round(min(totals), 2), round(max(totals), 2)],
        "median_tail_s": round(statistics.median(tails), 2),
        "tail_min_max_s": [round(min(tails), 2), round(max(tails), 2)],
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        **host(),
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
