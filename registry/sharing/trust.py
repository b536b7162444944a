"""Versions this machine has seen, with their sha256, kept outside every source: trust on first
use, as SSH's known_hosts. A hash kept in the same repository as the file cannot catch a remote
that rewrites both (force-push, an edited index); this store can. A version is remembered by the
place its source was added from (git URL or directory) and its name and number, not by the local
source name, which each user chooses. A remembered version whose hash changes is refused until
the user accepts the change by name (docs/failure-modes.md §52)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from registry.errors import RecipeError

LOCK_WAIT_S = 30


def store_file() -> Path:
    """RECIPE_KNOWN_VERSIONS, else beside the sources' config file: known-versions.jsonl for
    sources.yaml, NAME.known-versions.jsonl for a config named otherwise (one store per config)."""
    if os.environ.get("RECIPE_KNOWN_VERSIONS"):
        return Path(os.environ["RECIPE_KNOWN_VERSIONS"])
    from registry.sharing import config

    file = config.config_file()
    return file.with_name(
        "known-versions.jsonl" if file.name == "sources.yaml" else f"{file.stem}.known-versions.jsonl"
    )


def place(source) -> str:
    """Where a source's versions come from, the same on every machine that added it alike."""
    if source.kind == "git":
        return source.location
    return str(Path(source.root).resolve())


@dataclass(frozen=True)
class Changed:
    """A remembered version whose hash is not the one first seen."""

    source: str  # the local source name, for messages
    version: str  # NAME@N
    remembered: str
    now: str

    def line(self) -> str:
        return f"{self.source}:{self.version}: sha256 {self.now[:12]} now, {self.remembered[:12]} when first seen"


def known() -> dict[tuple[str, str], str]:
    path = store_file()
    try:
        st = path.stat()
    except OSError:
        return {}
    return _read(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=4)
def _read(path: Path, mtime: int, size: int) -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RecipeError(f"{path}: cannot read the known versions ({e}); hint: move it aside") from None
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            key = (entry["place"], entry["version"])
            digest = entry["sha256"]
        except (ValueError, KeyError, TypeError):
            continue  # a line cut off by a crash mid-append; the version is seen again next time
        found.setdefault(key, digest)  # the first sighting is the one trusted
    return found


def changed(source, entries: dict[str, str]) -> list[Changed]:
    """The versions among `entries` (NAME@N -> sha256 the source says) remembered with another hash."""
    remembered = known()
    where = place(source)
    out = []
    for version, digest in sorted(entries.items()):
        first = remembered.get((where, version))
        if first is not None and first != digest:
            out.append(Changed(source.name, version, first, digest))
    return out


def check(version) -> None:
    """Refuse a published version whose hash is not the one this machine first saw; remember one
    never seen (the caller has checked it against its index)."""
    if version.source.kind == "bundled":
        return  # the package's own files: they change only with a release
    label = f"{version.name}@{version.number}"
    found = changed(version.source, {label: version.sha256})
    if found:
        c = found[0]
        raise RecipeError.at(
            str(version.file),
            "version-changed",
            f"published version {version.qualified} changed since this machine first saw it "
            f"(sha256 {c.now[:12]} now, {c.remembered[:12]} first seen)",
            hint=f"recipe source accept {version.source.name} {label} if the change is deliberate",
        )
    if (place(version.source), label) not in known():
        try:
            remember(version.source, {label: version.sha256})
        except RecipeError as e:  # a read-only home: the version is still checked against its index
            import sys

            print(f"note: {e}; {version.qualified} was not remembered", file=sys.stderr)


def remember(source, entries: dict[str, str], replace: bool = False) -> None:
    """Add versions first seen now; with `replace`, also take these hashes for remembered ones
    (an accepted change)."""
    if source.kind == "bundled" or not entries:
        return
    from filelock import FileLock, Timeout  # only a first sighting writes: kept off the start-up path

    path = store_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    where = place(source)
    try:
        with FileLock(path.with_name(path.name + ".lock"), timeout=LOCK_WAIT_S):
            current = known()
            new = {v: d for v, d in entries.items() if (where, v) not in current}
            if replace and any(current.get((where, v)) not in (None, d) for v, d in entries.items()):
                _rewrite(path, current, where, entries)
            elif new:
                # the user's own record, as _rewrite leaves it: another user must not add hashes to it
                with os.fdopen(
                    os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a", encoding="utf-8"
                ) as f:
                    for version, digest in sorted(new.items()):
                        f.write(json.dumps({"place": where, "version": version, "sha256": digest}) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
    except Timeout:
        raise RecipeError(f"{path}: another recipe command holds its lock (hint: try again)") from None
    except OSError as e:
        raise RecipeError(f"{path}: cannot record the versions seen ({e.strerror})") from None


def _rewrite(path: Path, current: dict, where: str, entries: dict[str, str]) -> None:
    from registry.files import write_atomic

    merged = dict(current)
    merged.update({(where, v): d for v, d in entries.items()})
    lines = [json.dumps({"place": p, "version": v, "sha256": d}) for (p, v), d in merged.items()]
    write_atomic(path, "\n".join(lines) + "\n", 0o600)
