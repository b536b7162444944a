"""OpenTau: a TrainPipelineConfig JSON and `opentau-train --accelerate-config --config_path`.

opentau-train runs `accelerate launch --config_file <yaml> .../opentau/scripts/train.py` itself
(docs/failure-modes.md §28), and sets PYTORCH_CUDA_ALLOC_CONF unless the environment already has it.

TABLE maps the recipe onto the TrainPipelineConfig both ways: `train_config` resolves it,
`import_config` reads a team's config back (`recipe import --trainer opentau`).
"""

from __future__ import annotations

import json
from pathlib import Path

from registry import view
from registry.doc import MISSING, lookup
from registry.load import load_json
from registry.trainers.base import Context, Invocation, Raw
from registry.trainers.mapping import (
    Computed,
    Const,
    Extra,
    Field,
    Ignored,
    Keyed,
    Reader,
    Section,
    Table,
    field,
    stated,
    write,
)

CONFIG = "opentau.json"
PACKAGE = "opentau"
PROVEN = ("0.14.0", "0.15")  # its parser and validate() accept what TABLE writes (tests/test_opentau_upstream.py)
HINT = (
    "bash tests/upstream/opentau_env.sh ENV builds one (OpenTau 0.14.0 without its dependencies, and what"
    " its train() imports), then set trainer.env=ENV; OpenTau pins transformers 4.57, so it needs an"
    " environment of its own (docs/rehearsal.md)"
)
# what train.py imports at start-up besides accelerate, none of it brought by `pip install --no-deps
# opentau` (tests/upstream/opentau_env.sh says why each)
# OpenTau's AdamConfig and AdamWConfig build torch's fused Adam on a GPU (fused=True by default): the
# update allocates no fp32 temporary per parameter, which the memory estimate counts (registry/estimate.py)
FUSED_ADAM = True
NEEDS = ("torch", "torchvision", "transformers", "datasets", "draccus", "wandb", "gymnasium", "termcolor")
# read by the invocation besides TABLE (resolve/fields.py)
READS = ("trainer.opentau.program", "trainer.env")
# policy.type -> the policy part an imported recipe extends
PARTS = {"pi07_low_level": "pi07", "pi05": "pi05"}
# policies whose vlm_config (Gemma3WithExpertConfig) has disable_internal_bf16_cast: OpenTau's
# train.py sets it under FSDP, so their weights stay float32 there (docs/failure-modes.md §17)
FP32_UNDER_FSDP = ("pi07_low_level", "pi07_high_level")
_POLICY_FIELDS = (
    "type",
    "pretrained_path",
    "n_obs_steps",
    "history_interval",
    "chunk_size",
    "n_action_steps",
    "resize_imgs_with_padding",
    "attention_implementation",
    "gradient_checkpointing",
    "freeze_vision_encoder",
    "train_expert_only",
    "use_torch_compile",
)
_DATASET_FIELDS = (
    "action_freq",
    "image_resample_strategy",
    "vector_resample_strategy",
    "val_split_ratio",
    "n_obs_history",
)
_PRESET = (
    "a per-policy optimizer preset; the recipe sets the optimizer in train.optimizer and train.scheduler"
    " (keep it with policy.options)"
)


def _steps(doc) -> int:
    return field(doc, "train.steps")


def _option(name: str):
    return stated(f"policy.options.{name}")


def _keep(last_only):
    return 1 if last_only is True else MISSING


def _adam(doc) -> bool:
    return field(doc, "train.optimizer.type") != "sgd"  # SGD has no betas or eps


def _batch(doc) -> int:
    return field(doc, "train.micro_batch_size") * field(doc, "train.gradient_accumulation_steps")


