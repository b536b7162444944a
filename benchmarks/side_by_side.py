"""The built-in loop and a minimal hand-written accelerate loop, measured side by side in the
same processes on the same policy, data and launch files, alternating chunks of steps so that
drift between runs cannot favour either. Launched by benchmarks/throughput.py as
    accelerate launch --config_file RUN/accelerate.yaml benchmarks/side_by_side.py RUN/train_config.json
"""

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from accelerate import Accelerator

from registry.train.data import Synthetic
from registry.train.loop import fit, start
from registry.train.policy import build


def handwritten(doc: dict):
    """What a user writes by hand: prepare, then forward, backward, clip, step."""
    train = doc["train"]
    accelerator = Accelerator()  # its own instance: its own DeepSpeed engine
    data = Synthetic(doc, accelerator.device)
    model = build(doc)
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(train["optimizer"]["lr"]))
    model, optimizer = accelerator.prepare(model, optimizer)
    half = accelerator.distributed_type.value == "DEEPSPEED" and accelerator.mixed_precision == "bf16"
    dtype = torch.bfloat16 if half else torch.float32
    micro, clip = int(train["micro_batch_size"]), train["optimizer"].get("grad_clip_norm")
    rank, world = accelerator.process_index, accelerator.num_processes
    position = [0]

    def steps(n: int):
        for _ in range(n):
            first = (position[0] * world + rank) * micro
            batch = data.batch(torch.arange(first, first + micro) % data.samples, dtype)
            loss = F.mse_loss(model(batch["images"], batch["state"]).float(), batch["actions"])
            accelerator.backward(loss)
            if clip:
                accelerator.clip_grad_norm_(model.parameters(), float(clip))
            optimizer.step()
            optimizer.zero_grad()
            position[0] += 1
        loss.item()  # the hand-written loop looks at its loss too

    return steps


def timed(fn) -> float:
    torch.cuda.synchronize()
    dist.barrier()
    begin = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    elapsed = torch.tensor([time.perf_counter() - begin], device="cuda")
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
    return elapsed.item()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--chunk-steps", type=int, default=10)
    args = ap.parse_args()
    doc = json.loads(Path(args.config).read_text())
    doc["train"].update(steps=10**9, log_every=args.chunk_steps)  # no end-of-run checkpoint inside the chunks
    doc["train"]["checkpoint"] = {"every": 0, "consolidated": False, "resumable": False}
    doc["trainer"]["builtin"] = {"progress": False, "phase_timing": False}
    session = start(doc, Path(tempfile.mkdtemp()))
    ours = lambda: fit(session, session.step + args.chunk_steps)  # noqa: E731
    theirs = handwritten(doc)
    for warm in (ours, lambda: theirs(args.chunk_steps)):
        timed(warm)
    samples = args.chunk_steps * int(doc["train"]["micro_batch_size"]) * session.accelerator.num_processes
    a, b = [], []
    for i in range(args.chunks):
        pair = [("a", ours), ("b", lambda: theirs(args.chunk_steps))]
        for who, fn in pair if i % 2 == 0 else reversed(pair):
            (a if who == "a" else b).append(samples / timed(fn))
    if session.accelerator.is_main_process:
        ratios = [x / y for x, y in zip(a, b)]
        print(
            "SIDE_BY_SIDE "
            + json.dumps(
                {
                    "builtin_samples_per_s": statistics.median(a),
                    "handwritten_samples_per_s": statistics.median(b),
                    "ratio": statistics.median(ratios),
                    "builtin_chunks": a,
                    "handwritten_chunks": b,
                    "pair_ratios": ratios,
                }
            )
        )


if __name__ == "__main__":
    main()
