"""`recipe cp NAME DEST.yaml`: a recipe's own file, copied to edit, keeping what it extends."""

from __future__ import annotations

import os
from pathlib import Path

from registry import names
from registry.errors import RecipeError
from registry.files import SCHEMA_DIR, write_atomic
from registry.names import AXES
from registry.sharing import sources, versions

BINDING = "# yaml-language-server: $schema="


def copy(target: str, dest: Path, force: bool) -> Path:
    if dest.suffix not in (".yaml", ".yml"):
        raise RecipeError(f"{dest}: the copy must be a .yaml file")
    if dest.exists() and not force:
        raise RecipeError(f"{dest}: exists (hint: --force to replace it)")
    name = names.parse(target)
    version = versions.lookup(name)
    extends: list[str] = []
    if version is not None:
        source = version.file
    elif sources.is_cell(name):
        source = sources.find(name)
        extends = [f"{axis}/{seg}" for axis, seg in zip(AXES, name.segments)]
    else:
        source = sources.find(name)
    body = source.read_text(encoding="utf-8").splitlines(keepends=True) if source else []
    body = [line for line in body if not line.startswith(BINDING)]
    schema = os.path.relpath(SCHEMA_DIR / "recipe.schema.json", dest.resolve().parent)
    text = f"{BINDING}{schema}\n# copied from {target} by `recipe cp`\n"
    if extends:
        text += f"extends: [{', '.join(extends)}]\n"
    if not body and not extends:
        raise RecipeError(f"unknown recipe {target!r}")
    write_atomic(dest, text + "".join(body))
    return dest
