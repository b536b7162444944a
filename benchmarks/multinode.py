"""Multi-node through the per-node launch, on one host: 2 nodes x 1 GPU against 1 node x 2 GPUs.

For each backend, `recipe run POLICY/BACKEND/2x1xH100` starts one launcher per node (MACHINE_RANK
0 and 1, each with its own GPU, rendezvous at 127.0.0.1): the launch.sh that the sbatch, sky.yaml
and PyTorchJob run on every node. NCCL is made to talk over the network (P2P and shared memory
off, sockets on the loopback interface), as between two machines. The same recipe on
POLICY/BACKEND/2x1xH100 hardware=2xH100 (one launcher, two GPUs) is the reference, and the reference is run a second
time with the same NCCL settings as the 2-node run: the difference between the two 1-node runs
is the noise floor. The runs start from the same weights on the same batches, so step 1 agrees;
after it, bf16 rounding in a different reduction order makes the runs drift apart a little more
at each step (up to 24% at one late step of FSDP between two 1-node runs), so the maximum over
steps measures chaos, not correctness. The judged figure is the median over steps of
|loss / reference - 1|.

    python3 benchmarks/multinode.py --policy ref-100m --backends ddp,zero2,fsdp --steps 40 \
        -o benchmarks/results/multinode_2xH100.json

Per backend it records each run's losses, world size, transport seen in NCCL's log and wall
time. A backend passes when every run has world size 2, the 2-node run's NCCL went over the network
(NET/*), the loss falls, step 1 agrees within 1e-3, and the 2-node median difference is at most
2 x the floor's median and at most 1%.
`--judge FILE` judges a recorded result again, without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NETWORK = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "INFO"}


def run(cell: str, swap: list[str], steps: int, port: int, out: Path, env: dict[str, str]) -> dict:
    folder = out / cell.replace("/", "_")  # --output-dir is the run folder itself
    shutil.rmtree(folder, ignore_errors=True)  # a stale metrics.jsonl must not be judged
    command = [
        sys.executable,
        "-m",
        "registry",
        "run",
        cell,
        *swap,
        f"train.steps={steps}",
        "train.log_every=1",
        f"launch.main_process_port={port}",
        "--output-dir",
        str(folder),
    ]
    began = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True)
    wall = time.perf_counter() - began
    metrics, launch_log = folder / "metrics.jsonl", folder / "launch.log"
    records = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    log = launch_log.read_text(errors="replace") if launch_log.exists() else done.stderr
    start = next((r for r in records if r.get("event") == "start"), {})
    return {
        "cell": cell,
        "command": " ".join(command[2:]),
        "env": env,
        "exit_code": done.returncode,
        "wall_s": round(wall, 1),
        "world_size": start.get("world_size"),
        "distributed_type": start.get("distributed_type"),
        "transports": sorted(set(re.findall(r"via (NET/\w+|P2P/\w+|SHM)", log))),
        "losses": [r["loss"] for r in records if "loss" in r],
        "tail": done.stderr[-2000:] if done.returncode else "",
    }


def differences(a: list[float], b: list[float]) -> list[float]:
    return [abs(x / y - 1) for x, y in zip(a, b)] if a and len(a) == len(b) else []


def judge(backend: str, reference: dict, floor_run: dict, nodes: dict) -> dict:
    diff = differences(nodes["losses"], reference["losses"])
    floor = differences(floor_run["losses"], reference["losses"])
    median = statistics.median(diff) if diff else None
    floor_median = statistics.median(floor) if floor else None
    passed = (
        all(r["exit_code"] == 0 and r["world_size"] == 2 for r in (reference, floor_run, nodes))
        and any(t.startswith("NET/") for t in nodes["transports"])  # the nodes talked over the network
        and len(nodes["losses"]) > 1
        and nodes["losses"][-1] < nodes["losses"][0]
        and median is not None
        and floor_median is not None
        and diff[0] <= 1e-3
        and median <= min(max(2 * floor_median, 1e-4), 0.01)
    )
    return {
        "backend": backend,
        "passed": passed,
        "step1_rel_diff": diff[0] if diff else None,
        "median_rel_diff_2x1_vs_1x2": median,
        "median_rel_diff_floor": floor_median,
        "max_rel_diff_2x1_vs_1x2": max(diff) if diff else None,
        "max_rel_diff_floor": max(floor) if floor else None,
        "runs": [reference, floor_run, nodes],
    }


def say(result: dict) -> None:
    nodes = result["runs"][2]
    if result["median_rel_diff_2x1_vs_1x2"] is None or result["median_rel_diff_floor"] is None:
        runs = zip(("1x2 reference", "1x2 floor", "2x1"), result["runs"])
        failed = [f"{label} (exit {r['exit_code']})" for label, r in runs if not r["losses"]]
        print(f"{result['backend']}: FAIL: no losses from {', '.join(failed)}", flush=True)
        return
    print(
        f"{result['backend']}: 2 nodes x 1 GPU vs 1 x 2, median |loss ratio - 1| "
        f"{result['median_rel_diff_2x1_vs_1x2']:.4g} (floor {result['median_rel_diff_floor']:.4g}), step 1 "
        f"{result['step1_rel_diff']:.2g}; loss {nodes['losses'][0]:.4f} -> {nodes['losses'][-1]:.4f}; "
        f"transports {nodes['transports']}; {'PASS' if result['passed'] else 'FAIL'}",
        flush=True,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="ref-100m")
    ap.add_argument("--backends", default="ddp,zero2,fsdp")
    ap.add_argument("--one", default="2xH100", help="the 1-node hardware part (reference)")
    ap.add_argument("--two", default="2x1xH100", help="the 2-node hardware part")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--port", type=int, default=29560)
    ap.add_argument("--workdir", type=Path, default=Path("runs") / "multinode")
    ap.add_argument("-o", "--output", type=Path)
    ap.add_argument("--judge", type=Path, help="judge a recorded result again (rewritten in place)")
    args = ap.parse_args()
    args.workdir = ROOT / args.workdir  # the runs start in ROOT; relative paths are read from there too
    if args.judge:
        report = json.loads(args.judge.read_text())
        report["results"] = [judge(r["backend"], *r["runs"]) for r in report["results"]]
        for r in report["results"]:
            say(r)
        args.judge.write_text(json.dumps(report, indent=1) + "\n")
        return 0 if all(r["passed"] for r in report["results"]) else 1
    from registry.run.bench import versions
    from registry.run.machine import gpus

    results, ok = [], True
    for i, backend in enumerate(args.backends.split(",")):
        # one recipe, only the hardware part swapped, so nothing but the topology differs
        cell, one = f"{args.policy}/{backend}/{args.two}", [f"hardware={args.one}"]
        port = args.port + 3 * i
        reference = run(cell, one, args.steps, port, args.workdir / "reference", {})
        floor_run = run(cell, one, args.steps, port + 1, args.workdir / "floor", NETWORK)
        nodes = run(cell, [], args.steps, port + 2, args.workdir / "nodes", NETWORK)
        result = judge(backend, reference, floor_run, nodes)
        ok &= result["passed"]
        results.append(result)
        say(result)
    report = {
        "benchmark": "multinode",
        "date": time.strftime("%Y-%m-%d"),
        "hardware": ", ".join(sorted({g.name for g in gpus()})) or "CPU",
        "versions": versions(),
        "command": "python3 benchmarks/multinode.py " + " ".join(sys.argv[1:]),
        "steps": args.steps,
        "results": results,
    }
    text = json.dumps(report, indent=1) + "\n"
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
