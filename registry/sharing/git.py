"""The few git operations sources need, through the git command line."""

from __future__ import annotations

import getpass
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


def _git(*args: str, cwd: Path | None = None, timeout: int = 120, env: dict[str, str] | None = None) -> str:
    try:
        out = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**_env(), **(env or {})},
        )
    except FileNotFoundError:
        raise RecipeError("git is not installed (hint: apt-get install git)") from None
    except subprocess.TimeoutExpired:
        raise RecipeError(f"git {args[0]} took longer than {timeout} s") from None
    if out.returncode:
        raise RecipeError(f"git {args[0]} failed: {_reason(out.stderr or out.stdout) or 'exit ' + str(out.returncode)}")
    return out.stdout.strip()


def _reason(text: str) -> str:
    """The line of git's output that says what went wrong: its last line is often advice ("and
    the repository exists.", "hint: ...")."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    fatal = [i for i, line in enumerate(lines) if line.startswith("fatal:")]
    if fatal:
        i = fatal[0]
        if "Could not read from remote repository" in lines[i] and i > 0:
            i -= 1  # ssh says why first ("Permission denied (publickey).")
        return lines[i].removeprefix("fatal:").strip()
    refused = [line for line in lines if line.startswith("!")]  # a ref the remote refused, and git's reason
    if refused:
        said = [line.removeprefix("remote:").strip() for line in lines if line.startswith("remote:")]
        said = [line for line in said if line]
        return refused[-1].removeprefix("!").strip() + (f": {said[-1]}" if said else "")
    errors = [line for line in lines if line.startswith("error:")]
    if errors:
        return errors[-1].removeprefix("error:").strip()
    lines = [line for line in lines if not line.startswith("hint:")]
    return lines[-1] if lines else ""


def clone(url: str, dest: Path) -> None:
    if url.startswith("-"):
        raise RecipeError(f"{url!r} is not a git URL (it reads as an option)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # `--`: a URL or path is never read as an option (--upload-pack=... runs a command)
    _git("clone", "--quiet", "--", url, str(dest), timeout=600)


def move(repo: Path, commit: str) -> None:
    """A reading clone's work tree to `commit` (untracked files stay)."""
    _git("reset", "--quiet", "--hard", commit, cwd=repo)


def head(repo: Path) -> str:
    return _git("rev-parse", "HEAD", cwd=repo)


def committed(paths: list[Path]) -> str | None:
    """The commit of the one work tree holding every path, if each file is committed and
    unmodified there; None otherwise (no repository, several, or a change). One git call whatever
    the number of files: a launch pays for it before its first rank starts."""
    if not paths or len({_work_tree(p) for p in paths}) != 1:
        return None  # none, or several (a nested repository or a submodule: git status would not say)
    try:
        # the header names HEAD's commit; any entry is a path changed since HEAD (staged or not),
        # untracked or ignored; a path outside this work tree (another repository, a submodule,
        # none) is an error. No optional locks: a status beside the user's own git never blocks it.
        out = _git(
            "--no-optional-locks",
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=all",
            "--ignored=matching",
            "--",
            *(str(p) for p in paths),
            cwd=min(p.parent for p in paths),
        )
    except RecipeError:
        return None
    entries = out.split("\0")
    if any(e and not e.startswith("# ") for e in entries):
        return None
    commit = next((e.split()[2] for e in entries if e.startswith("# branch.oid ")), None)
    return commit if commit and commit != "(initial)" else None


def _work_tree(path: Path) -> Path | None:
    """The nearest folder above `path` with a .git (a folder, or a submodule's or worktree's file)."""
    return next((d for d in path.parents if (d / ".git").exists()), None)


# --- a working copy to publish through (registry/sharing/gitpublish.py) ---------------------------
def origin_url(repo: Path) -> str:
    return _git("remote", "get-url", "origin", cwd=repo)


def default_branch(repo: Path) -> str:
    """The remote's default branch as the clone recorded it (what `update` reads)."""
    try:
        ref = _git("symbolic-ref", "--quiet", "refs/remotes/origin/HEAD", cwd=repo)
    except RecipeError:
        raise RecipeError("the remote has no default branch (an empty repository?): push a first commit") from None
    return ref.removeprefix("refs/remotes/origin/")


def fetch(repo: Path) -> None:
    _git("fetch", "--quiet", "--prune", "--", "origin", cwd=repo, timeout=600)


def rev(repo: Path, ref: str) -> str:
    try:
        return _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=repo)
    except RecipeError:
        raise RecipeError(f"{ref} is not a commit here (a branch the remote deleted?)") from None


def contains(repo: Path, ancestor: str, ref: str) -> bool:
    """Whether `ref` includes commit `ancestor`."""
    try:
        _git("merge-base", "--is-ancestor", ancestor, ref, cwd=repo)
    except RecipeError:
        return False  # exit 1: not an ancestor (or an unknown commit)
    return True


def reset(repo: Path, ref: str, keep: str) -> None:
    """The work tree exactly at `ref`: no commit, change or new file of ours left (`keep`, a
    pattern for a file such as a lock, stays)."""
    _git("reset", "--quiet", "--hard", ref, cwd=repo)
    _git("clean", "-q", "-d", "-f", "-f", "-x", "-e", keep, cwd=repo)


def commit_all(repo: Path, message: str) -> str:
    _git("add", "--all", "--", ".", cwd=repo)
    # --no-verify: a user's pre-commit hooks (formatters) must not touch a file whose sha256 is
    # already recorded; the push still runs their pre-push hooks
    _git("commit", "--quiet", "--no-verify", "-m", message, cwd=repo, env=_identity(repo))
    return head(repo)


def _identity(repo: Path) -> dict[str, str]:
    """The user's git identity when they have one; else a stand-in rather than git's "tell me
    who you are" (a container or CI user often has none)."""
    try:
        _git("var", "GIT_COMMITTER_IDENT", cwd=repo)
        _git("var", "GIT_AUTHOR_IDENT", cwd=repo)
        return {}
    except RecipeError:
        pass
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "recipe"
    who = {"NAME": user, "EMAIL": f"{user}@localhost"}
    return {f"GIT_{role}_{k}": v for role in ("AUTHOR", "COMMITTER") for k, v in who.items()}


def push(repo: Path, branch: str) -> None:
    _git("push", "--quiet", "--", "origin", f"HEAD:refs/heads/{branch}", cwd=repo, timeout=600)
