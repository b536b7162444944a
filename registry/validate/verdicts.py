"""Verdicts kept on disk, keyed by everything a verdict depends on, so that validating what was
validated before (a pre-commit hook, `recipe list` at each start, CI over a whole source) costs a
hash and a database read, not the schemas: not even the import of the schema checker (docs/design.md, "Speed").

A verdict is the list of Problems of `validate(data, origins, ref)`. Its key hashes:
- the document and its origins, as composed (every value, every file:line:col a problem can name);
- the schema files, `recipes/base.yaml` (the defaults the computed checks read) and the package's
  own modules, by path, size, modification and change times and inode: an edit or an
  upgrade is a new key;
- each other source's rule files, by the same stamps.
Nothing else reaches a verdict: the checks read no environment, host or clock.

The verdicts live in one SQLite database (the standard library's sqlite3; write-ahead log, so
processes read while one writes, each write atomic): a file per verdict cost more to create than
the verdict took to check (2,000 files for 1,000 recipes, 0.8 s of a 1.8 s validate on 2 cores).
A record that is foreign or unreadable, or a database that is not one, is a miss; a database
that cannot be opened or written is a cache that misses, never a failed validate. Set
RECIPE_VERDICT_CACHE=0 to validate from scratch every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from functools import cache
from pathlib import Path

from registry import files
from registry.errors import Problem

FORMAT = 1  # bump when the file's shape changes
_PACKAGE = Path(__file__).resolve().parent.parent
KEEP_DAYS = 30  # entries written this long ago are removed, now and then, by a write
_SEEN: dict[str, list[Problem]] = {}  # this process's verdicts, for a key met twice


def enabled() -> bool:
    return os.environ.get("RECIPE_VERDICT_CACHE", "1") not in ("0", "off", "false", "no")


def folder() -> Path:
    return _folder(os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))


@cache
def _folder(cache_home: str | None, home: str | None) -> Path:
    base = cache_home or str(Path.home() / ".cache")
    return Path(base) / "recipe" / "verdicts"


def key(data: dict, origins: dict, ref: str, teams: tuple) -> str:
    digest = hashlib.blake2b(digest_size=20)
    for part in (str(FORMAT), _installation(), repr(teams), ref, repr(data), repr(origins)):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


def derived(composed: str, ref: str, teams: tuple) -> str:
    """The key of the verdict of a composition as composed: its key (fixes.apply's, over the
    document and origins before the fixes, which decide those after) with what else the
    verdict depends on."""
    text = f"{FORMAT}\0derived\0{composed}\0{ref}\0{teams!r}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


@cache
def _installation() -> str:
    """A digest of the path, size, times and inode of every file a verdict's code and data come
    from (a digest: every key hashes it)."""
    stamps = []
    for root, suffix in ((_PACKAGE, ".py"), (files.SCHEMA_DIR, ".json")):
        for path in sorted(root.rglob(f"*{suffix}")):
            st = path.stat()
            stamps.append(f"{path}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}")
    st = (files.RECIPES_DIR / "base.yaml").stat()
    stamps.append(f"base.yaml:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}")
    return hashlib.blake2b("\n".join(stamps).encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def get(k: str) -> list[Problem] | None:
    if k in _SEEN:
        return _SEEN[k]
    try:
        problems = [_problem(p) for p in recall(k)["problems"]]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    _SEEN[k] = problems
    return problems


def put(k: str, problems: list[Problem]) -> None:
    _SEEN[k] = problems
    remember(k, {"problems": [_record(p) for p in problems]})


def recall(k: str) -> dict | None:
    """What `remember` kept under a key, or None: missing, foreign or unreadable."""
    pending = _PENDING.get(k)
    row = (pending[1],) if pending else _execute("SELECT record FROM verdicts WHERE key = ?", (k,))
    if row is None:
        return None
    try:
        record = json.loads(row[0])
    except (TypeError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("key") != k:
        return None
    return record


def remember(k: str, content: dict) -> None:
    text = json.dumps({"format": FORMAT, "key": k, **content}, separators=(",", ":"))
    _PENDING[k] = (int(time.time()), text)
    if not _BATCHED or len(_PENDING) >= BATCH:
        flush()


def batched() -> None:
    """From now on this process writes its verdicts BATCH to a transaction, the last of them as
    it exits (a forked `recipe validate` worker: multiprocessing runs its finalizers when the
    pool is closed): one commit per verdict cost as much as a verdict's whole check."""
    global _BATCHED
    from multiprocessing import util

    _BATCHED = True
    util.Finalize(None, flush, exitpriority=10)


