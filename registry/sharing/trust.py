"""Versions this machine has seen, with their sha256, kept outside every source: trust on first
use, as SSH's known_hosts. A hash kept in the same repository as the file cannot catch a remote
that rewrites both (force-push, an edited index); this store can. A version is remembered by the
place its source was added from (git URL or directory, in one spelling: canonical_place) and its
name and number, not by the local source name, which each user chooses. A remembered version
whose hash changes is refused until the user accepts the change by name (docs/failure-modes.md
§52, §69)."""

from __future__ import annotations

import json
import os
import posixpath
import re
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

from registry import untrusted
from registry.errors import RecipeError

LOCK_WAIT_S = 30
MAX_STORE_BYTES = 64 << 20  # some 300,000 versions seen: far past any machine's, short of a planted file
_SHA256 = re.compile(r"[0-9a-f]{64}")
_VERSION = re.compile(r"[^@\s]+@[1-9][0-9]*")  # NAME@N, as versions.hashes writes it


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
    return canonical_place(source.location if source.kind == "git" else str(source.root))


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.S)
# git's scp-like form, [user@]host:path: a colon before any slash (docs/sharing.md)
_SCP = re.compile(r"(?:[^@/]*@)?(\[[^\]/]*\]|[^:/\[]+):(.*)", re.S)


@lru_cache(maxsize=1024)
def canonical_place(location: str) -> str:
    """One spelling per place, so that a version refused under one spelling of a source is
    refused under every other (docs/failure-modes.md §69): a local repository or directory as its
    absolute path with links, `.`, `..` and a trailing slash or `/.git` resolved (a file:// URL is
    its path, whatever host it names: git ignores it); a remote as HOST/PATH, whatever the scheme (ssh,
    https, git, scp-like), the user and the port, the host in lower case, without `.git` or a
    trailing slash."""
    text = location.strip()
    url = _SCHEME.fullmatch(text)
    if url:
        scheme, rest = url[1].lower(), url[2]
        authority, _, path = rest.partition("/")
        if scheme == "file":  # git reads the path of a file:// URL and ignores any host in it
            return _local(unquote("/" + path))
        host = authority.rpartition("@")[2]
        host = host[: host.index("]") + 1] if host.startswith("[") and "]" in host else host.partition(":")[0]
        return _remote(host, path)
    scp = None if text.startswith(("/", ".", "~")) else _SCP.fullmatch(text)
    if scp:
        return _remote(scp[1], scp[2])
    return _local(text)


def _local(path: str) -> str:
    """A local repository as git finds it: a `.git` file's gitdir followed, `DIR.git` for a `DIR`
    that is not there (git tries both), a final `/.git` dropped, so every spelling is one place."""
    resolved = os.path.realpath(os.path.expanduser(path))
    if not os.path.exists(resolved) and os.path.isdir(resolved + ".git"):
        resolved = os.path.realpath(resolved + ".git")
    gitfile = os.path.join(resolved, ".git")
    if os.path.isfile(gitfile):  # a worktree or submodule: `gitdir: PATH` names the repository
        try:
            with open(gitfile, encoding="utf-8") as f:
                line = f.read(4096).strip()
        except (OSError, UnicodeDecodeError):
            line = ""
        if line.startswith("gitdir:"):
            resolved = os.path.realpath(os.path.join(resolved, line[len("gitdir:") :].strip()))
    return os.path.dirname(resolved) if os.path.basename(resolved) == ".git" else resolved


def _remote(host: str, path: str) -> str:
    # scp-like `host:org/r` is `host/org/r`, as every hosting service reads it (and https spells it);
    # a plain ssh server reads it from the login's home, `ssh://host/~/org/r`, which stays apart
    path = posixpath.normpath("/" + unquote(path).lstrip("/"))  # `//`, `.`, `..` and a trailing /
    path = path.removesuffix(".git").rstrip("/") or "/"
    return host.lower().rstrip(".") + path  # `github.com.` is `github.com` to DNS


@dataclass(frozen=True)
class Changed:
    """A remembered version whose hash is not the one first seen."""

    source: str  # the local source name, for messages
    version: str  # NAME@N
    remembered: str
    now: str

    def line(self) -> str:
        if not self.now:  # a published version gone from its index: history rewritten as surely
            return f"{self.source}:{self.version}: no longer listed, sha256 {self.remembered[:12]} when first seen"
        return f"{self.source}:{self.version}: sha256 {self.now[:12]} now, {self.remembered[:12]} when first seen"


