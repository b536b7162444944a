"""`recipe source update` for one git source: the reading clone moved to the remote's newest
commit, unless that changes a published version this machine has seen (docs/failure-modes.md
§52). Also used after a publish, to move the publisher's own clone."""

from __future__ import annotations

import sys
from pathlib import Path

from registry.errors import RecipeError
from registry.sharing import git, sources, trust, versions


def refresh(name: str, url: str, clone: Path, accept: tuple[str, ...] = ()) -> str:
    """Move a git source's clone to the remote's newest commit, unless that changes a version
    this machine has seen (a force-push, a rewritten index): then the clone stays where it was
    and the error names each version with both hashes. `accept` takes the new hash of the
    versions named (NAME@N). A history that is not a fast-forward is said."""
    before = git.head(clone)
    git.fetch(clone)
    after = git.rev(clone, "origin/HEAD")
    if after != before and not git.contains(clone, before, after):
        print(
            f"note: {name}: the remote's history was rewritten ({after[:12]} does not contain {before[:12]});"
            " its versions are checked against the ones this machine has seen",
            file=sys.stderr,
        )
    git.move(clone, after)
    forget_parsed()
    source = sources.Source(name, sources._root(clone), "git", url)
    remembered = trust.known()  # before the index: a version published meanwhile is in both or neither
    try:
        offered = versions.hashes(source)
    except RecipeError:
        _back(clone, before)
        raise
    changed = [c for c in trust.changed(source, offered, True, remembered) if c.version not in accept]
    if changed:
        _back(clone, before)
        raise RecipeError(
            f"{name}: the remote changed {len(changed)} published version(s) this machine has seen: "
            + "; ".join(c.line() for c in changed)
            + f"; {name} stays at {before[:12]} (hint: if deliberate, recipe source update {name} "
            + " ".join(f"--accept {c.version}" for c in changed)
            + ")"
        )
    trust.remember(source, {v: d for v, d in offered.items() if v in accept}, replace=True)
    trust.forget(source, [v for v in accept if v not in offered])  # accepted as gone
    trust.remember(source, offered)  # trust on first use: every version seen from now on
    return after


def _back(clone: Path, commit: str) -> None:
    git.move(clone, commit)
    forget_parsed()


def forget_parsed() -> None:
    # a reset can swap index.yaml within the file system's timestamp granularity and at the same
    # size: read the file as it is now
    from registry.load import _load_cached

    _load_cached.cache_clear()
