"""`recipe publish --to SOURCE` where SOURCE is a git repository (issue 14, point 3): published
through a working copy the registry keeps, committed and pushed; a push beaten by another publisher
is made again under the next number; a refused push or a gone remote is one line and leaves the
working copy at the remote's state. Two users are two config/cache pairs over one bare repository."""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_cli, spawn_cli
from test_sharing import git, team

TINY = "tiny/ddp/cpu"
LOG = ("log", "--format=%s", "main")


def out(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def remote(tmp_path):
    return seeded_remote(tmp_path)


def seeded_remote(tmp_path):
    """A bare repository with one commit: a recipes/ folder and nothing published (its working
    copy at tmp_path/seed)."""
    bare, seed = tmp_path / "team-b.git", tmp_path / "seed"
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    git("clone", "-q", str(bare), str(seed), cwd=tmp_path)
    (seed / "recipes").mkdir()
    (seed / "recipes" / "README.md").write_text("team b's recipes\n")
    git("add", ".", cwd=seed)
    git("commit", "-qm", "start", cwd=seed)
    git("push", "-q", "origin", "HEAD", cwd=seed)
    return bare


def user(tmp_path, name, bare):
    env = team(tmp_path, name)
    r = run_cli("source", "add", "team-b", f"file://{bare}", env=env)
    assert r.returncode == 0, r.stderr
    return env


def published(env):
    """The reading clone's index of TINY, each file's bytes checked against its entry."""
    root = Path(env["RECIPE_CACHE"], "team-b", "recipes")
    entries = yaml.safe_load((root / "index.yaml").read_text())["versions"][TINY]
    for e in entries:
        assert hashlib.sha256((root / e["file"]).read_bytes()).hexdigest() == e["sha256"], e
    return {e["version"]: yaml.safe_load((root / e["file"]).read_text()) for e in entries}


def working_copy(env):
    return Path(env["RECIPE_CACHE"], ".publish", "team-b")


def assert_clean(env, bare):
    """Nothing half done left: the working copy is a commit the remote has, as is (no commit,
    change or file of its own)."""
    work = working_copy(env)
    assert out("status", "--porcelain", "--untracked-files=all", cwd=work) == ""
    out("merge-base", "--is-ancestor", out("rev-parse", "HEAD", cwd=work), "main", cwd=bare)


def one_line_error(r):
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_two_users_publish_and_see_each_other(tmp_path, remote):
    a, b = user(tmp_path, "a", remote), user(tmp_path, "b", remote)
    for env, steps, number in ((a, 101, 1), (b, 102, 2), (a, 103, 3)):
        r = run_cli("publish", TINY, f"train.steps={steps}", "--replace", "--to", "team-b", env=env)
        assert r.returncode == 0, r.stderr
        assert f"published team-b:{TINY}@{number} (" in r.stdout and "note:" not in r.stderr
        # the publisher's reading clone has it at once, without `recipe source update`
        assert sorted(published(env)) == list(range(1, number + 1))
    assert out(*LOG, cwd=remote).splitlines() == [f"publish {TINY}@{n}" for n in (3, 2, 1)] + ["start"]
    for env in (a, b):
        assert run_cli("source", "update", env=env).returncode == 0
        versions = published(env)
        assert {n: v["train"]["steps"] for n, v in versions.items()} == {1: 101, 2: 102, 3: 103}
    assert run_cli("validate", "--all", "-q", env=b).returncode == 0
    files = [Path(env["RECIPE_CACHE"], "team-b", "recipes", "published", TINY, "2.yaml") for env in (a, b)]
    assert files[0].read_bytes() == files[1].read_bytes()


def test_concurrent_publishers_lose_nothing(tmp_path, remote):
    from registry.compose import compose

    users = [user(tmp_path, "a", remote), user(tmp_path, "b", remote)]
    steps = {(u, i): 100 + 4 * u + i for u in range(2) for i in range(4)}
    procs = [
        spawn_cli("publish", TINY, f"train.steps={s}", "--replace", "--to", "team-b", env=users[u])
        for (u, _), s in steps.items()
    ]
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _, _ in results), [err for _, _, err in results]
    retries = sum(err.count("another publisher pushed first") for _, _, err in results)
    print(f"{retries} beaten pushes published again")
    assert run_cli("source", "update", env=users[1]).returncode == 0
    versions = published(users[1])
    assert sorted(versions) == list(range(1, 9))
    assert sorted(v["train"]["steps"] for v in versions.values()) == sorted(steps.values())
    for number, frozen in versions.items():  # each file is the recipe it came from, numbered
        expected = compose(TINY, [f"train.steps={frozen['train']['steps']}"]).data
        assert frozen == {**expected, "recipe": {**expected["recipe"], "version": number}}
    # one commit per publish, in a line, each adding its own file and nothing else rewritten
    assert out("rev-list", "--count", "--min-parents=2", "main", cwd=remote) == "0"
    commits = out("log", "--format=%H %s", "main", cwd=remote).splitlines()[:-1]
    assert sorted(c.split(" ", 1)[1] for c in commits) == sorted(f"publish {TINY}@{n}" for n in range(1, 9))
    for line in commits:
        commit, subject = line.split(" ", 1)
        number = subject.rsplit("@", 1)[1]
        changes = out("show", "--format=", "--name-status", commit, cwd=remote).splitlines()
        index = "A" if number == "1" else "M"  # the first publish creates index.yaml
        assert sorted(changes) == sorted([f"{index}\trecipes/index.yaml", f"A\trecipes/published/{TINY}/{number}.yaml"])
    assert_clean(users[0], remote)
    assert_clean(users[1], remote)


