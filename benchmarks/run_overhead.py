"""What `recipe run` adds over running the launch.sh it writes: rounds, interleaved in one run,
of `recipe run CELL train.steps=S` (compose, validate, resolve, the pre-launch checks, the lock,
the supervision, the closing lines) and `bash launch.sh` in a copy of that run's folder (the
ranks alone, as a user who resolved once would start them).

The training itself varies by seconds from launch to launch (torch's import, the rendezvous), far
more than the 0.2 s asked of `recipe run`, so it is taken out of both sides: both launch through a
`torchrun` shim that records when the real torchrun started and ended, and each side's overhead is
its wall time minus that span. The shim lies in a copy of this interpreter's virtualenv (its
pyvenv.cfg and lib/ linked), whose bin/ `recipe run` puts first on the ranks' PATH as it does for
its own interpreter.

    python benchmarks/run_overhead.py [--cell tiny/ddp/cpu] [--steps 5] [--pairs 9] [--out PATH]

`recipe run` is timed in two states of the verdict cache (registry/validate/verdicts.py), in
triples interleaved with launch.sh: a recipe run before (its verdict on disk: the same command
again, a resume), and a recipe new to this installation (the verdicts emptied before each run,
the installation's rule check kept: a first run after an edit, which validates it in full).

Reported: each side's median overhead with min and max, and the median of the per-triple
differences (recipe run minus launch.sh), for each state. The target: at most 0.2 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from emit import emit, host  # benchmarks/, the script's own folder

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ("launch.sh", "recipe.lock.yaml", "train_config.json", "accelerate.yaml", "deepspeed.json")


SHIM = """#!/usr/bin/env bash
start=$(date +%s.%N)
"$REAL_TORCHRUN" "$@"
code=$?
echo "$start $(date +%s.%N)" >> "$SHIM_LOG"
exit $code
"""


def shim_interpreter(tmp: Path) -> Path:
    """A python whose bin/ holds the torchrun shim: this virtualenv again, its files linked."""
    prefix = Path(sys.prefix)
    if not (prefix / "pyvenv.cfg").is_file():
        sys.exit("run it from a virtualenv's python (the shim goes into a copy of its bin/)")
    venv = tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    shutil.copy2(prefix / "pyvenv.cfg", venv / "pyvenv.cfg")
    for name in ("lib", "lib64", "include"):
        if (prefix / name).exists():
            (venv / name).symlink_to(prefix / name)
    python = venv / "bin" / "python"
    python.symlink_to(Path(sys.executable).resolve())
    torchrun = venv / "bin" / "torchrun"
    torchrun.write_text(SHIM)
    torchrun.chmod(0o755)
    return python


def timed(argv: list[str], cwd: Path, env: dict, log: Path) -> float:
    """Wall time minus the real torchrun's span, as the shim logged it."""
    log.write_text("")
    start = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, env={**env, "SHIM_LOG": str(log)}, capture_output=True, text=True)
    took = time.perf_counter() - start
    if r.returncode:
        sys.exit(f"{' '.join(argv)} exited {r.returncode}:\n{r.stderr[-2000:]}")
    spans = [float(b) - float(a) for a, b in (line.split() for line in log.read_text().splitlines())]
    if len(spans) != 1:
        sys.exit(f"{' '.join(argv)}: the torchrun shim ran {len(spans)} times, not once")
    return took - spans[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cell", default="tiny/ddp/cpu")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--out", help="also write the result here (JSON)")
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "registry")], check=True, capture_output=True)
    runs: dict[str, list[float]] = {"recipe run": [], "recipe run (new recipe)": [], "launch.sh": []}
    with tempfile.TemporaryDirectory() as tmp:
        py = shim_interpreter(Path(tmp))
        real = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
        if not real:
            sys.exit("no torchrun beside this python or on PATH")
        env = {
            **os.environ,
            "REAL_TORCHRUN": real,
            "PATH": os.pathsep.join([str(py.parent), os.environ.get("PATH", "")]),
        }
        log = Path(tmp, "shim.log")
        warm, new = Path(tmp, "warm-cache"), Path(tmp, "new-cache")
        for i in range(args.pairs + 1):  # the first triple warms the page cache and is not counted
            folder = Path(tmp, f"run{i}")
            argv = [str(py), "-m", "registry", "run", args.cell, f"train.steps={args.steps}", "--output-dir"]
            for entry in (new / "recipe" / "verdicts").glob("verdicts-*.sqlite3*"):  # keeps verdicts/rules/
                entry.unlink()
            fresh = timed([*argv, f"{folder}-new"], ROOT, {**env, "XDG_CACHE_HOME": str(new)}, log)
            ran = timed([*argv, str(folder)], ROOT, {**env, "XDG_CACHE_HOME": str(warm)}, log)
            copy = Path(tmp, f"copy{i}")
            copy.mkdir()
            for name in BUNDLE:
                if (folder / name).exists():
                    shutil.copy2(folder / name, copy / name)
            alone = timed(["bash", "launch.sh"], copy, env, log)
            if i:
                runs["recipe run"].append(ran)
                runs["recipe run (new recipe)"].append(fresh)
                runs["launch.sh"].append(alone)

    def over(side: str) -> dict:
        diffs = [a - b for a, b in zip(runs[side], runs["launch.sh"], strict=True)]
        return {"median": round(statistics.median(diffs), 3), "min": round(min(diffs), 3), "max": round(max(diffs), 3)}

    result = {
        "benchmark": "run_overhead",
        "command": f"python benchmarks/run_overhead.py --cell {args.cell} --steps {args.steps} --pairs {args.pairs}",
        "cell": args.cell,
        "steps": args.steps,
        "pairs": args.pairs,
        "outside_torchrun_median_s": {k: round(statistics.median(v), 3) for k, v in runs.items()},
        "outside_torchrun_min_max_s": {k: [round(min(v), 3), round(max(v), 3)] for k, v in runs.items()},
        "overhead_s": over("recipe run"),
        "overhead_new_recipe_s": over("recipe run (new recipe)"),
        "target_s": 0.2,
        **host(),
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
