"""Reading what comes from outside the registry's own folders: a dataset's metadata, a checkpoint's
config, the record of versions seen, what another program prints. Each is read through one guarded
path: a regular file only (a FIFO would hang the open, a device such as /dev/zero reads without
end), checked before it is opened and again on the open descriptor; a size cap; JSON with a depth
cap and bounded numbers; a process's output read up to a cap and within a time. Whatever fails is
one `Rejected` with the place and the reason, which each caller turns into its own message
(docs/failure-modes.md §68)."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import stat
import subprocess
import threading
import time

MAX_DEPTH = 64  # no metadata file the registry reads nests deeper than a handful of levels
MAX_INT_DIGITS = 19  # past 2**63: no count, size or version in these files is that large
MAX_BYTES = 16 << 20
EXIT_GRACE_S = 2.0  # how long the pipe may stay open after the program exited


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class Rejected(ValueError):
    """Input from outside that the registry does not read, with why."""


def _regular(st: os.stat_result, path) -> None:
    if stat.S_ISFIFO(st.st_mode):
        raise Rejected(f"{path}: a FIFO, not a regular file")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        raise Rejected(f"{path}: a device, not a regular file")
    if stat.S_ISDIR(st.st_mode):
        raise Rejected(f"{path}: a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise Rejected(f"{path}: not a regular file")


def _open(path) -> int:
    """A descriptor of a regular file at `path` (a symlink to one is followed, as the hub cache's
    snapshots are links to blobs); O_NONBLOCK so that a FIFO swapped in after the check cannot
    hang the open."""
    try:
        _regular(os.stat(path), path)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise Rejected(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        _regular(os.fstat(fd), path)
    except Rejected:
        os.close(fd)
        raise
    return fd


def read_bytes(path, limit: int = MAX_BYTES) -> bytes:
    """The whole of a regular file of at most `limit` bytes."""
    fd = _open(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise Rejected(f"{path}: {size} bytes, more than the {_size(limit)} a file of this kind may have")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as e:
        raise Rejected(f"{path}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if total > limit:  # grew while read
        raise Rejected(f"{path}: more than the {_size(limit)} a file of this kind may have")
    return b"".join(chunks)


def head(path, count: int) -> bytes:
    """The first `count` bytes of a regular file (a script's #! line), whatever its size."""
    fd = _open(path)
    try:
        chunks, total = [], 0
        while total < count:
            chunk = os.read(fd, min(1 << 20, count - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise Rejected(f"{path}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)


def read_text(path, limit: int = MAX_BYTES) -> str:
    try:
        return read_bytes(path, limit).decode("utf-8")
    except UnicodeDecodeError as e:
        raise Rejected(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_json(path, limit: int = MAX_BYTES, depth: int = MAX_DEPTH, nonfinite: bool = False):
    return loads(read_text(path, limit), path, depth, nonfinite)


def loads(text: str | bytes, where, depth: int = MAX_DEPTH, nonfinite: bool = False):
    """JSON as Python reads it, less what no well-formed file of ours holds: NaN and Infinity,
    integers past MAX_INT_DIGITS digits, floats that overflow, nesting past `depth`. `nonfinite`:
    NaN and Infinity are read as Python's json.dump writes them (a policy's config.json may hold
    one in a field the registry never reads)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise Rejected(f"{where}: not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        value = json.loads(
            text,
            parse_constant=float if nonfinite else _constant,
            parse_int=_int,
            parse_float=float if nonfinite else _float,
        )
    except RecursionError:
        raise Rejected(f"{where}: nested deeper than {depth} levels") from None
    except Rejected as e:
        raise Rejected(f"{where}: {e}") from None
    except ValueError as e:
        raise Rejected(f"{where}: not JSON ({e})") from None
    check_depth(value, where, depth)
    return value


def check_depth(value, where, depth: int = MAX_DEPTH) -> None:
    """Raise Rejected where `value` nests containers deeper than `depth` (walked without recursion,
    so a deep value cannot overflow the stack of whoever reads it next)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level > depth:
            raise Rejected(f"{where}: nested deeper than {depth} levels")
        stack.extend((child, level + 1) for child in children)


def _constant(name: str):
    raise Rejected(f"{name} is not a number a file of this kind holds")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise Rejected(f"an integer of {len(text)} digits ({text[:12]}...) is out of range")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Rejected(f"{text[:24]} overflows a float")
    return value


def run_output(argv: list[str], limit: int = 1 << 20, timeout: float = 60, env=None, cwd=None) -> tuple[int, bytes]:
    """(exit code, stdout) of a program, its output read up to `limit` bytes and its run bounded by
    `timeout` seconds: past either it is killed and Rejected. Its stderr is discarded. It runs in a
    session of its own, so that what it leaves behind (a child still holding the pipe, which would
    keep the read waiting for ever) is killed with it, unless it left the session; once it has
    exited, the output read within EXIT_GRACE_S more is its answer."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    except (OSError, ValueError) as e:
        raise Rejected(f"{argv[0]}: cannot run it ({e})") from None
    chunks: list[bytes] = []
    fd = proc.stdout.fileno()

    def read() -> None:
        total = 0
        while total <= limit:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            chunks.append(chunk)
            total += len(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline, exited = time.monotonic() + timeout, None
    try:
        while reader.is_alive():
            reader.join(0.05)
            now = time.monotonic()
            if exited is None and proc.poll() is not None:
                exited = now
            if exited is not None and now - exited > EXIT_GRACE_S:
                break  # it exited; what it left behind holds the pipe
            if now > deadline:
                raise Rejected(f"{argv[0]}: no answer within {timeout:g} s")
        out = b"".join(chunks)
        if len(out) > limit:
            raise Rejected(f"{argv[0]}: printed more than {_size(limit)}")
        try:
            code = proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise Rejected(f"{argv[0]}: did not exit within {timeout:g} s") from None
        return code, out
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # it, and whatever it started in its session
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        reader.join(1)
        if not reader.is_alive():
            proc.stdout.close()  # else the reader still holds it: closed when it returns


def expect(value, kind, where: str, what: str):
    """`value` when it is of `kind` (bool is no int here), else Rejected naming what was expected."""
    ok = isinstance(value, kind) and not (isinstance(value, bool) and kind in (int, float, (int, float)))
    if not ok:
        raise Rejected(f"{where}: {what} is {type(value).__name__}, not {_kind_name(kind)}")
    if isinstance(value, str) and _CONTROL.search(value):  # printed later: an escape would reach the terminal
        raise Rejected(f"{where}: {what} holds a control character ({_CONTROL.search(value).group()!r})")
    return value


def _kind_name(kind) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", int: "an integer", float: "a number"}
    if isinstance(kind, tuple):
        return " or ".join(names.get(k, k.__name__) for k in kind)
    return names.get(kind, kind.__name__)


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"


def is_regular(path) -> bool:
    """Whether `path` is a regular file (following links), without opening it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


__all__ = [
    "Rejected",
    "check_depth",
    "expect",
    "head",
    "is_regular",
    "loads",
    "read_bytes",
    "read_json",
    "read_text",
    "run_output",
]
