"""`recipe source add|list|update|remove`: the user's sources, kept in the config file."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from registry import names
from registry.errors import RecipeError
from registry.sharing import config, git, gitpublish, refresh, sources, trust

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_URL = re.compile(r"^(file|https?|ssh|git)://|^[\w.-]+@[\w.-]+:")


def add(name: str, where: str, rules_everywhere: bool = False) -> str:
    if not _NAME.fullmatch(name) or name == "bundled":
        raise RecipeError(f"source name {name!r} is not allowed (letters, digits, - and _; not 'bundled')")
    _not_taken(name, config.entries())  # fail before a long clone; checked again under the lock
    if _URL.match(where) or (where.endswith(".git") and not Path(where).is_dir()) or _bare_repository(where):
        # cloned beside its final place, then moved in under the lock: a failed or concurrent add
        # never leaves a half clone where a source's clone belongs
        config.cache_dir().mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=config.cache_dir()))
        try:
            try:
                git.clone(where, staging / "clone")
            except RecipeError as e:
                raise RecipeError(f"cannot add {name}: {where} is unreachable or not a git repository ({e})") from None
            try:  # an empty repository clones without error and has nothing to read: record nothing
                commit = git.head(staging / "clone")
            except RecipeError:
                raise RecipeError(
                    f"cannot add {name}: {where} is an empty git repository (hint: push a first commit, "
                    "e.g. a recipes/ folder, then add it again)"
                ) from None
            source = sources.Source(name, sources._root(staging / "clone"), "git", where)
            seen = _first_sight(source)
            with config.editing() as entries:
                _not_taken(name, entries)
                clone = config.cache_dir() / name
                if clone.exists():
                    shutil.rmtree(clone)  # left by a source of this name removed by hand
                os.replace(staging / "clone", clone)
                entries.append({"name": name, "git": where, "place": trust.place(source), **_scope(rules_everywhere)})
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        seen()
        return f"{name}: {where} at {commit[:12]}"
    folder = Path(where).expanduser().resolve()
    if not folder.is_dir():
        raise RecipeError(f"cannot add {name}: {where} is not a directory")
    source = sources.Source(name, sources._root(folder), "path", str(folder))
    seen = _first_sight(source)
    with config.editing() as entries:
        _not_taken(name, entries)
        # the place is recorded: a link on the way repointed later is refused (sources.where_added)
        entries.append({"name": name, "path": str(folder), "place": trust.place(source), **_scope(rules_everywhere)})
    seen()
    return f"{name}: {folder}"


def _bare_repository(where: str) -> bool:
    """A bare git repository given by its path: a git source (cloned), not a directory of recipes
    (read as one, it offered no versions, and any it had been seen with were taken as gone)."""
    folder = Path(where).expanduser()
    return (folder / "HEAD").is_file() and (folder / "objects").is_dir() and (folder / "refs").is_dir()


def _first_sight(source: sources.Source):
    """Check the versions a source offers against the ones this machine remembers from the same
    place (a source removed and added again), before anything is recorded; returns what records
    them once the source is added."""
    from registry.sharing import trust, versions

    try:
        offered = versions.hashes(source)
    except RecipeError as e:
        raise RecipeError(f"cannot add {source.name}: {e}") from None
    changed = trust.changed(source, offered, whole=True)
    if changed:
        raise RecipeError(
            f"cannot add {source.name}: {len(changed)} published version(s) differ from the ones this machine saw "
            f"from {source.location}: " + "; ".join(c.line() for c in changed)
        )
    return lambda: trust.remember(source, offered)


def _scope(everywhere: bool) -> dict:
    return {"rules": "everywhere"} if everywhere else {}  # the default, `own`, is left unwritten


def _not_taken(name: str, entries: list[dict]) -> None:
    if any(e["name"] == name for e in entries):
        raise RecipeError(f"a source named {name!r} exists (hint: recipe source remove {name} first)")


def remove(name: str) -> None:
    with config.editing() as entries:
        if not any(e["name"] == name for e in entries):
            raise RecipeError(f"no source named {name!r} in {config.config_file()}")
        entries[:] = [e for e in entries if e["name"] != name]
        shutil.rmtree(config.cache_dir() / name, ignore_errors=True)
        shutil.rmtree(config.cache_dir() / gitpublish.WORK / name, ignore_errors=True)  # its publishing copy


def update(names: list[str], accept: tuple[str, ...] = ()) -> list[str]:
    missing = set(names) - {e["name"] for e in config.entries()}
    if missing:
        raise RecipeError(f"no source named {', '.join(sorted(missing))}")
    lines = []
    for entry in config.entries():
        if names and entry["name"] not in names:
            continue
        if "git" not in entry:
            lines.append(f"{entry['name']}: a directory, nothing to update")
            continue
        clone = config.cache_dir() / entry["name"]
        sources.where_added(sources.Source(entry["name"], clone, "git", entry["git"]), entry)  # before any fetch
        if not (clone / ".git").is_dir():
            git.clone(entry["git"], clone)
        moved = refresh.refresh(entry["name"], entry["git"], clone, accept)
        lines.append(f"{entry['name']}: {entry['git']} at {moved[:12]}")
    return lines


def accept(name: str, wanted: list[str]) -> list[str]:
    """Take the hashes a source's files have now for versions remembered with other ones (an
    edit made on purpose in a directory source, or a clone moved by hand)."""
    from registry.sharing import trust, versions

    source = next((s for s in sources.all_sources() if s.name == name and s.kind != "bundled"), None)
    if source is None:
        raise RecipeError(f"no source named {name!r} (hint: recipe source list)")
    offered = versions.hashes(source)
    gone = {c.version for c in trust.changed(source, offered, whole=True) if not c.now}
    unknown = [v for v in wanted if v not in offered and v not in gone]
    if unknown:
        raise RecipeError(f"{name} has no published {', '.join(unknown)} (hint: recipe history NAME)")
    asked = list(wanted)
    trust.forget(source, [v for v in wanted if v in gone])  # accepted as gone from the source
    wanted = [v for v in wanted if v not in gone]
    for version in wanted:  # the index's hash is the file's: never accept a file the index does not match
        parsed = names.parse(version)
        versions.verified_file(next(v for v in versions.versions(source, parsed.path) if v.number == parsed.version))
    changed = {c.version: c for c in trust.changed(source, {v: offered[v] for v in wanted})}
    trust.remember(source, {v: offered[v] for v in wanted}, replace=True)
    return [f"{name}:{v}: accepted as no longer listed; forgotten" for v in sorted(gone & set(asked))] + [
        f"{name}:{v}: accepted sha256 {offered[v][:12]} (was {changed[v].remembered[:12]})"
        if v in changed
        else f"{name}:{v}: sha256 {offered[v][:12]}, as remembered"
        for v in wanted
    ]


def rows() -> list[list[str]]:
    out = []
    for source in sources.all_sources():
        commit = git.head(source.root) if source.kind == "git" else ""
        out.append([source.name, source.kind, source.location or str(source.root), commit[:12]])
    return out


def winners() -> list[list[str]]:
    """For every name defined in more than one source: which source wins, which are shadowed."""
    from registry.sharing.versions import index

    seen: dict[str, list[str]] = {}
    for source in sources.all_sources():
        names = {"/".join(c) for c in source.overlays()} | set(source.free_standing()) | set(index(source))
        names |= {f"{axis}/{p}" for axis in ("policy", "backend", "hardware") for p in source.parts(axis)}
        for name in names:
            seen.setdefault(name, []).append(source.name)
    return [[name, found[0], ", ".join(found[1:])] for name, found in sorted(seen.items()) if len(found) > 1]
