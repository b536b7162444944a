"""Supervision of launched processes: each in its own process group, their output copied to ours
and to launch.log, and every group stopped together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

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


def supervise(commands: list[tuple[list[str], dict[str, str]]], cwd: Path, echo: bool = True) -> int:
    """Run each command in its own process group, copy their output to ours and to launch.log.
    The first failure, SIGINT, SIGTERM or SIGHUP stops every group (SIGTERM, then SIGKILL after
    GRACE_S), and so does the watchdog when this process dies without a word (SIGKILL);
    the exit code is the first failure's, 128+signal when stopped, else 0."""
    log = open(cwd / "launch.log", "ab")  # noqa: SIM115 (closed in the finally below)
    lock = threading.Lock()
    procs = [
        subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        for argv, env in commands
    ]
    watchdog = subprocess.Popen(
        [sys.executable, "-c", WATCHDOG, *(str(p.pid) for p in procs)],
        stdin=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "GRACE_S": str(GRACE_S)},
    )
    broken: dict[str, bool] = {}  # what stopped taking output: "stdout", "log"
    pumps = [threading.Thread(target=_copy, args=(p.stdout, log, lock, echo, broken), daemon=True) for p in procs]
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
        _signal_all(procs, signal.SIGTERM)
        deadline.start()

    # SIGHUP: the terminal closed; stop the ranks as for Ctrl-C
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, lambda signum, frame: stop(signum)) for s in stops}
    failure = 0
    try:
        while any(p.poll() is None for p in procs):
            for p in procs:
                if p.returncode not in (None, 0) and not stopping:
                    failure = p.returncode
                    stop(0)  # one node died: the others would wait for it forever
            time.sleep(0.1)
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
        log.close()
    if stopping and stopping[0]:
        return 128 + stopping[0]
    failure = failure or next((p.returncode for p in procs if p.returncode), 0)
    return 128 - failure if failure < 0 else failure


def _copy(stream, log, lock, echo: bool, broken: dict[str, bool]) -> None:
    """Copy a launcher's output to ours and to launch.log until it ends. The pipe is always drained,
    whatever fails: a rank blocked on a full pipe would hang the run. A closed reader (`| head`)
    stops the echo, a full disk stops the log; each says so once on stderr."""
    out = sys.stdout.buffer
    for chunk in iter(lambda: stream.read1(65536), b""):
        with lock:
            if echo and not broken.get("stdout"):
                try:
                    out.write(chunk)
                    out.flush()
                except OSError:  # BrokenPipeError included
                    broken["stdout"] = True
                    _quiet_stdout()
                    _say("recipe: the output's reader went away; the run goes on, its output in launch.log")
            if not broken.get("log"):
                try:
                    log.write(chunk)
                    log.flush()
                except OSError as e:
                    broken["log"] = True
                    _say(f"recipe: launch.log stopped ({e.strerror or e}); the run goes on")


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
