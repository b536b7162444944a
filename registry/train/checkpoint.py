"""Checkpoints: `checkpoints/<step>/` holds model.safetensors (one consolidated file under every
backend), state/ (accelerate's save_state: optimizer, scheduler, RNG; sharded where the backend
shards) and trainer_state.json (step). A checkpoint is written under a temporary name and renamed
when complete; `checkpoints/last` then points at it."""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import torch

LAST = "last"


def folder(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"{step:06d}"


def save(accelerator, model, run_dir: Path, step: int, *, consolidated: bool, resumable: bool) -> Path:
    final = folder(run_dir, step)
    tmp = final.with_name(f".tmp-{final.name}")
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    if resumable:
        with _fsdp1_full_state(accelerator):
            accelerator.save_state(str(tmp / "state"))
    if consolidated:
        state = accelerator.get_state_dict(model)  # every rank takes part in the gather
        if accelerator.is_main_process:
            from safetensors.torch import save_file

            save_file({k: v.detach().to("cpu").contiguous() for k, v in state.items()}, str(tmp / "model.safetensors"))
    # every rank has written its part (save_state writes per-rank RNG files) before the rename
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / "trainer_state.json").write_text(json.dumps({"step": step}) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _point_last(run_dir / "checkpoints", final.name)
    accelerator.wait_for_everyone()
    return final


def _point_last(checkpoints: Path, name: str) -> None:
    link = checkpoints / LAST
    tmp = checkpoints / f".{LAST}.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(name)
    os.replace(tmp, link)


def find(path: Path) -> Path:
    """A checkpoint folder from itself, its checkpoints/ folder or its run directory."""
    for candidate in (path, path / LAST, path / "checkpoints" / LAST):
        if (candidate / "trainer_state.json").is_file():
            return candidate.resolve()
    raise FileNotFoundError(f"no checkpoint at {path} (expected checkpoints/last/trainer_state.json)")


def load(accelerator, optimizer, path: Path) -> int:
    """Restore optimizer, scheduler, RNG and weights; returns the step to continue from."""
    checkpoint = find(path)
    plugin = getattr(accelerator.state, "fsdp_plugin", None)
    if plugin is not None and plugin.fsdp_version == 2:
        _create_optimizer_state(optimizer)
    with _fsdp1_full_state(accelerator):
        accelerator.load_state(str(checkpoint / "state"))
    return int(json.loads((checkpoint / "trainer_state.json").read_text())["step"])


@contextmanager
def _fsdp1_full_state(accelerator):
    """FSDP1's sharded optimizer state does not load back through accelerate and DCP (seen on 2 x
    H200: 'Missing key in checkpoint state_dict: optimizer.param_groups'), so FSDP1 training
    state is saved and loaded as a full state dict; FSDP2 keeps sharded DCP checkpoints."""
    plugin = getattr(accelerator.state, "fsdp_plugin", None)
    if plugin is None or plugin.fsdp_version != 1:
        yield
        return
    previous = (plugin.state_dict_type, plugin.state_dict_config, plugin.optim_state_dict_config)
    plugin.state_dict_config = plugin.optim_state_dict_config = None  # else the sharded configs stay
    plugin.set_state_dict_type("FULL_STATE_DICT")
    try:
        yield
    finally:
        plugin.state_dict_type, plugin.state_dict_config, plugin.optim_state_dict_config = previous


def _create_optimizer_state(optimizer) -> None:
    """FSDP2 optimizer state loads through torch.distributed.checkpoint, which fills only the
    state that already exists: a fresh Adam has none, and would silently restart from zero
    moments. One step with zero gradients at learning rate 0 creates it without moving a weight."""
    inner = getattr(optimizer, "optimizer", optimizer)
    saved = [group["lr"] for group in inner.param_groups]
    for group in inner.param_groups:
        group["lr"] = 0.0
        for p in group["params"]:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
    inner.step()
    inner.zero_grad(set_to_none=True)
    for group, lr in zip(inner.param_groups, saved):
        group["lr"] = lr
