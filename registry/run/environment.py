"""The trainer's own Python environment, checked before anything is launched.

OpenTau (Python 3.10, transformers 4.57) and LeRobot (Python >= 3.12) cannot share an environment
with each other, and rarely with the registry (docs/failure-modes.md §27). `trainer.env` names
the trainer's; without it, the Python behind the launcher on PATH runs the trainer. Either way
`recipe run` asks that Python, before launch, whether it holds the trainer's package, and which
version: a missing one is one line saying how to install it, a version outside what the adapter
was proven against is a warning.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

from registry.errors import Exit, RecipeError
from registry.run import probe

# what changes a run besides the recipe: their versions are recorded in the run's lock
# (registry/run/envlock.py) and asked of the trainer's Python together with its own package
RECORDED = ("torch", "accelerate", "deepspeed", "transformers")
ASK_TIMEOUT_S = 60


def interpreter_of(program: str, env: dict[str, str]) -> str | None:
    """The Python a console script runs under, from its #! line (pip writes the interpreter's
    path there, or a /bin/sh line that execs it); None where it is not a Python script."""
    found = program if "/" in program else shutil.which(program, path=env.get("PATH"))
    try:
        head = Path(found).read_bytes()[:512].decode("utf-8", "replace").splitlines() if found else []
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = head[0][2:].split()
    if words and words[0].endswith("/env") and len(words) > 1:
        return shutil.which(words[1], path=env.get("PATH")) if words[1].startswith("python") else None
    if words and os.path.basename(words[0]).startswith("python"):
        return words[0]
    if len(head) > 1:  # pip's launcher for long paths: '''exec' "/path/to/python" "$0" "$@"
        match = re.match(r"""^'''exec' "?([^"\s]+)"?""", head[1])
        return match.group(1) if match else None
    return None


def ask(python: str, package: str | None = None) -> dict:
    """What the interpreter says of itself (registry/run/probe.py): its Python version, the
    versions of RECORDED and the trainer's package (None where absent), torch's CUDA release.
    Asked once per interpreter and package in a process: the pre-launch check and the lock's
    environment share one answer."""
    return _ask(python, (*RECORDED, package) if package else RECORDED)


@cache
def _ask(python: str, packages: tuple[str, ...]) -> dict:
    try:
        done = subprocess.run(
            [python, "-c", _probe_source(), *packages],
            capture_output=True,
            text=True,
            timeout=ASK_TIMEOUT_S,
            check=False,
        )
        found = json.loads(done.stdout)
        if not isinstance(found, dict) or not isinstance(found.get("packages"), dict):
            raise ValueError("no report")
        return found
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        raise RecipeError(f"{python}: cannot ask it for its packages ({e})", Exit.NOT_FOUND) from None


@cache
def _probe_source() -> str:
    # nothing of the registry is imported there: the file's own text runs as the program
    return Path(probe.__file__).read_text(encoding="utf-8")


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text.split("+")[0])[:3])


def check(bundle, env: dict[str, str], env_field: str | None) -> str | None:
    """Raise RecipeError when the trainer's Python is missing or lacks its package; return a
    warning when the package's version lies outside what the adapter was proven against."""
    if not bundle.package:
        return None
    python = bundle.python or interpreter_of(bundle.program, env)
    where = f"trainer.env {env_field}" if env_field else f"the Python behind {bundle.program}"
    if bundle.python and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise RecipeError(
            f"trainer.env {env_field}: no Python at {python} (hint: {bundle.install_hint})", Exit.NOT_FOUND
        )
    if python is None:
        return None  # not a Python script we can read: launch.sh reports what fails
    wanted = [bundle.package] + (["accelerate"] if "accelerate" in bundle.command else [])
    found = ask(python, bundle.package)
    missing = [name for name in wanted if not found["packages"].get(name)]
    if missing:
        raise RecipeError(
            f"{where} ({python}, Python {found.get('python', '?')}) has no {' or '.join(missing)}"
            f" (hint: {bundle.install_hint})",
            Exit.NOT_FOUND,
        )
    version = found["packages"][bundle.package]
    low, high = bundle.proven or (None, None)
    if low and not (_release(low) <= _release(version) < _release(high)):
        return (
            f"recipe: warning: {bundle.package} {version} in {where} is outside the versions this adapter"
            f" was proven against (>= {low}, < {high}); check the run's own config before trusting it"
        )
    return None


def report(warning: str | None) -> None:
    if warning:
        print(warning, file=sys.stderr)


STALE_LOCK_S = 600  # a JIT build of a DeepSpeed op takes seconds to a few minutes


def extension_root(env: dict[str, str]) -> Path:
    """Where torch builds C++ extensions just in time: TORCH_EXTENSIONS_DIR, else the user cache."""
    if env.get("TORCH_EXTENSIONS_DIR"):
        return Path(env["TORCH_EXTENSIONS_DIR"])
    cache = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or str(Path.home()), ".cache")
    return Path(cache) / "torch_extensions"


def stale_build_locks(env: dict[str, str], now: float | None = None) -> str | None:
    """A warning naming build locks older than STALE_LOCK_S. torch guards each extension build with
    a `lock` file and waits for it without limit: a build killed midway leaves it behind, and every
    later rank that needs the op (DeepSpeed builds its CPU communication op at start-up) waits
    forever without a word (docs/failure-modes.md §51)."""
    now = time.time() if now is None else now
    root, old = extension_root(env), []
    for lock in [*root.glob("*/lock"), *root.glob("*/*/lock")]:
        try:
            age = now - lock.stat().st_mtime
        except OSError:
            continue
        if age > STALE_LOCK_S:
            old.append(f"{lock} ({age / 60:.0f} min old)")
    if not old:
        return None
    return (
        f"recipe: warning: torch extension build lock{'s' if len(old) > 1 else ''} {', '.join(sorted(old))}: a"
        " build killed midway leaves its lock, and ranks that build that op wait on it without end; remove it if"
        " no build is running"
    )
