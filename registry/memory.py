"""Per-rank GPU memory of a recipe: model states by backend (INVARIANTS 24), the all-gathered
units of sharded backends, activations declared by the policy part, and allocator overhead
declared by the backend part. Pure arithmetic on the resolved document: no torch."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
CUDA_CONTEXT_GIB = 0.5  # held outside torch's allocator on every rank


@dataclass(frozen=True)
class Estimate:
    capacity_gib: float
    breakdown: dict[str, float]  # GiB per rank, in the order they are reported
    micro_batch_size: int
    per_sample_gib: float  # activations of one sample
    overhead: float  # allocator overhead, as a fraction of transient memory

    @property
    def total_gib(self) -> float:
        return sum(self.breakdown.values())

    @property
    def fraction(self) -> float:
        return self.total_gib / self.capacity_gib

    @property
    def allocated_gib(self) -> float:
        """What torch.cuda.max_memory_allocated would report: states, gathered units, activations."""
        return self.total_gib - self.breakdown["allocator overhead"] - self.breakdown["CUDA context"]

    @property
    def reserved_gib(self) -> float:
        """What torch.cuda.max_memory_reserved would report."""
        return self.allocated_gib + self.breakdown["allocator overhead"]

    @property
    def largest_micro_batch(self) -> int:
        return self.largest_under(1.0)

    def largest_under(self, fraction: float) -> int:
        """The largest micro batch whose total stays under `fraction` of the GPU's memory."""
        per_sample = self.per_sample_gib * (1 + self.overhead)
        fixed = self.total_gib - self.breakdown["activations"] * (1 + self.overhead)
        return max(0, int((fraction * self.capacity_gib - fixed) // per_sample)) if per_sample > 0 else 0


def world_size(doc: dict) -> int:
    hw = doc.get("hardware", {})
    per_node = hw.get("processes_per_node") or hw.get("gpus_per_node") or 1
    return int(per_node) * int(hw.get("nodes", 1))


def estimate(doc: dict) -> Estimate | None:
    """None when the recipe runs on CPU or its policy declares no sizes."""
    gpu = doc.get("hardware", {}).get("gpu")
    mem = doc.get("policy", {}).get("memory")
    if not isinstance(gpu, dict) or not isinstance(mem, dict) or "params" not in mem:
        return None
    states = _model_states(doc, mem)
    per_sample = _activation_per_sample(doc, mem)
    overhead = _allocator_overhead(doc)
    micro = int(doc.get("train", {}).get("micro_batch_size", 1))
    breakdown = dict(states)
    breakdown["activations"] = per_sample * micro
    breakdown["allocator overhead"] = (states["gathered units"] + per_sample * micro) * overhead
    breakdown["CUDA context"] = CUDA_CONTEXT_GIB
    return Estimate(float(gpu["memory_gib"]), breakdown, micro, per_sample, overhead)


def describe(doc: dict) -> str:
    """One line saying how the recipe is laid out, for the estimate's header."""
    backend, hw = doc["backend"], doc["hardware"]
    kind = backend["kind"]
    layout = {"ddp": "DDP", "deepspeed": f"ZeRO-{backend.get('zero_stage', 0)}",
              "fsdp": f"FSDP{backend.get('version', 1)} {backend.get('sharding', 'FULL_SHARD') if backend.get('version', 1) == 1 else ''}".strip()}[kind]
    offload = backend.get("offload", {})
    if kind == "deepspeed" and any(offload.get(k, "none") != "none" for k in ("optimizer", "param")):
        layout += f" (offload optimizer {offload.get('optimizer', 'none')}, parameters {offload.get('param', 'none')})"
    return f"{layout} over {world_size(doc)} ranks on {hw['gpus_per_node']} x {hw['gpu'].get('name', 'GPU')} per node"


def _model_states(doc: dict, mem: dict) -> dict[str, float]:
    backend = doc.get("backend", {})
    P = float(mem["params"])
    T = float(mem.get("trainable_params", P))
    unit = float(mem.get("largest_unit_params", 0))
    root = float(mem.get("root_unit_params", 0))
    mixed = backend.get("mixed_precision", "no") != "no"
    kind = backend.get("kind")
    n = world_size(doc)
    # bytes per parameter: compute copy, gradient, optimizer (fp32 master + Adam moments)
    param_b, grad_b, optim_b = (2, 2, 12) if mixed else (4, 4, 8)
    params, grads, optim, gathered = P * param_b, T * grad_b, T * optim_b, 0.0
    if kind == "deepspeed":
        stage = backend.get("zero_stage", 0)
        offload = backend.get("offload", {})
        if stage >= 1:
            optim /= n
        if stage >= 2:
            grads /= n
        if stage >= 3:
            params /= n
            gathered = 4 * unit * param_b
        if offload.get("optimizer", "none") != "none":
            optim = 0.0
        if stage >= 3 and offload.get("param", "none") != "none":
            params = 0.0
    elif kind == "fsdp":
        # FSDP keeps fp32 flat parameters and casts for compute (INVARIANTS 17).
        sharding = backend.get("sharding", "FULL_SHARD")
        shards = n if sharding in ("FULL_SHARD", "SHARD_GRAD_OP") or backend.get("version") == 2 else 1
        if sharding == "HYBRID_SHARD":
            shards = int(doc.get("hardware", {}).get("gpus_per_node", 1))
        params, grads, optim = P * 4 / shards, T * 4 / shards, T * 8 / shards
        if sharding == "SHARD_GRAD_OP":
            gathered = P * 2  # parameters stay gathered between forward and backward
        elif shards > 1:
            # the root unit stays gathered all step; two block units are in flight (prefetch)
            gathered = root * 6 + 2 * unit * 6
    return {
        "parameters": params / GIB,
        "gradients": grads / GIB,
        "optimizer states": optim / GIB,
        "gathered units": gathered / GIB,
    }


def _activation_per_sample(doc: dict, mem: dict) -> float:
    policy, dataset = doc.get("policy", {}), doc.get("dataset", {})
    frames = int(dataset.get("num_cams", 1)) * int(policy.get("n_obs_steps", 1))
    gib = float(mem.get("activation_gib_per_sample", 0)) + float(mem.get("activation_gib_per_frame", 0)) * frames
    if not policy.get("gradient_checkpointing") and not doc.get("backend", {}).get("activation_checkpointing"):
        gib *= float(mem.get("no_checkpointing_factor", 1.0))
    return gib


def _allocator_overhead(doc: dict) -> float:
    """Reserved beyond allocated, as a fraction of the transient memory (gathered units and
    activations), declared by the backend part: FSDP reserved 26 GB beyond what it allocated
    where ZeRO-2 reserved 0.2 GB (seed 002, with expandable_segments)."""
    return float(doc.get("backend", {}).get("memory", {}).get("allocator_overhead", 0.1))
