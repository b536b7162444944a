"""Where recipe files come from. A source is a directory laid out like the bundled `recipes/`:
parts under policy/, backend/ and hardware/, tuned overlays under P/B/H, the GPU catalog under
catalog/, and free-standing recipes anywhere else."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .errors import RecipeError
from .names import AXES, Name

_PACKAGE = Path(__file__).resolve().parent
# A source checkout keeps recipes/ and schemas/ beside the package; a wheel carries them inside.
DATA_ROOT = _PACKAGE.parent if (_PACKAGE.parent / "schemas").is_dir() else _PACKAGE / "_data"
SCHEMA_DIR = DATA_ROOT / "schemas"
BASE = "base"  # defaults composed under every recipe


@dataclass(frozen=True)
class Source:
    name: str
    root: Path

    def file(self, segments: tuple[str, ...]) -> Path | None:
        """The YAML file a name denotes here, if it exists and stays inside the source."""
        candidate = self.root.joinpath(*segments[:-1], segments[-1] + ".yaml")
        if not candidate.is_file():
            return None
        resolved = candidate.resolve()
        if not resolved.is_relative_to(self.root.resolve()):
            raise RecipeError(f"{'/'.join(segments)}: resolves outside source {self.name!r} (a symlink?)")
        return resolved

    def parts(self, axis: str) -> list[str]:
        folder = self.root / axis
        return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []

    def overlays(self) -> list[tuple[str, str, str]]:
        """Tuned cells: files at policy/backend/hardware whose three names are parts."""
        known = [set(self.parts(axis)) for axis in AXES]
        found = []
        for f in self.root.glob("*/*/*.yaml"):
            cell = (f.parent.parent.name, f.parent.name, f.stem)
            if all(c in k for c, k in zip(cell, known)):
                found.append(cell)
        return sorted(found)

    def free_standing(self) -> list[str]:
        """Recipe files that are neither parts, overlays, the base nor the catalog."""
        overlays = {"/".join(c) for c in self.overlays()}
        skip = set(AXES) | {"catalog"}
        names = []
        for f in self.root.rglob("*.yaml"):
            rel = f.relative_to(self.root).with_suffix("").as_posix()
            if rel == BASE or rel.split("/")[0] in skip or rel in overlays:
                continue
            names.append(rel)
        return sorted(names)


@cache
def bundled() -> Source:
    return Source("bundled", DATA_ROOT / "recipes")


def all_sources() -> list[Source]:
    """Sources in search order; the first that has a name wins."""
    return [bundled()]


def find(name: Name) -> Path | None:
    for source in _select(name):
        found = source.file(name.segments)
        if found:
            return found
    return None


def locate(path: Path) -> tuple[str, str] | None:
    """(source name, path inside it) for a file that lies in a source."""
    resolved = Path(path).resolve()
    for source in all_sources():
        root = source.root.resolve()
        if resolved.is_relative_to(root):
            return source.name, resolved.relative_to(root).as_posix()
    return None


def _select(name: Name) -> list[Source]:
    sources = all_sources()
    if name.source is None:
        return sources
    chosen = [s for s in sources if s.name == name.source]
    if not chosen:
        known = ", ".join(s.name for s in sources)
        raise RecipeError(f"unknown source {name.source!r} in {name} (known: {known})")
    return chosen


def is_cell(name: Name) -> bool:
    """A three-segment name whose segments are a policy, a backend and a hardware part."""
    if len(name.segments) != 3:
        return False
    return all(find(Name((axis, seg), name.source)) for axis, seg in zip(AXES, name.segments))


def part_names(axis: str) -> list[str]:
    seen: dict[str, None] = {}
    for source in all_sources():
        for p in source.parts(axis):
            seen.setdefault(p, None)
    return sorted(seen)
