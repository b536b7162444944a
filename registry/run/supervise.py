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


def supervise(commands: list[tuple[list[str], dict[str, str]]], cwd: Path, echo: bool = True) -> int:
    """Run each command in its own process group, copy their output to ours and to launch.log.
    The first failure, SIGINT or SIGTERM stops every group (SIGTERM, then SIGKILL after GRACE_S);
    the exit code is the first failure's, 128+signal when stopped, else 0."""
    log = open(cwd / "launch.log", "ab")  # noqa: SIM115 (closed in the finally below)
    lock = threading.Lock()
    procs = [
        subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        for argv, env in commands
    ]
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

    previous = {s: signal.signal(s, lambda signum, frame: stop(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
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
