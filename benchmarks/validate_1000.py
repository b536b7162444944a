"""Validate 1,000 generated recipe files in one `recipe validate` call; report the median of
several runs. Each file extends a random cell of the bundled matrix and sets a few fields, as
team recipes do. Usage: python benchmarks/validate_1000.py [--files 1000] [--runs 5]"""

import argparse
import itertools
import json
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from registry.sharing import sources  # noqa: E402


def generate(folder: Path, count: int) -> list[str]:
    rng = random.Random(0)
    cells = list(itertools.product(*(sources.part_names(a) for a in ("policy", "backend", "hardware"))))
    paths = []
    for i in range(count):
        cell = "/".join(rng.choice(cells))
        text = (
            "# yaml-language-server: $schema=../schemas/recipe.schema.json\n"
            f"recipe:\n  name: team/run-{i:04d}\n  summary: generated variant {i} of {cell}\n"
            f"extends: [{cell}]\n"
            f"train:\n  micro_batch_size: {rng.choice([1, 2, 4, 8])}\n  steps: {rng.randint(100, 10000)}\n"
            f"  optimizer: {{lr: {rng.choice(['1.0e-4', '3.0e-5'])}}}\n"
            f"env:\n  NCCL_DEBUG: WARN\n"
        )
        path = folder / f"run-{i:04d}.yaml"
        path.write_text(text)
        paths.append(str(path))
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = generate(Path(tmp), args.files)
        times, codes = [], set()
        for _ in range(args.runs):
            start = time.perf_counter()
            r = subprocess.run(
                [sys.executable, "-m", "registry", "validate", "-q", *paths], cwd=ROOT, capture_output=True, text=True
            )
            times.append(time.perf_counter() - start)
            codes.add(r.returncode)
        invalid = sum(1 for line in r.stdout.splitlines() if "error[" in line)
    result = {
        "benchmark": "validate_1000",
        "files": args.files,
        "runs": args.runs,
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
        "per_file_ms": round(statistics.median(times) / args.files * 1000, 2),
        "exit_codes": sorted(codes),
        "error_lines": invalid,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
