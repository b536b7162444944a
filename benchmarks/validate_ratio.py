"""Side by side, interleaved in one run: one-file `recipe validate pi07/zero2/8xA100`, one
`recipe validate` call over 1,000 generated recipe files (benchmarks/validate_1000.py's), and
`python -c "import yaml, jsonschema"`. Prints the medians and the two ratios the speed targets
name (issue 25: 1,000 files <= 8x one file; one file <= 1.15x the import). Usage:
python benchmarks/validate_ratio.py [--files 1000] [--runs 7] [--out PATH]"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from validate_1000 import generate  # noqa: E402


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - start, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", help="also write the result here (JSON)")
    args = ap.parse_args()
    py = sys.executable
    # The package's bytecode, as an installed package has it (pip compiles on install): under
    # PYTHONDONTWRITEBYTECODE a checkout recompiles every module it imports on every call,
    # which the yaml and jsonschema of the yardstick, compiled at install, never do.
    subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "registry")], check=True, capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        paths = generate(Path(tmp), args.files)
        commands = {
            "import": [py, "-c", "import yaml, jsonschema"],
            "one": [py, "-m", "registry", "validate", "pi07/zero2/8xA100"],
            "many": [py, "-m", "registry", "validate", "-q", *paths],
        }
        times: dict[str, list[float]] = {k: [] for k in commands}
        codes: dict[str, set] = {k: set() for k in commands}
        for argv in commands.values():  # one warm-up each: the page cache, __pycache__
            timed(argv)
        for _ in range(args.runs):
            for k, argv in commands.items():
                t, r = timed(argv)
                times[k].append(t)
                codes[k].add(r.returncode)
                if k == "many":
                    error_lines = sum(1 for line in r.stdout.splitlines() if "error[" in line)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "benchmark": "validate_1000",
        "files": args.files,
        "runs": args.runs,
        "median_s": round(med["many"], 3),
        "min_s": round(min(times["many"]), 3),
        "max_s": round(max(times["many"]), 3),
        "per_file_ms": round(med["many"] / args.files * 1000, 2),
        "exit_codes": sorted(codes["many"]),
        "error_lines": error_lines,
        "one_file_median_s": round(med["one"], 3),
        "import_median_s": round(med["import"], 3),
        "ratio_many_to_one": round(med["many"] / med["one"], 2),
        "ratio_one_to_import": round(med["one"] / med["import"], 2),
        "targets": {"ratio_many_to_one": 8, "ratio_one_to_import": 1.15},
        "interleaved": True,
        "bytecode": "registry compiled first (compileall), as installed",
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
