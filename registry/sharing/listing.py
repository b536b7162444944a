"""Every recipe a name reaches, from every source: tuned cells, published versions, free-standing
recipes and untuned cells, each with the name `recipe show` takes for it, its source, version,
validity and the sources it shadows. `recipe list`, `recipe search` and `recipe catalog` read
which recipes exist, and how they are named, from here.

Each entry is read from the file that `show`, `run` and `estimate` compose for its name (the
winning source's newest published version, else its overlay or recipe file), so that every
command reports the same values. A name is qualified with its source when another source wins
the bare name, and NAME@VERSION resolves wherever a version is shown.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from registry.errors import RecipeError
from registry.load import load_cached
from registry.names import AXES, Name, parse
from registry.sharing import sources

STATUSES = ("valid", "warnings", "invalid")


@dataclass
class Entry:
    name: str  # as `show` takes it
    version: int | None
    source: str
    tuned: bool
    summary: str
    tags: list[str] = field(default_factory=list)
    shadows: list[str] = field(default_factory=list)
    status: str = ""
    # why an invalid entry is invalid: (rule id, message) of each error, or of the one failure
    reasons: list[tuple[str, str]] = field(default_factory=list)
    target: str = ""  # what composes exactly this entry
    cell: tuple | None = None
    path: str = ""  # the recipe's name, without source or version
    published: bool = False  # a published version, not a working file
    date: str = ""  # when the version was published
    parts_from: tuple[str, ...] = ()  # an untuned cell: the sources of its parts, in axis order

    @property
    def kind(self) -> str:
        """published, tuned (an overlay file), cell (an untuned cell of parts) or free-standing."""
        if self.published:
            return "published"
        if self.parts_from:
            return "cell"
        return "tuned" if self.cell is not None else "free-standing"

    def matches(self, text: str) -> bool:
        text = text.casefold()
        return any(text in s.casefold() for s in (self.name, self.summary, *self.tags))


def entries(
    filters: dict,
    tuned_only: bool = False,
    everything: bool = False,
    every_version: bool = False,
    grep: str | None = None,
    valid_only: bool = False,
) -> tuple[list[Entry], int]:
    """The entries, with their status, and how many untuned cells were left out for want of a
    filter."""
    rows, hidden = _found(filters, tuned_only, everything, every_version)
    if grep:
        rows = [e for e in rows if e.matches(grep)]
    _fill_status(rows)
    if valid_only:
        rows = [e for e in rows if e.status in ("valid", "warnings")]
    rows.sort(key=lambda e: (not e.tuned, e.name.split(":")[-1], ":" in e.name, -(e.version or 0)))
    return rows, hidden


def every_recipe() -> list[Entry]:
    """Every recipe of every source, every published version, and every untuned cell (status
    not filled in: `list` reads it from its cache, the catalog validates each recipe itself)."""
    with sources.pinned():
        return _found(dict.fromkeys(AXES), everything=True, every_version=True)[0]


def _found(filters: dict, tuned_only: bool = False, everything: bool = False, every_version: bool = False):
    from registry.sharing import versions

    every = sources.all_sources()
    providers: dict[str, list[sources.Source]] = {}
    for source in every:
        # a name the index lists with no version is no recipe of the source (nor an untuned cell),
        # unless the source has published files of it: then its lost index entries are said
        listed = {name for name, found in versions.index(source).items() if found or versions.has_files(source, name)}
        here = listed | {"/".join(c) for c in source.overlays()} | set(source.free_standing())
        for name in sorted(here):
            providers.setdefault(name, []).append(source)
    parts = [set(sources.part_names(a)) for a in AXES]
    filtered = any(filters.values())
    names = set(providers)
    hidden = 0
    if filtered or everything or not tuned_only:
        untuned = {"/".join(c) for c in itertools.product(*(sorted(p) for p in parts))} - names
        if filtered or everything:
            names |= untuned
        elif not tuned_only:
            hidden = len(untuned)
    rows: list[Entry] = []
    for name in sorted(names):
        segments = tuple(name.split("/"))
        cell = segments if len(segments) == 3 and all(s in p for s, p in zip(segments, parts)) else None
        if filtered and cell is not None and any(v and v != s for v, s in zip(filters.values(), cell)):
            continue
        found = _rows(name, cell, providers.get(name, []), every_version)
        if tuned_only:
            found = [e for e in found if e.tuned]
        if filtered and cell is None:
            found = [e for e in found if _extends_parts(e.target, filters)]  # by the parts it composes
        rows += found
    return rows, hidden


def _rows(name: str, cell: tuple | None, providers: list[sources.Source], every_version: bool) -> list[Entry]:
    """The entry of the recipe a bare name composes, then (every_version) every other version and
    every shadowed source's recipe of that name, each named so that it resolves to itself."""
    from registry.sharing import versions

    parsed = Name(tuple(name.split("/")))
    tuned = cell is not None and sources.find(parsed) is not None
    try:
        winner = versions.lookup(parsed)
        own = winner.file if winner else sources.find(parsed)
    except RecipeError as e:  # a lost or malformed index, a changed version: shown, not fatal
        return [_broken(name, _unreadable_in(parsed, providers), tuned, e, cell, name, target=name)]
    if winner is not None:
        source, version = winner.source, winner.number
    elif own is not None:
        source = next(s for s in sources.all_sources() if s.file(parsed.segments) == own)
        version = versions.declared(source, parsed)
    else:  # an untuned cell: its parts may come from several sources
        part_sources = tuple(dict.fromkeys(_source_of(Name((a, s))) for a, s in zip(AXES, parsed.segments)))
        summary = "composed from parts " + ", ".join(f"{a}/{s}" for a, s in zip(AXES, parsed.segments))
        label = "+".join(part_sources)
        return [Entry(name, None, label, False, summary, target=name, cell=cell, path=name, parts_from=part_sources)]
    shadows = [s.name for s in providers if s.name != source.name]
    first = _entry(name, own, version, source.name, tuned, shadows, cell)
    first.target = name if winner is None else _pinned(name, source, version)
    if winner is not None:
        first.published, first.date = True, winner.date
    out = [first]
    if not every_version:
        return out
    for other in providers:
        try:
            published = versions.versions(other, name)
        except RecipeError as e:
            out.append(_broken(f"{other.name}:{name}", other.name, tuned, e, cell, name))
            continue
        shown = f"{name}" if other.name == source.name else f"{other.name}:{name}"
        for v in published:
            if other.name == source.name and v.number == version:
                continue
            e = _entry(shown, v.file, v.number, other.name, tuned, [], cell)
            e.target = _pinned(shown, other, v.number)
            e.published, e.date = True, v.date
            out.append(e)
        if other.name != source.name and not published:
            file = other.file(parsed.segments)
            e = _entry(shown, file, versions.declared(other, parsed), other.name, tuned, [], cell)
            e.target = shown
            out.append(e)
    return out


