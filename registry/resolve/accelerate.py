"""The accelerate config yaml <-> the recipe, both ways: only keys accelerate knows, the process
counts from the hardware part, and DeepSpeed settings left to the DeepSpeed JSON
(docs/failure-modes.md §12, §15). The fsdp_config section's table is fsdp.py's; the DeepSpeed
JSON's is deepspeed.py's.

Import (`import_config`) reads a team's yaml as `accelerate launch` does, and the DeepSpeed JSON
its deepspeed_config_file names; the trainer's config is read by its adapter in trainers/.
"""

from __future__ import annotations

import json
from pathlib import Path

from registry.doc import MISSING
from registry.errors import Exit, RecipeError
from registry.load import load_file
from registry.resolve import deepspeed, fsdp
from registry.topology import nodes, world_size
from registry.trainers.mapping import Computed, Const, Extra, Field, Notes, Reader, Section, Table, field, write

DEEPSPEED_JSON = "deepspeed.json"
# distributed_type -> backend.kind
BACKENDS = {"NO": "ddp", "MULTI_GPU": "ddp", "MULTI_CPU": "ddp", "DEEPSPEED": "deepspeed", "FSDP": "fsdp"}


def distributed_type(doc) -> str:
    kind = field(doc, "backend.kind")
    if kind == "deepspeed":
        return "DEEPSPEED"
    if kind == "fsdp":
        return "FSDP"
    if world_size(doc) == 1:
        return "NO"
    return "MULTI_CPU" if field(doc, "hardware.gpu") is None else "MULTI_GPU"


def _is(kind: str):
    return lambda doc: field(doc, "backend.kind") == kind


def _stage3(doc) -> bool:
    return field(doc, "backend.zero_stage") == 3


def _multi_node(doc) -> bool:
    return nodes(doc) > 1


def _nvme(path):
    return MISSING if path in (None, "none") else path


_NVME_NOTE = "nvme path moved from the yaml into the recipe (accelerate does not forward it: docs/failure-modes.md §15)"

# The yaml's deepspeed_config section. Resolve points it at the DeepSpeed JSON; accelerate's inline
# settings (emit=False) are read on import only, with the defaults `accelerate launch` gives them.
DEEPSPEED_SECTION = Table(
    Field("backend.zero_stage", "zero_stage", back=int, absent=2, emit=False),
    Field("backend.offload.optimizer", "offload_optimizer_device", emit=False),
    Field("backend.offload.param", "offload_param_device", emit=False),
    Field("backend.nvme_path", "offload_optimizer_nvme_path", back=_nvme, note=_NVME_NOTE, emit=False),
    Field("backend.nvme_path", "offload_param_nvme_path", back=_nvme, note=_NVME_NOTE, emit=False),
    Field(
        "backend.zero3_save_16bit_model",
        "zero3_save_16bit_model",
        back=fsdp.truth,
        absent=lambda recipe: False if _stage3(recipe) else MISSING,
        emit=False,
    ),
    Field("train.optimizer.grad_clip_norm", "gradient_clipping", back=float, emit=False),
    Field("train.gradient_accumulation_steps", "gradient_accumulation_steps", back=int, emit=False),
    # import reads the file it names through deepspeed.TABLE instead (import_config)
    Field(
        "backend.deepspeed_config_file",
        "deepspeed_config_file",
        unset=DEEPSPEED_JSON,
        back=lambda _: MISSING,
    ),
    Field(
        "backend.zero3_init_flag",
        "zero3_init_flag",
        to=bool,
        back=fsdp.truth,
        when=_stage3,
        absent=lambda recipe: True if _stage3(recipe) else MISSING,
    ),
    Const("deepspeed_multinode_launcher", "standard", when=_multi_node),
    auto=True,
)

TABLE = Table(
    Const("compute_environment", "LOCAL_MACHINE"),
    Const("debug", False),
    Computed(
        "distributed_type",
        distributed_type,
        reads=("backend.kind", "hardware"),
        what="backend.kind and the process count",
    ),
    Const("downcast_bf16", "no"),
    Const("machine_rank", 0, why="each node's rank comes from launch.sh (MACHINE_RANK)"),
    Const("main_training_function", "main"),
    Field("hardware.nodes", "num_machines", to=int, back=int),
    Computed("num_processes", world_size, reads=("hardware",), what="hardware.nodes x the processes per node"),
    Field("launch.rdzv_backend", "rdzv_backend"),
    Field("launch.same_network", "same_network", to=bool, back=fsdp.truth, absent=False),
    Computed("use_cpu", lambda doc: field(doc, "hardware.gpu") is None, reads=("hardware",), what="hardware.gpu"),
    # With deepspeed_config_file accelerate refuses mixed_precision, even 'no' (docs/failure-modes.md §12).
    Field("backend.mixed_precision", "mixed_precision", when=lambda doc: field(doc, "backend.kind") != "deepspeed"),
    Field("launch.main_process_ip", "main_process_ip", unset="127.0.0.1", when=_multi_node),
    # on one node a busy port makes accelerate pick a free one; several nodes must agree on it
    Field("launch.main_process_port", "main_process_port", to=int, back=int),
    Section("deepspeed_config", DEEPSPEED_SECTION, when=_is("deepspeed")),
    Section("fsdp_config", fsdp.TABLE, when=_is("fsdp")),
    Extra("backend.accelerate", mode="scalars"),
)


def accelerate_config(doc: dict) -> dict:
    return write(TABLE, doc)


def fsdp_section(doc: dict) -> dict:
    return write(fsdp.TABLE, doc)


def import_config(path: Path, gpu: str) -> tuple[dict, Notes]:
    """A recipe's backend, hardware, launch and train fields from a team's accelerate yaml (and the
    DeepSpeed JSON it names), with notes on what it could not place. The trainer's config is read
    into the same recipe and notes next; `mapping.finish` ends the import."""
    data = load_file(path).data
    kind = data.get("distributed_type") or "NO"
    if kind not in BACKENDS:
        raise RecipeError(
            f"{path}: distributed_type {kind!r} has no recipe backend (known: {', '.join(BACKENDS)})", Exit.INVALID
        )
    # the hardware part from the process counts, which the table then checks (num_processes, use_cpu)
    processes, machines = int(data.get("num_processes") or 1), int(data.get("num_machines") or 1)
    per_node = processes // max(1, machines)
    cpu = bool(data.get("use_cpu")) or kind == "MULTI_CPU"
    recipe: dict = {
        "backend": {"kind": BACKENDS[kind]},
        "hardware": (
            {"gpu": None, "gpus_per_node": 0, "processes_per_node": per_node, "nodes": machines}
            if cpu
            else {"gpu": gpu, "gpus_per_node": per_node, "nodes": machines}
        ),
    }
    notes = Notes()
    reader = Reader(recipe, notes)
    reader.read(TABLE, data, path.name)
    section = data.get("deepspeed_config") or {}
    if kind == "DEEPSPEED" and section.get("deepspeed_config_file"):
        file = (path.parent / section["deepspeed_config_file"]).resolve()
        try:
            ds = json.loads(file.read_text())
        except (OSError, ValueError) as e:
            raise RecipeError(f"{path}: cannot read deepspeed_config_file {file}: {e}", Exit.INVALID) from None
        reader.read(deepspeed.TABLE, ds, file.name)
    reader.finish()
    return recipe, notes
