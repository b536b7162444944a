"""Sharing under faults (issue 13): concurrent writers, symlinks out of a source, a deleted or
malformed index.yaml, shadowed and source-qualified free-standing recipes, unicode digits in
versions, and git run with the user's own environment but never with a URL read as an option."""

import hashlib
import os
import subprocess

import pytest
import yaml
from conftest import run_cli, spawn_cli

TINY = "tiny/ddp/cpu"


def finish(procs, timeout=60):
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append((p.returncode, stdout, stderr))
    return out


def one_line_error(r):
    """A RecipeError as the CLI prints it: a non-zero exit and one line, never a traceback."""
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.fixture
def two_teams(tmp_path):
    """Two directory sources on RECIPE_PATH, ta searched before tb, and an empty config."""
    ta, tb = tmp_path / "ta", tmp_path / "tb"
    ta.mkdir()
    tb.mkdir()
    env = {
        "RECIPE_PATH": f"ta={ta}{os.pathsep}tb={tb}",
        "RECIPE_CONFIG": str(tmp_path / "sources.yaml"),
        "RECIPE_CACHE": str(tmp_path / "cache"),
    }
    return ta, tb, env


# --- 1. concurrent writers ---------------------------------------------------------------------
def test_concurrent_source_adds_lose_nothing(tmp_path):
    env = {"RECIPE_CONFIG": str(tmp_path / "sources.yaml"), "RECIPE_CACHE": str(tmp_path / "cache")}
    folders = []
    for i in range(16):
        folders.append(tmp_path / f"d{i}")
        folders[-1].mkdir()
    results = finish([spawn_cli("source", "add", f"s{i}", str(folders[i]), env=env) for i in range(16)])
    assert all(rc == 0 for rc, _, _ in results), [err for _, _, err in results]
    entries = yaml.safe_load((tmp_path / "sources.yaml").read_text())["sources"]
    assert sorted(e["name"] for e in entries) == sorted(f"s{i}" for i in range(16))
    assert not list(tmp_path.glob(".sources.yaml.*.tmp"))  # no half-written file left behind


def test_concurrent_publishes_number_without_gaps(two_teams):
    ta, _, env = two_teams
    procs = [
        spawn_cli("publish", TINY, f"train.steps={100 + i}", "--replace", "--to", "ta", env=env) for i in range(12)
    ]
    procs += [spawn_cli("publish", "act/ddp/2xH100", "--replace", "--to", "ta", env=env) for _ in range(4)]
    results = finish(procs)
    assert all(rc == 0 for rc, _, _ in results), [err for _, _, err in results]
    index = yaml.safe_load((ta / "index.yaml").read_text())["versions"]
    assert sorted(index) == ["act/ddp/2xH100", TINY]
    for name, count in ((TINY, 12), ("act/ddp/2xH100", 4)):
        assert [e["version"] for e in index[name]] == list(range(1, count + 1))
        for e in index[name]:
            assert e["file"] == f"published/{name}/{e['version']}.yaml"
            assert hashlib.sha256((ta / e["file"]).read_bytes()).hexdigest() == e["sha256"]
    steps = sorted(yaml.safe_load((ta / e["file"]).read_text())["train"]["steps"] for e in index[TINY])
    assert steps == list(range(100, 112))
    assert run_cli("validate", "--all", "-q", env=env).returncode == 0


# --- 2. symlinks out of a source ---------------------------------------------------------------
def test_extends_symlink_cannot_leave_its_source(tmp_path, two_teams):
    ta, _, env = two_teams
    secret = tmp_path / "outside" / "credentials.yaml"
    secret.parent.mkdir()
    secret.write_text("token: hunter2\n")
    (ta / "exp").mkdir()
    (ta / "exp" / "creds.yaml").symlink_to(secret)
    (ta / "exp" / "linked").symlink_to(secret.parent, target_is_directory=True)
    (ta / "exp" / "leak.yaml").write_text(f"extends: [{TINY}, creds.yaml]\n")
    (ta / "exp" / "leak2.yaml").write_text(f"extends: [{TINY}, linked/credentials.yaml]\n")
    for name, entry in (("ta:exp/leak", "creds.yaml"), ("ta:exp/leak2", "linked/credentials.yaml")):
        r = run_cli("show", name, env=env)
        one_line_error(r)
        assert "hunter2" not in r.stdout + r.stderr
        assert repr(entry) in r.stderr and "outside" in r.stderr
    # a file given on the command line is confined to its own folder
    mine = tmp_path / "mine" / "mine.yaml"
    mine.parent.mkdir()
    (mine.parent / "creds.yaml").symlink_to(secret)
    mine.write_text(f"extends: [{TINY}, creds.yaml]\n")
    r = run_cli("show", str(mine), env=env)
    one_line_error(r)
    assert "hunter2" not in r.stdout
    # a symlink that stays inside the source still works
    (ta / "common").mkdir()
    (ta / "common" / "steps.yaml").write_text("train:\n  steps: 7\n")
    (ta / "exp" / "steps.yaml").symlink_to(ta / "common" / "steps.yaml")
    (ta / "exp" / "fine.yaml").write_text(f"extends: [{TINY}, steps.yaml]\n")
    r = run_cli("show", "ta:exp/fine", env=env)
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout)["train"]["steps"] == 7


