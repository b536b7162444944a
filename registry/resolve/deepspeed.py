"""The DeepSpeed JSON: explicit, consistent batch math (INVARIANTS 13), precision, ZeRO stage,
offload with its NVMe paths (INVARIANTS 15) and the 16-bit gather for ZeRO-3 saves (11)."""

from __future__ import annotations

from registry.topology import world_size


def deepspeed_config(doc: dict) -> dict | None:
    backend, train = doc["backend"], doc["train"]
    if backend["kind"] != "deepspeed" or backend.get("deepspeed_config_file"):
        return None
    micro = int(train["micro_batch_size"])
    accumulation = int(train.get("gradient_accumulation_steps", 1))
    stage = int(backend.get("zero_stage", 0))
    config: dict = {
        "train_batch_size": micro * accumulation * world_size(doc),
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accumulation,
    }
    clip = train.get("optimizer", {}).get("grad_clip_norm")
    if clip:
        config["gradient_clipping"] = float(clip)
    precision = backend.get("mixed_precision", "no")
    config["bf16"] = {"enabled": precision == "bf16"}
    config["fp16"] = {
        "enabled": precision == "fp16",
        **({"loss_scale": 0, "initial_scale_power": 16} if precision == "fp16" else {}),
    }
    zero: dict = {"stage": stage}
    for key in ("overlap_comm", "contiguous_gradients", "reduce_bucket_size", "allgather_bucket_size"):
        if key in backend:
            zero[key] = backend[key]
    offload = backend.get("offload", {})
    if offload.get("optimizer", "none") != "none":
        zero["offload_optimizer"] = _offload(offload["optimizer"], backend, offload)
        # lets the run keep its torch optimizer instead of DeepSpeed's CPU Adam (FACTS, CPU host)
        config["zero_force_ds_cpu_optimizer"] = False
    if stage == 3:
        if offload.get("param", "none") != "none":
            zero["offload_param"] = _offload(offload["param"], backend, offload)
        zero["stage3_gather_16bit_weights_on_model_save"] = bool(backend.get("zero3_save_16bit_model", True))
    config["zero_optimization"] = zero
    config["steps_per_print"] = int(train.get("steps", 1000)) + 1  # the trainer logs; DeepSpeed stays quiet
    config["wall_clock_breakdown"] = False
    config.update(backend.get("deepspeed_json") or {})
    return config


def _offload(device: str, backend: dict, offload: dict) -> dict:
    block: dict = {"device": device, "pin_memory": bool(offload.get("pin_memory", True))}
    if device == "nvme":
        block["nvme_path"] = backend["nvme_path"]
    return block
