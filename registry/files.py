"""Files: where the package's recipes and schemas live, and atomic writes (a reader sees the old
file or the new one, never half of either)."""

from __future__ import annotations

import json
import os
import tempfile
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# A source checkout keeps recipes/ and schemas/ beside the package; a wheel carries them inside.
DATA_ROOT = _PACKAGE.parent if (_PACKAGE.parent / "schemas").is_dir() else _PACKAGE / "_data"
SCHEMA_DIR = DATA_ROOT / "schemas"
RECIPES_DIR = DATA_ROOT / "recipes"


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@cache
def schema_documents() -> dict[str, dict]:
    """The schema files as data, by file name (validate/schemas.py checks their rules)."""
    from registry.errors import RecipeError

    docs = {}
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        try:
            docs[path.name] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise RecipeError(f"{path}: cannot load schema: {e}") from None
    return docs
