"""The project's own accelerate training entrypoint (`python -m registry.train`)."""

from __future__ import annotations

import json

from registry.trainers.base import Context, Invocation

CONFIG = "train_config.json"
# torch.optim.AdamW with torch's default on a GPU, foreach: one fp32 temporary per parameter in the update
FUSED_ADAM = False
# What registry/train reads of the recipe (resolve/fields.py; tests/test_fields.py traces it).
READS = (
    "policy.arch",
    "policy.chunk_size",
    "policy.n_obs_steps",
    "policy.gradient_checkpointing",
    "dataset.num_cams",
    "dataset.synthetic",
    "train.micro_batch_size",
    "train.gradient_accumulation_steps",
    "train.steps",
    "train.seed",
    "train.optimizer",
    "train.scheduler",
    "train.checkpoint.every",
    "train.checkpoint.consolidated",
    "train.checkpoint.resumable",
    "train.checkpoint.keep",
    "train.log_every",
    "trainer.builtin",
    "backend.kind",
    "backend.mixed_precision",
    "hardware.gpu",
)


def invocation(doc: dict, ctx: Context) -> Invocation:
    files = {CONFIG: json.dumps(doc, indent=2, sort_keys=False) + "\n"}
    entry = ["-m", "registry.train", CONFIG]
    if ctx.launcher == "torchrun":
        return Invocation(
            ctx.torchrun() + entry,
            "torchrun",
            "pip install torch",
            files,
            uses_accelerate_config=False,
            same_python=True,
        )
    return Invocation(ctx.accelerate() + entry, "accelerate", "pip install accelerate", files, same_python=True)
