"""Published versions: immutable, fully resolved recipe files under a source's published/, with
their sha256 recorded in the source's index.yaml. `name@N` pins one; a bare name means the
newest when the source that has the name has published it."""

from __future__ import annotations

import copy
import os
import re
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from registry import __version__, names
from registry.errors import RecipeError
from registry.files import write_atomic
from registry.load import display_path, load_cached
from registry.names import Name
from registry.sharing import sources, trust

INDEX = "index.yaml"
FOLDER = "published"
LOCK = ".publish.lock"
LOCK_WAIT_S = 30
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NUMBER = re.compile(r"[1-9][0-9]*")  # ASCII: published/NAME/N.yaml
_CHECKED: dict[Path, tuple] = {}  # index path -> (the parsed file, its checked versions)
_INDEX_HINT = (
    "versions: {NAME: [{version: N, file: published/NAME/N.yaml, sha256: HEX, date: TEXT, "
    "parts: {policy: P, backend: B, hardware: H}}]}"
)


@dataclass(frozen=True)
class Version:
    source: sources.Source
    name: str
    number: int
    file: Path
    sha256: str
    date: str
    # the parts it was composed from, (axis, name) in axis order, as its index entry records them:
    # the frozen file holds values only, and `recipe list --policy P` filters by parts
    parts: tuple[tuple[str, str], ...] = ()

    @property
    def qualified(self) -> str:
        return f"{self.source.name}:{self.name}@{self.number}"


MAX_BYTES = 1 << 20  # the loader's limit for a recipe file: a published version is one


def sha256(path: Path) -> str:
    """A published file's hash, read in chunks and only when its size is that of a recipe: a huge
    file planted in a source is refused before it is read, never read whole into memory."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_BYTES:
                raise RecipeError.at(
                    str(path), "size", f"{size} bytes, larger than {MAX_BYTES}; not a published recipe"
                )
            import hashlib  # only a published version's check reads it: not at start-up

            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as e:
        raise RecipeError(f"{path}: cannot read: {e.strerror}") from None


def index(source: sources.Source) -> dict[str, list[dict]]:
    """The source's published versions by name, each entry checked: a malformed index is one
    line naming its file and line, never a traceback at first use."""
    path = source.root / INDEX
    if not path.is_file():
        return {}
    sources.confined(source, INDEX)
    doc = load_cached(path)  # the index of published versions, not a recipe
    checked = _CHECKED.get(path)
    if checked is not None and checked[0] is doc:  # read many times per composition; checked once
        return checked[1]
    data = doc.data.get("versions") or {}
    if not isinstance(data, dict):
        raise _malformed(doc, ("versions",), "versions must be a mapping of names to lists of versions")
    for name, entries in data.items():
        try:
            parsed = names.parse(name) if isinstance(name, str) else None
        except RecipeError:
            parsed = None
        if parsed is None or parsed.source or parsed.version is not None:
            raise _malformed(doc, ("versions", name), f"{name!r} is not a recipe name")
        if not isinstance(entries, list):
            raise _malformed(doc, ("versions", name), f"{name}: must be a list of versions")
        seen: set[int] = set()
        for i, entry in enumerate(entries):
            _check_entry(doc, (name, i), entry)
            if entry["version"] in seen:
                raise _malformed(doc, ("versions", name, i), f"{name}@{entry['version']} is listed twice")
            seen.add(entry["version"])
    _CHECKED[path] = (doc, data)
    return data


def _check_entry(doc, at: tuple, entry) -> None:
    key = ("versions",) + at
    name = at[0]
    if not isinstance(entry, dict):
        raise _malformed(doc, key, f"{name}: a version must be a mapping")
    missing = [k for k in ("version", "file", "sha256") if k not in entry]
    if missing:
        raise _malformed(doc, key, f"{name}: a version without {', '.join(missing)}")
    version = entry["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise _malformed(doc, key + ("version",), f"{name}: version {version!r} is not a number >= 1")
    file = entry["file"]
    if not isinstance(file, str) or not file or PurePosixPath(file).is_absolute() or ".." in PurePosixPath(file).parts:
        raise _malformed(doc, key + ("file",), f"{name}@{version}: file {file!r} is not a path inside the source")
    if not isinstance(entry["sha256"], str) or not _SHA256.fullmatch(entry["sha256"]):
        raise _malformed(doc, key + ("sha256",), f"{name}@{version}: sha256 {entry['sha256']!r} is not 64 hex digits")
    if not isinstance(entry.get("date") or "", str):
        raise _malformed(doc, key + ("date",), f"{name}@{version}: date {entry['date']!r} is not text")
    parts = entry.get("parts", {})
    if not isinstance(parts, dict) or not all(a in names.AXES and _is_segment(p) for a, p in parts.items()):
        raise _malformed(
            doc, key + ("parts",), f"{name}@{version}: parts {parts!r} is not a mapping of axes to part names"
        )


def _is_segment(part) -> bool:
    """A part's name: one segment of a recipe name (no source, version or folder)."""
    try:
        parsed = names.parse(part) if isinstance(part, str) else None
    except RecipeError:
        return False
    return parsed is not None and len(parsed.segments) == 1 and parsed.source is None and parsed.version is None