def test_published_file_cannot_leave_its_source(tmp_path, two_teams):
    ta, _, env = two_teams
    assert run_cli("publish", TINY, "--replace", "--to", "ta", env=env).returncode == 0
    secret = tmp_path / "credentials.yaml"
    secret.write_text("token: hunter2\n")
    version = ta / "published" / TINY / "1.yaml"
    version.unlink()
    version.symlink_to(secret)
    index = yaml.safe_load((ta / "index.yaml").read_text())
    index["versions"][TINY][0]["sha256"] = hashlib.sha256(secret.read_bytes()).hexdigest()
    (ta / "index.yaml").write_text(yaml.safe_dump(index))
    r = run_cli("show", f"ta:{TINY}@1", env=env)
    one_line_error(r)
    assert "hunter2" not in r.stdout and "outside" in r.stderr


# --- 3. a deleted index.yaml -------------------------------------------------------------------
def test_deleted_index_never_falls_through_to_another_source(two_teams):
    ta, _, env = two_teams
    for team, steps in (("ta", 111), ("tb", 222)):
        r = run_cli("publish", TINY, f"train.steps={steps}", "--replace", "--to", team, env=env)
        assert r.returncode == 0, r.stderr
    assert yaml.safe_load(run_cli("show", f"ta:{TINY}@1", env=env).stdout)["train"]["steps"] == 111
    (ta / "index.yaml").unlink()
    for target in (f"{TINY}@1", f"ta:{TINY}@1", TINY, f"ta:{TINY}"):
        r = run_cli("show", target, env=env)
        one_line_error(r)
        assert "222" not in r.stdout
        assert "index.yaml" in r.stderr and "ta" in r.stderr, (target, r.stderr)
    r = run_cli("validate", "--all", env=env)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "index.yaml" in r.stdout
    # the name dropped from an index that still exists: the same
    run_cli("publish", "act/ddp/2xH100", "--replace", "--to", "ta", env=env)
    r = run_cli("show", f"{TINY}@1", env=env)
    one_line_error(r)
    assert "index.yaml" in r.stderr


