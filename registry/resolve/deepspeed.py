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
        # absent, DeepSpeed pins: its offload models default pin_memory to True (0.19.8, the pinned
        # release; tests/test_mutant_classes.py compares every such default with the installed one)
        Field("backend.offload.pin_memory", f"{block}.pin_memory", to=bool, absent=True, when=offloads),
        Field(
            "backend.nvme_path",
            f"{block}.nvme_path",
            when=lambda doc: offloads(doc) and field(doc, f"backend.offload.{part}") == "nvme",
        ),
    )


def sequence_parallel(doc) -> int:
    """The DeepSpeed (Ulysses/ALST) sequence-parallel size an accelerate yaml's parallelism_config
    asks for (kept in backend.accelerate), else 1. DeepSpeed's batch check counts data-parallel
    ranks only, and accelerate sets train_batch_size to micro x accumulation x (world / sp) under it
    (docs/failure-modes.md §57)."""
    config = (field(doc, "backend.accelerate") or {}).get("parallelism_config")
    if not isinstance(config, dict):
        return 1
    size, backend = config.get("parallelism_config_sp_size", 1), config.get("parallelism_config_sp_backend")
    if type(size) is not int or size < 1 or backend not in (None, "deepspeed"):
        return 1
    return size


def _batch(doc) -> int:
    ranks = world_size(doc) // sequence_parallel(doc)
    factors = (field(doc, "train.micro_batch_size"), field(doc, "train.gradient_accumulation_steps"), ranks)
    if not all(type(f) is int for f in factors):
        # an imported "x" times 10**30 would build a string that fills memory; validation reports the type
        raise TypeError(f"not whole numbers: {factors!r}")
    return math.prod(factors)


TABLE = Table(
    Computed(
        "train_batch_size",
        _batch,
        reads=("train.micro_batch_size", "train.gradient_accumulation_steps", "hardware"),
        what="train.micro_batch_size x train.gradient_accumulation_steps x the world size"
        " (over the sequence-parallel size, under DeepSpeed sequence parallelism)",
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
    found += _precision_conflict(ds, origins, file) + _zero_keys(ds, origins, file)
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


def _enabled(ds: dict, key: str):
    section = ds.get(key)
    return section.get("enabled") if isinstance(section, dict) else None


def _precision_conflict(ds: dict, origins: dict, file: str) -> list[Problem]:
    """fp16 and bf16 (or its legacy key bfloat16) both enabled: DeepSpeed asserts, where the
    import would keep one of them (docs/failure-modes.md §55)."""
    bf16 = next((k for k in ("bf16", "bfloat16") if _enabled(ds, k) is True), None)
    if _enabled(ds, "fp16") is not True or bf16 is None:
        return []
    return [
        Problem(
            "error",
            "import-conflict",
            "",
            f"{file} enables both fp16 and {bf16}",
            origins.get((bf16, "enabled"), origins.get((bf16,), file)),
            "DeepSpeed refuses it: 'bfloat16 and fp16 modes cannot be simultaneously enabled'; keep one",
        )
    ]


# DeepSpeedZeroConfig's fields and aliases (DeepSpeed 0.19): the model forbids any other key
ZERO_KEYS = frozenset(
    [
        "stage",
        "contiguous_gradients",
        "reduce_scatter",
        "reduce_bucket_size",
        "use_multi_rank_bucket_allreduce",
        "allgather_partitions",
        "allgather_bucket_size",
        "overlap_comm",
        "compute_grad_norm",
        "load_from_fp32_weights",
        "elastic_checkpoint",
        "offload_param",
        "offload_optimizer",
        "zenflow",
        "sub_group_size",
        "cpu_offload_param",
        "cpu_offload_use_pin_memory",
        "cpu_offload",
        "prefetch_bucket_size",
        "stage3_prefetch_bucket_size",
        "param_persistence_threshold",
        "stage3_param_persistence_threshold",
        "model_persistence_threshold",
        "stage3_model_persistence_threshold",
        "max_live_parameters",
        "stage3_max_live_parameters",
        "max_reuse_distance",
        "stage3_max_reuse_distance",
        "gather_16bit_weights_on_model_save",
        "stage3_gather_16bit_weights_on_model_save",
        "module_granularity_threshold",
        "stage3_module_granularity_threshold",
        "use_all_reduce_for_fetch_params",
        "stage3_use_all_reduce_for_fetch_params",
        "allgather_sequential",
        "stage3_allgather_sequential",
        "stage3_gather_fp16_weights_on_model_save",
        "ignore_unused_parameters",
        "legacy_stage1",
        "round_robin_gradients",
        "parameter_alignment",
        "zero_hpz_partition_size",
        "zero_quantized_weights",
        "zero_quantized_nontrainable_weights",
        "zero_quantized_gradients",
        "memory_efficient_linear",
        "pipeline_loading_checkpoint",
        "override_module_apply",
        "log_trace_cache_warnings",
        "enable_sanity_checks",
        "save_muon_momentum_buffer_in_memory",
        "leaf_module",
    ]
)
# deprecated boolean forms and the sections that replaced them: DeepSpeed refuses both together
ZERO_REPLACED = {
    "cpu_offload": "offload_optimizer",
    "cpu_offload_param": "offload_param",
    "stage3_gather_fp16_weights_on_model_save": "stage3_gather_16bit_weights_on_model_save",
}


def _zero_keys(ds: dict, origins: dict, file: str) -> list[Problem]:
    """zero_optimization keys DeepSpeedZeroConfig refuses: unknown ones (its pydantic model forbids
    extra fields) and a deprecated key beside its replacement (docs/failure-modes.md §56)."""
    zero = ds.get("zero_optimization")
    if not isinstance(zero, dict):
        return []
    found = []
    for key in zero:
        where = origins.get(("zero_optimization", key), file)
        if isinstance(key, str) and key not in ZERO_KEYS:
            top = " (it is a top-level DeepSpeed section)" if key in ("aio", "bf16", "fp16", "optimizer") else ""
            found.append(
                Problem(
                    "error",
                    "import-conflict",
                    "",
                    f"{file} zero_optimization.{key} is not a ZeRO setting{top}",
                    where,
                    "DeepSpeed refuses it: DeepSpeedZeroConfig 'Extra inputs are not permitted'",
                )
            )
        elif key in ZERO_REPLACED and ZERO_REPLACED[key] in zero:
            found.append(
                Problem(
                    "error",
                    "import-conflict",
                    "",
                    f"{file} zero_optimization.{key} is the deprecated form of {ZERO_REPLACED[key]}, which is also set",
                    where,
                    f"DeepSpeed refuses it: 'Cannot provide deprecated parameter {key!r} and replacing parameter"
                    f" {ZERO_REPLACED[key]!r} together'; keep {ZERO_REPLACED[key]}",
                )
            )
    return found
