"""registry/sharing/git.py on real repositories, in-process: each operation's result by value and
each failure as the one line it says (git missing, too slow, refused), and the environment git
runs in (a hook's repository variables removed, never a prompt)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_git_publish import out

from registry.errors import RecipeError
from registry.sharing import git


def _commit(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text)
    out("add", name, cwd=repo)
    out("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message, cwd=repo)
    return out("rev-parse", "HEAD", cwd=repo)


@pytest.fixture
def remote(tmp_path):
    """A bare repository (default branch `trunk`) with two commits, and the clone they were made in."""
    bare, seed = tmp_path / "team.git", tmp_path / "seed"
    out("init", "-q", "--bare", "-b", "trunk", str(bare), cwd=tmp_path)
    out("clone", "-q", str(bare), str(seed), cwd=tmp_path)
    first = _commit(seed, "a.yaml", "a: 1\n", "first")
    second = _commit(seed, "a.yaml", "a: 2\n", "second")
    out("push", "-q", "origin", "HEAD", cwd=seed)
    return bare, seed, first, second


def test_the_environment_git_runs_in(monkeypatch):
    monkeypatch.setenv("GIT_DIR", "/elsewhere/.git")
    monkeypatch.setenv("GIT_INDEX_FILE", "/elsewhere/index")
    monkeypatch.setenv("GIT_PREFIX", "sub/")
    monkeypatch.setenv("GIT_SSH_COMMAND", "ssh -i key")  # how the user's git reaches a remote: kept
    env = git._env()
    assert not {"GIT_DIR", "GIT_INDEX_FILE", "GIT_PREFIX"} & set(env)
    assert env["GIT_SSH_COMMAND"] == "ssh -i key" and env["GIT_TERMINAL_PROMPT"] == "0"


def test_a_hooks_repository_variables_do_not_send_git_elsewhere(remote, tmp_path, monkeypatch):
    _, seed, _, second = remote
    other = tmp_path / "other"
    out("init", "-q", str(other), cwd=tmp_path)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    assert git.head(seed) == second


def test_git_missing_too_slow_or_refusing_is_one_line(tmp_path, monkeypatch):
    with pytest.raises(RecipeError) as raised:
        git._git("status", cwd=tmp_path)
    assert str(raised.value).startswith("git status failed: not a git repository")
    with pytest.raises(RecipeError) as raised:
        git._git("hash-object", "--stdin", cwd=tmp_path, timeout=0.000001)
    assert str(raised.value) == "git hash-object took longer than 1e-06 s"
    with pytest.raises(RecipeError) as raised:  # no output to say why: the exit code
        git._git("diff", "--quiet", "--no-index", "--", "/dev/null", str(git.__file__), cwd=tmp_path)
    assert str(raised.value) == "git diff failed: exit 1"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RecipeError) as raised:
        git._git("status", cwd=tmp_path)
    assert str(raised.value) == "git is not installed (hint: apt-get install git)"


def test_output_is_returned_without_its_last_newline(tmp_path):
    out("init", "-q", str(tmp_path / "r"), cwd=tmp_path)
    assert git._git("config", "--get", "core.bare", cwd=tmp_path / "r") == "false"


def test_a_clone_its_branch_and_origin(remote, tmp_path):
    bare, _, _, second = remote
    dest = tmp_path / "deep" / "er" / "clone"  # its parents made
    git.clone(str(bare), dest)
    assert git.head(dest) == second
    assert git.default_branch(dest) == "trunk"
    assert git.origin_url(dest) == str(bare)
    assert git.rev(dest, "origin/trunk") == second
    with pytest.raises(RecipeError) as raised:
        git.clone("--upload-pack=touch /tmp/x", tmp_path / "evil")
    assert str(raised.value) == "'--upload-pack=touch /tmp/x' is not a git URL (it reads as an option)"
    assert not (tmp_path / "evil").exists()


def test_a_clone_of_an_empty_remote_has_no_default_branch(tmp_path):
    empty = tmp_path / "empty.git"
    out("init", "-q", "--bare", str(empty), cwd=tmp_path)
    git.clone(str(empty), tmp_path / "clone")
    with pytest.raises(RecipeError) as raised:
        git.default_branch(tmp_path / "clone")
    assert str(raised.value) == "the remote has no default branch (an empty repository?): push a first commit"


def test_moving_a_clone_and_what_contains_what(remote, tmp_path):
    bare, seed, first, second = remote
    clone = tmp_path / "clone"
    git.clone(str(bare), clone)
    (clone / "mine.txt").write_text("untracked\n")
    git.move(clone, first)
    assert git.head(clone) == first and (clone / "a.yaml").read_text() == "a: 1\n"
    assert (clone / "mine.txt").exists()  # untracked files stay
    assert git.contains(clone, first, second) is True
    assert git.contains(clone, second, first) is False
    assert git.contains(clone, "0" * 40, second) is False  # an unknown commit
    with pytest.raises(RecipeError) as raised:
        git.rev(clone, "origin/gone")
    assert str(raised.value) == "origin/gone is not a commit here (a branch the remote deleted?)"
    third = _commit(seed, "b.yaml", "b\n", "third")
    out("push", "-q", "origin", "HEAD", cwd=seed)
    git.fetch(clone)
    assert git.rev(clone, "origin/trunk") == third and git.head(clone) == first  # fetched, not moved


def test_a_reset_leaves_the_tree_at_the_ref_but_the_kept_file(remote, tmp_path):
    bare, _, first, _ = remote
    clone = tmp_path / "clone"
    git.clone(str(bare), clone)
    (clone / "a.yaml").write_text("changed\n")
    (clone / "new" / "deep").mkdir(parents=True)
    (clone / "new" / "deep" / "x.yaml").write_text("new\n")
    (clone / ".gitignore").write_text("*.log\n")
    (clone / "ignored.log").write_text("ignored\n")
    (clone / ".lock").write_text("held\n")
    git.reset(clone, first, keep=".lock")
    assert git.head(clone) == first and (clone / "a.yaml").read_text() == "a: 1\n"
    assert sorted(p.name for p in clone.iterdir()) == [".git", ".lock", "a.yaml"]


def test_committing_everything_under_a_stand_in_identity(remote, tmp_path, monkeypatch):
    bare, _, _, second = remote
    clone = tmp_path / "clone"
    git.clone(str(bare), clone)
    # no identity at all: none configured, none in the environment, none git may guess (EMAIL, the host)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "user.useConfigOnly"),
        ("GIT_CONFIG_VALUE_0", "true"),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(git.getpass, "getuser", lambda: "ci")
    (clone / "sub").mkdir()
    (clone / "sub" / "c.yaml").write_text("c\n")
    made = git.commit_all(clone, "publish exp/x@1")
    assert made == git.head(clone) != second
    said = out("log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", cwd=clone)
    assert said == "ci <ci@localhost>|ci <ci@localhost>|publish exp/x@1"
    assert out("status", "--porcelain", cwd=clone) == ""
    monkeypatch.setattr(git.getpass, "getuser", lambda: (_ for _ in ()).throw(KeyError("uid")))
    assert git._identity(clone)["GIT_AUTHOR_NAME"] == "recipe"  # no user name at all
    assert git._identity(clone) == {
        "GIT_AUTHOR_NAME": "recipe",
        "GIT_AUTHOR_EMAIL": "recipe@localhost",
        "GIT_COMMITTER_NAME": "recipe",
        "GIT_COMMITTER_EMAIL": "recipe@localhost",
    }


def test_a_push_lands_on_the_named_branch_of_origin(remote, tmp_path):
    bare, _, _, second = remote
    clone = tmp_path / "clone"
    git.clone(str(bare), clone)
    (clone / "new.yaml").write_text("n\n")
    made = git.commit_all(clone, "publish exp/n@1")
    git.push(clone, "trunk")
    assert out("rev-parse", "trunk", cwd=bare) == made
    git.push(clone, "side")  # a branch the remote does not have yet is made
    assert out("rev-parse", "side", cwd=bare) == made
    git.move(clone, second)
    with pytest.raises(RecipeError) as raised:  # behind the remote: refused, said by git's reason
        git.push(clone, "trunk")
    assert str(raised.value).startswith("git push failed: [rejected] HEAD -> trunk (non-fast-forward)")


def test_a_commit_skips_the_users_hooks_and_keeps_their_identity(remote, tmp_path):
    bare, _, _, _ = remote
    clone = tmp_path / "clone"
    git.clone(str(bare), clone)
    hook = clone / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'formatter ran' >&2\nexit 1\n")  # would rewrite a hashed file
    hook.chmod(0o755)
    out("config", "user.name", "Ada", cwd=clone)
    out("config", "user.email", "ada@example.com", cwd=clone)
    (clone / "b.yaml").write_text("b\n")
    git.commit_all(clone, "publish exp/b@1")
    assert out("log", "-1", "--format=%an <%ae>", cwd=clone) == "Ada <ada@example.com>"


def test_a_reset_removes_a_nested_repository_left_in_the_tree(remote, tmp_path):
    bare, _, first, _ = remote
    clone = tmp_path / "clone"
    git.clone(str(bare), clone)
    out("init", "-q", str(clone / "nested"), cwd=tmp_path)  # removed only by clean's second -f
    git.reset(clone, first, keep=".lock")
    assert not (clone / "nested").exists()


def test_a_fetch_forgets_branches_the_remote_deleted(remote, tmp_path):
    bare, seed, _, _ = remote
    out("push", "-q", "origin", "HEAD:refs/heads/feature", cwd=seed)
    clone = tmp_path / "clone"
    git.clone(str(bare), clone)
    assert git.rev(clone, "origin/feature")
    out("push", "-q", "origin", "--delete", "feature", cwd=seed)
    git.fetch(clone)
    with pytest.raises(RecipeError):
        git.rev(clone, "origin/feature")


# --- the working copy a publish goes through (gitpublish.py) -------------------------------------------
def test_the_working_copy_is_cloned_once_made_again_for_another_url_and_replaces_a_stray_folder(
    remote, tmp_path, monkeypatch
):
    from registry.sharing import gitpublish, sources, versions

    bare, _, _, second = remote
    monkeypatch.setenv("RECIPE_CACHE", str(tmp_path / "cache"))
    source = sources.Source("team-b", tmp_path / "cache" / "team-b", "git", str(bare))
    work = gitpublish.working_copy(source)
    assert work == tmp_path / "cache" / ".publish" / "team-b"
    work.mkdir(parents=True)
    (work / "stray.txt").write_text("not a clone")
    gitpublish._prepare(work, str(bare))
    assert git.head(work) == second and not (work / "stray.txt").exists()
    assert (work / ".git" / "info" / "exclude").read_text().splitlines()[-1] == versions.LOCK
    assert sorted(p.name for p in work.parent.iterdir()) == ["team-b"]  # no staging folder left
    (work / "mine.txt").write_text("kept: the same URL is not cloned again")
    gitpublish._prepare(work, str(bare))
    assert (work / "mine.txt").exists()
    other = tmp_path / "other.git"
    out("clone", "-q", "--bare", str(bare), str(other), cwd=tmp_path)
    gitpublish._prepare(work, str(other))  # the source re-added with another URL
    assert git.origin_url(work) == str(other) and not (work / "mine.txt").exists()
    (work / ".git" / "config").write_text("[broken")  # a clone git cannot read: made again
    gitpublish._prepare(work, str(other))
    assert git.origin_url(work) == str(other)


def test_a_working_copy_beyond_repair_is_removed_and_a_held_lock_is_said(tmp_path, monkeypatch):
    from registry.sharing import gitpublish, sources

    work = tmp_path / "work"
    work.mkdir()
    gitpublish._reset(work, "main")  # not a repository: nothing to reset, so nothing is kept
    assert not work.exists()
    monkeypatch.setattr(gitpublish, "LOCK_WAIT_S", 0.05)
    source = sources.Source("team-b", tmp_path, "git", "file:///team.git")
    with gitpublish._locked(work, source), pytest.raises(RecipeError) as raised, gitpublish._locked(work, source):
        pass
    assert str(raised.value) == f"{tmp_path / 'work.lock'}: another publish to team-b holds it (hint: try again)"


def _published_through(tmp_path, monkeypatch, remote):
    from registry.doc import Recipe
    from registry.sharing import sources

    bare = remote[0]
    monkeypatch.setenv("RECIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(tmp_path / "known.jsonl"))
    source = sources.Source("team-b", tmp_path / "cache" / "team-b", "git", str(bare))
    return Recipe("exp/x", {"recipe": {"name": "exp/x"}, "train": {"steps": 1}}, {}), source


def test_a_push_beaten_every_time_gives_up_after_five_attempts(remote, tmp_path, monkeypatch, capsys):
    from registry.sharing import gitpublish

    recipe, source = _published_through(tmp_path, monkeypatch, remote)
    tries = []
    monkeypatch.setattr(gitpublish, "_attempt", lambda *args: tries.append(1) or (None, False))
    monkeypatch.setattr(gitpublish.time, "sleep", lambda s: None)
    with pytest.raises(RecipeError) as raised:
        gitpublish.publish(recipe, source)
    assert len(tries) == gitpublish.ATTEMPTS == 5
    assert str(raised.value) == (
        "cannot publish exp/x to team-b: other publishers pushed first 5 times in a row;"
        " nothing was published (hint: try again)"
    )
    notes = capsys.readouterr().err.splitlines()
    assert notes[0] == (
        "note: team-b: another publisher pushed first; publishing exp/x again from the remote's new state"
        " (attempt 2 of 5)"
    )
    assert len(notes) == 4 and notes[-1].endswith("(attempt 5 of 5)")


def test_a_refused_push_whose_check_cannot_reach_the_remote_says_the_refusal(remote, tmp_path, monkeypatch):
    from registry.sharing import gitpublish

    recipe, source = _published_through(tmp_path, monkeypatch, remote)
    fetches = []
    real_fetch = git.fetch

    def fetch(repo):
        fetches.append(repo)
        if len(fetches) > 1:  # after the push: the network is down
            raise RecipeError("git fetch failed: Could not resolve host")
        real_fetch(repo)

    def push(repo, branch):
        raise RecipeError("git push failed: Connection reset by peer")

    monkeypatch.setattr(git, "fetch", fetch)
    monkeypatch.setattr(git, "push", push)
    with pytest.raises(RecipeError) as raised:
        gitpublish.publish(recipe, source)
    assert str(raised.value) == (
        f"cannot publish exp/x to team-b ({remote[0]}): git push failed: Connection reset by peer;"
        " nothing was published"
    )