def test_beaten_push_is_published_again(tmp_path, remote):
    """A's pre-push hook lets B publish first, once: A's push is rejected, and A publishes again
    from the remote's new state as @2, leaving B's @1 as B pushed it."""
    a, b = user(tmp_path, "a", remote), user(tmp_path, "b", remote)
    hooks, marker = tmp_path / "hooks", tmp_path / "raced"
    hooks.mkdir()
    rival = " ".join(f"{k}={v}" for k, v in b.items())
    (hooks / "pre-push").write_text(
        f"#!/bin/sh\n[ -e {marker} ] && exit 0\ntouch {marker}\n"
        f"env -u GIT_CONFIG_COUNT {rival} {sys.executable} -m registry publish {TINY} train.steps=200"
        " --replace --to team-b >/dev/null\n"
    )
    (hooks / "pre-push").chmod(0o755)
    hooked = {**a, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": str(hooks)}
    r = run_cli("publish", TINY, "train.steps=101", "--replace", "--to", "team-b", env=hooked)
    assert r.returncode == 0, r.stderr
    assert marker.exists()
    assert "another publisher pushed first; publishing tiny/ddp/cpu again" in r.stderr
    assert f"published team-b:{TINY}@2 (" in r.stdout
    versions = published(a)
    assert {n: v["train"]["steps"] for n, v in versions.items()} == {1: 200, 2: 101}
    assert out(*LOG, cwd=remote).splitlines() == [f"publish {TINY}@2", f"publish {TINY}@1", "start"]
    assert_clean(a, remote)


def test_refused_push_and_gone_remote_leave_nothing(tmp_path, remote):
    a = user(tmp_path, "a", remote)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'team-b: no push rights for a' >&2\nexit 1\n")
    hook.chmod(0o755)
    r = run_cli("publish", TINY, "--replace", "--to", "team-b", env=a)
    one_line_error(r)
    assert f"cannot publish {TINY} to team-b (file://{remote})" in r.stderr and "declined" in r.stderr
    assert "no push rights for a" in r.stderr  # the remote's own words
    assert "nothing was published" in r.stderr and "note:" not in r.stderr
    assert_clean(a, remote)
    assert out(*LOG, cwd=remote) == "start"

    hook.unlink()
    gone = remote.with_name("moved.git")
    remote.rename(gone)
    r = run_cli("publish", TINY, "--replace", "--to", "team-b", env=a)
    one_line_error(r)
    assert "does not appear to be a git repository" in r.stderr
    assert r.stderr.startswith(f"recipe: error: cannot publish {TINY} to team-b (file://{remote}): git fetch failed: ")
    aside = working_copy(a).with_name("aside")
    working_copy(a).rename(aside)  # a first publish from this machine: the working copy is cloned
    r = run_cli("publish", TINY, "--replace", "--to", "team-b", env=a)
    one_line_error(r)
    assert r.stderr.startswith(f"recipe: error: cannot publish {TINY} to team-b (file://{remote}): git clone failed: ")
    assert not working_copy(a).exists()  # a failed clone leaves nothing there
    aside.rename(working_copy(a))
    gone.rename(remote)
    assert_clean(a, remote)

    # a working copy left half done (a publish killed before its push): never pushed, never in the way
    work = working_copy(a)
    stray = work.joinpath("recipes", "published", *TINY.split("/"), "1.yaml")
    stray.parent.mkdir(parents=True)
    stray.write_text("not a version\n")
    git("commit", "-q", "--allow-empty", "-m", "half done", cwd=work)
    r = run_cli("publish", TINY, "--replace", "--to", "team-b", env=a)
    assert r.returncode == 0, r.stderr
    # numbers are not burnt by failures; the file named is the reading clone's copy
    clone_file = Path(a["RECIPE_CACHE"], "team-b", "recipes", "published", *TINY.split("/"), "1.yaml")
    assert r.stdout.startswith(f"published team-b:{TINY}@1 ({clone_file}, sha256 ")
    assert out(*LOG, cwd=remote).splitlines() == [f"publish {TINY}@1", "start"]
    assert published(a)[1]["recipe"]["version"] == 1


@pytest.mark.parametrize(
    "stderr, reason",
    [
        (
            "fatal: '/x.git' does not appear to be a git repository\nfatal: Could not read from remote repository.\n\n"
            "Please make sure you have the correct access rights\nand the repository exists.\n",
            "'/x.git' does not appear to be a git repository",
        ),
        (
            "git@host: Permission denied (publickey).\nfatal: Could not read from remote repository.\n\n"
            "Please make sure you have the correct access rights\nand the repository exists.\n",
            "git@host: Permission denied (publickey).",
        ),
        (  # nothing before it to say why: the line itself
            "fatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\n"
            "and the repository exists.\n",
            "Could not read from remote repository.",
        ),
        (
            "remote: error: GH006: Protected branch update failed for refs/heads/main.\nTo host:b.git\n"
            " ! [remote rejected] HEAD -> main (protected branch hook declined)\nerror: failed to push some refs\n",
            "[remote rejected] HEAD -> main (protected branch hook declined): error: GH006: Protected branch update"
            " failed for refs/heads/main.",
        ),
        (
            "To b.git\n ! [rejected]        HEAD -> main (fetch first)\nerror: failed to push some refs to 'b.git'\n"
            "hint: Updates were rejected because the remote contains work that you do\n",
            "[rejected] HEAD -> main (fetch first)",
        ),
    ],
)
def test_git_failure_is_its_telling_line(stderr, reason):
    from registry.sharing.git import _reason

    assert _reason(stderr) == reason


def test_adding_an_empty_repository_records_nothing_and_says_why(tmp_path):
    """An empty repository clones without error; adding it used to record the source and then
    fail on git's raw `rev-parse HEAD`, leaving `recipe source list` broken until edited by hand."""
    empty = tmp_path / "empty.git"
    git("init", "-q", "--bare", "-b", "main", str(empty), cwd=tmp_path)
    env = team(tmp_path, "a")
    r = run_cli("source", "add", "shared", f"file://{empty}", env=env)
    one_line_error(r)
    assert "is an empty git repository" in r.stderr and "push a first commit" in r.stderr
    assert "rev-parse" not in r.stderr
    listed = run_cli("source", "list", env=env)
    assert listed.returncode == 0 and "shared" not in listed.stdout, listed.stdout + listed.stderr
    cache = Path(env["RECIPE_CACHE"])
    assert not (cache / "shared").exists() and not [p for p in cache.glob(".shared.*")]  # no half clone


def test_an_unknown_name_says_how_to_see_what_teammates_published(tmp_path, remote):
    env = user(tmp_path, "a", remote)
    r = run_cli("show", "exp/brand-new", env=env)
    one_line_error(r)
    assert "unknown recipe 'exp/brand-new'" in r.stderr
    assert "published to team-b since the last update" in r.stderr and "recipe source update" in r.stderr
    bare = run_cli("show", "exp/brand-new")  # no git source: nothing to update
    assert bare.returncode != 0 and "recipe source update" not in bare.stderr
