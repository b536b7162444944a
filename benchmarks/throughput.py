"""Built-in loop vs a minimal hand-written accelerate loop on one GPU host, per backend.

Each backend's recipe is resolved once; benchmarks/side_by_side.py then runs, under that
recipe's accelerate yaml (and DeepSpeed JSON), both loops in the same processes, alternating
chunks of steps (built-in first in even chunks, hand-written first in odd ones). Reported:
median samples/s of each (timed by the slowest rank) and the median of the per-chunk ratios.
Usage on a 2-GPU host: python3 benchmarks/throughput.py [--recipe ref-1b/{}/2xH100] [--backends ddp,zero2,fsdp]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--recipe", default="ref-1b/{}/2xH100")
    ap.add_argument("--backends", default="ddp,zero2,fsdp")
    ap.add_argument("--micro", type=int, default=8)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--chunk-steps", type=int, default=10)
    ap.add_argument("--out", default="/tmp/throughput")
    args = ap.parse_args()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)])),
        "NCCL_NVLS_ENABLE": "0",
    }
    rows = []
    for backend in args.backends.split(","):
        name = args.recipe.format(backend)
        run = Path(args.out) / backend
        overrides = [f"train.micro_batch_size={args.micro}"]
        subprocess.run(
            [sys.executable, "-m", "registry", "resolve", name, *overrides, "-o", str(run)],
            cwd=ROOT,
            env=env,
            check=True,
        )
        cmd = [
            "accelerate",
            "launch",
            "--config_file",
            "accelerate.yaml",
            str(ROOT / "benchmarks" / "side_by_side.py"),
            "train_config.json",
            "--chunks",
            str(args.chunks),
            "--chunk-steps",
            str(args.chunk_steps),
        ]
        out = subprocess.run(cmd, cwd=run, env=env, capture_output=True, text=True)
        line = next((s for s in out.stdout.splitlines() if s.startswith("SIDE_BY_SIDE ")), None)
        if line is None:
            sys.exit(f"{backend} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        row = {
            "backend": backend,
            "recipe": name,
            "command": f"recipe resolve {name} {' '.join(overrides)}; " + " ".join(cmd),
            **json.loads(line.split(" ", 1)[1]),
        }
        rows.append(row)
        print(
            json.dumps({k: row[k] for k in ("backend", "builtin_samples_per_s", "handwritten_samples_per_s", "ratio")}),
            flush=True,
        )
    import torch

    print(
        json.dumps(
            {
                "benchmark": "throughput",
                "device": torch.cuda.get_device_name(0),
                "gpus": torch.cuda.device_count(),
                "torch": torch.__version__,
                "micro_batch_size": args.micro,
                "chunks": args.chunks,
                "chunk_steps": args.chunk_steps,
                "date": time.strftime("%Y-%m-%d"),
                "rows": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
