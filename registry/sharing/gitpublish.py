"""`recipe publish --to SOURCE` where SOURCE is a git repository: the version is made in a working
copy that the registry keeps for that source, committed and pushed. A push that another publisher
beat is made again from the remote's new state, under the next free number; a version anyone has
pushed is never renumbered or rewritten.

The working copy is a clone of its own at $RECIPE_CACHE/.publish/NAME, beside the reading clone
at $RECIPE_CACHE/NAME: runs read the reading clone while a publish writes, commits, resets and
retries, so they never see a version that was not pushed, and the reading clone moves only by
fetching what the remote has (here after a successful push, or with `recipe source update`)."""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from registry.errors import RecipeError
from registry.sharing import config, git, refresh, sources, trust, versions

WORK = ".publish"  # under the cache; a source's name never starts with a dot, so never a clone's
ATTEMPTS = 5  # pushes beaten by another publisher before giving up
LOCK_WAIT_S = 300  # a publish holds the lock for its fetches and pushes: longer than a directory's


def working_copy(source: sources.Source) -> Path:
    return config.cache_dir() / WORK / source.name


def publish(recipe, source: sources.Source) -> versions.Version:
    """Publish a validated, composed recipe as the next version of its name in a git source,
    push it, and move the source's reading clone to the remote's new state."""
    name = recipe.data["recipe"]["name"]
    work = working_copy(source)
    with _locked(work, source):
        try:
            _prepare(work, source.location)
            branch = git.default_branch(work)
        except RecipeError as e:
            raise _cannot(name, source, e) from None
        for attempt in range(1, ATTEMPTS + 1):
            made, pushed = _attempt(recipe, source, work, branch)
            if pushed:
                return _read(source, work, made)
            if attempt < ATTEMPTS:
                print(
                    f"note: {source.name}: another publisher pushed first; publishing {name} again from the"
                    f" remote's new state (attempt {attempt + 1} of {ATTEMPTS})",
                    file=sys.stderr,
                )
                time.sleep(random.uniform(0.05, 0.3) * attempt)  # apart, rather than in step again
    raise RecipeError(
        f"cannot publish {name} to {source.name}: other publishers pushed first {ATTEMPTS} times in a row;"
        " nothing was published (hint: try again)"
    )


def _attempt(recipe, source: sources.Source, work: Path, branch: str) -> tuple[versions.Version, bool]:
    """One try from the remote's newest state: (the version made, whether the push landed). On a
    beaten push or any failure the working copy is back at the remote's state."""
    name = recipe.data["recipe"]["name"]
    remote = f"origin/{branch}"
    try:
        with _git_step(name, source):
            git.fetch(work)
            base = git.rev(work, remote)
            git.reset(work, base, keep=versions.LOCK)
        refresh.forget_parsed()
        _unchanged(name, source, work)  # never a next version on top of a rewritten one
        # the same numbering, locking and hashing as a directory source, inside the working copy
        made = versions.publish(recipe, sources.Source(source.name, sources._root(work), "path", source.location))
        with _git_step(name, source):
            mine = git.commit_all(work, f"publish {name}@{made.number}")
        try:
            git.push(work, branch)
            return made, True
        except RecipeError as refused:
            with _git_step(name, source, instead=refused):  # the remote is gone or the network down
                git.fetch(work)
                now = git.rev(work, remote)
            if git.contains(work, mine, now):
                return made, True  # it landed; only git's answer was lost
            if now == base:
                raise _cannot(name, source, refused) from None  # refused, not beaten: rights, a hook
            _reset(work, remote)  # beaten: this number may be taken now; the next try renumbers
            return made, False
    except BaseException:
        _reset(work, remote)  # nothing half done stays: no file, commit or index change of ours
        raise


def _unchanged(name: str, source: sources.Source, work: Path) -> None:
    """The remote's state, about to be published onto, against the versions this machine has seen:
    after `recipe source update` refused a force-push, a publish must not push on top of it
    (docs/failure-modes.md §69)."""
    remote = sources.Source(source.name, sources._root(work), "git", source.location)
    trust.refuse_publishing(remote, lambda: versions.hashes(remote), name)


@contextmanager
def _git_step(name: str, source: sources.Source, instead: RecipeError | None = None):
    try:
        yield
    except RecipeError as e:
        raise _cannot(name, source, instead or e) from None


def _read(source: sources.Source, work: Path, made: versions.Version) -> versions.Version:
    """The version as the reading clone has it once moved to the remote's new state."""
    clone = config.cache_dir() / source.name
    try:
        refresh.refresh(source.name, source.location, clone)
    except RecipeError as e:
        print(
            f"note: {made.qualified} is pushed, but {clone} was not moved to it ({e});"
            f" hint: recipe source update {source.name}",
            file=sys.stderr,
        )
    relative = made.file.relative_to(sources._root(work))
    return versions.Version(source, made.name, made.number, source.root / relative, made.sha256, made.date, made.parts)


def _reset(work: Path, ref: str) -> None:
    try:
        git.reset(work, ref, keep=versions.LOCK)
    except RecipeError:
        shutil.rmtree(work, ignore_errors=True)  # beyond repair: the next publish clones afresh


def _prepare(work: Path, url: str) -> None:
    """A clone of `url` at `work`: made beside it and moved in (a failed clone leaves nothing
    there), made again when the source was re-added with another URL."""
    if (work / ".git").is_dir():
        try:
            same = git.origin_url(work) == url
        except RecipeError:
            same = False
        if same:
            _exclude_lock(work)
            return
        shutil.rmtree(work)
    work.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{work.name}.", dir=work.parent))
    try:
        git.clone(url, staging / "clone")
        if work.exists():
            shutil.rmtree(work)  # a folder that is not a clone
        os.replace(staging / "clone", work)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _exclude_lock(work)


def _exclude_lock(work: Path) -> None:
    # versions.publish locks with a file in the source's folder: never committed
    exclude = work / ".git" / "info" / "exclude"
    text = exclude.read_text() if exclude.is_file() else ""
    if versions.LOCK not in text.split():
        exclude.parent.mkdir(parents=True, exist_ok=True)
        exclude.write_text(text + ("" if text.endswith("\n") or not text else "\n") + versions.LOCK + "\n")


@contextmanager
def _locked(work: Path, source: sources.Source):
    """One publish at a time through a working copy (several processes of one user)."""
    from filelock import FileLock, Timeout

    work.parent.mkdir(parents=True, exist_ok=True)
    lock = work.with_name(work.name + ".lock")
    try:
        with FileLock(lock, timeout=LOCK_WAIT_S):
            yield
    except Timeout:
        raise RecipeError(f"{lock}: another publish to {source.name} holds it (hint: try again)") from None


def _cannot(name: str, source: sources.Source, e: RecipeError) -> RecipeError:
    return RecipeError(f"cannot publish {name} to {source.name} ({source.location}): {e}; nothing was published")
