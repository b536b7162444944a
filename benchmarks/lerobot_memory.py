"""LeRobot's own logged peak memory against `recipe estimate`, for LeRobot cells on 2 GPUs.

Measure (on a GPU host with LeRobot installed; see benchmarks/README.md for the exact command):

    python3 benchmarks/lerobot_memory.py measure --env "$(which python3)" --dataset-root /tmp/ds/toy \\
        --out points.jsonl [--policies act,diffusion] [--backends ddp,fsdp-grad-op,fsdp,fsdp2]
        [--micro 4,8,16] [--steps 30] [--gpus 0,1] [--port 29610] [--deadline-s 1500] [--set KEY=VALUE ...]

For each policy x backend x micro batch it trains POLICY/BACKEND/2xH100 through `recipe run`
(benchmarks/lerobot_e2e.py's launch), reads LeRobot's logged `mem_gb` (lerobot_train.py:
torch.cuda.max_memory_allocated() / 1024**3 after each update, averaged over the log window and
reduced across ranks with max; the largest logged value is kept) and `recipe estimate ... --format
json`'s allocated_gib for the same overrides, and appends one JSON line to --out. A configuration
already in --out is skipped (resumable); none is started once --deadline-s seconds have passed, or
would pass during a run as long as the longest so far. --gpus sets CUDA_VISIBLE_DEVICES and --port
the rendezvous port, so two instances can share a 4-GPU host. --make-dataset builds the toy dataset
(benchmarks/make_dataset.py, with --env's Python) when --dataset-root does not exist.

The toy dataset has one 96 x 96 camera and 14-dim state and action. The estimate is asked for
that dataset: dataset.num_cams=1 and the activations derived at 96 x 96 from
tests/data/policy_sizes.json ("activations_toy"; ACT's part declares 480 x 640, its own dataset's).
Diffusion's part is sized for pusht's 2-dim state and action; at 14 dims it has about 0.3% more
parameters, which the estimate does not see.

Report (anywhere, no GPU): |predicted/measured - 1| over every measured point; acceptance: every
point within 15% of LeRobot's logged peak.

    python3 benchmarks/lerobot_memory.py report points.jsonl [more.jsonl ...] [--host 2xH100] [--current]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lerobot_e2e import ROOT, launch

TOLERANCE = 0.15
FIXTURE = ROOT / "tests" / "data" / "policy_sizes.json"
MEM_GB = re.compile(r"(?<![\w])mem_gb:([0-9]+(?:\.[0-9]+)?)")
HARDWARE = "2xH100"


def peak_mem_gb(log: str) -> float | None:
    """The largest `mem_gb:` LeRobot logged (its log lines share lines with tqdm after a carriage return)."""
    found = [float(m.group(1)) for line in re.split(r"[\r\n]", log) for m in MEM_GB.finditer(line)]
    return max(found) if found else None


def toy_overrides(policy: str, fixture: dict | None = None) -> list[str]:
    """Recipe fields that make the estimate describe the toy dataset (the module docstring)."""
    fixture = fixture or json.loads(FIXTURE.read_text())
    toy = fixture["lerobot"]["policies"][policy]["activations_toy"]
    return [
        "dataset.num_cams=1",
        f"policy.memory.activation_gib_per_sample={toy['activation_gib_per_sample_bf16']}",
        f"policy.memory.activation_gib_per_frame={toy['activation_gib_per_frame_bf16']}",
    ]


def key(point: dict) -> tuple[str, int]:
    return point["recipe"], point["micro_batch_size"]


def done_keys(path: Path) -> set[tuple[str, int]]:
    """Configurations already recorded in `path`; a cut-off last line is ignored."""
    keys = set()
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                keys.add(key(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return keys


def plan(policies: list[str], backends: list[str], micros: list[int], done: set) -> list[tuple[str, int]]:
    wanted = [(f"{p}/{b}/{HARDWARE}", m) for p in policies for b in backends for m in micros]
    return [w for w in wanted if w not in done]


def predicted(cell: str, overrides: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "registry", "estimate", cell, *overrides, "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        return {"estimate_error": (out.stdout + out.stderr)[-500:]}
    data = json.loads(out.stdout)
    return {
        "predicted_allocated_gib": round(data["allocated_gib"], 3),
        "predicted_reserved_gib": round(data["reserved_gib"], 3),
        "predicted_breakdown_gib": {k: round(v, 3) for k, v in data["breakdown_gib"].items()},
    }


def measure_one(cell: str, micro: int, args) -> dict:
    policy = cell.split("/")[0]
    overrides = [
        f"trainer.env={args.env}",
        f"dataset.repo_id={args.repo_id}",
        f"dataset.root={args.dataset_root}",
        f"train.steps={args.steps}",
        f"train.micro_batch_size={micro}",
        f"train.log_every={args.log_every}",
        f"train.checkpoint.every={args.steps}",
        "train.num_workers=2",
        "policy.options.pretrained_backbone_weights=null",  # ResNet weights need a download
        f"launch.main_process_port={args.port}",
        *toy_overrides(policy),
        *args.set,
    ]
    env = dict(os.environ)
    if args.gpus:
        env["CUDA_VISIBLE_DEVICES"] = args.gpus
    folder = Path(tempfile.mkdtemp(prefix="lerobot-memory-")) / "run"
    command, done, wall, log = launch(cell, overrides, folder, allow_mismatch=True, env=env)
    measured = peak_mem_gb(log)
    point = {
        "recipe": cell,
        "micro_batch_size": micro,
        "rc": done.returncode,
        "wall_s": round(wall, 1),
        "steps": args.steps,
        "measured_mem_gb": measured,  # LeRobot's mem_gb: GiB (1024**3), max over ranks
        **predicted(cell, overrides),
        "command": " ".join(command[1:]),
        "gpus": args.gpus,
        "host": args.host,
    }
    if measured is None:
        point["tail"] = log[-3000:]
    return point


def gpu_label(gpus: str | None) -> str:
    """'2xH100' for the GPUs the runs see (nvidia-smi's names; the model's short name when it has one)."""
    try:
        names = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    if gpus:
        names = [names[int(i)] for i in gpus.split(",") if i.strip().isdigit() and int(i) < len(names)]
    if not names:
        return "unknown"
    model = re.search(r"\b([A-Z]\d{2,4}[A-Z]?)\b", names[0])
    return f"{len(names)}x{model.group(1) if model else names[0].replace(' ', '_')}"


def measure(args) -> int:
    args.host = args.host or gpu_label(args.gpus)
    if args.make_dataset and not Path(args.dataset_root).exists():
        subprocess.run(
            [args.env, str(ROOT / "benchmarks" / "make_dataset.py"), args.dataset_root, "--repo-id", args.repo_id],
            check=True,
        )
    todo = plan(
        args.policies.split(","), args.backends.split(","), [int(m) for m in args.micro.split(",")], done_keys(args.out)
    )
    start, longest = time.time(), 0.0
    for cell, micro in todo:
        if args.deadline_s and time.time() - start + longest > args.deadline_s:
            print(f"deadline: {len(todo)} planned, stopping before {cell} micro {micro}", file=sys.stderr)
            break
        point = measure_one(cell, micro, args)
        longest = max(longest, point["wall_s"])
        print(json.dumps({k: v for k, v in point.items() if k not in ("tail", "predicted_breakdown_gib")}), flush=True)
        with args.out.open("a") as f:
            f.write(json.dumps(point) + "\n")
    return 0


def summarise(points: list[dict]) -> dict:
    """|predicted/measured - 1| over the points that have both figures."""
    rows = []
    for p in points:
        measured, guess = p.get("measured_mem_gb"), p.get("predicted_allocated_gib")
        if not measured or guess is None:
            continue
        ratio = guess / measured
        rows.append({**key_of(p), "measured_gib": measured, "predicted_gib": guess, "ratio": round(ratio, 4)})
    errors = [abs(r["ratio"] - 1) for r in rows]
    return {
        "count": len(rows),
        "unmeasured": len(points) - len(rows),
        "median_abs_error": round(statistics.median(errors), 4) if errors else None,
        "worst_abs_error": round(max(errors), 4) if errors else None,
        "under_predicted": sum(r["ratio"] < 1 for r in rows),
        "outside_tolerance": sum(e > TOLERANCE for e in errors),
        "tolerance": TOLERANCE,
        "accepted": bool(rows) and len(rows) == len(points) and all(e <= TOLERANCE for e in errors),
        "points": rows,
    }


def key_of(point: dict) -> dict:
    return {"recipe": point["recipe"], "micro_batch_size": point["micro_batch_size"]}


def read_points(paths: list[Path]) -> list[dict]:
    """Every configuration's last recorded line across `paths`."""
    last = {}
    for path in paths:
        for line in path.read_text().splitlines():
            try:
                point = json.loads(line)
                last[key(point)] = point
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return list(last.values())


