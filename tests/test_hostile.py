"""The hostile teammate and the hostile remote (issue 24): a pin that another team's publish
tries to redirect, a remote that force-pushes a rewritten version together with its new hash,
a source whose published/, lock or rules/ is a symlink out of it, a huge file planted as a
version, concurrent readers recording what they saw, and hostile names. Each is refused in one
line, with nothing written outside the source and nothing remembered wrongly."""

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
import yaml
from conftest import run_cli, spawn_cli
from test_git_publish import seeded_remote, user
from test_sharing import git
from test_sharing_faults import finish, one_line_error

TINY = "tiny/ddp/cpu"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rewrite_version(root: Path, name: str, number: int, old: str, new: str) -> str:
    """Change a published file and write its new hash into the index, as a hostile remote would."""
    index = yaml.safe_load((root / "index.yaml").read_text())
    entry = next(e for e in index["versions"][name] if e["version"] == number)
    path = root / entry["file"]
    path.chmod(0o644)
    path.write_text(path.read_text().replace(old, new))
    entry["sha256"] = sha(path)
    (root / "index.yaml").write_text(yaml.safe_dump(index, sort_keys=False))
    return entry["sha256"]


@pytest.fixture
def teams(tmp_path):
    """Two directory sources, team-b searched first, one user's config."""
    a, b = tmp_path / "team-a", tmp_path / "team-b"
    a.mkdir()
    b.mkdir()
    env = {
        "RECIPE_PATH": f"team-b={b}{os.pathsep}team-a={a}",
        "RECIPE_CONFIG": str(tmp_path / "sources.yaml"),
        "RECIPE_CACHE": str(tmp_path / "cache"),
    }
    return a, b, env


# --- pins ----------------------------------------------------------------------------------------
def test_another_teams_publish_cannot_redirect_a_pin(tmp_path, teams):
    _, b, env = teams
    r = run_cli("publish", TINY, "recipe.name=lab/fast", "train.micro_batch_size=6", "--to", "team-a", env=env)
    assert r.returncode == 0, r.stderr
    r = run_cli("cp", "lab/fast@1", "mine", "--to", "team-b", env=env)
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load((b / "mine.yaml").read_text())["extends"] == ["team-a:lab/fast@1"]
    # team B publishing the name team A has: refused without --replace, nothing written
    r = run_cli("publish", "lab/fast", "train.micro_batch_size=5", "--to", "team-b", env=env)
    one_line_error(r)
    assert "team-a already has this name" in r.stderr and "--replace" in r.stderr
    assert not (b / "published").exists() and not (b / "index.yaml").exists()
    r = run_cli("publish", "lab/fast", "train.micro_batch_size=5", "--replace", "--to", "team-b", env=env)
    assert r.returncode == 0, r.stderr
    # the copy still means team A's version; a bare pin is now ambiguous and says so, never team B's
    assert yaml.safe_load(run_cli("show", "mine", env=env).stdout)["train"]["micro_batch_size"] == 6
    r = run_cli("show", "lab/fast@1", env=env)
    one_line_error(r)
    assert "ambiguous" in r.stderr and "team-a:lab/fast@1" in r.stderr and "team-b:lab/fast@1" in r.stderr
    # a version only one source has is still found without its source
    assert run_cli("publish", "lab/fast", "train.micro_batch_size=4", "--to", "team-b", env=env).returncode == 0
    assert yaml.safe_load(run_cli("show", "lab/fast@2", env=env).stdout)["train"]["micro_batch_size"] == 4


def test_publishing_a_bundled_name_needs_replace(teams):
    a, _, env = teams
    r = run_cli("publish", TINY, "--to", "team-a", env=env)
    one_line_error(r)
    assert "bundled already has this name" in r.stderr and "recipe.name=" in r.stderr
    assert not (a / "index.yaml").exists()
    assert run_cli("publish", TINY, "--replace", "--to", "team-a", env=env).returncode == 0
    # its own next version: no --replace
    assert run_cli("publish", TINY, "train.steps=9", "--to", "team-a", env=env).returncode == 0


