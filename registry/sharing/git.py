"""The few git operations sources need, through the git command line."""

from __future__ import annotations

import subprocess
from pathlib import Path

from registry.errors import RecipeError


def _git(*args: str, cwd: Path | None = None, timeout: int = 120) -> str:
    try:
        out = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={"GIT_TERMINAL_PROMPT": "0", "PATH": __import__("os").environ.get("PATH", "")},
        )
    except FileNotFoundError:
        raise RecipeError("git is not installed (hint: apt-get install git)") from None
    except subprocess.TimeoutExpired:
        raise RecipeError(f"git {args[0]} took longer than {timeout} s") from None
    if out.returncode:
        message = (out.stderr or out.stdout).strip().splitlines()
        raise RecipeError(f"git {args[0]} failed: {message[-1] if message else 'exit ' + str(out.returncode)}")
    return out.stdout.strip()


def clone(url: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    _git("clone", "--quiet", url, str(dest), timeout=600)


def update(repo: Path) -> str:
    _git("fetch", "--quiet", "origin", cwd=repo, timeout=600)
    _git("reset", "--quiet", "--hard", "origin/HEAD", cwd=repo)
    return head(repo)


def head(repo: Path) -> str:
    return _git("rev-parse", "HEAD", cwd=repo)


def committed(path: Path) -> str | None:
    """The commit of the work tree holding `path` if the file is committed and unmodified there."""
    folder = path.parent
    try:
        top = _git("rev-parse", "--show-toplevel", cwd=folder)
        if _git("status", "--porcelain", "--", str(path), cwd=folder):
            return None
        if not _git("ls-files", "--", str(path), cwd=folder):
            return None
        return _git("rev-parse", "HEAD", cwd=Path(top))
    except RecipeError:
        return None
