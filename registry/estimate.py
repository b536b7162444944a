"""Per-rank GPU memory of a recipe at the peak of a training step. A step has two phases whose
peaks differ: forward and backward (activations, gathered or cast weights, communication
buckets) and the optimizer step (gradients and the optimizer's temporaries); both sit on what
every rank keeps between steps. The byte counts per parameter are those measured with the
built-in trainer on GPUs (benchmarks/calibrate.py); they refine INVARIANTS 24's model-state
accounting with DDP's gradient buckets, autocast's weight copies and DeepSpeed's fp32 gradient
partition. Pure arithmetic on the resolved document: no torch."""

from __future__ import annotations

from dataclasses import dataclass

from registry.topology import world_size

GIB = 1024**3
CUDA_CONTEXT_GIB = 0.5  # held outside torch's allocator on every rank
WORKSPACE_GIB = 0.1  # allocated between steps beyond the model states: 0.08-0.11 GiB on every backend measured
DEEPSPEED_REDUCE_BUCKET = 5e8  # DeepSpeed's default reduce_bucket_size, in elements
DEEPSPEED_MAX_LIVE = 1e9  # DeepSpeed's default stage3_max_live_parameters
ROWS = (
    "parameters",
    "gradients",
    "optimizer states",
    "communication buckets",
    "gathered weights",
    "activations",
    "optimizer temporaries",
    "workspace",
)
TRANSIENT = ("communication buckets", "gathered weights", "activations", "optimizer temporaries")
OUTSIDE_ALLOCATOR = ("allocator overhead", "CUDA context")  # not in torch.cuda.max_memory_allocated
FORWARD, STEP = "forward/backward", "optimizer step"


