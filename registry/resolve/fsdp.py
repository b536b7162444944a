"""The accelerate yaml's fsdp_config section <-> backend.* and policy.block_classes, both ways.

Import reads the section as `accelerate launch` does: a key the yaml leaves out takes the
launcher's default (`absent`), which is not always the value a recipe leaves unset writes.
"""

from __future__ import annotations

from dataclasses import replace

from registry.doc import MISSING
from registry.trainers.mapping import Field, Ignored, Table, field, value

TRANSFORMER, SIZE = "TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP"
# accelerate's FSDP1 strategy names, in ShardingStrategy order (an int n names the n-th)
STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")


def truth(item):
    """A yaml bool as accelerate's str_to_bool reads it; anything else is left for validation."""
    if isinstance(item, str) and item.lower() in (
        "y",
        "yes",
        "t",
        "true",
        "on",
        "1",
        "n",
        "no",
        "f",
        "false",
        "off",
        "0",
    ):
        return item.lower() in ("y", "yes", "t", "true", "on", "1")
    return item


def strategy(item):
    """fsdp_reshard_after_forward / fsdp_sharding_strategy under FSDP1: a name or its number."""
    if isinstance(item, int) and not isinstance(item, bool) and 1 <= item <= len(STRATEGIES):
        return STRATEGIES[item - 1]
    if isinstance(item, str):
        return STRATEGIES[int(item) - 1] if item.isdigit() and 1 <= int(item) <= len(STRATEGIES) else item.upper()
    return item  # a bool is FSDP2's spelling: validation says so


def upper(item):
    """An FSDP enum name as accelerate's plugin reads it: any case."""
    return item.upper() if isinstance(item, str) else item


def classes(text) -> list[str]:
    return [c.strip() for c in str(text).split(",") if c.strip()]


def _version(doc) -> int:
    return field(doc, "backend.version")


def _fsdp1(doc) -> bool:
    return _version(doc) == 1


def _fsdp2(doc) -> bool:
    return _version(doc) == 2


VERSION = Field("backend.version", "fsdp_version", to=int, back=int)
# accelerate launch without fsdp_auto_wrap_policy wraps nothing
WRAP = Field("backend.auto_wrap_policy", "fsdp_auto_wrap_policy", back=upper, absent="NO_WRAP")


CPU_RAM = Field("backend.cpu_ram_efficient_loading", "fsdp_cpu_ram_efficient_loading", to=bool, back=truth, absent=True)


def _wraps(policy: str):
    return lambda doc: value(WRAP, doc) == policy


def _wrapped_classes(names: list, doc) -> list:
    if _fsdp2(doc):  # FSDP2 also wraps what only it needs wrapped
        names += [c for c in field(doc, "policy.fsdp2_extra_block_classes") or [] if c not in names]
    return names


TABLE = Table(
    VERSION,
    WRAP,
    # no classes: accelerate wraps a transformers model's own _no_split_modules; an empty name
    # would make it look for a class called "" instead
    Field(
        "policy.block_classes",
        "fsdp_transformer_layer_cls_to_wrap",
        derive=_wrapped_classes,
        to=",".join,
        back=classes,
        when=lambda doc: _wraps(TRANSFORMER)(doc) and bool(field(doc, "policy.block_classes")),
    ),
    Field("backend.min_num_params", "fsdp_min_num_params", to=int, when=_wraps(SIZE)),
    # accelerate launch always exports fsdp_sharding_strategy (default FULL_SHARD), and the FSDP1
    # plugin prefers it to reshard_after_forward, which it then never reads (docs/failure-modes.md §8)
    Field(
        "backend.sharding",
        "fsdp_sharding_strategy",
        derive=lambda sharding, doc: field(doc, "backend.reshard_after_forward") or sharding,
        back=strategy,
        when=_fsdp1,
        exclusive=True,
        absent=lambda recipe: "FULL_SHARD" if _version(recipe) in (1, None) else MISSING,
    ),
    Field(
        "backend.sharding",
        "fsdp_reshard_after_forward",
        back=lambda _: MISSING,
        emit=False,
        when=_fsdp1,
        exclusive=True,
        note="not read by accelerate under FSDP1, which takes the strategy from fsdp_sharding_strategy"
        " (FULL_SHARD when absent); the recipe keeps what accelerate runs",
    ),
    Field(
        "backend.use_orig_params",
        "fsdp_use_orig_params",
        to=bool,
        back=truth,
        absent=True,
        when=_fsdp1,
    ),
    Field(
        "backend.forward_prefetch",
        "fsdp_forward_prefetch",
        to=bool,
        back=truth,
        when=_fsdp1,
    ),
    Field(
        "backend.backward_prefetch",
        "fsdp_backward_prefetch",
        when=_fsdp1,
    ),
    Field(
        "backend.reshard_after_forward",
        "fsdp_reshard_after_forward",
        to=bool,
        back=truth,
        unset=True,
        when=_fsdp2,
        exclusive=True,
    ),
    Field(
        "backend.state_dict_type",
        "fsdp_state_dict_type",
        back=upper,
        # without one, accelerate's plugin saves FSDP1 full state dicts
        absent=lambda recipe: "FULL_STATE_DICT" if _version(recipe) == 1 else MISSING,
    ),
    Field("backend.offload_params", "fsdp_offload_params", to=bool, back=truth),
    CPU_RAM,
    # accelerate refuses cpu_ram_efficient_loading without sync_module_states
    Field(
        "backend.sync_module_states",
        "fsdp_sync_module_states",
        derive=lambda sync, doc: bool(sync) or bool(value(CPU_RAM, doc)),
        back=truth,
    ),
    Field("backend.activation_checkpointing", "fsdp_activation_checkpointing", to=bool, back=truth),
    Ignored("fsdp_backward_prefetch_policy", "a legacy key accelerate 1.15 does not read (fsdp_backward_prefetch)"),
)


def _unprefixed(row):
    """accelerate's loader adds the fsdp_ prefix to keys written without it (use_orig_params)."""
    if isinstance(row, Field) and row.foreign.startswith("fsdp_"):
        return replace(row, aliases=(*row.aliases, row.foreign[len("fsdp_") :]))
    return row


TABLE = Table(*(_unprefixed(row) for row in TABLE.rows))
