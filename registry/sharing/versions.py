"""Published versions: immutable, fully resolved recipe files under a source's published/, with
their sha256 recorded in the source's index.yaml. `name@N` pins one; a bare name means the
newest when the source that has the name has published it."""

from __future__ import annotations

import hashlib
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from registry.errors import RecipeError
from registry.files import write_atomic
from registry.load import load_cached
from registry.names import Name
from registry.sharing import sources

INDEX = "index.yaml"
FOLDER = "published"
LOCK = ".publish.lock"
LOCK_WAIT_S = 30


@dataclass(frozen=True)
class Version:
    source: sources.Source
    name: str
    number: int
    file: Path
    sha256: str
    date: str

    @property
    def qualified(self) -> str:
        return f"{self.source.name}:{self.name}@{self.number}"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def index(source: sources.Source) -> dict[str, list[dict]]:
    path = source.root / INDEX
    if not path.is_file():
        return {}
    data = load_cached(path).data.get("versions") or {}  # the index of published versions, not a recipe
    if not isinstance(data, dict):
        raise RecipeError.at(
            str(path), "index", "malformed index", hint="versions: {NAME: [{version, file, sha256, date}]}"
        )
    return data


def versions(source: sources.Source, name: str) -> list[Version]:
    found = []
    for entry in index(source).get(name, []):
        found.append(
            Version(
                source,
                name,
                int(entry["version"]),
                source.root / entry["file"],
                entry["sha256"],
                str(entry.get("date") or ""),
            )
        )
    return sorted(found, key=lambda v: v.number)


def lookup(name: Name) -> Version | None:
    """The version a name denotes, checked against its recorded hash; None when the winning
    source has not published the name (and no version was asked for)."""
    for source in sources.candidates(name):
        published = versions(source, name.path)
        if name.version is not None:
            match = next((v for v in published if v.number == name.version), None)
            if match is None:
                if published or sources.has(source, name):
                    known = ", ".join(str(v.number) for v in published) or "none"
                    raise RecipeError(f"{source.name}:{name.path} has no version {name.version} (published: {known})")
                continue
            return verified(match)
        if published:
            return verified(published[-1])
        if sources.has(source, name):
            return None
    if name.version is not None:
        raise RecipeError(f"no source has published {name.path}@{name.version}")
    return None


def verified(version: Version) -> Version:
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
    return version


@contextmanager
def _locked(source: sources.Source):
    """One publisher at a time per source; a second waits, then fails cleanly."""
    from filelock import FileLock, Timeout  # only publishing locks: kept off the start-up path

    source.root.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(source.root / LOCK, timeout=LOCK_WAIT_S):
            yield
    except Timeout:
        raise RecipeError(f"{source.root}: another publish holds {LOCK} (hint: try again)") from None


def publish(recipe, source: sources.Source) -> Version:
    """Freeze a validated, composed recipe as the next version of its name in `source`."""
    if source.kind == "git":
        raise RecipeError(f"{source.name} is a git source: publish into a working copy (a path source) and push")
    if source.kind == "bundled":
        raise RecipeError("the bundled recipes are part of the package; publish to a team source (recipe source add)")
    name = recipe.data["recipe"]["name"]
    with _locked(source):
        entries = index(source)
        number = max((int(e["version"]) for e in entries.get(name, [])), default=0) + 1
        relative = Path(FOLDER, *name.split("/"), f"{number}.yaml")
        target = source.root / relative
        if target.exists():
            raise RecipeError(f"{target}: exists; a published version is never overwritten (hint: check {INDEX})")
        frozen = dict(recipe.data)
        frozen["recipe"] = {**frozen["recipe"], "name": name, "version": number}
        text = f"# {name}@{number}: published by recipe; immutable (its sha256 is in {INDEX}).\n" + yaml.safe_dump(
            frozen, sort_keys=False, width=100
        )
        write_atomic(target, text, 0o444)
        digest = hashlib.sha256(text.encode()).hexdigest()
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entries.setdefault(name, []).append(
            {
                "version": number,
                "file": relative.as_posix(),
                "sha256": digest,
                "date": date,
                "summary": frozen["recipe"].get("summary") or "",
            }
        )
        header = "# published versions: written by `recipe publish`, checked by `recipe validate --all`\n"
        write_atomic(source.root / INDEX, header + yaml.safe_dump({"versions": entries}, sort_keys=False, width=1000))
    return Version(source, name, number, target, digest, date)


def history_rows(name: str) -> list[list[str]]:
    rows = []
    for source in sources.all_sources():
        for v in versions(source, name):
            doc = load_cached(v.file).data if v.file.is_file() else {}
            results = doc.get("results") or []
            rate = f"{results[-1]['samples_per_s']:.1f}" if results and "samples_per_s" in results[-1] else "-"
            rows.append([v.qualified, v.date, v.sha256[:12], rate, (doc.get("recipe") or {}).get("summary") or ""])
    return rows
