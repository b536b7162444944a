"""The user's sources: a YAML file (RECIPE_CONFIG, else $XDG_CONFIG_HOME/recipe/sources.yaml) and
the git cache (RECIPE_CACHE, else $XDG_CACHE_HOME/recipe/git)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
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
        if os.path.lexists(path):  # a folder or a FIFO where the config goes: said, not taken for none
            load_file(path)  # the loader's guarded read names what it is
        return []
    data = load_file(path).data
    found = data.get("sources", [])
    if not isinstance(found, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str) for e in found):
        raise RecipeError(
            f"{path}: malformed (hint: sources: [{{name: team-a, path: /dir}}, {{name: team-b, git: URL}}])", 2
        )
    return found


RULES = ("own", "everywhere")  # `rules:` of an entry: where the source's rules/*.json apply


def rules_everywhere(entry: dict) -> bool:
    scope = entry.get("rules", "own")
    if scope not in RULES:
        raise RecipeError(
            f"{config_file()}: source {entry['name']!r}: rules: {scope!r} is not one of {', '.join(RULES)}", 2
        )
    return scope == "everywhere"


LOCK_WAIT_S = 30


@contextmanager
def editing() -> Iterator[list[dict]]:
    """The entries to change in place, read and written back under the config's lock: two
    `recipe source add` at once each keep their source (a plain read-modify-write loses one)."""
    from filelock import FileLock, Timeout  # only writers lock: kept off the start-up path

    path = config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    try:
        with FileLock(lock, timeout=LOCK_WAIT_S):
            found = entries()
            yield found
            _save(found)
    except Timeout:
        raise RecipeError(f"{path}: another `recipe source` holds {lock.name} (hint: try again)") from None


def _save(found: list[dict]) -> None:
    path = config_file()
    text = "# recipe sources, searched in this order after RECIPE_PATH; managed by `recipe source`\n"
    write_atomic(path, text + yaml.safe_dump({"sources": found}, sort_keys=False))
