"""The DeepSpeed JSON <-> backend.* and train.*, both ways: explicit, consistent batch math
(docs/failure-modes.md §13), precision, ZeRO stage, offload with its NVMe paths
(docs/failure-modes.md §15) and the 16-bit gather for ZeRO-3 saves (docs/failure-modes.md §11).

Import reads the JSON as DeepSpeed does: a key it leaves out takes DeepSpeed's default
(`absent`), and both spellings of the ZeRO-3 gather key are accepted.
"""

from __future__ import annotations

import math

from registry.doc import MISSING
from registry.errors import Problem
from registry.topology import world_size
from registry.trainers.mapping import Computed, Const, Extra, Field, Table, field, write


def _whole(value):
    """DeepSpeed reads these as pydantic ints, which take a whole float (`5e8` in a JSON file): an
    import reads them the same way, so the recipe holds the int its integer fields require."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _stage3(doc) -> bool:
    return field(doc, "backend.zero_stage") == 3


def _precision(name: str):
    return lambda doc: field(doc, "backend.mixed_precision") == name


def _offloads(part: str):
    """Whether the recipe offloads `part` (optimizer states, or parameters under ZeRO-3)."""

    def offloads(doc) -> bool:
        return field(doc, f"backend.offload.{part}") != "none" and (part == "optimizer" or _stage3(doc))

    return offloads


def _offload(part: str) -> tuple:
    block, offloads = f"zero_optimization.offload_{part}", _offloads(part)
    return (
        Field(f"backend.offload.{part}", f"{block}.device", when=offloads),
        # DeepSpeed pins no memory unless asked
        Field("backend.offload.pin_memory", f"{block}.pin_memory", to=bool, absent=False, when=offloads),
        Field(
            "backend.nvme_path",
            f"{block}.nvme_path",
            when=lambda doc: offloads(doc) and field(doc, f"backend.offload.{part}") == "nvme",
        ),
    )


def _batch(doc) -> int:
    factors = (field(doc, "train.micro_batch_size"), field(doc, "train.gradient_accumulation_steps"), world_size(doc))
    if not all(type(f) is int for f in factors):
        # an imported "x" times 10**30 would build a string that fills memory; validation reports the type
        raise TypeError(f"not whole numbers: {factors!r}")
    return math.prod(factors)


TABLE = Table(
    Computed(
        "train_batch_size",
        _batch,
        reads=("train.micro_batch_size", "train.gradient_accumulation_steps", "hardware"),
        what="train.micro_batch_size x train.gradient_accumulation_steps x the world size",
        raises="DeepSpeed refuses to start: 'Check batch related parameters. train_batch_size is not equal to"
        " micro_batch_per_gpu * gradient_acc_step * world_size'",
    ),
    Field("train.micro_batch_size", "train_micro_batch_size_per_gpu", to=int, back=_whole),
    # absent, accelerate gives DeepSpeed its own value: 1 unless the trainer says otherwise
    Field("train.gradient_accumulation_steps", "gradient_accumulation_steps", to=int, back=_whole, absent=1),
    # DeepSpeed without gradient_clipping does not clip
    Field(
        "train.optimizer.grad_clip_norm",
        "gradient_clipping",
        to=float,
        absent=None,
        when=lambda doc: bool(field(doc, "train.optimizer.grad_clip_norm")),
    ),
    Field(
        "backend.mixed_precision",
        "bf16.enabled",
        to=lambda precision: precision == "bf16",
        back=lambda enabled: "bf16" if enabled is True else MISSING,
        aliases=("bfloat16.enabled",),
    ),
    Field(
        "backend.mixed_precision",
        "fp16.enabled",
        to=lambda precision: precision == "fp16",
        back=lambda enabled: "fp16" if enabled is True else MISSING,
    ),
    Const("fp16.loss_scale", 0, when=_precision("fp16")),  # dynamic loss scaling
    Const("fp16.initial_scale_power", 16, when=_precision("fp16")),
    # lets the run keep its torch optimizer instead of DeepSpeed's CPU Adam (docs/failure-modes.md §29)
    Const("zero_force_ds_cpu_optimizer", False, when=_offloads("optimizer")),
    Field("backend.zero_stage", "zero_optimization.stage", to=int, back=_whole),
    # written only where the recipe sets them: the schema's defaults are DeepSpeed's own
    Field("backend.overlap_comm", "zero_optimization.overlap_comm", stated=True),
    Field("backend.contiguous_gradients", "zero_optimization.contiguous_gradients", stated=True),
    Field("backend.reduce_bucket_size", "zero_optimization.reduce_bucket_size", back=_whole, stated=True),
    Field("backend.allgather_bucket_size", "zero_optimization.allgather_bucket_size", back=_whole, stated=True),
    *_offload("optimizer"),
    *_offload("param"),
    Field(
        "backend.zero3_save_16bit_model",
        "zero_optimization.stage3_gather_16bit_weights_on_model_save",
        to=bool,
        when=_stage3,
        aliases=(
            "zero_optimization.gather_16bit_weights_on_model_save",
            "zero_optimization.stage3_gather_fp16_weights_on_model_save",
        ),
        # accelerate's plugin reads only the stage3_ spelling (zero3_save_16bit_model) and saw false
        alias_note="DeepSpeed's spelling, which accelerate does not read (it took zero3_save_16bit_model as"
        " false); the recipe writes stage3_gather_16bit_weights_on_model_save, which both read",
        absent=lambda recipe: False if _stage3(recipe) else MISSING,
    ),
    Computed(
        "steps_per_print",
        lambda doc: field(doc, "train.steps") + 1,  # the trainer logs; DeepSpeed stays quiet
        reads=("train.steps",),
        what="train.steps + 1 (the trainer logs, DeepSpeed stays quiet)",
    ),
    Const("wall_clock_breakdown", False),
    Extra("backend.deepspeed_json"),
    auto=True,
)


def refused(ds: dict, origins: dict, file: str) -> list[Problem]:
    """What accelerate refuses in a DeepSpeed JSON before DeepSpeed reads it (import-conflict)."""
    found = []
    if "zero_optimization" not in ds:
        found.append(
            Problem(
                "error",
                "import-conflict",
                "",
                f"{file} has no zero_optimization section",
                file,
                "accelerate refuses it: 'Please specify the ZeRO optimization config in the DeepSpeed config.'",
            )
        )
    legacy = ds.get("bfloat16")
    if isinstance(legacy, dict) and "auto" in legacy.values():
        found.append(
            Problem(
                "error",
                "import-conflict",
                "",
                f"{file} bfloat16.enabled is 'auto', which accelerate fills in only under the key bf16",
                origins.get(("bfloat16",), file),
                "accelerate refuses it: '`bfloat16.enabled` not found in kwargs'; write bf16.enabled",
            )
        )
    return found


def deepspeed_config(doc: dict) -> dict | None:
    """The generated DeepSpeed JSON; None when the backend is not DeepSpeed or the recipe brings
    its own file (backend.deepspeed_config_file)."""
    if field(doc, "backend.kind") != "deepspeed" or field(doc, "backend.deepspeed_config_file"):
        return None
    return write(TABLE, doc)