def _unreadable_in(name: Name, providers: list[sources.Source]) -> str:
    """The source whose versions of NAME cannot be read (a lost or malformed index: it need not
    provide the name otherwise), else the first that has the name."""
    from registry.sharing import versions

    for source in sources.candidates(name):
        try:
            versions.versions(source, name.path)
        except RecipeError:
            return source.name
    return providers[0].name if providers else "-"


def _broken(shown: str, source: str, tuned: bool, e: RecipeError, cell, path: str, target: str = "") -> Entry:
    """The row of a recipe whose index or versions cannot be read: shown with why, not fatal."""
    reasons = _failure(e)
    return Entry(
        shown, None, source, tuned, str(e), status="invalid", reasons=reasons, target=target, cell=cell, path=path
    )


def _pinned(shown: str, source: sources.Source, number: int) -> str:
    """NAME@N, or SOURCE:NAME@N where another source has a version N too (a bare pin would be
    refused as ambiguous)."""
    from registry.sharing import versions

    if ":" in shown:
        return f"{shown}@{number}"
    if len(versions.holders(Name(tuple(shown.split("/")), None, number))) > 1:
        return f"{source.name}:{shown}@{number}"
    return f"{shown}@{number}"


def _entry(name, own: Path | None, version, source: str, tuned: bool, shadows, cell) -> Entry:
    meta = meta_of(own) if own else {}
    tags = meta.get("tags")
    return Entry(
        name,
        version,
        source,
        tuned,
        str(meta.get("summary") or ""),
        [str(t) for t in tags] if isinstance(tags, list) else [],
        shadows,
        cell=cell,
        path=name.split(":")[-1],
    )


