"""Side by side, interleaved in one run: one-file `recipe validate pi07/zero2/8xA100`, one
`recipe validate` call over 1,000 generated recipe files (benchmarks/validate_1000.py's), and
`python -c "import yaml, jsonschema"`. Each validate is timed in three states of the verdict cache
(registry/validate/verdicts.py): cold, empty (the first validate after an install or an upgrade:
the bundled rules checked against their meta-schema, then every recipe); new, the installation
seen before but not these recipes (a pre-commit run on an edited file: every recipe checked); and
warm, the verdicts of an earlier call on disk (`recipe list` and the hook on unchanged files). Prints the medians and the ratios the speed targets name
(1,000 files <= 8x one file; one file <= 1.15x the import). Usage:
python benchmarks/validate_ratio.py [--files 1000] [--runs 7] [--out PATH]"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from emit import emit, host  # noqa: E402
from validate_1000 import generate  # noqa: E402

STATES = ("cold", "new", "warm")


def timed(argv: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env)
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
        warm_cache = Path(tmp, "warm-cache")
        cold_cache = Path(tmp, "cold-cache")
        new_cache = Path(tmp, "new-cache")
        one = [py, "-m", "registry", "validate", "pi07/zero2/8xA100"]
        many = [py, "-m", "registry", "validate", "-q", *paths]
        commands = {  # name -> (argv, verdict cache, what is emptied before each run)
            "import": ([py, "-c", "import yaml, jsonschema"], warm_cache, None),
            "one_cold": (one, cold_cache, "all"),
            "one_new": (one, new_cache, "verdicts"),
            "one_warm": (one, warm_cache, None),
            "many_cold": (many, cold_cache, "all"),
            "many_new": (many, new_cache, "verdicts"),
            "many_warm": (many, warm_cache, None),
        }
        times: dict[str, list[float]] = {k: [] for k in commands}
        codes: dict[str, set] = {k: set() for k in commands}
        outputs: dict[str, set] = {k: set() for k in commands}

        def once(name: str) -> None:
            argv, cache, empty = commands[name]
            if empty == "all":
                shutil.rmtree(cache, ignore_errors=True)
            elif empty == "verdicts":  # keeps recipe/verdicts/rules/: the installation's check
                for entry in (cache / "recipe" / "verdicts").glob("verdicts-*.sqlite3*"):
                    entry.unlink()
            t, r = timed(argv, {**os.environ, "XDG_CACHE_HOME": str(cache), "RECIPE_VERDICT_CACHE": "1"})
            times[name].append(t)
            codes[name].add(r.returncode)
            outputs[name].add(r.stdout)

        for name in commands:  # one warm-up each: the page cache, __pycache__, the warm verdicts
            once(name)
            times[name].clear()
        for _ in range(args.runs):
            for name in commands:
                once(name)
    med = {k: statistics.median(v) for k, v in times.items()}
    spread = {k: [round(min(v), 3), round(max(v), 3)] for k, v in times.items()}
    many_out = next(iter(outputs["many_cold"]))
    result = {
        "benchmark": "validate_1000",
        "files": args.files,
        "runs": args.runs,
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "min_max_s": spread,
        "per_file_ms": {k: round(med[k] / args.files * 1000, 2) for k in ("many_cold", "many_new", "many_warm")},
        "exit_codes": {k: sorted(v) for k, v in codes.items()},
        "error_lines": sum(1 for line in many_out.splitlines() if "error[" in line),
        "cold_and_warm_print_the_same": outputs["one_cold"] == outputs["one_new"] == outputs["one_warm"]
        and outputs["many_cold"] == outputs["many_new"] == outputs["many_warm"]
        and len(outputs["many_cold"]) == 1,
        "ratio_many_to_one": {s: round(med[f"many_{s}"] / med[f"one_{s}"], 2) for s in STATES},
        "ratio_one_to_import": {s: round(med[f"one_{s}"] / med["import"], 2) for s in STATES},
        "targets": {"ratio_many_to_one": 8, "ratio_one_to_import": 1.15},
        "interleaved": True,
        "bytecode": "registry compiled first (compileall), as installed",
        **host(),
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
