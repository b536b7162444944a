"""Supervision of launched processes: each in its own process group, their output copied to ours
and to launch.log, and every group stopped together. The run folder is locked for as long as a
process of the launch lives (docs/failure-modes.md §37)."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from registry.errors import RecipeError

GRACE_S = 10.0  # between SIGTERM to the ranks and SIGKILL

# A watchdog in a session of its own holds the read end of a pipe whose write end only this process
# has. When this process ends in any way, SIGKILL included, the pipe reaches end of file and the
# watchdog stops every launch group: the ranks die with their launcher. A clean end writes "done".
WATCHDOG = """
import os, signal, sys, time
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
groups = [int(g) for g in sys.argv[1:]]
if sys.stdin.buffer.read() == b"done":
    sys.exit(0)
def alive():
    found = []
    for g in groups:
        try:
            os.killpg(g, 0)
            found.append(g)
        except OSError:
            pass
    return found
for sig, wait in ((signal.SIGTERM, float(os.environ.get("GRACE_S", "10"))), (signal.SIGKILL, 0)):
    for g in alive():
        try:
            os.killpg(g, sig)
        except OSError:
            pass
    end = time.time() + wait
    while alive() and time.time() < end:
        time.sleep(0.1)
"""


def hold(folder: Path):
    """launch.log, opened to append and locked: one launch per run folder at a time (a second
    `--resume` of a running run is refused). The watchdog inherits it, so the lock lasts until the
    last rank is gone, even when `recipe run` itself is killed."""
    path = folder / "launch.log"
    # a resume appends to it: a link (or a fifo, a device) would take the ranks' output, and the
    # folder's lock, out of the run folder; refused rather than removed, it may be someone's doing
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if path.is_symlink():
            raise RecipeError(
                f"{folder}: launch.log is a symbolic link; nothing is written through it"
                " (hint: move it away, then run again)"
            ) from None
        raise RecipeError(f"{folder}: cannot write launch.log: {e.strerror or e}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RecipeError(f"{folder}: launch.log is not a regular file (hint: move it away, then run again)")
    log = os.fdopen(fd, "ab")
    try:
        fcntl.flock(log.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        log.close()
        raise RecipeError(
            f"{folder}: a run is going on in this folder (launch.log is locked) (hint: wait for it to end, or stop it)"
        ) from None
    return log


def supervise(commands: list[tuple[list[str], dict[str, str]]], cwd: Path, echo: bool = True, log=None) -> int:
    """Run each command in its own process group, copy their output to ours and to launch.log.
    The first failure, SIGINT, SIGTERM or SIGHUP stops every group (SIGTERM, then SIGKILL after
    GRACE_S), and so does the watchdog when this process dies without a word (SIGKILL); once a
    signal stops the run, the ranks' last words go to launch.log only. The exit code is the first
    failure's, 128+signal when stopped, else 0."""
    log = log or hold(cwd)
    lock = threading.Lock()
    procs = [
        subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        for argv, env in commands
    ]
    watchdog = subprocess.Popen(
        # -S: the standard library is all it needs; without site (and its .pth files) it starts
        # in milliseconds, and a short run does not wait for it to get as far as reading "done"
        [sys.executable, "-S", "-c", WATCHDOG, *(str(p.pid) for p in procs)],
        stdin=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "GRACE_S": str(GRACE_S)},
        pass_fds=(log.fileno(),),  # holds the folder's lock until the ranks are gone
    )
    output = Output(echo)
    pumps = [threading.Thread(target=_copy, args=(p.stdout, log, lock, output), daemon=True) for p in procs]
    for pump in pumps:
        pump.start()
    stopping: list[int] = []
    deadline = threading.Timer(GRACE_S, _signal_all, (procs, signal.SIGKILL))
    deadline.daemon = True

    def stop(reason: int):
        if stopping:
            _signal_all(procs, signal.SIGKILL)  # asked twice: no more waiting
            return
        stopping.append(reason)
        if reason:
            output.quiet = True  # the launchers' tracebacks about the signal go to launch.log only
        _signal_all(procs, signal.SIGTERM)
        deadline.start()

    # SIGHUP: the terminal closed; stop the ranks as for Ctrl-C
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, lambda signum, frame: stop(signum)) for s in stops}
    failure = 0
    exited = threading.Event()  # a launcher ended: look at once, not at the next tick
    for p in procs:
        threading.Thread(target=lambda p=p: (p.wait(), exited.set()), daemon=True).start()
    try:
        while any(p.poll() is None for p in procs):
            for p in procs:
                if p.returncode not in (None, 0) and not stopping:
                    failure = p.returncode
                    stop(0)  # one node died: the others would wait for it forever
            exited.wait(0.1)
            exited.clear()
        for pump in pumps:
            pump.join()
        _signal_all(procs, signal.SIGKILL)  # no rank outlives its launcher
    finally:
        try:  # every group has ended (or was killed above): the watchdog has nothing to do
            watchdog.communicate(b"done", timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            watchdog.kill()
        deadline.cancel()
        for s, handler in previous.items():
            signal.signal(s, handler)
        _close(log, output)
        output.end_line()
    if stopping and stopping[0]:
        return 128 + stopping[0]
    failure = failure or next((p.returncode for p in procs if p.returncode), 0)
    return 128 - failure if failure < 0 else failure


# A line's time stamp and process id, as logging, DeepSpeed and torch (glog style) print them: two
# ranks' copies of one warning differ only there.
_STAMP = re.compile(rb"^(\[\d{4}-\d\d-\d\d [\d:,.]+\]\s*|[IWEF]\d{4} [\d:.]+\s+\d+\s+)")
REPEAT_S = 10.0  # a line repeated within this many seconds (every rank saying it) is shown once


class Output:
    """What the launchers' output does on our stdout: one copy of a line that every rank prints,
    the progress bar's carriage returns passed through as they come, nothing once quiet."""

    def __init__(self, echo: bool):
        self.echo = echo
        self.quiet = False
        self.broken: dict[str, bool] = {}  # what stopped taking output: "stdout", "log"
        self.shown: dict[bytes, float] = {}
        self.last = b"\n"

    def line(self, text: bytes) -> bytes:
        """The part of a complete line to show: empty when it repeats a line just shown."""
        key = _STAMP.sub(b"", text).strip()
        if not any(c.isalnum() for c in key.decode("utf-8", "replace")):
            return text
        now = time.monotonic()
        if now - self.shown.get(key, -REPEAT_S) < REPEAT_S:
            return b""
        self.shown[key] = now
        return text

    def write(self, data: bytes) -> None:
        if not data or not self.echo or self.quiet or self.broken.get("stdout"):
            return
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            self.last = data[-1:]
        except OSError:  # BrokenPipeError included
            self.broken["stdout"] = True
            _quiet_stdout()
            _say("recipe: the output's reader went away; the run goes on, its output in launch.log")

    def end_line(self) -> None:
        """End a progress bar's line, so that what we print next starts on a line of its own."""
        if self.last != b"\n":
            self.quiet = False
            self.write(b"\n")


def _copy(stream, log, lock, output: Output) -> None:
    """Copy a launcher's output to ours and to launch.log until it ends. The pipe is always drained,
    whatever fails: a rank blocked on a full pipe would hang the run. A closed reader (`| head`)
    stops the echo, a full disk stops the log; each says so once on stderr. A progress bar's
    updates (carriage returns) reach the terminal as they come; launch.log keeps each line's last
    state only."""
    pending, shown = b"", 0  # the unfinished line; how much of it the terminal has
    for chunk in iter(lambda: stream.read1(65536), b""):
        pending += chunk
        with lock:
            while (end := pending.find(b"\n")) >= 0:
                text, pending = pending[: end + 1], pending[end + 1 :]
                output.write(text[shown:] if shown else output.line(text))
                _log(log, _last_state(text), output)
                shown = 0
            if b"\r" in pending:  # a bar update: show it now, keep only its last state
                output.write(pending[shown:])
                cut = (
                    pending.rfind(b"\r", 0, len(pending) - 1) + 1
                    if pending.endswith(b"\r")
                    else pending.rfind(b"\r") + 1
                )
                pending, shown = pending[cut:], len(pending) - cut
    if pending:
        with lock:
            output.write(pending[shown:])
            _log(log, _last_state(pending), output)


def _last_state(text: bytes) -> bytes:
    """A line redrawn with carriage returns, as it last looked."""
    parts = [p for p in text.rstrip(b"\n").split(b"\r") if p.strip()]
    return (parts[-1] if parts else b"") + (b"\n" if text.endswith(b"\n") else b"")


def _log(log, data: bytes, output: Output) -> None:
    if not data or output.broken.get("log"):
        return
    try:
        log.write(data)
        log.flush()
    except OSError as e:
        output.broken["log"] = True
        _say(f"recipe: launch.log stopped ({e.strerror or e}); the run goes on")


def _close(log, output: Output) -> None:
    """Close launch.log; closing flushes again what a full disk refused, and that failure must not
    turn the trainer's exit status into a traceback (it has been said once already)."""
    try:
        log.close()
    except OSError as e:
        if not output.broken.get("log"):
            output.broken["log"] = True
            _say(f"recipe: launch.log stopped ({e.strerror or e}); its end is missing")


def _quiet_stdout() -> None:
    """Point our stdout at /dev/null, so nothing written to it later (or flushed at exit) fails."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass


def _signal_all(procs, sig: int) -> None:
    for p in procs:
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
