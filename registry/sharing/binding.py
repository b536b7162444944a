"""The editor binding of a recipe file a verb writes (`recipe cp`, `recipe import`, `recipe
tune`): a `# yaml-language-server: $schema=...` line that stays valid wherever the file goes.

A path into this machine's installed package breaks as soon as the file is committed and checked
out elsewhere. So the joined schema (`recipe schema`) is written into the place the file belongs
to, the root of the directory source it lies in, else its own folder, as `recipe.schema.json`,
and the line names it relatively: copying, committing or cloning that folder keeps both together.
Files inside the bundled recipes keep binding to the package's own schemas/ (they ship with it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from registry import __version__
from registry.errors import RecipeError
from registry.files import SCHEMA_DIR, write_atomic
from registry.sharing import sources

MODELINE = "# yaml-language-server: $schema="
FILE = "recipe.schema.json"
# Marks a schema file this tool wrote, which it may write again (a newer version's schema).
MARK = "written by recipe {version} (recipe schema -o FILE writes it again); editors bind recipe files to it"


def schema_text() -> str:
    """The joined schema of a recipe file, as `recipe schema` prints it, with its mark."""
    from registry.validate.schemas import joined

    bundle = {"$comment": MARK.format(version=__version__), **joined()}
    return json.dumps(bundle, indent=2) + "\n"


def write_schema(path: Path) -> None:
    """Write the joined schema to `path`, unless a file there is not one this tool wrote."""
    text = schema_text()
    if path.exists():
        try:
            current = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            current = None
        comment = current.get("$comment", "") if isinstance(current, dict) else ""
        if not (isinstance(comment, str) and comment.startswith("written by recipe ")):
            raise RecipeError(
                f"{path}: exists and is not a schema recipe wrote; not replaced (hint: move it, and write again)"
            )
        if path.read_text(encoding="utf-8") == text:
            return
    try:
        write_atomic(path, text)
    except OSError as e:
        raise RecipeError(f"{path}: cannot write the schema: {e.strerror or e}") from None


def modeline(dest: Path) -> str:
    """The binding line for a file about to be written to `dest`, its schema written first."""
    folder = Path(os.path.abspath(dest)).parent.resolve()
    root = sources.root_of(folder)
    kind = next((s.kind for s in sources.all_sources() if s.name == root.name), None) if root else None
    if kind == "bundled":  # shipped with the package, beside its schemas/
        target = SCHEMA_DIR / "recipe.schema.json"
    else:
        target = (root.path if root is not None and kind == "path" else folder) / FILE
        write_schema(target)
    return MODELINE + Path(os.path.relpath(target, folder)).as_posix()