def flush() -> None:
    """Write what waits to be written, in one transaction."""
    if not _PENDING:
        return
    rows = [(k, written, text) for k, (written, text) in _PENDING.items()]
    _PENDING.clear()
    statements = [("INSERT OR REPLACE INTO verdicts (key, written, record) VALUES (?, ?, ?)", rows)]
    if any(k.startswith("00") for k, _, _ in rows):  # about one write in 256 removes stale entries
        statements.append(("DELETE FROM verdicts WHERE written < ?", [(rows[0][1] - KEEP_DAYS * 86400,)]))
    _execute(None, statements)


BATCH = 64
_BATCHED = False
_PENDING: dict[str, tuple[int, str]] = {}  # key -> (when, record) not written yet


DATABASE = f"verdicts-{FORMAT}.sqlite3"
_OPEN: dict = {}  # (process id, cache folder, home) -> connection: a forked worker opens its own


def database() -> Path:
    return folder() / DATABASE


def _execute(sql: str | None, parameters):
    """One statement, committed; its first row. `sql` None: `parameters` lists (statement, rows)
    to run with executemany, all in one transaction. None where the database cannot be used: a
    full, unwritable or damaged one is a miss, and a damaged one is replaced once. A lock that
    SQLite reports at once, past its busy timeout (processes opening a new database together
    switch it to WAL at once), is waited for a few times more."""
    import sqlite3

    where = (os.getpid(), os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))
    replaced = False
    for attempt in range(LOCKED_TRIES):
        try:
            connection = _OPEN.get(where) or _connection(where)
            if sql is not None:
                return connection.execute(sql, parameters).fetchone()
            with connection:  # one transaction: committed whole, or rolled back
                connection.execute("BEGIN IMMEDIATE")
                for statement, rows in parameters:
                    connection.executemany(statement, rows)
            return None
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                return None  # full, unwritable, read-only: a miss
            time.sleep(0.01 * (attempt + 1))
        except sqlite3.DatabaseError as e:
            _OPEN.pop(where, None)
            if replaced or not _damaged(e):
                return None
            try:
                database().unlink()  # a file that is no database: this cache is ours to rebuild
            except OSError:
                return None
            replaced = True
        except (OSError, ValueError, sqlite3.Error):  # ValueError: text no database can hold
            return None
    return None


LOCKED_TRIES = 8


def close() -> None:
    """Close this process's connections (a test that replaces the database under them)."""
    while _OPEN:
        _OPEN.popitem()[1].close()


def _damaged(error) -> bool:
    return "not a database" in str(error) or "malformed" in str(error)


def _connection(where: tuple):
    import sqlite3

    connection = _OPEN.get(where)
    if connection is None:
        path = database()
        path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit: every statement is its own transaction; the busy timeout waits for a writer
        connection = sqlite3.connect(path, timeout=5, isolation_level=None, check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(
            "PRAGMA synchronous=NORMAL"
        )  # under WAL: no sync per commit; a power cut may lose the latest
        connection.execute(
            "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, written INTEGER NOT NULL, record TEXT NOT NULL)"
        )
        _OPEN[where] = connection
    return connection


def rules_checked(which: str = "schemas") -> bool:
    """Whether a bundled rule file set (the schemas' rules, the pre-flight rules), as installed
    now, passed its meta-schema check before."""
    return enabled() and _rules_mark(which).exists()


def mark_rules_checked(which: str = "schemas") -> None:
    if enabled():
        put_file(_rules_mark(which), "checked\n")


def _rules_mark(which: str) -> Path:
    digest = hashlib.blake2b(f"{FORMAT}\n{which}\n{_installation()}".encode(), digest_size=20).hexdigest()
    return folder() / "rules" / digest


def put_file(path: Path, text: str) -> bool:
    """Write atomically; False where the cache cannot be written (never an error)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        return False
    return True


def _record(p: Problem) -> dict:
    return {
        "severity": p.severity,
        "rule": p.rule,
        "path": p.path,
        "message": p.message,
        "origin": p.origin,
        "hint": p.hint,
        "related": [list(r) for r in p.related],
        "source": p.source,
    }


def _problem(d: dict) -> Problem:
    fields = {name: d[name] for name in ("severity", "rule", "path", "message", "origin", "hint", "source")}
    if not all(v is None or isinstance(v, str) for v in fields.values()):
        raise TypeError("not a verdict")
    return Problem(**fields, related=tuple((str(a), None if b is None else str(b)) for a, b in d["related"]))
