"""`recipe import`: a team's existing accelerate yaml (and OpenTau JSON or LeRobot flags) turned
into a recipe file: the adoption path. Every field read lands where the recipe keeps it; what
has no place in a recipe is reported, not dropped silently.

The field tables that read them are the ones resolve writes with: accelerate.py (with fsdp.py and
deepspeed.py) for the accelerate yaml and its DeepSpeed JSON, trainers/opentau.py and
trainers/lerobot.py for the trainer's config, in that order and into one recipe; `finish` then
checks what waited for a later file. This module writes the recipe file.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from registry.files import SCHEMA_DIR
from registry.resolve.accelerate import import_config as from_accelerate
from registry.trainers.lerobot import import_flags as from_lerobot
from registry.trainers.mapping import finish
from registry.trainers.opentau import import_config as from_opentau

__all__ = ["finish", "from_accelerate", "from_lerobot", "from_opentau", "render"]


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