# --- trust on first use --------------------------------------------------------------------------
def test_a_version_rewritten_with_its_hash_is_refused_until_accepted(tmp_path, teams):
    a, _, env = teams
    assert run_cli("publish", TINY, "recipe.name=exp/x", "train.steps=100", "--to", "team-a", env=env).returncode == 0
    assert yaml.safe_load(run_cli("show", "exp/x@1", env=env).stdout)["train"]["steps"] == 100
    first = json.loads((tmp_path / "known-versions.jsonl").read_text().splitlines()[0])
    assert (tmp_path / "known-versions.jsonl").stat().st_mode & 0o777 == 0o600  # the user's own, from the first line
    assert first["version"] == "exp/x@1" and first["place"] == str(a.resolve())
    new = rewrite_version(a, "exp/x", 1, "steps: 100", "steps: 7")
    for argv in (["show", "exp/x@1"], ["show", "team-a:exp/x"], ["run", "exp/x@1", "--dry-run"]):
        r = run_cli(*argv, env=env, cwd=tmp_path)
        one_line_error(r)
        assert (
            "error[version-changed] published version team-a:exp/x@1 changed since this machine first saw it"
            in r.stderr
        )
        assert f"(sha256 {new[:12]} now, {first['sha256'][:12]} first seen)" in r.stderr  # 12 digits of each
        assert "recipe source accept team-a exp/x@1" in r.stderr
    r = run_cli("validate", "--all", env=env)
    assert r.returncode != 0 and "exp/x@1" in r.stdout and "Traceback" not in r.stderr
    r = run_cli("source", "accept", "team-a", "exp/x@8", "exp/x@9", env=env)
    assert "team-a has no published exp/x@8, exp/x@9 (hint: recipe history NAME)" in r.stderr
    r = run_cli("source", "accept", "team-a", "exp/x@1", env=env)
    assert r.returncode == 0 and f"team-a:exp/x@1: accepted sha256 {new[:12]} (was {first['sha256'][:12]})" in r.stdout
    # the record rewritten with the accepted hash, every line as it is read back
    lines = [json.loads(line) for line in (tmp_path / "known-versions.jsonl").read_text().splitlines()]
    assert [(d["version"], d["sha256"]) for d in lines] == [("exp/x@1", new)] and all(
        set(d) == set(first) for d in lines
    )
    assert yaml.safe_load(run_cli("show", "exp/x@1", env=env).stdout)["train"]["steps"] == 7
    for bad in (["nowhere", "exp/x@1"], ["team-a", "exp/x"], ["team-a", "exp/x@9"]):
        one_line_error(run_cli("source", "accept", *bad, env=env))


@pytest.fixture
def remote(tmp_path):
    return seeded_remote(tmp_path)


def test_force_pushed_rewrite_is_refused_by_update(tmp_path, remote):
    a, b = user(tmp_path, "a", remote), user(tmp_path, "b", remote)
    r = run_cli("publish", TINY, "recipe.name=exp/x", "train.steps=100", "--to", "team-b", env=a)
    assert r.returncode == 0, r.stderr
    assert run_cli("source", "update", "team-b", env=b).returncode == 0
    assert yaml.safe_load(run_cli("show", "team-b:exp/x@1", env=b).stdout)["train"]["steps"] == 100
    # the hostile remote: the version and its hash rewritten, history amended and force-pushed
    evil = tmp_path / "evil"
    git("clone", "-q", str(remote), str(evil), cwd=tmp_path)
    new = rewrite_version(evil / "recipes", "exp/x", 1, "steps: 100", "steps: 7")
    git("commit", "-qa", "--amend", "-m", "rewritten", cwd=evil)
    git("push", "-qf", "origin", "HEAD", cwd=evil)
    clone = Path(b["RECIPE_CACHE"], "team-b")
    before = (clone / ".git" / "HEAD").read_text(), sorted(p.name for p in clone.rglob("*.yaml"))
    r = run_cli("source", "update", "team-b", env=b)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    # the non-fast-forward is said, each commit by its first 12 digits
    said = re.search(r"history was rewritten \(([0-9a-f]+) does not contain ([0-9a-f]+)\)", r.stderr)
    assert said and len(said[1]) == len(said[2]) == 12, r.stderr
    assert "team-b:exp/x@1" in r.stderr and new[:12] in r.stderr
    assert "(hint: if deliberate, recipe source update team-b --accept exp/x@1)" in r.stderr
    assert yaml.safe_load(run_cli("show", "team-b:exp/x@1", env=b).stdout)["train"]["steps"] == 100  # not moved
    assert ((clone / ".git" / "HEAD").read_text(), sorted(p.name for p in clone.rglob("*.yaml"))) == before
    # a teammate re-adding the source meets the same refusal
    assert run_cli("source", "remove", "team-b", env=b).returncode == 0
    r = run_cli("source", "add", "team-b", f"file://{remote}", env=b)
    one_line_error(r)
    assert "exp/x@1" in r.stderr and run_cli("source", "list", env=b).returncode == 0
    assert "team-b" not in run_cli("source", "list", env=b).stdout.split()
    assert run_cli("source", "add", "team-b", f"file://{remote}", env=a).returncode == 2  # exists for A
    # accepted by name: the clone moves and the new hash is remembered
    r = run_cli("source", "update", "team-b", "--accept", "exp/x@1", env=a)
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(run_cli("show", "team-b:exp/x@1", env=a).stdout)["train"]["steps"] == 7
    assert run_cli("source", "update", "team-b", env=a).returncode == 0  # nothing changed since
    one_line_error(run_cli("source", "update", "team-b", "--accept", "exp/x", env=a))


