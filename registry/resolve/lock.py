"""recipe.lock.yaml: the fully resolved recipe, the sha256 of every input and output file, where
each input came from, and the tool version. Deterministic: no dates, no absolute paths."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

from .. import __version__, sources
from ..compose import Recipe
from ..load import display_path

LOCK = "recipe.lock.yaml"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_entry(path: Path) -> dict:
    located = sources.locate(path)
    where = {"source": located[0], "file": located[1]} if located else {"file": display_path(path)}
    return {**where, "sha256": sha256(path.read_bytes())}


def lock(recipe: Recipe, outputs: dict[str, str]) -> str:
    meta = recipe.data.get("recipe", {})
    content = {
        "lock_version": 1,
        "tool": {"name": "recipe-registry", "version": __version__},
        "recipe": {"name": meta.get("name", recipe.name), "version": meta.get("version"), "tuned": recipe.tuned},
        "overrides": list(recipe.overrides),
        "inputs": [input_entry(p) for p in recipe.inputs],
        "outputs": {name: sha256(text.encode()) for name, text in sorted(outputs.items())},
        "resolved": recipe.data,
    }
    return yaml.safe_dump(content, sort_keys=False, width=100)