def recorded_overrides(point: dict) -> list[str]:
    """The KEY=VALUE overrides of the run's recorded command line."""
    words = point["command"].split()
    return [w for w in words[words.index(point["recipe"]) + 1 :] if "=" in w and not w.startswith("-")]


def repredict(points: list[dict]) -> list[dict]:
    """The points with the current estimator's prediction (the recorded one keeps its own key)."""
    out = []
    for p in points:
        now = predicted(p["recipe"], recorded_overrides(p))
        out.append({**p, "recorded_predicted_allocated_gib": p.get("predicted_allocated_gib"), **now})
    return out


def report(args) -> int:
    points = read_points(args.points)
    if args.current:
        points = repredict(points)
    summary = summarise(points)
    host = args.host or next((p.get("host") for p in points if p.get("host")), None) or "unknown"
    print(f"{'RECIPE':<28} {'MICRO':>5} {'MEASURED GiB':>12} {'PREDICTED GiB':>13} {'RATIO':>6}")
    for r in summary["points"]:
        flag = "" if abs(r["ratio"] - 1) <= TOLERANCE else "  <- outside 15%"
        line = f"{r['recipe']:<28} {r['micro_batch_size']:>5} {r['measured_gib']:>12.2f} {r['predicted_gib']:>13.2f}"
        print(f"{line} {r['ratio']:>6.3f}{flag}")
    print(
        f"{summary['count']} points ({summary['unmeasured']} without a measurement) on {host}: median "
        f"{summary['median_abs_error']}, worst {summary['worst_abs_error']}, under-predicted {summary['under_predicted']}; "
        f"{'accepted' if summary['accepted'] else 'not accepted'} (every point within 15%)"
    )
    out = args.output or ROOT / "benchmarks" / "results" / f"lerobot_memory_{host.replace(' ', '')}.json"
    Path(out).write_text(json.dumps({"host": host, **summary, "raw": points}, indent=1) + "\n")
    return 0 if summary["accepted"] else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="train each configuration and record measured and predicted peaks")
    m.add_argument("--env", required=True, help="LeRobot's Python (trainer.env)")
    m.add_argument("--dataset-root", required=True)
    m.add_argument("--repo-id", default="local/toy")
    m.add_argument("--make-dataset", action="store_true", help="build the toy dataset if --dataset-root is missing")
    m.add_argument("--out", type=Path, required=True, help="JSON lines, appended; recorded configurations are skipped")
    m.add_argument("--policies", default="act,diffusion")
    m.add_argument("--backends", default="ddp,fsdp-grad-op,fsdp,fsdp2")
    m.add_argument("--micro", default="4,8,16")
    m.add_argument("--steps", type=int, default=30)
    m.add_argument("--log-every", type=int, default=5)
    m.add_argument("--gpus", help="CUDA_VISIBLE_DEVICES for the runs, e.g. 0,1")
    m.add_argument("--port", type=int, default=29610, help="rendezvous port (launch.main_process_port)")
    m.add_argument("--deadline-s", type=float, help="start no run after this many seconds")
    m.add_argument("--host", help="a label kept with each point (default: from nvidia-smi, e.g. 2xH100)")
    m.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a recipe override for every run and its estimate, e.g. backend.cpu_ram_efficient_loading=false",
    )
    r = sub.add_parser("report", help="summarise recorded points against the 15% acceptance")
    r.add_argument("points", type=Path, nargs="+")
    r.add_argument("--host", help="names the results file (default: the points' host label)")
    r.add_argument("-o", "--output", type=Path)
    r.add_argument("--current", action="store_true", help="predict with the current estimator, not the recorded one")
    args = parser.parse_args(argv)
    return measure(args) if args.command == "measure" else report(args)


if __name__ == "__main__":
    raise SystemExit(main())