@dataclass(frozen=True)
class Estimate:
    capacity_gib: float
    phases: dict[str, dict[str, float]]  # FORWARD and STEP: GiB per rank by row, in report order
    micro_batch_size: int
    per_sample_gib: float  # activations of one sample
    overhead: float  # allocator overhead, as a fraction of transient memory

    @property
    def phase(self) -> str:
        """Where the peak falls: the phase that allocates more."""
        return max(self.phases, key=lambda name: _allocated(self.phases[name]))

    @property
    def breakdown(self) -> dict[str, float]:
        return self.phases[self.phase]

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
        forward = self.phases[FORWARD]
        per_sample = self.per_sample_gib * (1 + self.overhead)
        if sum(self.phases[STEP].values()) > limit or per_sample <= 0:
            return 0
        fixed = sum(forward.values()) - forward["activations"] * (1 + self.overhead)
        return max(0, int((limit - fixed) // per_sample))


def estimate(doc: dict) -> Estimate | None:
    """None when the recipe runs on CPU or its policy declares no sizes."""
    gpu = doc.get("hardware", {}).get("gpu")
    mem = doc.get("policy", {}).get("memory")
    if not isinstance(gpu, dict) or not isinstance(mem, dict) or "params" not in mem:
        return None
    kept, forward, step = _layout(doc, mem)
    overhead = _allocator_overhead(doc)
    micro = int(doc.get("train", {}).get("micro_batch_size", 1))
    per_sample = _activation_per_sample(doc, mem)
    forward = {**forward, "activations": per_sample * micro * GIB}
    phases = {name: _rows(kept, extra, overhead) for name, extra in ((FORWARD, forward), (STEP, step))}
    return Estimate(float(gpu["memory_gib"]), phases, micro, per_sample, overhead)


def _allocated(rows: dict[str, float]) -> float:
    return sum(v for k, v in rows.items() if k not in OUTSIDE_ALLOCATOR)


def _rows(kept: dict, extra: dict, overhead: float) -> dict[str, float]:
    rows = {row: (kept.get(row, 0.0) + extra.get(row, 0.0)) / GIB for row in ROWS}
    rows["workspace"] = WORKSPACE_GIB
    rows["allocator overhead"] = sum(rows[row] for row in TRANSIENT) * overhead
    rows["CUDA context"] = CUDA_CONTEXT_GIB
    return rows


def describe(doc: dict) -> str:
    """One line saying how the recipe is laid out, for the estimate's header."""
    backend, hw = doc["backend"], doc["hardware"]
    kind = backend["kind"]
    layout = {
        "ddp": "DDP",
        "deepspeed": f"ZeRO-{backend.get('zero_stage', 0)}",
        "fsdp": f"FSDP{backend.get('version', 1)} {backend.get('sharding', 'FULL_SHARD') if backend.get('version', 1) == 1 else ''}".strip(),
    }[kind]
    offload = backend.get("offload", {})
    if kind == "deepspeed" and any(offload.get(k, "none") != "none" for k in ("optimizer", "param")):
        layout += f" (offload optimizer {offload.get('optimizer', 'none')}, parameters {offload.get('param', 'none')})"
    return f"{layout} over {world_size(doc)} ranks on {hw['gpus_per_node']} x {hw['gpu'].get('name', 'GPU')} per node"


@dataclass(frozen=True)
class Sizes:
    params: float
    trainable: float
    unit: float  # the largest wrap unit
    root: float  # what FSDP's root unit keeps gathered
    mixed: bool

    @property
    def low(self) -> int:
        """Bytes of a compute copy of a parameter."""
        return 2 if self.mixed else 4


def _layout(doc: dict, mem: dict) -> tuple[dict, dict, dict]:
    """Bytes per rank by row: kept between steps, added in forward/backward, added in the step."""
    backend = doc.get("backend", {})
    sizes = Sizes(
        params=float(mem["params"]),
        trainable=float(mem.get("trainable_params", mem["params"])),
        unit=float(mem.get("largest_unit_params", 0)),
        root=float(mem.get("root_unit_params", 0)),
        mixed=backend.get("mixed_precision", "no") != "no",
    )
    return LAYOUTS.get(backend.get("kind"), _ddp)(doc, backend, sizes)


def _ddp(doc: dict, backend: dict, z: Sizes) -> tuple[dict, dict, dict]:
    # fp32 weights with autocast, and bucket copies of the gradients for the all-reduce
    P, T = z.params, z.trainable
    kept = {"parameters": 4 * P, "optimizer states": 8 * T, "communication buckets": 4 * T}
    forward = {"gathered weights": 2 * P if z.mixed else 0.0}  # autocast's low-precision weight copies
    return kept, forward, {"gradients": 4 * T, "optimizer temporaries": 4 * T}  # foreach Adam: one fp32 copy


def _fsdp(doc: dict, backend: dict, z: Sizes) -> tuple[dict, dict, dict]:
    P, T = z.params, z.trainable
    sharding = backend.get("sharding", "FULL_SHARD")
    shards = world_size(doc) if sharding in ("FULL_SHARD", "SHARD_GRAD_OP") or backend.get("version") == 2 else 1
    if sharding == "HYBRID_SHARD":
        shards = int(doc.get("hardware", {}).get("gpus_per_node", 1))
    if sharding == "SHARD_GRAD_OP" or shards == 1:
        gathered = P * z.low if z.mixed or shards > 1 else 0.0  # gathered between forward and backward
    else:
        gathered = (z.root + 2 * z.unit) * (4 + z.low if z.mixed else 4)  # root all step, two blocks in flight
    kept = {"parameters": 4 * P / shards, "optimizer states": 8 * T / shards}  # fp32 flat parameters
    return kept, {"gathered weights": gathered}, {"gradients": 4 * T / shards, "optimizer temporaries": 4 * T / shards}


def _deepspeed(doc: dict, backend: dict, z: Sizes) -> tuple[dict, dict, dict]:
    P, T, n = z.params, z.trainable, world_size(doc)
    stage = int(backend.get("zero_stage", 0))
    offload = backend.get("offload", {})
    optimizer_shards = n if stage >= 1 else 1
    on_cpu = offload.get("optimizer", "none") != "none"
    optim = 0.0 if on_cpu else (12 if z.mixed else 8) * T / optimizer_shards  # fp32 master copy and Adam moments
    grads = 0.0 if on_cpu else 4 * T / optimizer_shards  # the fp32 gradient partition the optimizer reads
    bucket = float(backend.get("reduce_bucket_size", DEEPSPEED_REDUCE_BUCKET)) * z.low
    if stage >= 3:
        params = 0.0 if offload.get("param", "none") != "none" else z.low * P / n
        kept = {"parameters": params, "optimizer states": optim, "gradients": grads}
        gathered = min(P, DEEPSPEED_MAX_LIVE) * z.low  # ZeRO-3 keeps up to this many gathered
        return kept, {"communication buckets": bucket, "gathered weights": gathered}, {}
    buckets = bucket * (2 if backend.get("overlap_comm") else 1)  # double-buffered when overlapping
    return (
        {"parameters": z.low * P, "optimizer states": optim},
        {"communication buckets": buckets},
        {"communication buckets": buckets, "gradients": grads},
    )


LAYOUTS = {"ddp": _ddp, "fsdp": _fsdp, "deepspeed": _deepspeed}


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
    weights, activations, temporaries), declared by the backend part: FSDP reserved 26 GB beyond
    what it allocated where ZeRO-2 reserved 0.2 GB (seed 002, with expandable_segments)."""
    return float(doc.get("backend", {}).get("memory", {}).get("allocator_overhead", 0.1))
