"""Checkpoints: `checkpoints/<step>/` holds model.safetensors (one consolidated file under every
backend), state/ (accelerate's save_state: optimizer, scheduler, RNG; sharded where the backend
shards) and trainer_state.json (step and the size of every file, see state.py). A checkpoint is
written under a temporary name and renamed when complete; `checkpoints/last` then points at it,
and checkpoints beyond train.checkpoint.keep, the oldest first, are removed."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import torch

from registry.train import state

LAST = "last"


def folder(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"{step:06d}"


def save(
    accelerator, model, run_dir: Path, step: int, *, consolidated: bool, resumable: bool, keep: int | None = None
) -> Path:
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
        weights = accelerator.get_state_dict(model)  # every rank takes part in the gather
        if accelerator.is_main_process:
            from safetensors.torch import save_file

            save_file(
                {k: v.detach().to("cpu").contiguous() for k, v in weights.items()}, str(tmp / "model.safetensors")
            )
    # every rank has written its part (save_state writes per-rank RNG files) before the rename
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        state.write(tmp, step)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _point_last(run_dir / "checkpoints", final.name)
        if keep:
            _prune(run_dir / "checkpoints", keep)
    accelerator.wait_for_everyone()
    return final


def _prune(checkpoints: Path, keep: int) -> None:
    """Remove all but the newest `keep` checkpoints (`last` points at the newest)."""
    found = sorted(p for p in checkpoints.glob("*") if state.CHECKPOINT.fullmatch(p.name) and p.is_dir())
    for old in found[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _point_last(checkpoints: Path, name: str) -> None:
    link = checkpoints / LAST
    tmp = checkpoints / f".{LAST}.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(name)
    os.replace(tmp, link)


def find(path: Path) -> Path:
    """A checkpoint folder from itself, its checkpoints/ folder or its run directory."""
    for candidate in (path, path / LAST, path / "checkpoints" / LAST):
        if (candidate / state.FILE).is_file():
            return candidate.resolve()
    raise FileNotFoundError(f"no checkpoint at {path} (expected checkpoints/last/{state.FILE})")


class Unloadable(Exception):
    """A checkpoint that cannot be resumed from: its message is the one line a rank prints."""


def load(accelerator, optimizer, path: Path) -> int:
    """Restore optimizer, scheduler, RNG and weights; returns the step to continue from.
    `recipe run --resume` has already picked a complete checkpoint (state.complete); a damaged
    file that kept its size is found here, as Unloadable."""
    try:
        checkpoint = find(path)
        step = state.check(checkpoint)
    except (FileNotFoundError, ValueError) as e:
        raise Unloadable(f"cannot resume from {path}: {e}") from None
    plugin = getattr(accelerator.state, "fsdp_plugin", None)
    if plugin is not None and plugin.fsdp_version == 2:
        _create_optimizer_state(optimizer)
    try:
        with _fsdp1_full_state(accelerator):
            accelerator.load_state(str(checkpoint / "state"))
    except Exception as e:  # whatever the loader raises on damaged files: one line, not a traceback per rank
        raise Unloadable(
            f"cannot resume from {checkpoint}: its state does not load ({type(e).__name__}: {str(e)[:200]})"
            f" (hint: resume from an earlier checkpoint with --resume {checkpoint.parent}/NNNNNN)"
        ) from None
    return step


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
