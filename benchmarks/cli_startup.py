"""Wall time of `recipe validate pi07/zero2/8xA100` (and show/list) from a cold interpreter:
the start-up path a user waits on. Usage: python benchmarks/cli_startup.py [--runs 21]"""

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "validate pi07/zero2/8xA100": ["validate", "pi07/zero2/8xA100"],
    "show pi07/zero2/8xA100 --origin": ["show", "pi07/zero2/8xA100", "--origin"],
    "list": ["list"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    out = {
        "benchmark": "cli_startup",
        "runs": args.runs,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
        "median_s": {},
    }
    for label, argv in COMMANDS.items():
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "registry", *argv], cwd=ROOT, capture_output=True, check=True)
            times.append(time.perf_counter() - start)
        out["median_s"][label] = round(statistics.median(times), 3)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
