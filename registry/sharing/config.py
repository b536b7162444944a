"""The user's sources: a YAML file (RECIPE_CONFIG, else $XDG_CONFIG_HOME/recipe/sources.yaml) and
the git cache (RECIPE_CACHE, else $XDG_CACHE_HOME/recipe/git)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from registry.errors import RecipeError
from registry.files import write_atomic
from registry.load import load_file


def config_file() -> Path:
    if os.environ.get("RECIPE_CONFIG"):
        return Path(os.environ["RECIPE_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "recipe" / "sources.yaml"


def cache_dir() -> Path:
    if os.environ.get("RECIPE_CACHE"):
        return Path(os.environ["RECIPE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "recipe" / "git"


def entries() -> list[dict]:
    path = config_file()
    if not path.is_file():
        return []
    data = load_file(path).data
    found = data.get("sources", [])
    if not isinstance(found, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str) for e in found):
        raise RecipeError(
            f"{path}: malformed (hint: sources: [{{name: team-a, path: /dir}}, {{name: team-b, git: URL}}])", 2
        )
    return found


def save(found: list[dict]) -> None:
    path = config_file()
    text = "# recipe sources, searched in this order after RECIPE_PATH; managed by `recipe source`\n"
    write_atomic(path, text + yaml.safe_dump({"sources": found}, sort_keys=False))