def _malformed(doc, key: tuple, message: str) -> RecipeError:
    origin = next((doc.origins[key[:n]] for n in range(len(key), 0, -1) if key[:n] in doc.origins), doc.file)
    return RecipeError.at(origin, "index", f"malformed {INDEX}: {message}", hint=_INDEX_HINT)


def hashes(source: sources.Source) -> dict[str, str]:
    """NAME@N -> sha256 for every version the source's index lists (what trust.py remembers)."""
    return {f"{name}@{e['version']}": e["sha256"] for name, entries in index(source).items() for e in entries}


def versions(source: sources.Source, name: str) -> list[Version]:
    entries = index(source).get(name, [])
    if not entries:
        _none_unlisted(source, name)
        return []
    root = source.root.resolve()
    found = []
    for i, entry in enumerate(entries):
        file = source.root / entry["file"]
        if not file.resolve().is_relative_to(root):
            # a symlink out of the source: its hash may match, but it is not the team's file
            doc = load_cached(source.root / INDEX)
            where = doc.origins.get(("versions", name, i, "file"), doc.file)
            raise RecipeError.at(
                where, "index", f"{source.name}:{name}@{entry['version']}: {entry['file']} resolves outside the source"
            )
        parts = tuple((a, entry["parts"][a]) for a in names.AXES if a in entry.get("parts", {}))
        found.append(
            Version(source, name, entry["version"], file, entry["sha256"], str(entry.get("date") or ""), parts)
        )
    return sorted(found, key=lambda v: v.number)


def _published_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.yaml") if _NUMBER.fullmatch(p.stem)) if folder.is_dir() else []


def has_files(source: sources.Source, name: str) -> bool:
    """Whether the source holds published files of NAME (listed in its index or not)."""
    return bool(_files_of(source, name))


def _files_of(source: sources.Source, name: str) -> list[Path]:
    return _published_files(source.root.joinpath(FOLDER, *name.split("/")))


def _none_unlisted(source: sources.Source, name: str, locked: bool = False) -> None:
    """A name with published files but no index entry lost its index: say so rather than let a
    pin fall through to another source's version of the same name."""
    if not has_files(source, name):
        return
    with nullcontext() if locked else _settled(source):  # a first publish writes its file, then the index
        files = _files_of(source, name) if not index(source).get(name) else []
    if files:
        raise _lost_index(source, f"{name}@{', '.join(sorted((p.stem for p in files), key=int))}")


def _lost_index(source: sources.Source, what: str) -> RecipeError:
    path = source.root / INDEX
    state = "is missing" if not path.exists() else "does not list them"
    return RecipeError.at(
        display_path(path),
        "index-missing",
        f"source {source.name!r} has published {what} but its {INDEX} {state}",
        hint=f"restore {INDEX} (e.g. git checkout -- {INDEX} in the source); versions are never guessed",
    )


def unlisted(source: sources.Source) -> RecipeError | None:
    """For `recipe validate --all`: published files that the index does not list."""
    with _settled(source):
        return _unlisted(source)


def _unlisted(source: sources.Source) -> RecipeError | None:
    listed = {(source.root / e["file"]).resolve() for entries in index(source).values() for e in entries}
    folder = source.root / FOLDER
    found = folder.rglob("*.yaml") if folder.is_dir() else []
    files = [p for p in found if _NUMBER.fullmatch(p.stem) and p.parent != folder]  # published/NAME/N.yaml
    missing = sorted(p.relative_to(folder).with_suffix("").as_posix() for p in files if p.resolve() not in listed)
    if not missing:
        return None
    shown = [m.rsplit("/", 1)[0] + "@" + m.rsplit("/", 1)[1] for m in missing[:5]]
    return _lost_index(source, ", ".join(shown) + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))


