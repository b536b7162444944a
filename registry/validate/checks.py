"""Rules that need computation. A schema rule names one with `"compute": NAME`; the rule keeps
its id, hint and source in the schema, the check says whether and how badly it is broken.

Checks read the typed view (registry/view.py) and run only on documents whose types the schema
has already accepted, so they never meet a string where a number belongs.
"""

from __future__ import annotations

from dataclasses import dataclass

from registry import estimate as memory
from registry.doc import MISSING, PLACEHOLDER, lookup
from registry.view import Section

# What the command trainer fills in besides dotted recipe paths (registry/trainers/command.py).
COMMAND_PLACEHOLDERS = ("output_dir", "world_size", "accelerate_config", "deepspeed_config")


@dataclass(frozen=True)
class Finding:
    severity: str
    path: tuple
    message: str

    def rule_fields(self) -> dict:
        return {"severity": self.severity, "message": self.message}


def memory_fit(recipe: Section) -> list[Finding]:
    est = memory.estimate(recipe)
    if est is None:
        return []
    parts = ", ".join(f"{k} {v:.1f}" for k, v in est.breakdown.items() if v >= 0.05)
    text = (
        f"needs about {est.total_gib:.1f} GiB per rank of {est.capacity_gib:.1f} GiB "
        f"({est.fraction:.0%}: {parts}); the largest micro batch that fits is {est.largest_micro_batch}"
    )
    path = ("train", "micro_batch_size")
    if est.fraction > 1.0:
        return [Finding("error", path, text)]
    if est.fraction > 0.9:
        return [Finding("warning", path, text)]
    return []


def command_placeholders(recipe: Section) -> list[Finding]:
    """Every {placeholder} in trainer.command.args names a recipe value or a launch value."""
    findings = []
    for i, template in enumerate(recipe.trainer.command.args or ()):
        for key in PLACEHOLDER.findall(template):
            if key not in COMMAND_PLACEHOLDERS and lookup(recipe, key) is MISSING:
                path = ("trainer", "command", "args", i)
                findings.append(Finding("error", path, f"placeholder {key!r} names nothing in the recipe"))
    return findings


CHECKS = {"memory-fit": memory_fit, "command-placeholders": command_placeholders}


def run(name: str, recipe: Section) -> list[Finding]:
    return CHECKS[name](recipe)
