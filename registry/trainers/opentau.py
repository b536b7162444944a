"""OpenTau: a TrainPipelineConfig JSON and `opentau-train --accelerate-config --config_path`.

opentau-train runs `accelerate launch --config_file <yaml> .../opentau/scripts/train.py` itself
(INVARIANTS 28), and sets PYTORCH_CUDA_ALLOC_CONF unless the environment already has it.
"""

from __future__ import annotations

import json

from registry.doc import merge
from registry.trainers.base import Context, Invocation, Raw

CONFIG = "opentau.json"
HINT = "pip install opentau (Python 3.10, transformers>=4.57,<4.58), in an environment of its own"
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


def train_config(doc: dict) -> dict:
    policy, dataset, train = doc["policy"], doc["dataset"], doc["train"]
    micro, accumulation = int(train["micro_batch_size"]), int(train.get("gradient_accumulation_steps", 1))
    source = {k: dataset[k] for k in ("repo_id", "root", "episodes", "revision") if dataset.get(k) is not None}
    mixture = {"datasets": [source], "weights": [1.0], **{k: dataset[k] for k in _DATASET_FIELDS if k in dataset}}
    mixture.update({f"{name}_drop_prob": p for name, p in dataset.get("drop_probs", {}).items()})
    mixture.update(dataset.get("options", {}))
    optimizer, scheduler = train.get("optimizer", {}), train.get("scheduler", {})
    every = int(train.get("checkpoint", {}).get("every", 0))
    config = {
        "dataset_mixture": mixture,
        "policy": {**{k: policy[k] for k in _POLICY_FIELDS if k in policy}, **policy.get("options", {})},
        "output_dir": "output",
        "resume": False,
        "seed": train.get("seed", 1000),
        "resolution": dataset.get("resolution") or [224, 224],
        "num_cams": dataset.get("num_cams", 1),
        "loss_weighting": train.get("loss_weights") or {"MSE": 1, "CE": 1},
        "num_workers": train.get("num_workers", 4),
        "batch_size": micro * accumulation,  # OpenTau checks batch_size == dataloader x accumulation
        "dataloader_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps": train["steps"],
        "log_freq": train.get("log_every", 10),
        "save_checkpoint": True,
        "save_freq": every or train["steps"],
        "optimizer": {
            "type": optimizer.get("type", "adamw"),
            **{k: optimizer[k] for k in ("lr", "weight_decay", "grad_clip_norm", "betas", "eps") if k in optimizer},
        },
        "scheduler": {
            "type": scheduler.get("type", "cosine_decay_with_warmup"),
            "num_warmup_steps": scheduler.get("warmup_steps", 0),
            "num_decay_steps": scheduler.get("decay_steps") or train["steps"],
            "peak_lr": scheduler.get("peak_lr") or optimizer.get("lr"),
            "decay_lr": scheduler.get("decay_lr", 0.0),
        },
        "wandb": {"enable": False},
    }
    if train.get("prefetch_factor"):
        config["prefetch_factor"] = train["prefetch_factor"]
    return merge(config, doc["trainer"].get("opentau", {}).get("config", {}))


def invocation(doc: dict, ctx: Context) -> Invocation:
    program = doc["trainer"].get("opentau", {}).get("program", "opentau-train")
    config = ctx.accelerate_config
    flag = Raw(f"--accelerate-config={config}") if isinstance(config, Raw) else f"--accelerate-config={config}"
    files = {CONFIG: json.dumps(train_config(doc), indent=2) + "\n"}
    return Invocation([program, flag, f"--config_path={CONFIG}"], program, HINT, files)
