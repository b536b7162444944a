"""Rules that need computation. A schema rule names one with `"compute": NAME`; the rule keeps
its id, hint and source in the schema, the check says whether and how badly it is broken.

Checks read the typed view (registry/view.py) and run only on documents whose types the schema
has already accepted, so they never meet a string where a number belongs.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache

from registry import estimate as memory
from registry import view
from registry.doc import MISSING, PLACEHOLDER, lookup, split
from registry.files import RECIPES_DIR
from registry.view import Section

# What the command trainer fills in besides dotted recipe paths (registry/trainers/command.py).
COMMAND_PLACEHOLDERS = ("output_dir", "world_size", "accelerate_config", "deepspeed_config", "recipe_lock")


@dataclass(frozen=True)
class Finding:
    severity: str
    path: tuple
    message: str

    hint: str = ""

    def rule_fields(self) -> dict:
        found = {"severity": self.severity, "message": self.message}
        return {**found, "hint": self.hint} if self.hint else found


def memory_fit(recipe: Section, rule: dict) -> list[Finding]:
    missing = memory.unset_input(recipe) if recipe.hardware.gpu is not None else None
    if missing and recipe.policy.memory.params is not None:
        text = f"not checked: {missing} is not set"
        return [
            Finding("warning", tuple(split(missing)), text, "extend a whole cell, policy/backend/hardware, or set it")
        ]
    est = memory.estimate(recipe)
    if est is None and recipe.hardware.gpu is not None:
        # an imported policy the registry has no part for: say the check did not run
        text = "not checked: the policy declares no sizes (policy.memory.params)"
        return [Finding("warning", ("policy", "memory"), text, "extend a bundled policy part, or set policy.memory")]
    if est is None:
        return []
    path = ("train", "micro_batch_size")
    if not est.finite:
        return [Finding("error", path, memory.overflow(recipe), "bring the sizes and counts into a realistic range")]
    parts = ", ".join(f"{k} {v:.1f}" for k, v in est.breakdown.items() if v >= 0.05)
    need = est.needed_fraction * est.capacity_gib
    text = (
        f"needs about {need:.1f} GiB per rank of {est.capacity_gib:.1f} GiB ({est.needed_fraction:.0%}; "
        f"{est.fraction:.0%} with the allocator's reserve: {parts}); the largest micro batch that fits is "
        f"{est.largest_micro_batch}"
    )
    if est.needed_fraction > 1.0:
        return [Finding("error", path, text)]
    if est.fraction > 0.9:
        return [Finding("warning", path, text)]
    return []


def command_placeholders(recipe: Section, rule: dict) -> list[Finding]:
    """Every {placeholder} in trainer.command.args names a recipe value or a launch value."""
    findings = []
    for i, template in enumerate(recipe.trainer.command.args or ()):
        for key in PLACEHOLDER.findall(template):
            path = ("trainer", "command", "args", i)
            if key not in COMMAND_PLACEHOLDERS and lookup(recipe, key) is MISSING:
                findings.append(Finding("error", path, f"placeholder {key!r} names nothing in the recipe"))
            elif key == "deepspeed_config" and recipe.backend.kind != "deepspeed":
                # resolve writes deepspeed.json only under DeepSpeed: the program would get a path to nothing
                findings.append(
                    Finding(
                        "error",
                        path,
                        f"the deepspeed_config placeholder under backend.kind {recipe.backend.kind}: no DeepSpeed JSON is written",
                        "drop the argument, or use a DeepSpeed backend (backend=zero2, ...)",
                    )
                )
    return findings


@cache
def _defaults() -> Section:
    from registry.load import load_cached

    return view.of(load_cached(RECIPES_DIR / "base.yaml").data)


def default(path: tuple):
    """What a field holds when no part sets it: base.yaml's value, else the schema's default, else None."""
    found = _default(tuple(path))
    return copy.deepcopy(found) if isinstance(found, (dict, list)) else found


@lru_cache(maxsize=4096)
def _default(path: tuple):
    node = _defaults()
    for key in path:
        if isinstance(node, Section) and isinstance(key, str):
            try:
                node = getattr(node, key)
            except AttributeError:
                return None  # below a free-form mapping: nothing is set by default
        elif isinstance(node, tuple) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            return None
    return view.plain(node)


def changed(value, path: tuple) -> list[tuple[tuple, object]]:
    """(path, value) for each value at or under `path` that differs from its default; mappings are
    walked, a list counts as one value."""
    if isinstance(value, Mapping) and value:
        return [found for key, item in value.items() for found in changed(item, (*path, key))]
    value = view.plain(value)
    if value is MISSING or value is None or value == {} or value == default(path):
        return []
    return [(path, value)]


def not_applicable(recipe: Section, rule: dict) -> list[Finding]:
    """Fields the trainer named by the rule has no counterpart for, set away from their defaults:
    they would be dropped without a word (docs/failure-modes.md §31). `rule.fields` maps each
    dotted path to the reason."""
    findings = []
    data = view.raw(recipe)  # plain values: a rule lists dozens of fields, read for every recipe
    for dotted, why in rule["fields"].items():
        for path, value in changed(lookup(data, dotted), split(dotted)):
            shown = value if isinstance(value, str) else json.dumps(value)
            dflt = default(path)
            hint = rule["hint"] + ("" if dflt is None else f"; its default is {dflt!r}")
            message = f"{shown} would be dropped: {rule['message']} ({why})"
            findings.append(Finding(rule["severity"], path, message, hint))
    return findings


def wrap_classes_exist(recipe: Section, rule: dict) -> list[Finding]:
    """Each FSDP wrap class names a module class the policy has: accelerate raises 'Could not find
    the transformer layer class ... in the model' at prepare otherwise (docs/failure-modes.md §32)."""
    known = set(recipe.policy.module_classes or ())
    findings = []
    for field in ("block_classes", "fsdp2_extra_block_classes"):
        for i, name in enumerate(getattr(recipe.policy, field) or ()):
            if name not in known:
                findings.append(Finding(rule["severity"], ("policy", field, i), f"{name} {rule['message']}"))
    return findings