TABLE = Table(
    Section(
        "dataset_mixture.datasets.0",
        Table(*(Field(f"dataset.{k}", k) for k in ("repo_id", "root", "episodes", "revision"))),
    ),
    Const("dataset_mixture.weights", [1.0], why="a recipe trains on one dataset"),
    *(Field(f"dataset.{k}", f"dataset_mixture.{k}", null=True) for k in _DATASET_FIELDS),
    Keyed("dataset.drop_probs", "dataset_mixture", suffix="_drop_prob"),
    Extra("dataset.options", "dataset_mixture"),
    *(Field(f"policy.{k}", f"policy.{k}", null=True) for k in _POLICY_FIELDS),
    Extra("policy.options", "policy"),
    Ignored("policy.optimizer_*", _PRESET),
    Ignored("policy.scheduler_*", _PRESET),
    Const("output_dir", "output", why="each run writes under its own directory"),
    Const("resume", False),
    Field("train.seed", "seed"),
    # the pipeline-level values overwrite the policy's at parse (docs/failure-modes.md §31)
    Field("policy.chunk_size", "action_chunk"),
    *(Field(f"policy.options.{k}", k, when=_option(k), exclusive=True) for k in ("max_state_dim", "max_action_dim")),
    Field("dataset.resolution", "resolution"),
    Field("dataset.num_cams", "num_cams"),
    Field("train.loss_weights", "loss_weighting"),
    Field("train.num_workers", "num_workers"),
    # OpenTau checks batch_size == dataloader_batch_size x gradient_accumulation_steps (docs/failure-modes.md §3)
    Field("train.batch_size", "batch_size", when=stated("train.batch_size"), exclusive=True),
    Computed(
        "batch_size",
        _batch,
        reads=("train.micro_batch_size", "train.gradient_accumulation_steps"),
        what="train.micro_batch_size x train.gradient_accumulation_steps",
        when=lambda doc: not stated("train.batch_size")(doc),
        raises="OpenTau refuses it at parse: '`batch_size` must be equal to `dataloader_batch_size *"
        " gradient_accumulation_steps`'",
    ),
    Field("train.micro_batch_size", "dataloader_batch_size"),
    Field("train.gradient_accumulation_steps", "gradient_accumulation_steps"),
    Field("train.steps", "steps"),
    Field("train.log_every", "log_freq"),
    Const("save_checkpoint", True),
    # OpenTau keeps only the last checkpoint unless told otherwise
    Field("train.checkpoint.keep", "last_checkpoint_only", to=lambda keep: keep == 1, unset=False, back=_keep),
    Field("train.checkpoint.every", "save_freq", derive=lambda every, doc: every or _steps(doc)),
    Field("train.optimizer.type", "optimizer.type"),
    *(Field(f"train.optimizer.{k}", f"optimizer.{k}", null=True) for k in ("lr", "weight_decay", "grad_clip_norm")),
    *(Field(f"train.optimizer.{k}", f"optimizer.{k}", null=True, when=_adam) for k in ("betas", "eps")),
    Field("train.scheduler.type", "scheduler.type"),
    Field("train.scheduler.warmup_steps", "scheduler.num_warmup_steps"),
    Field("train.scheduler.decay_steps", "scheduler.num_decay_steps", derive=lambda steps, doc: steps or _steps(doc)),
    Field(
        "train.scheduler.peak_lr",
        "scheduler.peak_lr",
        derive=lambda lr, doc: lr or field(doc, "train.optimizer.lr"),
    ),
    Field("train.scheduler.decay_lr", "scheduler.decay_lr"),
    Const("wandb", {"enable": False}),
    Field("train.eval.every", "eval_freq", when=stated("train.eval.every")),
    Field("train.eval.env", "env.type", when=stated("train.eval.env")),
    Field("train.prefetch_factor", "prefetch_factor", when=lambda doc: bool(field(doc, "train.prefetch_factor"))),
    Extra("trainer.opentau.config", mode="deep"),  # extra TrainPipelineConfig fields, merged last
)


def train_config(doc: dict) -> dict:
    return write(TABLE, doc)


def invocation(doc: dict, ctx: Context) -> Invocation:
    """opentau-train from the trainer's environment when trainer.env names one (launch.sh puts
    its bin/ first on PATH, so the accelerate it starts is that environment's too)."""
    program = view.of(doc).trainer.opentau.program
    if ctx.python and "/" not in program:
        program = str(Path(ctx.python).parent / program)
    config = ctx.accelerate_config
    flag = Raw(f"--accelerate-config={config}") if isinstance(config, Raw) else f"--accelerate-config={config}"
    files = {CONFIG: json.dumps(train_config(doc), indent=2) + "\n"}
    return Invocation(
        [program, flag, f"--config_path={CONFIG}"],
        program,
        HINT,
        files,
        package=PACKAGE,
        proven=PROVEN,
        python=ctx.python,
        needs=NEEDS,
    )


def import_config(path: Path, recipe: dict, notes: list[str]) -> str | None:
    """Read a TrainPipelineConfig JSON into `recipe`; the policy part to extend, if one fits."""
    loaded = load_json(path, "OpenTau TrainPipelineConfig JSON")
    cfg = loaded.data
    recipe["trainer"] = {"kind": "opentau"}
    reader = Reader(recipe, notes)
    reader.read(TABLE, cfg, path.name, loaded.origins)
    reader.finish()
    kind = lookup(cfg, "policy.type")
    if lookup(recipe, "backend.kind") == "fsdp" and kind in FP32_UNDER_FSDP:
        # no file says so: OpenTau decides it from accelerate's distributed_type
        reader.set(("policy", "dtype"), "float32", f"OpenTau's {kind} under FSDP")
    return PARTS.get(kind) if isinstance(kind, str) else None  # another type is the schema's to report