def _source_of(name: Name) -> str:
    return next((s.name for s in sources.all_sources() if s.file(name.segments)), "-")


def _extends_parts(target: str, filters: dict) -> bool:
    """Whether a recipe that is not a cell composes the parts the filters name."""
    used = parts_of(target)  # None: it does not compose, so it composes no part
    return used is not None and all(not want or used.get(axis) == want for axis, want in filters.items())


def parts_of(target: str) -> dict[str, str] | None:
    """axis -> part name of what TARGET composes: its part files; for a published version (one
    frozen file of resolved values) the parts its index entry records, each axis it does not
    record named from those values (`described`). None when it does not compose."""
    from registry.compose import Plan
    from registry.sharing import versions

    try:
        inputs = Plan.of(target).inputs
    except RecipeError:
        return None
    used = dict(versions.composed_parts(inputs))
    if used:
        return used
    try:
        version = versions.lookup(parse(target))
    except RecipeError:
        return None
    if version is None:  # a working recipe that composes no part file
        return {}
    return published_parts(version, load_cached(version.file).data)


def published_parts(version, data: dict) -> dict[str, str]:
    """A published version's axes: the parts its index entry records, else (a version recorded
    before parts were, or a value set inline) what its resolved values name."""
    recorded = dict(version.parts)
    return {axis: recorded.get(axis) or described(data, axis) for axis in AXES}


def described(data: dict, axis: str) -> str:
    """An axis named from resolved values, spelt as the parts are where it can be (zero3-offload,
    fsdp2, 2x8xH100-80GB)."""
    section = data.get(axis)
    if not isinstance(section, dict):
        return ""
    if axis == "policy":
        return str(section.get("type") or "")
    if axis == "backend":
        kind = section.get("kind")
        if kind == "deepspeed":
            offload = section.get("offload")
            offloaded = isinstance(offload, dict) and any(v not in (None, "none") for v in offload.values())
            return f"zero{section.get('zero_stage')}" + ("-offload" if offloaded else "")
        if kind == "fsdp":
            if section.get("version") == 2:
                return "fsdp2"
            return "fsdp-grad-op" if section.get("sharding") == "SHARD_GRAD_OP" else "fsdp"
        return str(kind or "")
    gpu = section.get("gpu")
    gpu = gpu.get("name") if isinstance(gpu, dict) else gpu
    if not gpu:
        return "cpu"
    nodes = section.get("nodes")
    return (f"{nodes}x" if isinstance(nodes, int) and nodes > 1 else "") + f"{section.get('gpus_per_node')}x{gpu}"


def meta_of(path) -> dict:
    """A recipe file's own `recipe:` block (summary, tags, version), {} where it has none."""
    try:
        meta = load_cached(path).data.get("recipe")
    except RecipeError:
        return {}
    return meta if isinstance(meta, dict) else {}


def parts() -> list[list]:
    """[axis, part, summary] for every part of every axis, from every source."""
    return [
        [axis, part, meta_of(sources.find(Name((axis, part)))).get("summary") or ""]
        for axis in AXES
        for part in sources.part_names(axis)
    ]


# --- STATUS, cached ------------------------------------------------------------------------
# Validating every cell takes seconds; an entry's status depends only on the files it
# composes, the schemas, the team rules and the code, so it is kept per entry with each input's
# stamp, and the whole cache is dropped when the code, the schemas, the catalog, an index, a
# source's rules/*.json (or where they apply) or the set of files changes (a new file may change
# which one a name composes).


_RULES = "rules"  # registry.validate.team.RULES_DIR; importing it would load every validator