def engine_counts(recipe: Section, rule: dict) -> list[Finding]:
    """The engine file's node and GPU counts, read back, are the hardware part's (registry/validate/engines.py)."""
    from registry.validate import engines

    return [
        Finding(rule["severity"], tuple(split(field)), f"{what}: {rule['message']}")
        for field, what in engines.disagreements(recipe)
    ]


# LeRobot 0.6.1's DiffusionConfig defaults: horizon 16, down_dims (512, 1024, 2048)
DIFFUSION_HORIZON, DIFFUSION_DOWN_DIMS = 16, (512, 1024, 2048)


def diffusion_horizon(recipe: Section, rule: dict) -> list[Finding]:
    """The diffusion U-Net halves the action horizon at each of its len(down_dims) stages, so the
    horizon (policy.chunk_size) must be a multiple of 2 ** len(down_dims): LeRobot's DiffusionConfig
    raises 'The horizon should be an integer multiple of the downsampling factor' otherwise."""
    horizon = recipe.policy.chunk_size
    horizon = DIFFUSION_HORIZON if horizon is None else horizon
    options = recipe.policy.options
    dims = options.get("down_dims", DIFFUSION_DOWN_DIMS) if options is not None else DIFFUSION_DOWN_DIMS
    if isinstance(dims, str):  # a flag's text: [256,512,1024]
        import yaml

        try:
            dims = yaml.safe_load(dims)
        except yaml.YAMLError:
            return []
    if not isinstance(dims, (list, tuple)) or not dims or not isinstance(horizon, int):
        return []
    factor = 2 ** len(dims)
    if horizon % factor == 0:
        return []
    path = ("policy", "chunk_size") if recipe.policy.chunk_size is not None else ("policy", "type")
    lower, upper = horizon // factor * factor, (horizon // factor + 1) * factor
    nearest = sorted({lower or factor, upper})  # below the factor, the factor itself is the one choice
    return [
        Finding(
            rule["severity"],
            path,
            f"{rule['message']}: horizon {horizon} with {len(dims)} down_dims stages (a factor of {factor})",
            f"{rule['hint']} ({' or '.join(map(str, nearest))})",
        )
    ]


CHECKS = {
    "diffusion-horizon": diffusion_horizon,
    "memory-fit": memory_fit,
    "engine-counts": engine_counts,
    "command-placeholders": command_placeholders,
    "not-applicable": not_applicable,
    "wrap-classes-exist": wrap_classes_exist,
}


def run(rule: dict, recipe: Section) -> list[Finding]:
    return CHECKS[rule["compute"]](recipe, rule)
