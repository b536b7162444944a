"""Per-rank GPU memory of a recipe at the peak of a training step. A step has two phases whose
peaks differ: forward and backward (activations, gathered or cast weights, communication
buckets) and the optimizer step (gradients and the optimizer's temporaries); both sit on what
every rank keeps between steps. The byte counts per parameter are those measured with the
built-in trainer on GPUs (benchmarks/calibrate.py); they refine the model-state
accounting of docs/failure-modes.md §24 with DDP's gradient buckets, autocast's weight copies and DeepSpeed's fp32 gradient
partition. Under gradient accumulation every micro step after the first runs its forward and
backward beside the gradients the earlier ones left (docs/failure-modes.md §47). Pure arithmetic
on the resolved document: no torch.

The schema bounds types and signs, not magnitudes: a count beyond float range or a product that
overflows gives an estimate that is not `finite`, which `recipe estimate` and the memory-fit rule
report as one error instead of doing arithmetic on inf and nan."""

from __future__ import annotations

import math
from dataclasses import dataclass

from registry import view
from registry.doc import MISSING, lookup
from registry.errors import Exit, RecipeError
from registry.topology import world_size
from registry.view import Section

GIB = 1024**3
CUDA_CONTEXT_GIB = 0.5  # held outside torch's allocator on every rank
WORKSPACE_GIB = 0.1  # allocated between steps beyond the model states: 0.08-0.11 GiB on every backend measured
DEEPSPEED_MAX_LIVE = 1e9  # DeepSpeed's default stage3_max_live_parameters
DEEPSPEED_PREFETCH = 5e7  # DeepSpeed's default stage3_prefetch_bucket_size
ROWS = (
    "parameters",
    "gradients",
    "accumulated gradients",
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
    accumulation: int  # micro steps per optimizer step
    per_sample_gib: float  # activations of one sample
    overhead: float  # allocator overhead, as a fraction of transient memory

    @property
    def phase(self) -> str:
        """Where the peak falls: the phase that allocates more."""
        return max(self.phases, key=lambda name: allocated(self.phases[name]))

    @property
    def breakdown(self) -> dict[str, float]:
        return self.phases[self.phase]

    @property
    def total_gib(self) -> float:
        return sum(self.breakdown.values())

    @property
    def fraction(self) -> float:
        return self.total_gib / self.capacity_gib if self.capacity_gib > 0 else math.inf

    @property
    def allocated_gib(self) -> float:
        """What torch.cuda.max_memory_allocated would report."""
        return allocated(self.breakdown)

    @property
    def reserved_gib(self) -> float:
        """What torch.cuda.max_memory_reserved would report."""
        return self.allocated_gib + self.breakdown["allocator overhead"]

    @property
    def needed_fraction(self) -> float:
        """What must be allocated (and the CUDA context) against the GPU's memory. This, not the
        reserve, decides whether a step fits: torch's caching allocator, when an allocation fails,
        frees the blocks it caches and tries again before it raises out-of-memory; the reserve it
        keeps beyond allocated (`fraction`) is what the 90% warning reads."""
        need = self.allocated_gib + self.breakdown["CUDA context"]
        return need / self.capacity_gib if self.capacity_gib > 0 else math.inf

    @property
    def finite(self) -> bool:
        """Whether every figure is a finite number (False when an input overflows float range)."""
        figures = [v for rows in self.phases.values() for v in rows.values()]
        return all(math.isfinite(v) for v in (*figures, self.capacity_gib, self.per_sample_gib, self.overhead))

    @property
    def largest_micro_batch(self) -> int:
        """The largest micro batch whose allocated peak fits (needed_fraction at most 1)."""
        return self._largest(1.0, reserve=False)

    def largest_under(self, fraction: float) -> int:
        """The largest micro batch whose peak with the allocator's reserve stays under `fraction`."""
        return self._largest(fraction, reserve=True)

    def _largest(self, fraction: float, reserve: bool) -> int:
        limit = fraction * self.capacity_gib
        forward, step = self.phases[FORWARD], self.phases[STEP]
        counted = (
            (lambda rows: sum(rows.values())) if reserve else (lambda rows: allocated(rows) + rows["CUDA context"])
        )
        scale = 1 + self.overhead if reserve else 1.0
        per_sample = self.per_sample_gib * scale
        if not self.finite or counted(step) > limit or per_sample <= 0:
            return 0
        fixed = counted(forward) - forward["activations"] * scale
        fits = (limit - fixed) // per_sample
        return max(0, int(fits)) if math.isfinite(fits) else 0


def estimate(recipe: Section, frame_pixels: float | None = None) -> Estimate | None:
    """None when the recipe runs on CPU or its policy declares no sizes. `recipe` is the view of
    a document the schema has accepted (registry/view.py). `frame_pixels`: the dataset's mean
    camera image in pixels, where its metadata gives one; per-frame activations then scale from
    the size the part measured them at (policy.memory.frame_shape) to it."""
    recipe = view.of(recipe)
    gpu, mem = recipe.hardware.gpu, recipe.policy.memory
    if gpu is None or mem.params is None:
        return None
    missing = unset_input(recipe)
    if missing:
        raise RecipeError(
            f"cannot estimate the memory: {missing} is not set (hint: extend a whole cell, policy/backend/hardware, or set it)",
            Exit.INVALID,
        )
    kept, forward, step, accumulated = _layout(recipe)
    accumulation = recipe.train.gradient_accumulation_steps
    if _float(accumulation) > 1:
        forward = {**forward, "accumulated gradients": accumulated}
    overhead = _float(recipe.backend.memory.allocator_overhead)
    micro = recipe.train.micro_batch_size
    per_sample = _activation_per_sample(recipe, frame_scale(recipe, frame_pixels))
    forward = {**forward, "activations": per_sample * _float(micro) * GIB}
    phases = {name: _rows(kept, extra, overhead) for name, extra in ((FORWARD, forward), (STEP, step))}
    return Estimate(_float(gpu.memory_gib), phases, micro, accumulation, per_sample, overhead)


# The counts and sizes every estimate multiplies (the policy's sizes are checked as they are read).
# A file that extends parts rather than a cell may compose without one: the schema lets a section
# be partial, the arithmetic cannot.
INPUTS = (
    "hardware.gpu.memory_gib",
    "hardware.gpus_per_node",
    "train.micro_batch_size",
    "train.gradient_accumulation_steps",
    "dataset.num_cams",
    "policy.n_obs_steps",
    "backend.memory.allocator_overhead",
    "backend.memory.activation_factor",
)


def unset_input(recipe: Section) -> str | None:
    """The first of INPUTS that a recipe leaves unset, or None."""
    recipe = view.of(recipe)
    data = view.raw(recipe)
    for dotted in INPUTS:
        if lookup(data, dotted) not in (None, MISSING):
            continue  # set in the document; else a schema default may give it
        node = recipe
        for key in dotted.split("."):
            node = getattr(node, key, None) if isinstance(node, Section) else None
        if node is None:
            return dotted
    return None


def _float(value) -> float:
    """A number as a float; an int beyond float range is infinite rather than an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _world(recipe: Section) -> float:
    return _float(world_size(recipe))


def overflow(recipe: Section) -> str:
    """What to say of an estimate that is not finite: the sizes it multiplies, as the recipe sets them."""
    recipe = view.of(recipe)
    mem = recipe.policy.memory
    sizes = {
        "policy.memory.params": mem.params,
        "policy.memory.activation_gib_per_sample": mem.activation_gib_per_sample,
        "policy.memory.activation_gib_per_frame": mem.activation_gib_per_frame,
        "train.micro_batch_size": recipe.train.micro_batch_size,
        "backend.memory.allocator_overhead": recipe.backend.memory.allocator_overhead,
    }
    shown = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {_short(v)}" for k, v in sizes.items())
    return f"the memory estimate does not come out finite (a size or count too large for float arithmetic: {shown})"


def _short(value) -> str:
    text = str(value)
    return text if len(text) <= 12 else f"{text[:6]}...({len(text)} digits)"


def allocated(rows: dict[str, float]) -> float:
    """What torch.cuda.max_memory_allocated would report of one phase's rows."""
    return sum(v for k, v in rows.items() if k not in OUTSIDE_ALLOCATOR)


def _rows(kept: dict, extra: dict, overhead: float) -> dict[str, float]:
    rows = {row: (kept.get(row, 0.0) + extra.get(row, 0.0)) / GIB for row in ROWS}
    rows["workspace"] = WORKSPACE_GIB
    rows["allocator overhead"] = sum(rows[row] for row in TRANSIENT) * overhead
    rows["CUDA context"] = CUDA_CONTEXT_GIB
    return rows


def describe(recipe: Section) -> str:
    """One line saying how the recipe is laid out, for the estimate's header."""
    recipe = view.of(recipe)
    backend, hw = recipe.backend, recipe.hardware
    fsdp1 = f" {backend.sharding}" if backend.version == 1 else ""
    layout = {"ddp": "DDP", "deepspeed": f"ZeRO-{backend.zero_stage}", "fsdp": f"FSDP{backend.version}{fsdp1}"}[
        backend.kind
    ]
    offload = backend.offload
    if backend.kind == "deepspeed" and (offload.optimizer, offload.param) != ("none", "none"):
        layout += f" (offload optimizer {offload.optimizer}, parameters {offload.param})"
    return f"{layout} over {world_size(recipe)} ranks on {hw.gpus_per_node} x {hw.gpu.name or 'GPU'} per node"


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


def _layout(recipe: Section) -> tuple[dict, dict, dict, float]:
    """Bytes per rank by row: kept between steps, added in forward/backward, added in the step;
    and the gradients that accumulation carries from one micro step into the next one's forward
    and backward (accelerate's `accumulate` skips the synchronisation between them)."""
    backend, mem = recipe.backend, recipe.policy.memory
    sizes = Sizes(
        params=_float(mem.params),
        trainable=_float(mem.params if mem.trainable_params is None else mem.trainable_params),
        unit=_float(mem.largest_unit_params),
        root=_float(mem.root_unit_params),
        mixed=backend.mixed_precision != "no",
    )
    kept, forward, step, accumulated = LAYOUTS[backend.kind](recipe, backend, sizes)
    if _fused_adam(recipe) and backend.kind in ("ddp", "fsdp"):
        step = {**step, "optimizer temporaries": 0.0}
    return kept, forward, step, accumulated


def _fused_adam(recipe: Section) -> bool:
    """Whether the trainer's Adam is torch's fused kernel, which allocates no temporary in the update
    (each trainer module says what its library builds)."""
    from registry.trainers import KINDS, adapter

    kind = recipe.trainer.kind
    return kind in KINDS and bool(getattr(adapter(kind), "FUSED_ADAM", False))


def _ddp(recipe: Section, backend: Section, z: Sizes) -> tuple[dict, dict, dict, float]:
    # fp32 weights with autocast, and bucket copies of the gradients for the all-reduce
    P, T = z.params, z.trainable
    kept = {"parameters": 4 * P, "optimizer states": 8 * T, "communication buckets": 4 * T}
    forward = {"gathered weights": 2 * P if z.mixed else 0.0}  # autocast's low-precision weight copies
    step = {"gradients": 4 * T, "optimizer temporaries": 4 * T}  # foreach Adam: one fp32 copy
    return kept, forward, step, 4 * T  # no_sync: the fp32 .grad of every parameter


def _fsdp(recipe: Section, backend: Section, z: Sizes) -> tuple[dict, dict, dict, float]:
    P, T = z.params, z.trainable
    sharding = backend.sharding
    shards = _world(recipe) if sharding in ("FULL_SHARD", "SHARD_GRAD_OP") or backend.version == 2 else 1.0
    if sharding in ("HYBRID_SHARD", "HYBRID_SHARD_ZERO2"):
        # within a node; a hardware part without GPUs (an invariant's error) shards over nothing
        shards = max(1.0, _float(recipe.hardware.gpus_per_node))
    forward = {}
    if backend.version == 1 and shards == 1:
        # NO_SHARD, which FSDP1 also falls back to on one process: each unit's low-precision copy is
        # made and freed unit by unit, and the fp32 gradients of the last update stay until each
        # unit's next forward (pi07 on 1 x H200, benchmarks/results/pi07_fsdp_1xH200.json)
        gathered = 2 * z.unit * z.low if z.mixed else 0.0  # a unit in flight and the next one
        forward["gradients"] = 4 * T
    elif sharding in ("SHARD_GRAD_OP", "HYBRID_SHARD_ZERO2") or shards == 1:
        gathered = P * z.low if z.mixed or shards > 1 else 0.0  # gathered between forward and backward
    elif backend.version == 1:
        # the root stays gathered from forward into backward in fp32 (autocast's copies of it die
        # with the autocast context); one block in flight with its copy (docs/failure-modes.md §49)
        gathered = z.root * 4 + z.unit * (4 + z.low if z.mixed else 4)
    else:
        gathered = (z.root + 2 * z.unit) * (4 + z.low if z.mixed else 4)  # root all step, two blocks in flight
    kept = {"parameters": 4 * P / shards, "optimizer states": 8 * T / shards}  # fp32 flat parameters
    step = {"gradients": 4 * T / shards, "optimizer temporaries": 4 * T / shards}
    # FSDP1's no_sync and FSDP2's set_requires_gradient_sync(False) skip the reduce-scatter and
    # keep every unsharded gradient, in the compute dtype, until the micro step that syncs
    accumulated = T * z.low if shards > 1 else (0.0 if "gradients" in forward else 4 * T)
    return kept, {**forward, "gathered weights": gathered}, step, accumulated


def _deepspeed(recipe: Section, backend: Section, z: Sizes) -> tuple[dict, dict, dict, float]:
    P, T, n = z.params, z.trainable, _world(recipe)
    stage, offload = backend.zero_stage, backend.offload
    optimizer_shards = n if stage >= 1 else 1
    on_cpu = offload.optimizer != "none"
    optim = 0.0 if on_cpu else (12 if z.mixed else 8) * T / optimizer_shards  # fp32 master copy and Adam moments
    grads = 0.0 if on_cpu else 4 * T / optimizer_shards  # the fp32 gradient partition the optimizer reads
    bucket = _float(backend.reduce_bucket_size) * z.low  # schema default: DeepSpeed's 5e8 elements
    if stage >= 3:
        params = 0.0 if offload.param != "none" else z.low * P / n
        kept = {"parameters": params, "optimizer states": optim, "gradients": grads}
        gathered = min(P, DEEPSPEED_MAX_LIVE) * z.low  # ZeRO-3 keeps up to this many gathered
        if offload.param != "none":  # partitions copied in from CPU ahead of their all-gather
            gathered += min(P / n, DEEPSPEED_PREFETCH) * z.low
        # the fp32 partition it keeps between steps is where micro steps accumulate: nothing more
        return kept, {"communication buckets": bucket, "gathered weights": gathered}, {}, 0.0
    buckets = bucket * (2 if backend.overlap_comm else 1)  # double-buffered when overlapping
    # ZeRO-1 accumulates in every parameter's low-precision .grad (accelerate's no_sync); ZeRO-2
    # reduces each micro step into its partition of averaged gradients; with the optimizer on CPU
    # both accumulate there
    accumulated = 0.0 if on_cpu else z.low * T / (n if stage == 2 else 1)
    # as it converts the gradients, DeepSpeed holds the low-precision partition, its flattened copy and
    # the fp32 copy at once (a foreach Adam's temporary in the update is as large): 2P + 20T/n at
    # one rank, measured on pi07 (benchmarks/results/pi07_zero2_1xH200.json)
    temporaries = 0.0 if on_cpu else 2 * z.low * T / optimizer_shards
    return (
        {"parameters": z.low * P, "optimizer states": optim},
        {"communication buckets": buckets},
        {"communication buckets": buckets, "gradients": grads, "optimizer temporaries": temporaries},
        accumulated,
    )


LAYOUTS = {"ddp": _ddp, "fsdp": _fsdp, "deepspeed": _deepspeed}


def frame_shape(recipe: Section) -> tuple[int, int] | None:
    """The camera size the part measured its per-frame activations at; None for a policy that
    resizes every image to a size of its own (the dataset's size then changes nothing)."""
    shape = view.of(recipe).policy.memory.frame_shape
    return (shape[0], shape[1]) if shape else None


def frame_scale(recipe: Section, frame_pixels: float | None) -> float:
    """Per-frame activations at the dataset's image size relative to the part's: linear in the
    pixels (convolutions and patch tokens are; attention over the tokens grows faster, so a much
    larger image is underestimated, docs/preflight.md §dataset-memory-fit)."""
    shape = frame_shape(recipe)
    if shape is None or not frame_pixels:
        return 1.0
    return frame_pixels / (shape[0] * shape[1])


def _activation_per_sample(recipe: Section, scale: float = 1.0) -> float:
    policy, mem = recipe.policy, recipe.policy.memory
    frames = _float(recipe.dataset.num_cams) * _float(policy.n_obs_steps)
    gib = _float(mem.activation_gib_per_sample) + _float(mem.activation_gib_per_frame) * frames * scale
    if not policy.gradient_checkpointing and not recipe.backend.activation_checkpointing:
        gib *= _float(mem.no_checkpointing_factor)
    return gib * _activation_factor(recipe)


def _activation_factor(recipe: Section) -> float:
    """Activations relative to a model computing in bf16 throughout. Autocast over fp32 weights
    (DDP, FSDP1) keeps an fp32 residual stream, declared by the backend part; a policy that casts
    itself to bf16 is unaffected; otherwise, without mixed precision, everything is fp32. The
    allocator overhead (backend.memory) is reserved beyond allocated, as a fraction of transient
    memory: FSDP reserved 26 GB beyond what it allocated where ZeRO-2 reserved 0.2 GB (docs/failure-modes.md §seed-002,
    with expandable_segments)."""
    backend = recipe.backend
    if recipe.policy.dtype == "bfloat16":
        return 1.0
    if backend.mixed_precision == "no":
        return 2.0
    measured = recipe.policy.memory.fp32_activation_factor
    return _float(measured if measured is not None else backend.memory.activation_factor)