def known() -> dict[tuple[str, str], str]:
    """(place, NAME@N) -> the sha256 first seen, from the store as it is now."""
    path = store_file()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise RecipeError(f"{path}: cannot read the known versions ({e.strerror}); hint: move it aside") from None
    if stat.S_ISREG(st.st_mode):
        _private(path, st)  # else the guarded read below says what it is instead
    return _read(path, st.st_mtime_ns, st.st_size, st.st_ino)


class NotPrivate(RecipeError):
    """A store or lock others could write: refused, never taken for a read-only home."""


def _private(path: Path, st: os.stat_result) -> None:
    """Refuse a store or lock that someone else could write, as ssh refuses such a known_hosts:
    whoever can add a line can make this machine trust a rewritten version (docs/sharing.md)."""
    if st.st_uid not in (os.geteuid(), 0):
        raise NotPrivate(
            f"{path}: is owned by another user (uid {st.st_uid}, this user is {os.geteuid()}); "
            f"hint: move it aside, or chown {os.geteuid()} {path}"
        )
    if st.st_mode & 0o022:
        raise NotPrivate(f"{path}: is writable by others (mode {st.st_mode & 0o7777:04o}); hint: chmod 600 {path}")
    _folder_private(path)


def _folder_private(path: Path) -> None:
    """Refuse a store whose folder, or any folder above it, someone else could write: whoever may
    rename a folder on the way may put a store of their own in its place. As ssh's StrictModes,
    each folder up to the root is owned by this user or root and writable by no one else, save a
    sticky one (/tmp: only an entry's owner may replace it) and a group of this user alone."""
    folder = Path(os.path.abspath(path)).parent
    real = Path(os.path.realpath(path)).parent  # a store linked elsewhere lives in that folder
    for above in dict.fromkeys((folder, *folder.parents, real, *real.parents)):
        try:
            st = os.stat(above)
        except OSError:
            continue  # not made yet: remember() creates it, with this user's umask
        why = _others_may_write(st)
        if why:
            hint = "chmod go-w" if st.st_uid in (os.geteuid(), 0) else f"chown {os.geteuid()}"
            raise NotPrivate(
                f"{path}: {'its folder' if above in (folder, real) else 'the folder above it'} {above} {why} "
                f"(mode {st.st_mode & 0o7777:04o}), so they can replace it; hint: {hint} {above}, or set "
                "RECIPE_KNOWN_VERSIONS to a file in a folder of your own"
            )


def _others_may_write(st: os.stat_result) -> str | None:
    """Who else may add or rename entries in a folder, as a phrase, or None."""
    if st.st_uid not in (os.geteuid(), 0):
        return f"is owned by another user (uid {st.st_uid})"
    if st.st_mode & stat.S_ISVTX:
        return None  # sticky: others may add their own entries, never replace this user's
    if st.st_mode & 0o002:
        return "is writable by everyone"
    if st.st_mode & 0o020 and not _own_group(st.st_gid):
        return f"is writable by its group (gid {st.st_gid})"
    return None


def _own_group(gid: int) -> bool:
    """A user's private group (umask 002 systems): named as the user, with no other member."""
    import grp
    import pwd

    try:
        group, user = grp.getgrgid(gid), pwd.getpwuid(os.geteuid())
    except KeyError:
        return False
    return group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


@lru_cache(maxsize=4)
def _read(path: Path, mtime: int, size: int, inode: int) -> dict[tuple[str, str], str]:
    try:
        text = untrusted.read_text(path, MAX_STORE_BYTES)  # a FIFO, a device, a planted huge file
    except untrusted.Rejected as e:
        why = str(e).removeprefix(f"{path}: ")
        raise RecipeError(f"{path}: cannot read the known versions ({why}); hint: move it aside") from None
    found: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        entry = _entry(line)
        if entry is not None:
            found.setdefault(entry[:2], entry[2])  # the first sighting is the one trusted
    return found


def _entry(line: str) -> tuple[str, str, str] | None:
    """(canonical place, NAME@N, sha256) of a well-formed line, else None: a line cut off by a
    crash mid-append, or damaged in any way, is no sighting (the version is seen again next
    time), so it can neither switch the check off nor stand in for the real first sighting."""
    try:
        entry = untrusted.loads(line, "line", depth=8)  # a sighting is flat; room for fields to come
    except untrusted.Rejected:
        return None
    if not isinstance(entry, dict):
        return None
    where, version, digest = entry.get("place"), entry.get("version"), entry.get("sha256")
    if not (isinstance(where, str) and where and isinstance(version, str) and isinstance(digest, str)):
        return None
    if not (_VERSION.fullmatch(version) and _SHA256.fullmatch(digest)):
        return None
    try:
        return canonical_place(where), version, digest
    except ValueError:  # a NUL or a lone surrogate: no path, no place (UnicodeError is a ValueError)
        return None


