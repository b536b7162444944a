"""The few git operations sources need, through the git command line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from registry.errors import RecipeError

# Variables that point git at one repository (set inside a hook or by a wrapper): they would
# send every command to that repository instead of the source's clone in `cwd`.
_REPOSITORY_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)


def _env() -> dict[str, str]:
    # the user's environment as is: ~/.gitconfig (insteadOf, credential helpers), the SSH agent
    # and proxies are how their git reaches the remote; only never wait on a prompt
    env = {k: v for k, v in os.environ.items() if k not in _REPOSITORY_VARS}
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def _git(*args: str, cwd: Path | None = None, timeout: int = 120) -> str:
    try:
        out = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_env(),
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
    if url.startswith("-"):
        raise RecipeError(f"{url!r} is not a git URL (it reads as an option)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # `--`: a URL or path is never read as an option (--upload-pack=... runs a command)
    _git("clone", "--quiet", "--", url, str(dest), timeout=600)


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
