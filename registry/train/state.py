"""trainer_state.json, the last file of a checkpoint: its step and the size of every file the
checkpoint holds, so that a resume can tell a complete checkpoint from a truncated or damaged
one before any rank starts (docs/failure-modes.md §37). No torch here: `recipe run --resume`
reads it."""

from __future__ import annotations

import json
import re
from pathlib import Path

FILE = "trainer_state.json"
CHECKPOINT = re.compile(r"\d{6}")  # checkpoints/<step, 6 digits>; temporary ones start with a dot


def write(folder: Path, step: int) -> None:
    """Written last, once every rank has written its part: lists what is there."""
    files = {
        str(p.relative_to(folder)): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != FILE
    }
    (folder / FILE).write_text(json.dumps({"step": step, "files": files}, indent=1) + "\n")


def check(folder: Path) -> int:
    """The checkpoint's step if it is complete: trainer_state.json parses, its step is the
    folder's, it lists files, and every one is there with its size. ValueError saying what is wrong."""
    path = folder / FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"no {FILE}") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{FILE} is unreadable ({type(e).__name__})") from None
    step = state.get("step") if isinstance(state, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"{FILE} holds no step")
    if CHECKPOINT.fullmatch(folder.name) and int(folder.name) != step:
        raise ValueError(f"{FILE} says step {step}, its folder {folder.name}")
    files = state.get("files", {})
    if not isinstance(files, dict):
        raise ValueError(f"{FILE} lists its files wrongly")
    if not files:  # a resumable checkpoint holds state/ at least: an empty list vouches for nothing
        raise ValueError(f"{FILE} lists no files")
    for name, size in files.items():
        file = folder / name
        if not file.is_file():
            raise ValueError(f"{name} is missing")
        if file.stat().st_size != size:
            raise ValueError(f"{name} has {file.stat().st_size} bytes, {size} when saved")
    return step


def complete(checkpoints: Path) -> list[tuple[Path, int | None, str | None]]:
    """Every checkpoint folder under checkpoints/, newest first: (folder, step, None) when it is
    complete, else (folder, None, what is wrong)."""
    found = sorted((p for p in checkpoints.glob("*") if CHECKPOINT.fullmatch(p.name) and p.is_dir()), reverse=True)
    out: list[tuple[Path, int | None, str | None]] = []
    for folder in found:
        try:
            out.append((folder, check(folder), None))
        except ValueError as e:
            out.append((folder, None, str(e)))
    return out