def changed(source, entries: dict[str, str], whole: bool = False, remembered: dict | None = None) -> list[Changed]:
    """The versions among `entries` (NAME@N -> sha256 the source says) remembered with another hash;
    with `whole` (`entries` is the source's whole index), also each version remembered from this
    place that the index no longer lists (its `now` empty): a published version never goes away
    but by a rewrite, and its number would be published again over it. `remembered`: the record
    as read before the index was (a version another process publishes meanwhile is remembered
    after its index lists it, so a record read first never names one the index lacks)."""
    remembered = known() if remembered is None else remembered
    where = place(source)
    out = []
    for version, digest in sorted(entries.items()):
        first = remembered.get((where, version))
        if first is not None and first != digest:
            out.append(Changed(source.name, version, first, digest))
    if whole:
        gone = sorted(v for (p, v) in remembered if p == where and v not in entries)
        out += [Changed(source.name, v, remembered[(where, v)], "") for v in gone]
    return out


def forget(source, labels: list[str]) -> None:
    """Drop remembered versions (accepted as gone from their source by the user, by name)."""
    if not labels:
        return
    from filelock import FileLock, Timeout

    path, where = store_file(), place(source)
    try:
        lock = path.with_name(path.name + ".lock")
        _private_if_there(lock)
        with FileLock(lock, timeout=LOCK_WAIT_S, mode=0o600):
            current = known()
            kept = {k: d for k, d in current.items() if not (k[0] == where and k[1] in labels)}
            if kept != current:
                _rewrite(path, kept, where, {})
    except Timeout:
        raise RecipeError(f"{path}: another recipe command holds its lock (hint: try again)") from None
    except OSError as e:
        raise RecipeError(f"{path}: cannot record the versions seen ({e.strerror})") from None


def refuse_publishing(source, index, name: str) -> None:
    """Refuse to publish on top of published versions changed since this machine first saw them
    (a force-pushed remote, a directory edited in place), naming each, until the user accepts the
    change or removes the source (docs/failure-modes.md §69). `index`: reads the source's NAME@N ->
    sha256 now."""
    if source.kind == "bundled":
        return
    remembered = known()  # before the index: see changed()
    found = changed(source, index(), whole=True, remembered=remembered)
    if not found:
        return
    if source.kind == "git":  # the reading clone stayed behind: only an update takes the remote's hash
        accept = f"recipe source update {source.name} " + " ".join(f"--accept {c.version}" for c in found)
    else:
        accept = f"recipe source accept {source.name} " + " ".join(c.version for c in found)
    raise RecipeError(
        f"cannot publish {name} to {source.name}: {len(found)} published version(s) changed since this machine "
        "first saw them: " + "; ".join(c.line() for c in found) + "; nothing was published "
        f"(hint: if the change is deliberate, {accept}; else recipe source remove {source.name})"
    )


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
        except NotPrivate:
            raise
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
    _folder_private(path)  # before the first sighting creates the store there
    try:
        lock = path.with_name(path.name + ".lock")
        _private_if_there(lock)
        with FileLock(lock, timeout=LOCK_WAIT_S, mode=0o600):
            current = known()
            new = {v: d for v, d in entries.items() if (where, v) not in current}
            if replace and any(current.get((where, v)) not in (None, d) for v, d in entries.items()):
                _rewrite(path, current, where, entries)
            elif new:
                # the user's own record, as _rewrite leaves it: another user must not add hashes to it
                with os.fdopen(os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600), "a+", encoding="utf-8") as f:
                    if _unterminated(f):  # a line cut off by a crash, or edited by hand: kept apart
                        f.write("\n")
                    for version, digest in sorted(new.items()):
                        f.write(json.dumps({"place": where, "version": version, "sha256": digest}) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
    except Timeout:
        raise RecipeError(f"{path}: another recipe command holds its lock (hint: try again)") from None
    except OSError as e:
        raise RecipeError(f"{path}: cannot record the versions seen ({e.strerror})") from None


def _unterminated(f) -> bool:
    """Whether the open store's last byte is not a newline (an append would join its line)."""
    size = os.fstat(f.fileno()).st_size
    if not size:
        return False
    return os.pread(f.fileno(), 1, size - 1) != b"\n"


def _private_if_there(path: Path) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    _private(path, st)


def _rewrite(path: Path, current: dict, where: str, entries: dict[str, str]) -> None:
    from registry.files import write_atomic

    merged = dict(current)
    merged.update({(where, v): d for v, d in entries.items()})
    lines = [json.dumps({"place": p, "version": v, "sha256": d}) for (p, v), d in merged.items()]
    write_atomic(path, "\n".join(lines) + "\n", 0o600)
