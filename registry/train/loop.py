"""The built-in accelerate training loop. Launched by `recipe run` through accelerate launch,
or through torchrun for DDP on a CPU-only host (docs/failure-modes.md §25)."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.nn.functional as F

from registry import view
from registry.train import CRASH_AFTER, LAUNCHED_AT, PHASES, RESUME, checkpoint
from registry.train.data import Synthetic, indices
from registry.train.metrics import Log, Phases, process_started
from registry.train.policy import build


def make_accelerator(doc: dict):
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

    recipe = view.of(doc)
    cpu = recipe.hardware.gpu is None
    kwargs = {
        "gradient_accumulation_steps": recipe.train.gradient_accumulation_steps,
        "step_scheduler_with_optimizer": False,  # one scheduler step per optimizer step, whatever the world size
    }
    handlers = []
    if cpu:
        # On a CPU host accelerate must be told gloo, else it sees each rank alone (docs/failure-modes.md §25).
        handlers.append(InitProcessGroupKwargs(backend="gloo", timeout=timedelta(minutes=10)))
        if recipe.backend.kind == "ddp":
            kwargs["cpu"] = True
            kwargs["mixed_precision"] = recipe.backend.mixed_precision
    return Accelerator(kwargs_handlers=handlers, **kwargs)


def make_optimizer(model: torch.nn.Module, opt) -> torch.optim.Optimizer:
    """train.optimizer as torch builds it; SGD has no betas or eps (the sgd-not-applicable rule)."""
    common = {"lr": float(opt.lr), "weight_decay": float(opt.weight_decay)}
    if opt.type == "sgd":
        return torch.optim.SGD(model.parameters(), **common)
    adam = {"betas": tuple(float(b) for b in opt.betas), "eps": float(opt.eps)}
    kind = torch.optim.AdamW if opt.type == "adamw" else torch.optim.Adam
    return kind(model.parameters(), **common, **adam)


def schedule(doc):
    train = view.of(doc).train
    steps = train.steps
    spec = train.scheduler
    kind, warmup = spec.type, spec.warmup_steps
    lr = float(train.optimizer.lr)
    peak = float(spec.peak_lr or lr)
    floor = float(spec.decay_lr) / peak
    decay = spec.decay_steps or steps

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if kind == "constant":
            return 1.0
        progress = min(1.0, (step - warmup) / max(1, decay - warmup))
        shape = 0.5 * (1 + math.cos(math.pi * progress)) if kind == "cosine_decay_with_warmup" else 1 - progress
        return floor + (1 - floor) * shape

    return factor


def local_numel(p: torch.Tensor) -> int:
    """Elements of a parameter held by this rank (ZeRO-3 partitions, FSDP2 DTensor shards)."""
    if hasattr(p, "ds_tensor"):
        return p.ds_tensor.numel()
    if hasattr(p, "to_local"):
        return p.to_local().numel()
    return p.numel()


@dataclass
class Session:
    """Everything the loop needs between steps; `fit` advances it."""

    doc: dict
    run_dir: Path
    accelerator: object
    model: torch.nn.Module
    optimizer: object
    scheduler: object
    data: Synthetic
    log: Log
    phases: Phases
    input_dtype: torch.dtype
    step: int = 0


def start(doc: dict, run_dir: Path, entered: float | None = None) -> Session:
    """Build the accelerator, policy, optimizer and schedule; resume if asked; log the start with
    where the start-up time went (recipe tune and benchmarks/grid.py pay it once per candidate)."""
    clock = Startup(entered)
    accelerator = make_accelerator(doc)
    clock.mark("accelerator")
    recipe = view.of(doc)
    train_cfg = recipe.train
    torch.manual_seed(train_cfg.seed)
    data = Synthetic(doc, accelerator.device)
    model = build(doc)
    if any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in model.parameters()):
        # Lazy modules must have their shapes before ZeRO-3 partitions them (docs/failure-modes.md §seed-000).
        with torch.no_grad():
            sample = data.batch(torch.arange(1))
            model(sample["images"].cpu(), sample["state"].cpu())
    param_numel = sum(p.numel() for p in model.parameters())
    clock.mark("model")
    optimizer = make_optimizer(model, train_cfg.optimizer)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule(doc))
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    clock.mark("prepare")

    deepspeed_half = accelerator.distributed_type.value == "DEEPSPEED" and accelerator.mixed_precision in (
        "bf16",
        "fp16",
    )
    # DeepSpeed casts the model and accelerate does not autocast: inputs are cast here (docs/failure-modes.md §21).
    input_dtype = (
        {"bf16": torch.bfloat16, "fp16": torch.float16}[accelerator.mixed_precision]
        if deepspeed_half
        else torch.float32
    )
    options = recipe.trainer.builtin
    # phase timing synchronises the GPU at each boundary: on by default only on CPU
    timing = accelerator.device.type == "cpu" if options.phase_timing is None else options.phase_timing
    phases = Phases(accelerator.device, timing)
    log = Log(run_dir / "metrics.jsonl", accelerator.is_main_process, train_cfg.steps, options.progress)
    session = Session(doc, run_dir, accelerator, model, optimizer, scheduler, data, log, phases, input_dtype)
    if os.environ.get(RESUME):
        session.step = checkpoint.load(accelerator, optimizer, Path(os.environ[RESUME]))
        log.resumed(session.step)
    rank, world = accelerator.process_index, accelerator.num_processes
    micro, accumulation = train_cfg.micro_batch_size, train_cfg.gradient_accumulation_steps
    first = indices(session.step, 0, accumulation, rank, world, micro, data.samples, data.seed).tolist()
    info = {
        "rank": rank,
        "first_batch": first,
        "local_param_numel": sum(local_numel(p) for p in model.parameters()),
        "param_numel": param_numel,
    }
    log.write(
        {
            "event": "resume" if session.step else "start",
            "step": session.step,
            "world_size": world,
            "distributed_type": accelerator.distributed_type.value,
            "mixed_precision": accelerator.mixed_precision,
            "param_numel": param_numel,
            "ranks": _gather_objects(info, world),
            "startup_s": clock.marks,
        }
    )
    return session


class Startup:
    """Seconds spent before the first step, by stage: `launcher` (from the launching command to
    this process), `interpreter`, `imports` (torch, accelerate, the trainer), then each stage of
    `start`. Rank 0's view; the launcher's share needs RECIPE_LAUNCHED_AT."""

    def __init__(self, entered: float | None):
        self.marks: dict[str, float] = {}
        now = time.time()
        began = process_started()
        launched = os.environ.get(LAUNCHED_AT)
        if launched and began is not None:
            self.marks["launcher"] = round(max(0.0, began - float(launched)), 3)
        if entered is not None:
            if began is not None:
                self.marks["interpreter"] = round(max(0.0, entered - began), 3)
            self.marks["imports"] = round(now - entered, 3)
        self._last = now

    def mark(self, stage: str) -> None:
        now = time.time()
        self.marks[stage] = round(now - self._last, 3)
        self._last = now


def fit(s: Session, until: int) -> None:
    """Train from s.step to `until`: accumulation, clipping, logging, checkpoints."""
    accelerator, model, optimizer, scheduler, data, phases = (
        s.accelerator,
        s.model,
        s.optimizer,
        s.scheduler,
        s.data,
        s.phases,
    )
    train_cfg = view.of(s.doc).train
    rank, world = accelerator.process_index, accelerator.num_processes
    micro, accumulation, steps = train_cfg.micro_batch_size, train_cfg.gradient_accumulation_steps, train_cfg.steps
    clip = train_cfg.optimizer.grad_clip_norm
    checkpoints = train_cfg.checkpoint
    every, consolidated, resumable = checkpoints.every, checkpoints.consolidated, checkpoints.resumable
    keep = checkpoints.keep
    log_every = train_cfg.log_every
    crash_after = int(os.environ.get(CRASH_AFTER, "0"))

    model.train()
    window_loss = torch.zeros((), device=accelerator.device)
    window_start, window_steps = time.perf_counter(), 0
    while s.step < until:
        for m in range(accumulation):
            phases.start()
            with accelerator.accumulate(model):
                batch = data.batch(
                    indices(s.step, m, accumulation, rank, world, micro, data.samples, data.seed), s.input_dtype
                )
                phases.mark("data")
                prediction = model(batch["images"], batch["state"])
                loss = F.mse_loss(prediction.float(), batch["actions"])
                phases.mark("forward")
                accelerator.backward(loss)
                phases.mark("backward")
                if clip and accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), float(clip))
                optimizer.step()
                optimizer.zero_grad()
                phases.mark("optimizer")
            window_loss += loss.detach() / accumulation
        scheduler.step()
        s.step += 1
        window_steps += 1
        if s.step % log_every == 0 or s.step == steps:
            record = _report(
                accelerator,
                s.step,
                window_loss,
                window_steps,
                time.perf_counter() - window_start,
                phases,
                micro * accumulation * world,
                scheduler.get_last_lr()[0],
            )
            s.log.write(record)
            s.log.progress(s.step, record, window_steps)
            window_loss.zero_()
            window_start, window_steps = time.perf_counter(), 0
        if (every and s.step % every == 0) or s.step == steps:
            saved = checkpoint.save(
                accelerator, model, s.run_dir, s.step, consolidated=consolidated, resumable=resumable, keep=keep
            )
            s.log.write({"event": "checkpoint", "step": s.step, "path": str(saved.relative_to(s.run_dir))})
            window_start = time.perf_counter()  # checkpoint time is not step time
        if crash_after and s.step == crash_after:
            # the test hook crashes once every rank is past the step's checkpoint: a rank that exits
            # first makes torchrun kill the others, maybe mid-write, which is a different test
            accelerator.wait_for_everyone()
            os._exit(1)


def finish(s: Session) -> None:
    probe(s.accelerator, s.model, s.data, s.run_dir / "checkpoints" / "last", s.input_dtype)
    s.log.write({"event": "end", "step": s.step, "time": time.time()})  # launchers time the exit from here
    s.log.close()
    s.accelerator.end_training()


def train(doc: dict, run_dir: Path, entered: float | None = None) -> None:
    session = start(doc, run_dir, entered)
    fit(session, view.of(doc).train.steps)
    finish(session)


def probe(accelerator, model, data: Synthetic, folder: Path, dtype: torch.dtype) -> None:
    """Outputs of the trained model on fixed inputs, saved beside the final checkpoint so that
    anyone can check that model.safetensors reproduces them."""
    model.eval()
    batch = data.batch(torch.arange(4), dtype)
    with torch.no_grad(), accelerator.autocast():
        outputs = model(batch["images"], batch["state"]).float()
    if accelerator.is_main_process and folder.exists():
        from safetensors.torch import save_file

        save_file(
            {"images": batch["images"].float().cpu(), "state": batch["state"].float().cpu(), "actions": outputs.cpu()},
            str(folder / "probe.safetensors"),
        )
    accelerator.wait_for_everyone()
    model.train()


def _report(accelerator, step, window_loss, window_steps, elapsed, phases, global_batch, lr) -> dict:
    device = accelerator.device
    if device.type == "cuda":
        torch.cuda.synchronize()
    allocated, reserved = phases.peak_memory()
    timings, peaks = phases.take()
    stats = torch.tensor(
        [elapsed, allocated, reserved, phases.resident, *timings, *peaks], dtype=torch.float64, device=device
    )
    worst = _all_reduce_max(stats)  # the slowest rank's time, the fullest rank's memory
    loss = accelerator.reduce(window_loss.clone(), reduction="mean").item() / window_steps
    slowest = worst[0].item()
    record = {
        "step": step,
        "loss": loss,
        "lr": lr,
        "samples_per_s": global_batch * window_steps / slowest if slowest > 0 else 0.0,
        "step_time_s": slowest / window_steps,
        "peak_allocated_gib": worst[1].item(),
        "peak_reserved_gib": worst[2].item(),
    }
    measured, peaks = worst[4 : 4 + len(PHASES)].tolist(), worst[4 + len(PHASES) :].tolist()
    if sum(measured) > 0:
        record["phases_s"] = {p: t / window_steps for p, t in zip(PHASES, measured)}
    if sum(peaks) > 0:
        record["resident_allocated_gib"] = worst[3].item()
        record["phase_peak_allocated_gib"] = dict(zip(PHASES, peaks))
    return record


def _all_reduce_max(t: torch.Tensor) -> torch.Tensor:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t


def _gather_objects(obj, world: int) -> list:
    import torch.distributed as dist

    if world > 1 and dist.is_initialized():
        out = [None] * world
        dist.all_gather_object(out, obj)
        return out
    return [obj]


def main(argv: list[str], entered: float | None = None) -> int:
    if len(argv) != 1:
        print("usage: python -m registry.train TRAIN_CONFIG.json", flush=True)
        return 2
    doc = json.loads(Path(argv[0]).read_text())
    try:
        train(doc, Path.cwd(), entered)
    except checkpoint.Unloadable as e:  # every rank meets it; `recipe run` shows identical lines once
        print(f"recipe: {e}", file=sys.stderr, flush=True)
        return 1
    return 0