# --- 4 and 5. free-standing recipes per source -------------------------------------------------
def test_validate_all_validates_shadowed_free_standing(two_teams):
    ta, tb, env = two_teams
    for team in (ta, tb):
        (team / "exp").mkdir()
    (ta / "exp" / "foo.yaml").write_text(f"extends: [{TINY}]\n")
    (tb / "exp" / "foo.yaml").write_text(f"extends: [{TINY}]\ntrain:\n  steps: -5\n")
    r = run_cli("validate", "--all", env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ta:exp/foo: valid" in r.stderr and "tb:exp/foo: invalid" in r.stderr


def test_qualified_free_standing_without_its_own_name(tmp_path, two_teams):
    ta, _, env = two_teams
    (ta / "exp").mkdir()
    (ta / "exp" / "foo.yaml").write_text(f"extends: [{TINY}]\ntrain:\n  steps: 7\n")
    r = run_cli("validate", "ta:exp/foo", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    shown = yaml.safe_load(run_cli("show", "ta:exp/foo", env=env).stdout)
    assert shown["recipe"]["name"] == "exp/foo" and shown["train"]["steps"] == 7
    r = run_cli("run", "ta:exp/foo", "--dry-run", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_cli("publish", "ta:exp/foo", "--replace", "--to", "tb", env=env)
    assert r.returncode == 0 and "published tb:exp/foo@1" in r.stdout, r.stderr


# --- 6. a malformed index.yaml -----------------------------------------------------------------
SHA = "0" * 64


@pytest.mark.parametrize(
    "versions",
    [
        [TINY],  # not a mapping
        {TINY: {"version": 1}},  # not a list
        {TINY: ["1.yaml"]},  # an entry that is not a mapping
        {TINY: [{"version": 1, "file": f"published/{TINY}/1.yaml"}]},  # no sha256
        {TINY: [{"version": "one", "file": f"published/{TINY}/1.yaml", "sha256": SHA}]},
        {TINY: [{"version": [1], "file": f"published/{TINY}/1.yaml", "sha256": SHA}]},
        {TINY: [{"version": 1, "file": 7, "sha256": SHA}]},
        {TINY: [{"version": 1, "file": "../../etc/passwd", "sha256": SHA}]},
        {TINY: [{"version": 1, "file": "/etc/passwd", "sha256": SHA}]},
        {TINY: [{"version": 1, "file": f"published/{TINY}/1.yaml", "sha256": None}]},
        {
            TINY: [
                {"version": 1, "file": f"published/{TINY}/1.yaml", "sha256": SHA},
                {"version": 1, "file": f"published/{TINY}/1.yaml", "sha256": SHA},
            ]
        },
        {"../x": [{"version": 1, "file": f"published/{TINY}/1.yaml", "sha256": SHA}]},
    ],
)
def test_malformed_index_is_one_line(two_teams, monkeypatch, capsys, versions):
    from registry.commands import main

    ta, _, env = two_teams
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (ta / "index.yaml").write_text(yaml.safe_dump({"versions": versions}))
    for argv in (["show", f"ta:{TINY}@1"], ["show", f"{TINY}@1"], ["history", TINY], ["list", "--sources"]):
        assert main(argv) != 0, argv
        err = capsys.readouterr().err
        assert str(ta / "index.yaml") in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert main(["validate", "--all", "-q"]) != 0
    assert str(ta / "index.yaml") in capsys.readouterr().out


def test_malformed_index_names_the_line(two_teams):
    ta, _, env = two_teams
    (ta / "index.yaml").write_text(f"versions:\n  {TINY}:\n  - version: 1\n    file: 3\n    sha256: {SHA}\n")
    r = run_cli("show", f"ta:{TINY}@1", env=env)
    one_line_error(r)
    assert f"{ta / 'index.yaml'}:4:" in r.stderr


# --- 7. unicode digits are not versions --------------------------------------------------------
@pytest.mark.parametrize("target", [f"{TINY}@²", f"{TINY}@١", f"{TINY}@１", "ta:x@٣"])
def test_unicode_digit_is_not_a_version(target):
    r = run_cli("show", target)
    one_line_error(r)
    assert r.returncode == 2 and "malformed version" in r.stderr


# --- 8. git gets the user's environment, and a URL is never an option ----------------------------
def _bare_repo(tmp_path, name):
    env = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "A"}
    env["GIT_COMMITTER_EMAIL"] = "a@x"
    work, remote = tmp_path / f"{name}-work", tmp_path / "remotes" / f"{name}.git"
    (work / "recipes" / "exp").mkdir(parents=True)
    (work / "recipes" / "exp" / "foo.yaml").write_text(f"extends: [{TINY}]\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "start"], ["clone", "-q", "--bare", ".", str(remote)]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)
    return remote


def test_git_reads_the_users_gitconfig(tmp_path):
    remote = _bare_repo(tmp_path, "team")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f'[url "file://{remote.parent}/"]\n\tinsteadOf = https://git.example.invalid/\n')
    env = {"HOME": str(home), "RECIPE_CONFIG": str(tmp_path / "s.yaml"), "RECIPE_CACHE": str(tmp_path / "cache")}
    r = run_cli("source", "add", "tg", "https://git.example.invalid/team.git", env=env)
    assert r.returncode == 0, r.stderr
    assert run_cli("validate", "tg:exp/foo", env=env).returncode == 0


def test_git_url_is_never_an_option(tmp_path):
    marker = tmp_path / "pwned"
    cache = tmp_path / "cache"
    (tmp_path / "s.yaml").write_text(
        yaml.safe_dump({"sources": [{"name": "tx", "git": f"--upload-pack=touch {marker};false"}]})
    )
    env = {"RECIPE_CONFIG": str(tmp_path / "s.yaml"), "RECIPE_CACHE": str(cache)}
    # a clone folder git reads as a repository: old code cloned from it with the URL as an option
    subprocess.run(["git", "init", "-q", "--bare", str(cache / "tx")], check=True, capture_output=True)
    (tmp_path / "cwd").mkdir()
    r = run_cli("source", "update", "tx", env=env, cwd=tmp_path / "cwd")
    assert not marker.exists()
    one_line_error(r)
    r = run_cli("source", "add", "ty", f"--upload-pack=touch {marker};false.git", env=env, cwd=tmp_path / "cwd")
    assert not marker.exists() and r.returncode != 0 and "Traceback" not in r.stderr


def test_git_environment_and_arguments(tmp_path, monkeypatch):
    from registry.errors import RecipeError
    from registry.sharing import git

    monkeypatch.setenv("SSH_AUTH_SOCK", "/run/agent.sock")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    monkeypatch.setenv("GIT_DIR", str(tmp_path))  # would point every command at another repository
    env = git._env()
    assert env["SSH_AUTH_SOCK"] == "/run/agent.sock" and env["HTTPS_PROXY"] == "http://proxy:3128"
    assert env["GIT_TERMINAL_PROMPT"] == "0" and "GIT_DIR" not in env and env["HOME"] == os.environ["HOME"]
    calls = []
    monkeypatch.setattr(git, "_git", lambda *args, **kw: calls.append(args) or "")
    with pytest.raises(RecipeError):
        git.clone("--upload-pack=touch x", tmp_path / "c")
    git.clone("file:///srv/a.git", tmp_path / "c")
    assert calls == [("clone", "--quiet", "--", "file:///srv/a.git", str(tmp_path / "c"))]