def test_a_fast_forward_update_says_nothing_and_remembers_new_versions(tmp_path, remote):
    a, b = user(tmp_path, "a", remote), user(tmp_path, "b", remote)
    for steps in (100, 200):
        r = run_cli("publish", TINY, "recipe.name=exp/x", f"train.steps={steps}", "--to", "team-b", env=a)
        assert r.returncode == 0, r.stderr
    r = run_cli("source", "update", "team-b", env=b)
    assert r.returncode == 0 and "rewritten" not in r.stderr, r.stderr
    store = Path(b["RECIPE_CONFIG"]).with_name("b-sources.known-versions.jsonl")
    seen = {json.loads(line)["version"] for line in store.read_text().splitlines()}
    assert seen == {"exp/x@1", "exp/x@2"}
    assert {json.loads(line)["place"] for line in store.read_text().splitlines()} == {str(remote.resolve())}


def test_concurrent_readers_record_each_version_once(tmp_path, teams):
    _, _, env = teams
    for steps in range(1, 7):
        r = run_cli("publish", TINY, "recipe.name=exp/y", f"train.steps={steps}", "--to", "team-a", env=env)
        assert r.returncode == 0, r.stderr
    store = tmp_path / "known-versions.jsonl"
    store.unlink()  # as on a machine that never saw them
    results = finish([spawn_cli("show", f"exp/y@{1 + i % 6}", env=env) for i in range(18)])
    assert all(rc == 0 for rc, _, _ in results), [e for _, _, e in results]
    lines = [json.loads(line) for line in store.read_text().splitlines()]
    assert sorted(e["version"] for e in lines) == [f"exp/y@{n}" for n in range(1, 7)]


# --- containment ---------------------------------------------------------------------------------
def test_a_symlinked_published_folder_is_never_written_through(tmp_path, teams):
    a, _, env = teams
    outside = tmp_path / "outside"
    outside.mkdir()
    (a / "published").symlink_to(outside)
    r = run_cli("publish", TINY, "recipe.name=exp/z", "--to", "team-a", env=env)
    one_line_error(r)
    assert "leads outside the source" in r.stderr
    assert not any(outside.rglob("*")) and not (a / "index.yaml").exists()


def test_a_symlinked_published_folder_in_the_remote_publishes_nothing(tmp_path, remote):
    seed, outside = tmp_path / "seed", tmp_path / "outside"
    outside.mkdir()
    (seed / "recipes" / "published").symlink_to(outside)  # absolute: the same place in every clone
    git("add", ".", cwd=seed)
    git("commit", "-qm", "hostile", cwd=seed)
    git("push", "-q", "origin", "HEAD", cwd=seed)
    a = user(tmp_path, "a", remote)
    head = git_out("rev-parse", "main", cwd=remote)
    r = run_cli("publish", TINY, "recipe.name=exp/hostile-remote", "--to", "team-b", env=a)
    assert r.returncode == 2 and "leads outside the source" in r.stderr and "Traceback" not in r.stderr
    assert git_out("rev-parse", "main", cwd=remote) == head  # nothing pushed
    assert not any(outside.rglob("*"))


def git_out(*args, cwd):
    import subprocess

    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_a_symlinked_lock_is_never_opened(tmp_path, teams):
    a, _, env = teams
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    (a / ".publish.lock").symlink_to(victim)
    r = run_cli("publish", TINY, "recipe.name=exp/z", "--to", "team-a", env=env)
    one_line_error(r)
    assert victim.read_text() == "keep me\n"


def test_rules_linked_from_outside_are_refused(tmp_path, teams):
    a, _, env = teams
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.json").write_text('{"x-invariants": []}')
    (a / "rules").symlink_to(elsewhere)
    r = run_cli("validate", TINY, env=env)
    assert r.returncode != 0 and "leads outside the source" in r.stdout + r.stderr and "Traceback" not in r.stderr


def test_a_huge_published_file_is_refused_before_it_is_read(tmp_path, teams):
    a, _, env = teams
    assert run_cli("publish", TINY, "recipe.name=exp/big", "--to", "team-a", env=env).returncode == 0
    path = a / "published" / "exp" / "big" / "1.yaml"
    path.chmod(0o644)
    with open(path, "ab") as f:
        f.truncate(64 << 30)  # 64 GiB, sparse: read whole, it would exhaust the machine
    r = run_cli("show", "exp/big@1", env=env, timeout=30)
    one_line_error(r)
    assert "not a published recipe" in r.stderr and str(64 << 30) in r.stderr


# --- hostile names and suggestions ---------------------------------------------------------------
@pytest.mark.parametrize("name", ["../up", "-rf", "a b", "bundled", "$(id)"])
def test_hostile_source_names_are_refused(tmp_path, name):
    env = {"RECIPE_CONFIG": str(tmp_path / "sources.yaml"), "RECIPE_CACHE": str(tmp_path / "cache")}
    r = run_cli("source", "add", "--", name, str(tmp_path), env=env)
    one_line_error(r)
    assert not (tmp_path / "sources.yaml").exists()


def test_a_typo_of_a_teams_published_name_is_matched(teams):
    _, _, env = teams
    assert run_cli("publish", TINY, "recipe.name=lab/pi07-fast", "--to", "team-a", env=env).returncode == 0
    r = run_cli("show", "lab/pi07-fsat", env=env)
    one_line_error(r)
    assert "did you mean lab/pi07-fast?" in r.stderr