def lookup(name: Name) -> Version | None:
    """The version a name denotes, checked against its recorded hash; None when the winning
    source has not published the name (and no version was asked for), or when NAME@N is the
    bundled file as shipped. While the sources are pinned (one command over many recipes), each
    name is looked up once."""
    return sources.while_pinned(_LOOKED_UP, name, lambda: _lookup(name))


_LOOKED_UP: dict = {}  # what each name denoted under the pinned sources


def _lookup(name: Name) -> Version | None:
    if name.version is not None and name.source is None:
        return _pin(name)
    for source in sources.candidates(name):
        published = versions(source, name.path)
        if name.version is not None:
            match = next((v for v in published if v.number == name.version), None)
            if match is not None:
                return verified(match)
            if not published and declared(source, name) == name.version:
                return None  # the bundled file as shipped: composed like the bare name
            if published or sources.has(source, name):
                _no_such_version(source, name, published)
            continue
        if published:
            return verified(published[-1])
        if sources.has(source, name):
            return None
    if name.version is not None:
        raise RecipeError(f"no source has published {name.path}@{name.version}")
    return None


def holders(name: Name) -> list[tuple[sources.Source, Version | None]]:
    """Every source that has version N of the name: its published version, or (None) the bundled
    file that declares N."""
    found: list[tuple[sources.Source, Version | None]] = []
    for source in sources.candidates(name):
        match = next((v for v in versions(source, name.path) if v.number == name.version), None)
        if match is not None:
            found.append((source, match))
        elif source.kind == "bundled" and declared(source, name) == name.version:
            found.append((source, None))
    return found


def _pin(name: Name) -> Version | None:
    """NAME@N without a source: the one version N of NAME among the sources, whatever their
    order, so that a later publish elsewhere cannot change what it means. Where two sources have
    a version N, the pin is ambiguous and refused, naming both: never the first in search order
    (docs/failure-modes.md §53)."""
    found = holders(name)
    if len(found) > 1:
        choices = " or ".join(f"{s.name}:{name.path}@{name.version}" for s, _ in found)
        raise RecipeError(
            f"{name.path}@{name.version} is ambiguous: {len(found)} sources have a version {name.version} "
            f"(hint: name the source: {choices})",
        )
    if found:
        source, match = found[0]
        return verified(match) if match is not None else None
    for source in sources.candidates(name):  # say what there is, from the first source that has the name
        published = versions(source, name.path)
        if published or sources.has(source, name):
            _no_such_version(source, name, published)
    raise RecipeError(f"no source has published {name.path}@{name.version}")


def _no_such_version(source: sources.Source, name: Name, published: list[Version]) -> None:
    known = ", ".join(str(v.number) for v in published) or "none"
    shipped = declared(source, name)
    also = f"; the bundled file is version {shipped}" if shipped else ""
    raise RecipeError(f"{source.name}:{name.path} has no version {name.version} (published: {known}{also})")


def pin(version: Version) -> str:
    """How to write a pin to this version that another source's publish cannot redirect: the
    bare NAME@N for a version of the bundled recipes, SOURCE:NAME@N for a team's."""
    return f"{version.name}@{version.number}" if version.source.kind == "bundled" else version.qualified


def declared(source: sources.Source, name: Name) -> int | None:
    """The version a bundled recipe's own file declares (`recipe.version`). The bundled recipes
    change only with a release of the package, so `NAME@N` names the file as shipped; in a team
    source only `recipe publish` makes a version (its files are edited in place)."""
    if source.kind != "bundled":
        return None
    path = source.file(name.segments)
    meta = load_cached(path).data.get("recipe") if path else None
    number = meta.get("version") if isinstance(meta, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) and number >= 1 else None


def verified(version: Version) -> Version:
    """A version whose file matches its index and whose hash is the one this machine first saw."""
    verified_file(version)
    trust.check(version)  # a remote that rewrites file and index together passes the first check
    return version


def verified_file(version: Version) -> None:
    if not version.file.is_file():
        raise RecipeError.at(str(version.file), "hash-mismatch", f"published version {version.qualified} is missing")
    actual = sha256(version.file)
    if actual != version.sha256:
        raise RecipeError.at(
            str(version.file),
            "hash-mismatch",
            f"published version {version.qualified} was changed after publishing "
            f"(sha256 {actual[:12]}, index says {version.sha256[:12]})",
        )


