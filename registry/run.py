"""`recipe resolve` and `recipe run`: validate, resolve into a directory, check the machine,
launch, stream the output, pass the exit code through, and stop every rank on Ctrl-C/SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import machine
from .compose import Recipe, compose
from .errors import RecipeError
from .files import write_atomic
from .resolve import Bundle, resolve
from .validate import validate

GRACE_S = 10.0  # between SIGTERM to the ranks and SIGKILL


def checked(target: str, overrides: list[str]) -> tuple[Recipe, Bundle]:
    """Compose, validate (problems go to stderr) and resolve; RecipeError if invalid."""
    recipe = compose(target, overrides)
    problems = validate(recipe.data, recipe.origins)
    for p in problems:
        print(p.render(), file=sys.stderr)
    errors = sum(p.is_error for p in problems)
    if errors:
        raise RecipeError(f"{recipe.name}: invalid ({errors} error{'s' if errors > 1 else ''}); nothing was resolved", 1)
    return recipe, resolve(recipe)


def write_bundle(bundle: Bundle, folder: Path) -> None:
    for name, text in bundle.files.items():
        write_atomic(folder / name, text, 0o755 if name.endswith(".sh") else 0o644)


def fresh_run_dir(recipe: Recipe, output_dir: str | None) -> Path:
    if output_dir:
        folder = Path(output_dir)
        if folder.exists() and any(folder.iterdir()):
            raise RecipeError(f"{folder}: exists and is not empty (hint: pick a new --output-dir, or --resume later)")
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = Path("runs") / recipe.name.replace("/", "_").replace(":", "_").replace("@", "_v")
        folder, n = base / stamp, 1
        while folder.exists():
            n += 1
            folder = base / f"{stamp}-{n}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def find_program(program: str) -> bool:
    if "/" in program:
        return Path(program).is_file() and os.access(program, os.X_OK)
    return shutil.which(program) is not None


def show(bundle: Bundle) -> None:
    for name, text in bundle.files.items():
        print(f"==> {name} <==")
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        print()
    print(f"==> command <==\n{bundle.command}")


def run(target: str, overrides: list[str], *, dry_run: bool, output_dir: str | None, allow_mismatch: bool) -> int:
    recipe, bundle = checked(target, overrides)
    if dry_run:
        show(bundle)
        return 0
    why = machine.mismatch(recipe.data, machine.gpus())
    if why and not allow_mismatch:
        raise RecipeError(f"{why} (hint: run on matching hardware, swap it with hardware=..., or pass --allow-hardware-mismatch)", 1)
    if not find_program(bundle.program):
        raise RecipeError(f"{bundle.program} not found on PATH (hint: {bundle.install_hint})", 127)
    folder = fresh_run_dir(recipe, output_dir)
    write_bundle(bundle, folder)
    print(f"recipe: {recipe.name} in {folder}", file=sys.stderr)
    return supervise(["bash", "launch.sh"], folder)


def supervise(argv: list[str], cwd: Path) -> int:
    """Run argv in its own process group, copy its output to ours and to launch.log, and on
    SIGINT/SIGTERM stop the whole group (SIGTERM, then SIGKILL after GRACE_S)."""
    log = open(cwd / "launch.log", "wb")
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    stopping: list[int] = []
    deadline = threading.Timer(GRACE_S, _signal_group, (proc.pid, signal.SIGKILL))
    deadline.daemon = True

    def stop(signum, frame):
        if stopping:  # a second Ctrl-C: no more waiting
            _signal_group(proc.pid, signal.SIGKILL)
            return
        stopping.append(signum)
        _signal_group(proc.pid, signal.SIGTERM)
        deadline.start()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    pump = threading.Thread(target=_copy, args=(proc.stdout, log), daemon=True)
    pump.start()
    try:
        code = proc.wait()
        pump.join()
        _signal_group(proc.pid, signal.SIGKILL)  # no rank outlives its launcher
    finally:
        deadline.cancel()
        for s, handler in previous.items():
            signal.signal(s, handler)
        log.close()
    if stopping:
        return 128 + stopping[0]
    return 128 - code if code < 0 else code


def _copy(stream, log) -> None:
    out = sys.stdout.buffer
    for chunk in iter(lambda: stream.read1(65536), b""):
        out.write(chunk)
        out.flush()
        log.write(chunk)
        log.flush()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
