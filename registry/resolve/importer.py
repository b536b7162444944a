"""`recipe import`: a team's existing accelerate yaml (and OpenTau JSON or LeRobot flags) turned
into a recipe file: the adoption path. Every field read lands where the recipe keeps it; what
has no place in a recipe is reported, not dropped silently."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import yaml

from registry.errors import RecipeError
from registry.files import SCHEMA_DIR
from registry.load import load_file
from registry.names import Name
from registry.sharing import sources

OPENTAU_PARTS = {"pi07_low_level": "pi07", "pi05": "pi05"}
_DISTRIBUTED = {"MULTI_GPU": "ddp", "NO": "ddp", "MULTI_CPU": "ddp", "DEEPSPEED": "deepspeed", "FSDP": "fsdp"}
_POLICY_KEYS = (
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


def from_accelerate(path: Path, gpu: str) -> tuple[dict, list[str]]:
    data = load_file(path).data
    notes: list[str] = []
    kind = data.get("distributed_type", "NO")
    if kind not in _DISTRIBUTED:
        raise RecipeError(
            f"{path}: distributed_type {kind!r} has no recipe backend (known: {', '.join(_DISTRIBUTED)})", 1
        )
    processes, machines = int(data.get("num_processes", 1)), int(data.get("num_machines", 1))
    cpu = bool(data.get("use_cpu")) or kind == "MULTI_CPU"
    backend: dict = {"kind": _DISTRIBUTED[kind], "mixed_precision": str(data.get("mixed_precision") or "no")}
    recipe: dict = {"backend": backend, "train": {}}
    per_node = processes // max(1, machines)
    recipe["hardware"] = (
        {"gpu": None, "gpus_per_node": 0, "processes_per_node": per_node, "nodes": machines}
        if cpu
        else {"gpu": gpu, "gpus_per_node": per_node, "nodes": machines}
    )
    if machines > 1:
        recipe["launch"] = {
            k: data[k] for k in ("main_process_ip", "main_process_port", "rdzv_backend") if data.get(k) is not None
        }
    if kind == "DEEPSPEED":
        _deepspeed(data.get("deepspeed_config") or {}, path, recipe, notes)
    if kind == "FSDP":
        _fsdp(data.get("fsdp_config") or {}, recipe)
    return recipe, notes


def _deepspeed(section: dict, path: Path, recipe: dict, notes: list[str]) -> None:
    backend, train = recipe["backend"], recipe["train"]
    if section.get("deepspeed_config_file"):
        file = (path.parent / section["deepspeed_config_file"]).resolve()
        try:
            ds = json.loads(file.read_text())
        except (OSError, ValueError) as e:
            raise RecipeError(f"{path}: cannot read deepspeed_config_file {file}: {e}", 1) from None
        zero = ds.get("zero_optimization", {})
        backend["zero_stage"] = int(zero.get("stage", 0))
        for key in ("offload_optimizer", "offload_param"):
            if isinstance(zero.get(key), dict):
                backend.setdefault("offload", {})[key.split("_")[1]] = zero[key].get("device", "none")
                if zero[key].get("nvme_path"):
                    backend["nvme_path"] = zero[key]["nvme_path"]
        if ds.get("bf16", {}).get("enabled") is True:
            backend["mixed_precision"] = "bf16"
        elif ds.get("fp16", {}).get("enabled") is True:
            backend["mixed_precision"] = "fp16"
        for src, dst in (
            ("train_micro_batch_size_per_gpu", "micro_batch_size"),
            ("gradient_accumulation_steps", "gradient_accumulation_steps"),
        ):
            if isinstance(ds.get(src), int):
                train[dst] = ds[src]
        if isinstance(ds.get("gradient_clipping"), (int, float)):
            train.setdefault("optimizer", {})["grad_clip_norm"] = float(ds["gradient_clipping"])
        if zero.get("stage3_gather_16bit_weights_on_model_save") is not None:
            backend["zero3_save_16bit_model"] = bool(zero["stage3_gather_16bit_weights_on_model_save"])
        return
    backend["zero_stage"] = int(section.get("zero_stage", 0))
    offload = {
        "optimizer": section.get("offload_optimizer_device") or "none",
        "param": section.get("offload_param_device") or "none",
    }
    backend["offload"] = offload
    for key in ("zero3_init_flag", "zero3_save_16bit_model"):
        if section.get(key) is not None:
            backend[key] = bool(section[key])
    if section.get("gradient_clipping") is not None:
        train.setdefault("optimizer", {})["grad_clip_norm"] = float(section["gradient_clipping"])
    if section.get("gradient_accumulation_steps") not in (None, "auto"):
        train["gradient_accumulation_steps"] = int(section["gradient_accumulation_steps"])
    if section.get("offload_optimizer_nvme_path") or section.get("offload_param_nvme_path"):
        backend["nvme_path"] = section.get("offload_optimizer_nvme_path") or section.get("offload_param_nvme_path")
        notes.append("nvme path moved from the yaml into the recipe (accelerate does not forward it: INVARIANTS 15)")


def _fsdp(section: dict, recipe: dict) -> None:
    backend = recipe["backend"]
    version = int(section.get("fsdp_version", 1))
    backend["version"] = version
    reshard = section.get("fsdp_reshard_after_forward", section.get("fsdp_sharding_strategy"))
    if version == 1:
        backend["sharding"] = str(reshard or "FULL_SHARD").upper()
        backend["use_orig_params"] = bool(section.get("fsdp_use_orig_params", False))
        backend["forward_prefetch"] = bool(section.get("fsdp_forward_prefetch", False))
        if section.get("fsdp_backward_prefetch"):
            backend["backward_prefetch"] = section["fsdp_backward_prefetch"]
    else:
        backend["reshard_after_forward"] = bool(True if reshard is None else reshard)
        if "fsdp_use_orig_params" in section:
            backend["use_orig_params"] = bool(section["fsdp_use_orig_params"])
    backend["auto_wrap_policy"] = section.get("fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP")
    classes = [c.strip() for c in str(section.get("fsdp_transformer_layer_cls_to_wrap") or "").split(",") if c.strip()]
    if classes:
        recipe.setdefault("policy", {})["block_classes"] = classes
    for src, dst in (
        ("fsdp_state_dict_type", "state_dict_type"),
        ("fsdp_activation_checkpointing", "activation_checkpointing"),
        ("fsdp_sync_module_states", "sync_module_states"),
        ("fsdp_cpu_ram_efficient_loading", "cpu_ram_efficient_loading"),
        ("fsdp_offload_params", "offload_params"),
        ("fsdp_min_num_params", "min_num_params"),
    ):
        if src in section:
            backend[dst] = section[src]


def from_opentau(path: Path, recipe: dict) -> str | None:
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RecipeError(f"{path}: not an OpenTau TrainPipelineConfig JSON: {e}", 1) from None
    policy_cfg, mixture = cfg.get("policy", {}), cfg.get("dataset_mixture", {})
    policy = recipe.setdefault("policy", {})
    policy.update({k: policy_cfg[k] for k in _POLICY_KEYS if k in policy_cfg})
    extra = {
        k: v for k, v in policy_cfg.items() if k not in _POLICY_KEYS and not k.startswith(("optimizer_", "scheduler_"))
    }
    if extra:
        policy["options"] = extra
    dataset = recipe.setdefault("dataset", {})
    first = (mixture.get("datasets") or [{}])[0]
    dataset.update({k: first[k] for k in ("repo_id", "root", "episodes", "revision") if first.get(k) is not None})
    for key in (
        "n_obs_history",
        "action_freq",
        "image_resample_strategy",
        "vector_resample_strategy",
        "val_split_ratio",
    ):
        if mixture.get(key) is not None:
            dataset[key] = mixture[key]
    drops = {k[: -len("_drop_prob")]: v for k, v in mixture.items() if k.endswith("_drop_prob")}
    if drops:
        dataset["drop_probs"] = drops
    for key in ("resolution", "num_cams"):
        if cfg.get(key) is not None:
            dataset[key] = cfg[key]
    train = recipe.setdefault("train", {})
    if cfg.get("dataloader_batch_size"):
        train["micro_batch_size"] = cfg["dataloader_batch_size"]
    for src, dst in (
        ("gradient_accumulation_steps", "gradient_accumulation_steps"),
        ("steps", "steps"),
        ("seed", "seed"),
        ("log_freq", "log_every"),
        ("num_workers", "num_workers"),
        ("prefetch_factor", "prefetch_factor"),
    ):
        if cfg.get(src) is not None:
            train[dst] = cfg[src]
    if cfg.get("batch_size") is not None:
        train["batch_size"] = cfg["batch_size"]  # checked against micro x accumulation (INVARIANTS 3)
    if cfg.get("save_freq"):
        train["checkpoint"] = {"every": cfg["save_freq"]}
    if cfg.get("loss_weighting"):
        train["loss_weights"] = cfg["loss_weighting"]
    opt = {
        k: v
        for k, v in (cfg.get("optimizer") or {}).items()
        if k in ("type", "lr", "weight_decay", "grad_clip_norm", "betas", "eps")
    }
    if opt:
        train["optimizer"] = {**train.get("optimizer", {}), **opt}
    sched = cfg.get("scheduler") or {}
    if sched:
        train["scheduler"] = {
            k: v
            for k, v in {
                "type": sched.get("type"),
                "warmup_steps": sched.get("num_warmup_steps"),
                "decay_steps": sched.get("num_decay_steps"),
                "peak_lr": sched.get("peak_lr"),
                "decay_lr": sched.get("decay_lr"),
            }.items()
            if v is not None
        }
    recipe["trainer"] = {"kind": "opentau"}
    return OPENTAU_PARTS.get(policy_cfg.get("type"))


def from_lerobot(args: str, recipe: dict) -> str | None:
    flags: dict[str, str] = {}
    rest: list[str] = []
    tokens = shlex.split(args)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--") and "=" in token:
            key, value = token[2:].split("=", 1)
        elif token.startswith("--") and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            key, value = token[2:], tokens[i + 1]
            i += 1
        else:
            raise RecipeError(
                f"--trainer-args: cannot read {token!r} (hint: --key=value flags as lerobot-train takes them)"
            )
        flags[key] = value
        i += 1
    policy, dataset, train = (
        recipe.setdefault("policy", {}),
        recipe.setdefault("dataset", {}),
        recipe.setdefault("train", {}),
    )
    lerobot: dict = {"api": "accelerate"}
    read = {
        "policy.type": lambda v: policy.__setitem__("type", v),
        "policy.n_obs_steps": lambda v: policy.__setitem__("n_obs_steps", int(v)),
        "policy.chunk_size": lambda v: policy.__setitem__("chunk_size", int(v)),
        "policy.n_action_steps": lambda v: policy.__setitem__("n_action_steps", int(v)),
        "policy.push_to_hub": lambda v: lerobot.__setitem__("push_to_hub", v.lower() == "true"),
        "policy.repo_id": lambda v: lerobot.__setitem__("repo_id", v),
        "dataset.repo_id": lambda v: dataset.__setitem__("repo_id", v),
        "dataset.root": lambda v: dataset.__setitem__("root", v),
        "batch_size": lambda v: train.__setitem__("micro_batch_size", int(v)),
        "steps": lambda v: train.__setitem__("steps", int(v)),
        "seed": lambda v: train.__setitem__("seed", int(v)),
        "log_freq": lambda v: train.__setitem__("log_every", int(v)),
        "save_freq": lambda v: train.__setitem__("checkpoint", {"every": int(v)}),
        "num_workers": lambda v: train.__setitem__("num_workers", int(v)),
        "job_name": lambda v: lerobot.__setitem__("job_name", v),
        "wandb.enable": lambda v: lerobot.__setitem__("wandb", v.lower() == "true"),
        "output_dir": lambda v: None,  # each run gets its own directory
    }
    for key, value in flags.items():
        if key in read:
            read[key](value)
        else:
            rest.append(f"--{key}={value}")
    if rest:
        lerobot["args"] = rest
    if "n_obs_steps" in policy:
        dataset["n_obs_history"] = policy["n_obs_steps"]
    recipe["trainer"] = {"kind": "lerobot", "lerobot": lerobot}
    part = policy.get("type")
    return part if part and sources.find(Name(("policy", part))) else None


def render(recipe: dict, part: str | None, origin: str, name: str, dest: Path) -> str:
    schema = os.path.relpath(SCHEMA_DIR / "recipe.schema.json", dest.resolve().parent)
    doc = {"recipe": {"name": name, "summary": f"imported from {origin}"}}
    if part:
        doc["extends"] = [f"policy/{part}"]
    for section in ("trainer", "policy", "dataset", "backend", "hardware", "train", "launch"):
        if recipe.get(section):
            doc[section] = recipe[section]
    return f"# yaml-language-server: $schema={schema}\n# imported by `recipe import` from {origin}\n" + yaml.safe_dump(
        doc, sort_keys=False, width=100
    )
