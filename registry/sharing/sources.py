"""Where recipe files come from. A source is a directory laid out like the bundled `recipes/`:
parts under policy/, backend/ and hardware/, tuned overlays under P/B/H, the GPU catalog under
catalog/, and free-standing recipes anywhere else."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TypeVar

from registry.errors import RecipeError
from registry.files import RECIPES_DIR
from registry.names import AXES, Name

BASE = "base"  # defaults composed under every recipe
_SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True)
class Source:
    name: str
    root: Path
    kind: str = "bundled"  # bundled | path | git
    location: str = ""  # the directory or git URL it was added with
    rules_everywhere: bool = False  # its rules/*.json apply to every recipe, not only its own

    def file(self, segments: tuple[str, ...]) -> Path | None:
        """The YAML file a name denotes here, if it exists and stays inside the source."""
        return _file(self.root, self.name, segments)

    def parts(self, axis: str) -> list[str]:
        folder = self.root / axis
        return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []

    def overlays(self) -> list[tuple[str, str, str]]:
        """Tuned cells: files at policy/backend/hardware whose three names are parts. The parts
        may come from any source, as composition takes them: a team's overlay of a bundled cell
        is an overlay, not a free-standing recipe."""
        known = [set(part_names(axis)) for axis in AXES]
        found = []
        for f in self.root.glob("*/*/*.yaml"):
            cell = (f.parent.parent.name, f.parent.name, f.stem)
            if all(c in k for c, k in zip(cell, known)):
                found.append(cell)
        return sorted(found)

    def free_standing(self) -> list[str]:
        """Recipe files that are neither parts, overlays, the base, the catalog nor published.
        Hidden files and folders are never recipes: a source laid out at a repository's root
        holds .github/workflows/*.yaml and .pre-commit-config.yaml."""
        overlays = {"/".join(c) for c in self.overlays()}
        skip = set(AXES) | {"catalog", "published", "index"}
        names = []
        for f in self.root.rglob("*.yaml"):
            rel = f.relative_to(self.root).with_suffix("").as_posix()
            if rel == BASE or rel.split("/")[0] in skip or rel in overlays or hidden(rel):
                continue
            names.append(rel)
        return sorted(names)


def confined(source: Source, relative: str | Path) -> Path:
    """A path in the source that the registry reads or writes, refused when a symlink on the way
    leads out of it (a remote's `published` pointing elsewhere): nothing goes through it."""
    path = source.root.joinpath(relative)
    if not path.resolve().is_relative_to(source.root.resolve()):
        shown = Path(relative).as_posix()
        raise RecipeError(
            f"source {source.name!r}: {shown} leads outside the source (a symlink, to {path.resolve()}); "
            "nothing is read or written through it"
        )
    return path


def hidden(rel: str) -> bool:
    """A path inside a source that a dot-folder or dot-file is on."""
    return any(part.startswith(".") for part in rel.split("/"))


@lru_cache(maxsize=4096)
def _file(root: Path, source: str, segments: tuple[str, ...]) -> Path | None:
    # looked up many times per composition; a process sees one state of its sources
    candidate = root.joinpath(*segments[:-1], segments[-1] + ".yaml")
    if not candidate.is_file():
        return None
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise RecipeError(f"{'/'.join(segments)}: resolves outside source {source!r} (a symlink?)")
    return resolved


@cache
def bundled() -> Source:
    return Source("bundled", RECIPES_DIR)


def _root(folder: Path) -> Path:
    """A source directory, or its recipes/ folder when it has one (a repository like this one)."""
    return folder / "recipes" if (folder / "recipes").is_dir() else folder


def all_sources() -> list[Source]:
    """Sources in search order: RECIPE_PATH entries, then `recipe source add` ones, then the
    bundled recipes. The first that has a name wins; `name:` picks one."""
    if _pinned:
        return _pinned[-1]
    # validate() asks on every recipe (team rules): the config's places are worked out once per
    # environment, as building their Paths costs more than the rest of this lookup
    file, cache_dir = _places(tuple(os.environ.get(v) for v in _PLACE_VARS))
    key = (os.environ.get("RECIPE_PATH", ""), str(file), _mtime(file), cache_dir)
    return _sources(key)


_PLACE_VARS = ("RECIPE_CONFIG", "XDG_CONFIG_HOME", "RECIPE_CACHE", "XDG_CACHE_HOME", "HOME")  # what config reads


@lru_cache(maxsize=8)
def _places(env: tuple) -> tuple[Path, str]:
    from registry.sharing import config

    return config.config_file(), str(config.cache_dir())


_pinned: list[list[Source]] = []


T = TypeVar("T")


def while_pinned(table: dict, key, compute: Callable[[], T]) -> T:
    """compute(), remembered in `table` under `key` for as long as the sources stay pinned (one
    command over many recipes reads one state of them); computed afresh when they are not. An
    exception is raised again at every call."""
    if not _pinned:
        return compute()
    state = _pinned[-1]  # a list of its own per pinned block (pinned())
    if table.get(_STATE) is not state:
        table.clear()
        table[_STATE] = state
    if key not in table:
        table[key] = compute()
    return table[key]


_STATE = object()  # the key under which a while_pinned table keeps the state it holds for


@contextmanager
def pinned() -> Iterator[None]:
    """Sources read once for a command that resolves many names (`recipe list`): working out
    the current sources costs a config lookup and a stat per call."""
    _pinned.append(list(all_sources()))  # a list of its own: what is remembered while pinned ends with it
    try:
        yield
    finally:
        _pinned.pop()


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


@lru_cache(maxsize=8)
def _sources(key: tuple) -> list[Source]:
    from registry.sharing import config

    found: list[Source] = []
    for entry in filter(None, key[0].split(os.pathsep)):
        name, sep, folder = entry.partition("=")
        if not sep:
            name, folder = Path(entry).name, entry
        found.append(_checked(Source(name, _root(Path(folder).expanduser().resolve()), "path", folder), "RECIPE_PATH"))
    for entry in config.entries():
        everywhere = config.rules_everywhere(entry)
        if "git" in entry:
            clone = config.cache_dir() / entry["name"]
            source = Source(entry["name"], _root(clone), "git", entry["git"], everywhere)
        else:
            folder = str(entry.get("path", ""))
            source = Source(entry["name"], _root(Path(folder)), "path", folder, everywhere)
        found.append(where_added(_checked(source, str(config.config_file())), entry))
    found.append(bundled())
    names = [s.name for s in found]
    clash = next((n for n in names if names.count(n) > 1), None)
    if clash:
        raise RecipeError(f"two sources are named {clash!r} (RECIPE_PATH and {config.config_file()}); rename one")
    return found


def _checked(source: Source, where: str) -> Source:
    if not _SOURCE_NAME.fullmatch(source.name) or source.name == "bundled":
        raise RecipeError(
            f"{where}: source name {source.name!r} is not allowed (letters, digits, - and _; not 'bundled')"
        )
    if not source.root.is_dir():
        hint = f"recipe source update {source.name}" if source.kind == "git" else "check the path"
        raise RecipeError(f"source {source.name!r}: {source.location} is not reachable here (hint: {hint})")
    return source


def where_added(source: Source, entry: dict) -> Source:
    """The source, if it is still the place `recipe source add` recorded: a directory or local
    repository reached through a link repointed since would offer each of its versions as a first
    sighting, trusted without a word (docs/failure-modes.md §69). An entry written by hand records
    no place and is taken where it leads."""
    recorded = entry.get("place")
    if not isinstance(recorded, str) or not recorded:
        return source
    from registry.sharing import trust

    now = trust.place(source)
    if now != recorded:
        raise RecipeError(
            f"source {source.name!r}: {source.location} now leads to {now}, not to {recorded} where it was added "
            f"(a link on the way was changed); hint: if you trust the new place, recipe source remove {source.name} "
            f"and add it again"
        )
    return source


def candidates(name: Name) -> list[Source]:
    """The sources a name may come from, in search order."""
    return _select(name)


def has(source: Source, name: Name) -> bool:
    """Whether a source defines the name as a file or as a cell of its parts."""
    if source.file(name.segments):
        return True
    return len(name.segments) == 3 and all(source.file((a, s)) for a, s in zip(AXES, name.segments))


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


@dataclass(frozen=True)
class Root:
    name: str
    path: Path  # resolved


def root_of(path: Path, resolved: bool = False) -> Root | None:
    """The source a file lies in (after resolving symlinks), the innermost when roots nest.
    `resolved`: the path has its symlinks followed already."""
    resolved = Path(path) if resolved else Path(path).resolve()
    inside = [r for r in _roots(tuple(all_sources())) if resolved.is_relative_to(r.path)]
    return max(inside, key=lambda r: len(r.path.parts)) if inside else None


@lru_cache(maxsize=8)
def _roots(known: tuple[Source, ...]) -> tuple[Root, ...]:
    """The sources' roots, resolved once per set of sources (`recipe validate` over 1,000 files)."""
    return tuple(Root(s.name, s.root.resolve()) for s in known)


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
    """A three-segment name whose segments are a policy, a backend and a hardware part (parts
    come from any source; a qualifier picks where the overlay comes from)."""
    if len(name.segments) != 3:
        return False
    return all(find(Name((axis, seg))) for axis, seg in zip(AXES, name.segments))


def part_names(axis: str) -> list[str]:
    seen: dict[str, None] = {}
    for source in all_sources():
        for p in source.parts(axis):
            seen.setdefault(p, None)
    return sorted(seen)