@contextmanager
def _locked(source: sources.Source):
    """One publisher at a time per source; a second waits, then fails cleanly."""
    from filelock import FileLock, Timeout  # only publishing locks: kept off the start-up path

    source.root.mkdir(parents=True, exist_ok=True)
    try:
        # a lock file linked elsewhere would be opened (and truncated) there
        with FileLock(sources.confined(source, LOCK), timeout=LOCK_WAIT_S):
            yield
    except Timeout:
        raise RecipeError(f"{source.root}: another publish holds {LOCK} (hint: try again)") from None


@contextmanager
def _settled(source: sources.Source):
    """No publish half done while inside: the publish lock where publishing can happen (a
    directory source), nothing for the rest (git clones and the bundled recipes)."""
    if source.kind != "path" or not (source.root / LOCK).exists():
        yield
        return
    from filelock import FileLock, Timeout

    lock: FileLock | None = FileLock(sources.confined(source, LOCK), timeout=LOCK_WAIT_S)
    try:
        lock.acquire()
    except (OSError, Timeout):
        lock = None  # read-only (no publisher to wait for) or held too long: check as it is
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def publish(recipe, source: sources.Source) -> Version:
    """Freeze a validated, composed recipe as the next version of its name in `source`."""
    if source.kind == "git":
        raise RecipeError(f"{source.name} is a git source: publish into a working copy (a path source) and push")
    if source.kind == "bundled":
        raise RecipeError("the bundled recipes are part of the package; publish to a team source (recipe source add)")
    name = recipe.data["recipe"]["name"]
    with _locked(source):
        entries = copy.deepcopy(index(source))  # the parsed file is cached: never edit it in place
        if not entries.get(name):
            _none_unlisted(source, name, locked=True)  # never restart at 1 beside versions an index lost
        number = max((int(e["version"]) for e in entries.get(name, [])), default=0) + 1
        relative = Path(FOLDER, *name.split("/"), f"{number}.yaml")
        target = sources.confined(source, relative)  # a symlinked published/ would write elsewhere
        sources.confined(source, INDEX)
        if target.exists():
            raise RecipeError(f"{target}: exists; a published version is never overwritten (hint: check {INDEX})")
        frozen = dict(recipe.data)
        frozen["recipe"] = {**frozen["recipe"], "name": name, "version": number}
        text = f"# {name}@{number}: published by recipe; immutable (its sha256 is in {INDEX}).\n" + yaml.safe_dump(
            frozen, sort_keys=False, width=100
        )
        write_atomic(target, text, 0o444)
        import hashlib

        digest = hashlib.sha256(text.encode()).hexdigest()
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entry = {
            "version": number,
            "file": relative.as_posix(),
            "sha256": digest,
            "date": date,
            "summary": frozen["recipe"].get("summary") or "",
        }
        parts = composed_parts(recipe.inputs)
        if parts:
            entry["parts"] = dict(parts)
        entries.setdefault(name, []).append(entry)
        header = "# published versions: written by `recipe publish`, checked by `recipe validate --all`\n"
        write_atomic(source.root / INDEX, header + yaml.safe_dump({"versions": entries}, sort_keys=False, width=1000))
    return Version(source, name, number, target, digest, date, parts)


def composed_parts(inputs) -> tuple[tuple[str, str], ...]:
    """(axis, part name) of each part file among a composition's inputs, in axis order."""
    found = {}
    for path in inputs:
        where = sources.locate(path)
        segments = where[1].removesuffix(".yaml").split("/") if where else []
        if len(segments) == 2 and segments[0] in names.AXES:
            found[segments[0]] = segments[1]
    return tuple((a, found[a]) for a in names.AXES if a in found)


def history(name: str) -> list[Version]:
    """Every version of a name, in source order: each source's published versions and, where the
    bundled recipes ship the name with a `recipe.version`, that file as shipped (`NAME@N`
    composes it, as `declared` says)."""
    found: list[Version] = []
    for source in sources.all_sources():
        published = versions(source, name)
        found += published
        number = None if published else declared(source, Name(tuple(name.split("/"))))
        if number is not None:
            file = source.file(tuple(name.split("/")))
            found.append(Version(source, name, number, file, sha256(file), f"shipped with recipe {__version__}"))
    return found
