"""recipe.lock.yaml: the fully resolved recipe, the sha256 of every input and output file, where
each input came from, and the tool version. Deterministic: no dates, no absolute paths.

What is written here is host-independent, as `recipe resolve` is: the same recipe gives the same
lock anywhere. `recipe run` appends the host's side, the `environment` it launched in (package
versions, CUDA, driver, GPUs, dataset revision), in registry/run/envlock.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

from registry import __version__
from registry.compose import Recipe
from registry.load import display_path
from registry.sharing import sources

LOCK = "recipe.lock.yaml"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_entry(path: Path) -> dict:
    located = sources.locate(path)
    where = {"source": located[0], "file": located[1]} if located else {"file": display_path(path)}
    return {**where, "sha256": sha256(path.read_bytes())}


def source_commits(paths: list[Path]) -> dict[str, dict]:
    """For each source the inputs came from, the git commit that holds them unmodified."""
    from registry.sharing import git

    by_source: dict[str, list[Path]] = {}
    for path in paths:
        located = sources.locate(path)
        if located:
            by_source.setdefault(located[0], []).append(path)
    out = {}
    for name, files in by_source.items():
        together = git.committed_together(files)  # the usual case, a source committed as it is
        commits = {together} if together else {git.committed(f) for f in files}
        out[name] = (
            {"commit": commits.pop()}
            if len(commits) == 1 and None not in commits
            else {"commit": None, "note": "uncommitted changes"}
        )
    return out


def lock(recipe: Recipe, outputs: dict[str, str]) -> str:
    meta = recipe.data["recipe"]  # composition names every recipe
    content = {
        "lock_version": 1,
        "tool": {"name": "recipe-registry", "version": __version__},
        "recipe": {"name": meta["name"], "version": meta.get("version"), "tuned": recipe.tuned},
        "overrides": list(recipe.overrides),
        "sources": source_commits(recipe.inputs),
        "inputs": [input_entry(p) for p in recipe.inputs],
        "outputs": {name: sha256(text.encode()) for name, text in sorted(outputs.items())},
        "resolved": recipe.data,
    }
    return dump(content)


def dump(content: dict) -> str:
    """A lock's text: keys in the order given (a lock read back and dumped again is unchanged)."""
    return yaml.safe_dump(content, sort_keys=False, width=100)