def _fill_status(rows: list[Entry]) -> None:
    if not rows:
        return
    cache = _StatusCache()
    for e in rows:
        if not e.status:
            e.status, e.reasons = cache.status(e.target or e.name)
    cache.save()


def _stamp(path: Path) -> list[int]:
    """What changes with a file's content, from the one stat already made: mtime and size alone
    miss an edit of the same size whose mtime was put back (touch -r, tools that keep times);
    ctime cannot be set back (any write or utime moves it to now), and the inode changes when a
    file is replaced by a rename."""
    try:
        st = path.stat()
    except OSError:
        return [0, 0, 0, 0]
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_size]


class _StatusCache:
    def __init__(self):
        from registry import __version__

        every = sources.all_sources()
        where = hashlib.sha256("\0".join(f"{s.name}={s.root}" for s in every).encode()).hexdigest()[:16]
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        self.path = Path(base) / "recipe" / "status" / f"{where}.json"
        package = Path(__file__).resolve().parent.parent
        from registry.files import SCHEMA_DIR

        stamps: list = [__version__]
        for path in sorted([*package.rglob("*.py"), *SCHEMA_DIR.glob("*.json")]):
            stamps.append([str(path), _stamp(path)])
        for s in every:
            files = sorted(s.root.rglob("*.yaml")) if s.root.is_dir() else []
            stamps.append([str(p.relative_to(s.root)) for p in files])
            stamps += [[str(p), _stamp(p)] for p in files if p.name == "index.yaml" or p.parent.name == "catalog"]
            # team rules judge the source's own recipes (or every recipe: rules_everywhere)
            rules = sorted((s.root / _RULES).glob("*.json"))
            stamps.append([s.name, s.rules_everywhere, [[str(p), _stamp(p)] for p in rules]])
        self.key = hashlib.sha256(json.dumps(stamps).encode()).hexdigest()
        self.entries: dict = {}
        self.changed = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("key") == self.key and isinstance(data.get("entries"), dict):
                self.entries = data["entries"]
        except (OSError, ValueError, AttributeError):
            pass  # no cache yet, or an unreadable one: recomputed

    def status(self, target: str) -> tuple[str, list[tuple[str, str]]]:
        """The entry's status and, when invalid, its reasons."""
        entry = self.entries.get(target)
        fresh = isinstance(entry, dict) and entry.get("status") in STATUSES and entry.get("inputs")
        reasons = entry.get("reasons") if fresh else None
        fresh = fresh and isinstance(reasons, list) and all(isinstance(r, list) and len(r) == 2 for r in reasons)
        if fresh and all(_stamp(Path(p)) == s for p, s in entry["inputs"]):
            return entry["status"], [(str(rule), str(why)) for rule, why in reasons]
        status, reasons, inputs = _validated(target)
        if inputs is not None:
            self.entries[target] = {
                "status": status,
                "reasons": [list(r) for r in reasons],
                "inputs": [[str(p), _stamp(p)] for p in inputs],
            }
            self.changed = True
        return status, reasons

    def save(self) -> None:
        if not self.changed:
            return
        from registry.files import write_atomic

        try:
            write_atomic(self.path, json.dumps({"key": self.key, "entries": self.entries}))
        except OSError:
            pass  # a read-only cache: statuses are recomputed next time


def _validated(target: str) -> tuple[str, list[tuple[str, str]], list[Path] | None]:
    """valid, warnings or invalid; the reasons it is invalid (each error's rule and message, in
    the order validation reports them); the files composed (None: not cached, it did not compose)."""
    from registry.compose import compose
    from registry.validate import validate

    try:
        recipe = compose(target)
        problems = validate(recipe.data, recipe.origins)
    except RecipeError as e:
        return "invalid", _failure(e), None
    reasons = list(dict.fromkeys((p.rule, p.message) for p in problems if p.is_error))
    status = "invalid" if reasons else "warnings" if problems else "valid"
    return status, reasons, list(recipe.inputs)


def _failure(e: RecipeError) -> list[tuple[str, str]]:
    """The reason an entry that does not even compose is invalid."""
    return [(e.problem.rule, e.problem.message) if e.problem else ("compose", str(e))]
