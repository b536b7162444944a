"""The lock's source commit: `git.committed_together`, the four-call answer for all of a source's
files, says a commit exactly where asking file by file (`git.committed`) says that one commit."""

from __future__ import annotations

from pathlib import Path

from test_sharing import git

from registry.sharing.git import committed, committed_together


def repo(folder: Path, files: dict[str, str]) -> list[Path]:
    folder.mkdir()
    git("init", "-q", cwd=folder)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    git("add", ".", cwd=folder)
    git("commit", "-qm", "recipes", cwd=folder)
    return [folder / name for name in files]


def per_file(paths: list[Path]) -> str | None:
    commits = {committed(p) for p in paths}
    return commits.pop() if len(commits) == 1 and None not in commits else None


def test_committed_files_give_the_head_commit_both_ways(tmp_path):
    paths = repo(tmp_path / "a", {"base.yaml": "a: 1\n", "policy/x.yaml": "b: 2\n", "backend/y.yaml": "c: 3\n"})
    assert committed_together(paths) == per_file(paths) and len(per_file(paths)) == 40


def test_a_modified_or_untracked_file_gives_no_commit_both_ways(tmp_path):
    paths = repo(tmp_path / "a", {"base.yaml": "a: 1\n", "policy/x.yaml": "b: 2\n"})
    paths[1].write_text("b: 3\n")
    assert committed_together(paths) is None and per_file(paths) is None
    paths[1].write_text("b: 2\n")
    (tmp_path / "a" / "new.yaml").write_text("d: 4\n")
    untracked = [*paths, tmp_path / "a" / "new.yaml"]
    assert committed_together(untracked) is None and per_file(untracked) is None
    assert committed_together(paths) == per_file(paths) is not None


def test_files_of_two_repositories_are_not_one_commit(tmp_path):
    paths = repo(tmp_path / "a", {"base.yaml": "a: 1\n"}) + repo(tmp_path / "b", {"x.yaml": "b: 2\n"})
    assert committed_together(paths) is None and per_file(paths) is None
    assert committed_together([]) is None and committed_together([tmp_path / "nowhere.yaml"]) is None
