"""`recipe cp SRC DEST`: a new recipe that extends SRC, holding SRC's own settings to edit.

The copy is a recipe of its own: its own `recipe.name`, no version (publishing gives it one),
no `tuned` tag, no summary and no measured `results` (they describe SRC, and stop being true
at the first edit). `extends` names SRC, pinned to its version when SRC is a published one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from registry import names
from registry.errors import RecipeError
from registry.files import write_atomic
from registry.load import load_cached
from registry.names import Name
from registry.sharing import binding, sources, versions

# Sections of SRC's own file that the copy does not carry: who it is, what was measured on it,
# and what it extends (the copy extends SRC itself, which brings those along).
NOT_CARRIED = ("recipe", "results", "extends")
_TOP_KEY = re.compile(r"^([A-Za-z_][\w-]*)\s*:")


def copy(target: str, dest: str, force: bool, into: str | None = None) -> tuple[Path, str]:
    """Write the copy; returns its file and its name."""
    original = names.parse(target)
    path, name = destination(dest, into)
    _writable(path)
    if path.exists() and not force:
        raise RecipeError(f"{path}: exists (hint: --force to replace it)")
    version = versions.lookup(original)
    if version is not None:  # pinned with its source: another source's later publish cannot redirect it
        own, parent = version.file, versions.pin(version)
    else:
        own = sources.find(original)
        parent = Name(original.segments, original.source, original.version)
        if own is None and not _is_cell(original):
            raise RecipeError(f"unknown recipe {target!r}")
    head = f"{binding.modeline(path)}\n# copied from {parent} by `recipe cp`\n"
    head += yaml.safe_dump({"recipe": _meta(own, name)}, sort_keys=False, width=100)
    head += f"extends: [{parent}]\n"
    try:
        write_atomic(path, head + (_body(own) if own else ""))
    except OSError as e:  # read-only, no space, a folder nothing can be created in
        raise RecipeError(f"{path}: cannot write the copy: {e.strerror or e}") from None
    return path, name


def _writable(path: Path) -> None:
    """Refuse, before anything is read, a destination that is a folder or lies below a file."""
    if path.is_dir():
        raise RecipeError(f"{path}: cannot write the copy: it is a folder (hint: give a file name, DIR/NAME.yaml)")
    folder = next((p for p in path.parents if os.path.lexists(p)), None)
    if folder is not None and not folder.is_dir():
        raise RecipeError(f"{path}: cannot write the copy: {folder} is a file, not a folder")


def destination(dest: str, into: str | None) -> tuple[Path, str]:
    """The file and the name of the copy. DEST is a file (its name: the path inside the source
    it lies in, else the file name without .yaml) or a NAME (written to NAME.yaml here, or in
    the directory source `--to` names)."""
    if names.looks_like_file(dest):
        if into:
            raise RecipeError("--to takes a NAME for the copy, not a file (hint: recipe cp SRC NAME --to SOURCE)")
        path = Path(dest)
        found = sources.locate(path.parent) if path.parent.exists() else None
        derived = f"{found[1]}/{path.stem}" if found and found[1] != "." else path.stem
        try:
            parsed = names.parse(derived)
        except RecipeError:
            raise RecipeError(
                f"{dest}: cannot make a recipe name of {derived!r} (hint: letters, digits, . _ + -; "
                "or give the copy a NAME: recipe cp SRC NAME)"
            ) from None
        return path, parsed.path
    parsed = names.parse(dest)
    if parsed.source or parsed.version is not None:
        raise RecipeError(f"{dest}: a copy is named without a source or version (hint: --to SOURCE)")
    if parsed.segments[0] in (*names.AXES, sources.BASE, "catalog", versions.FOLDER):
        raise RecipeError(f"{dest}: {parsed.segments[0]}/ holds parts or published files, not recipes")
    root = Path.cwd()
    if into:
        chosen = [s for s in sources.all_sources() if s.name == into]
        if not chosen or chosen[0].kind != "path":
            raise RecipeError(f"--to {into}: not a directory source (recipe source list)")
        root = chosen[0].root
    return root.joinpath(*parsed.segments[:-1], parsed.segments[-1] + ".yaml"), parsed.path


def _meta(own: Path | None, name: str) -> dict:
    """The copy's `recipe` section: its name, and SRC's tags but `tuned` (nothing was measured
    on the copy)."""
    meta = load_cached(own).data.get("recipe") if own else None
    tags = meta.get("tags") if isinstance(meta, dict) else None
    out: dict = {"name": name}
    if isinstance(tags, list) and [t for t in tags if t != "tuned"]:
        out["tags"] = [t for t in tags if t != "tuned"]
    return out


def _body(own: Path) -> str:
    """SRC's own settings as written (comments kept), without the sections the copy replaces.
    Cut by top-level key; when the cut does not read back as the same settings (anchors,
    flow style), the settings are written out plainly instead."""
    text = own.read_text(encoding="utf-8")
    kept, skipping, started = [], False, False
    for line in text.splitlines(keepends=True):
        key = _TOP_KEY.match(line)
        started = started or bool(key)
        if not started:
            continue  # the header comments describe SRC, like its summary
        if key:
            skipping = key.group(1) in NOT_CARRIED
        elif line.strip() and not line[0].isspace() and not line.startswith("#"):
            skipping = False  # a top-level line that is not a key: keep it, the check below decides
        if not skipping:
            kept.append(line)
    body = "".join(kept)
    wanted = {k: v for k, v in load_cached(own).data.items() if k not in NOT_CARRIED}
    try:
        same = (yaml.safe_load(body) or {}) == wanted
    except yaml.YAMLError:
        same = False
    if same:
        return body
    return yaml.safe_dump(wanted, sort_keys=False, width=100) if wanted else ""


def _is_cell(name: Name) -> bool:
    """A cell of parts, a generated hardware name's included."""
    from registry.compose import hardware

    return hardware.is_cell(name)
