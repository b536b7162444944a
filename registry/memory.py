"""Per-rank GPU memory of a recipe at the peak of a training step. A step has two phases whose
peaks differ: forward and backward (activations, gathered or cast weights, communication
buckets) and the optimizer step (gradients and the optimizer's temporaries); both sit on what
every rank keeps between steps. The byte counts per parameter are those measured with the
built-in trainer on GPUs (benchmarks/calibrate.py); they refine INVARIANTS 24's model-state
accounting with DDP's gradient buckets, autocast's weight copies and DeepSpeed's fp32 gradient
partition. Pure arithmetic on the resolved document: no torch."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
CUDA_CONTEXT_GIB = 0.5  # held outside torch's allocator on every rank
WORKSPACE_GIB = 0.1  # allocated between steps beyond the model states: 0.08-0.11 GiB on every backend measured
DEEPSPEED_REDUCE_BUCKET = 5e8  # DeepSpeed's default reduce_bucket_size, in elements
DEEPSPEED_MAX_LIVE = 1e9  # DeepSpeed's default stage3_max_live_parameters
ROWS = ("parameters", "gradients", "optimizer states", "communication buckets", "gathered weights",
        "activations", "optimizer temporaries", "workspace")
TRANSIENT = ("communication buckets", "gathered weights", "activations", "optimizer temporaries")
FORWARD, STEP = "forward/backward", "optimizer step"


@dataclass(frozen=True)
class Estimate:
    capacity_gib: float
    breakdown: dict[str, float]  # GiB per rank in the peak phase, in the order they are reported
    phase: str  # FORWARD or STEP: where the peak falls
    micro_batch_size: int
    per_sample_gib: float  # activations of one sample, allocator overhead included
    forward_fixed_gib: float  # the forward/backward phase's total without activations
    step_total_gib: float  # the optimizer step's total, which the micro batch does not change

    @property
    def total_gib(self) -> float:
        return sum(self.breakdown.values())

    @property
    def fraction(self) -> float:
        return self.total_gib / self.capacity_gib

    @property
    def allocated_gib(self) -> float:
        """What torch.cuda.max_memory_allocated would report."""
        return _allocated(self.breakdown)

    @property
    def reserved_gib(self) -> float:
        """What torch.cuda.max_memory_reserved would report."""
        return self.allocated_gib + self.breakdown["allocator overhead"]

    @property
    def largest_micro_batch(self) -> int:
        return self.largest_under(1.0)

    def largest_under(self, fraction: float) -> int:
        """The largest micro batch whose peak stays under `fraction` of the GPU's memory."""
        limit = fraction * self.capacity_gib
        if self.step_total_gib > limit or self.per_sample_gib <= 0:
            return 0
        return max(0, int((limit - self.forward_fixed_gib) // self.per_sample_gib))


def estimate(doc: dict) -> Estimate | None:
    """None when the recipe runs on CPU or its policy declares no sizes."""
    gpu = doc.get("hardware", {}).get("gpu")
    mem = doc.get("policy", {}).get("memory")
    if not isinstance(gpu, dict) or not isinstance(mem, dict) or "params" not in mem:
        return None
    kept, forward, step = _layout(doc, mem)
    overhead = _allocator_overhead(doc)
    per_sample = _activation_per_sample(doc, mem)
    micro = int(doc.get("train", {}).get("micro_batch_size", 1))
    forward = {**forward, "activations": per_sample * micro * GIB}
    phases = {name: _rows(kept, extra, overhead) for name, extra in ((FORWARD, forward), (STEP, step))}
    peak = max(phases, key=lambda name: _allocated(phases[name]))
    forward_fixed = sum(phases[FORWARD].values()) - per_sample * micro * (1 + overhead)
    return Estimate(float(gpu["memory_gib"]), phases[peak], peak, micro, per_sample * (1 + overhead),
                    forward_fixed, sum(phases[STEP].values()))


def _allocated(rows: dict[str, float]) -> float:
    return sum(v for k, v in rows.items() if k not in ("allocator overhead", "CUDA context"))


def _rows(kept: dict, extra: dict, overhead: float) -> dict[str, float]:
    rows = {row: (kept.get(row, 0.0) + extra.get(row, 0.0)) / GIB for row in ROWS}
    rows["workspace"] = WORKSPACE_GIB
    rows["allocator overhead"] = sum(rows[row] for row in TRANSIENT) * overhead
    rows["CUDA context"] = CUDA_CONTEXT_GIB
    return rows


def world_size(doc: dict) -> int:
    hw = doc.get("hardware", {})
    per_node = hw.get("processes_per_node") or hw.get("gpus_per_node") or 1
    return int(per_node) * int(hw.get("nodes", 1))


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


def _layout(doc: dict, mem: dict) -> tuple[dict, dict, dict]:
    """Bytes per rank by row: kept between steps, added in forward/backward, added in the step."""
    backend = doc.get("backend", {})
    P = float(mem["params"])
    T = float(mem.get("trainable_params", P))
    unit = float(mem.get("largest_unit_params", 0))
    root = float(mem.get("root_unit_params", 0))
    mixed = backend.get("mixed_precision", "no") != "no"
    low = 2 if mixed else 4  # bytes of a compute copy of a parameter
    n = world_size(doc)
    kind = backend.get("kind")
    if kind == "deepspeed":
        return _deepspeed(backend, P, T, n, mixed)
    if kind == "fsdp":
        sharding = backend.get("sharding", "FULL_SHARD")
        shards = n if sharding in ("FULL_SHARD", "SHARD_GRAD_OP") or backend.get("version") == 2 else 1
        if sharding == "HYBRID_SHARD":
            shards = int(doc.get("hardware", {}).get("gpus_per_node", 1))
        if sharding == "SHARD_GRAD_OP" or shards == 1:
            gathered = P * low if mixed or shards > 1 else 0.0  # gathered between forward and backward
        else:
            gathered = (root + 2 * unit) * (4 + low if mixed else 4)  # root all step, two blocks in flight
        kept = {"parameters": 4 * P / shards, "optimizer states": 8 * T / shards}  # fp32 flat parameters
        return kept, {"gathered weights": gathered}, {"gradients": 4 * T / shards, "optimizer temporaries": 4 * T / shards}
    # DDP: fp32 weights with autocast, and bucket copies of the gradients for the all-reduce
    kept = {"parameters": 4 * P, "optimizer states": 8 * T, "communication buckets": 4 * T}
    forward = {"gathered weights": 2 * P if mixed else 0.0}  # autocast's low-precision weight copies
    return kept, forward, {"gradients": 4 * T, "optimizer temporaries": 4 * T}  # foreach Adam: one fp32 copy


def _deepspeed(backend: dict, P: float, T: float, n: int, mixed: bool) -> tuple[dict, dict, dict]:
    stage = int(backend.get("zero_stage", 0))
    offload = backend.get("offload", {})
    low = 2 if mixed else 4
    optimizer_shards = n if stage >= 1 else 1
    on_cpu = offload.get("optimizer", "none") != "none"
    optim = 0.0 if on_cpu else (12 if mixed else 8) * T / optimizer_shards  # fp32 master copy and Adam moments
    grads = 0.0 if on_cpu else 4 * T / optimizer_shards  # the fp32 gradient partition the optimizer reads
    bucket = float(backend.get("reduce_bucket_size", DEEPSPEED_REDUCE_BUCKET)) * low
    if stage >= 3:
        params = 0.0 if offload.get("param", "none") != "none" else low * P / n
        kept = {"parameters": params, "optimizer states": optim, "gradients": grads}
        gathered = min(P, DEEPSPEED_MAX_LIVE) * low  # ZeRO-3 keeps up to this many gathered
        return kept, {"communication buckets": bucket, "gathered weights": gathered}, {}
    buckets = bucket * (2 if backend.get("overlap_comm") else 1)  # double-buffered when overlapping
    return ({"parameters": low * P, "optimizer states": optim},
            {"communication buckets": buckets}, {"communication buckets": buckets, "gradients": grads})


def _activation_per_sample(doc: dict, mem: dict) -> float:
    policy, dataset = doc.get("policy", {}), doc.get("dataset", {})
    frames = int(dataset.get("num_cams", 1)) * int(policy.get("n_obs_steps", 1))
    gib = float(mem.get("activation_gib_per_sample", 0)) + float(mem.get("activation_gib_per_frame", 0)) * frames
    backend = doc.get("backend", {})
    if not policy.get("gradient_checkpointing") and not backend.get("activation_checkpointing"):
        gib *= float(mem.get("no_checkpointing_factor", 1.0))
    return gib * _activation_factor(doc)


def _activation_factor(doc: dict) -> float:
    """Activations relative to a model computing in bf16 throughout. Autocast over fp32 weights
    (DDP, FSDP1) keeps an fp32 residual stream, declared by the backend part; a policy that casts
    itself to bf16 is unaffected; otherwise, without mixed precision, everything is fp32."""
    backend = doc.get("backend", {})
    if doc.get("policy", {}).get("dtype") == "bfloat16":
        return 1.0
    if backend.get("mixed_precision", "no") == "no":
        return 2.0
    return float(backend.get("memory", {}).get("activation_factor", 1.0))


def _allocator_overhead(doc: dict) -> float:
    """Reserved beyond allocated, as a fraction of the transient memory (buckets, gathered
    weights, activations, temporaries), declared by the backend part: FSDP reserved 26 GB beyond what it allocated
    where ZeRO-2 reserved 0.2 GB (seed 002, with expandable_segments)."""
    return float(doc.get("backend", {}).get("memory", {}).get("allocator_overhead", 0.1))
