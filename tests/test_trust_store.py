"""The store of published versions this machine has seen (issue 41, items 1 and 4): read through
the guarded reader (a FIFO, /dev/zero or a planted huge file is one line, never a hang or an
unbounded read), every damaged line skipped whatever its shape and never taken for a sighting,
one canonical place per source whatever its spelling, refused when others could write it, and
a publish refused on top of a version changed since it was first seen. Also: a changed
published file said as its own problem, not inside another rule's."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from test_git_publish import out, seeded_remote, user
from test_hostile import rewrite_version
from test_sharing import git
from test_sharing_faults import one_line_error

from registry.errors import RecipeError
from registry.sharing import sources, trust

TINY = "tiny/ddp/cpu"
H1, H2 = "1" * 64, "2" * 64
CAP = 64 << 20  # the store's size cap, as its message says


def bounded_cli(*args, env, timeout=20):
    """`recipe ARGS` in a fresh interpreter whose memory is capped: an unbounded read fails there
    instead of filling this machine."""

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run(
        [sys.executable, "-m", "registry", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=cap,
    )


@pytest.fixture
def team(tmp_path):
    """A directory source with exp/x@1 published, and the environment that sees it."""
    root = tmp_path / "team-a"
    root.mkdir()
    env = {
        "RECIPE_PATH": f"team-a={root}",
        "RECIPE_CONFIG": str(tmp_path / "sources.yaml"),
        "RECIPE_CACHE": str(tmp_path / "cache"),
        "RECIPE_KNOWN_VERSIONS": str(tmp_path / "known.jsonl"),
    }
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "train.steps=100", "--to", "team-a", env=env)
    assert r.returncode == 0, r.stderr
    return root, env


@pytest.fixture
def store(tmp_path, monkeypatch):
    path = tmp_path / "known.jsonl"
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(path))
    return path


def refused_update(env) -> None:
    r = bounded_cli("source", "update", "team-b", env=env)  # a note that history was rewritten, and the error
    assert r.returncode == 2 and "Traceback" not in r.stderr and "the remote changed 1 published" in r.stderr


def line(where, version, digest) -> str:
    return json.dumps({"place": where, "version": version, "sha256": digest}) + "\n"


# --- 1. the store read through the guarded reader ----------------------------------------------
def test_a_fifo_in_place_of_the_store_does_not_hang_a_published_version(team):
    _, env = team
    store = Path(env["RECIPE_KNOWN_VERSIONS"])
    store.unlink()
    os.mkfifo(store, 0o600)
    for argv in (["show", "exp/x@1"], ["run", "exp/x@1", "--dry-run"], ["validate", "team-a:exp/x@1"]):
        r = bounded_cli(*argv, env=env)  # before: the open waited for a writer for ever
        one_line_error(r)
        said = f"{store}: cannot read the known versions (a FIFO, not a regular file); hint: move it aside"
        assert said in r.stderr + r.stdout


def test_a_store_linked_to_dev_zero_is_not_read_without_bound(team):
    _, env = team
    store = Path(env["RECIPE_KNOWN_VERSIONS"])
    store.unlink()
    store.symlink_to("/dev/zero")
    r = bounded_cli("show", "exp/x@1", env=env)
    one_line_error(r)
    assert r.stderr.strip() == (
        f"recipe: error: {store}: cannot read the known versions (a device, not a regular file); hint: move it aside"
    )


def test_a_store_past_the_cap_is_refused_before_it_is_read(store):
    with open(store, "wb") as f:
        f.truncate(CAP + 1)  # sparse: nothing written, nothing to read but zeros
    os.chmod(store, 0o600)
    with pytest.raises(RecipeError) as raised:
        trust.known()
    assert str(raised.value) == (
        f"{store}: cannot read the known versions ({CAP + 1} bytes, more than the 64 MiB "
        "a file of this kind may have); hint: move it aside"
    )


# --- 2. a damaged line is skipped, whatever its shape ------------------------------------------
DAMAGED = [
    {"place": ["p"], "version": "a@1", "sha256": H1},
    {"place": {"p": 1}, "version": "a@1", "sha256": H1},
    {"place": "/p", "version": 1, "sha256": H1},
    {"place": "/p", "version": ["a@1"], "sha256": H1},
    {"place": "/p", "version": "a@1", "sha256": 7},
    {"place": "/p", "version": "a@1", "sha256": None},
    {"place": "/p", "version": "a@1", "sha256": [H1]},
    {"place": "/p", "version": "a@1", "sha256": {H1: H1}},
    {"place": "/p", "version": "a@1"},
    7,
    None,
    "a@1",
    ["/p", "a@1", H1],
]


def test_every_damaged_line_is_skipped_without_a_traceback(store):
    text = "".join(json.dumps(d) + "\n" for d in DAMAGED)
    text += "[" * 100_000 + "]" * 100_000 + "\n"  # deeper than any parser's stack
    text += '{"place": ' + "[" * 5_000 + "]" * 5_000 + ', "version": "a@1", "sha256": "' + H1 + '"}\n'
    text += '{"place": "/p", "version": "a@1", "sha256": "' + H1 + '", "n": 1' + "0" * 400 + "}\n"
    text += line("/q", "b@2", H2) + '{"place": "/q", "vers'  # the one good line, and one cut off
    store.write_text(text)
    store.chmod(0o600)
    assert trust.known() == {("/q", "b@2"): H2}


# --- 3. a malformed sighting never switches the check off --------------------------------------
@pytest.mark.parametrize("bad", [None, "", "x", "A" * 64, "1" * 63, "1" * 65, 0, [H1]])
def test_a_malformed_sighting_ahead_of_the_real_one_is_no_sighting(store, tmp_path, bad):
    folder = tmp_path / "team"
    folder.mkdir()
    source = sources.Source("team-a", folder, "path", str(folder))
    where = trust.place(source)
    store.write_text(
        json.dumps({"place": where, "version": "exp/x@1", "sha256": bad}) + "\n" + line(where, "exp/x@1", H1)
    )
    store.chmod(0o600)
    assert trust.known() == {(where, "exp/x@1"): H1}
    # before: the malformed line was the "first sighting", and a None never differs from anything
    assert trust.changed(source, {"exp/x@1": H2}) == [trust.Changed("team-a", "exp/x@1", H1, H2)]
    assert trust.changed(source, {"exp/x@1": H1}) == []


# --- 4. one place, whatever the spelling -------------------------------------------------------
def test_canonical_place_spells_each_place_once(tmp_path, monkeypatch):
    repo = tmp_path / "x" / "r.git"
    repo.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "x")
    monkeypatch.chdir(tmp_path / "x")
    local = str(repo.resolve())
    same_local = [
        str(repo),
        f"{repo}/",
        f"file://{repo}",
        f"file://{repo}/",
        f"file://{tmp_path}/x/./r.git",
        f"file://{tmp_path}/x/../x/r.git",
        f"file://{tmp_path}//x//r.git",
        f"file://localhost{repo}",
        f"FILE://LOCALHOST{repo}",
        f"file://{str(repo).replace('r.git', 'r%2Egit')}",
        f"file://{tmp_path}/link/r.git",
        "r.git",
        "./r.git",
        "../x/./r.git",
        f"{tmp_path}/x/r.git/.git",
    ]
    for spelling in same_local:
        assert trust.canonical_place(spelling) == local, spelling
    same_remote = [
        "ssh://git@host/org/r.git",
        "ssh://git@host/org/r",
        "ssh://git@host:22/org/r.git/",
        "ssh://HOST/org/r.git",
        "https://host/org/r.git",
        "https://host/org/r",
        "https://host/org/r/",
        "https://user:token@Host:443/org/r.git",
        "http://host/org//r.git",
        "git://host/org/./r.git",
        "git@host:org/r.git",
        "git@HOST:org/r",
        "host:org/r.git/",
        "git@host:/org/r.git",
    ]
    for spelling in same_remote:
        assert trust.canonical_place(spelling) == "host/org/r", spelling
    others = {
        "https://host/org/other.git": "host/org/other",
        "https://other/org/r.git": "other/org/r",
        "https://host/Org/r.git": "host/Org/r",  # a path's case is the server's to judge
        "ssh://git@[::1]:2222/org/r.git": "[::1]/org/r",
    }
    for spelling, expected in others.items():
        assert trust.canonical_place(spelling) == expected, spelling
    assert len({trust.canonical_place(s) for s in [local, *others]}) == 1 + len(others)
    # git reads a file:// URL's path and ignores its host: every host names this machine's folder
    for host in ("elsewhere", "127.0.0.1", "EVIL.example", "user@host:22"):
        assert trust.canonical_place(f"file://{host}{repo}") == trust.canonical_place(str(repo)), host
    assert trust.canonical_place("https://github.com./org/r") == "github.com/org/r"  # the root's dot


def test_a_store_written_with_another_spelling_is_read_canonically(store, tmp_path):
    """A store from before canonical places: its raw spelling still names the place."""
    bare = tmp_path / "team.git"
    bare.mkdir()
    store.write_text(line(f"file://{bare}/", "exp/x@1", H1) + line("git@Host:org/r.git", "exp/y@1", H1))
    store.chmod(0o600)
    for spelling, version in ((f"file://localhost{bare}", "exp/x@1"), ("https://host/org/r", "exp/y@1")):
        source = sources.Source("team-g", tmp_path, "git", spelling)
        assert trust.changed(source, {version: H2}) == [trust.Changed("team-g", version, H1, H2)]


def test_a_rewritten_version_is_refused_under_every_spelling_of_its_remote(tmp_path):
    remote = seeded_remote(tmp_path)
    (tmp_path / "link").symlink_to(tmp_path)
    a = user(tmp_path, "a", remote)  # added as file://REMOTE
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "train.steps=100", "--to", "team-b", env=a)
    assert r.returncode == 0, r.stderr
    evil = tmp_path / "evil"
    git("clone", "-q", str(remote), str(evil), cwd=tmp_path)
    new = rewrite_version(evil / "recipes", "exp/x", 1, "steps: 100", "steps: 7")
    git("commit", "-qa", "--amend", "-m", "rewritten", cwd=evil)
    git("push", "-qf", "origin", "HEAD", cwd=evil)
    refused_update(a)  # under the spelling it was seen with
    spellings = [
        f"file://{remote}/",
        f"file://localhost{remote}",
        f"file://{tmp_path}/./{remote.name}",
        f"file://{tmp_path}/link/{remote.name}",
    ]
    for i, spelling in enumerate(spellings):
        r = bounded_cli("source", "add", f"again-{i}", spelling, env=a)
        one_line_error(r)  # before: a new place, the rewritten version taken as first seen
        assert f"cannot add again-{i}: 1 published version(s) differ" in r.stderr and new[:12] in r.stderr
    listed = bounded_cli("source", "list", env=a).stdout
    assert "again-" not in listed


# --- 5. a store others could write is refused ---------------------------------------------------
@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602, 0o660])
def test_a_store_writable_by_others_is_refused(store, mode):
    store.write_text(line("/p", "a@1", H1))
    store.chmod(mode)
    with pytest.raises(RecipeError) as raised:
        trust.known()
    assert str(raised.value) == f"{store}: is writable by others (mode {mode:04o}); hint: chmod 600 {store}"


def test_a_store_owned_by_another_user_is_refused(store, monkeypatch):
    store.write_text(line("/p", "a@1", H1))
    store.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(store, 54321, -1)
    else:  # this user cannot give a file away: it is another user who asks
        real = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: real + 1)
    st = store.stat()
    with pytest.raises(RecipeError) as raised:
        trust.known()
    assert str(raised.value) == (
        f"{store}: is owned by another user (uid {st.st_uid}, this user is {os.geteuid()}); "
        f"hint: move it aside, or chown {os.geteuid()} {store}"
    )


def test_the_lock_is_the_users_own_and_a_shared_one_is_refused(store, tmp_path):
    source = sources.Source("team-a", tmp_path, "path", str(tmp_path))
    old = os.umask(0)  # what a lock made with no mode of its own would take
    try:
        trust.remember(source, {"exp/x@1": H1})
    finally:
        os.umask(old)
    lock = store.with_name(store.name + ".lock")
    assert store.stat().st_mode & 0o777 == 0o600
    assert lock.stat().st_mode & 0o777 == 0o600  # before: 0666
    lock.chmod(0o666)
    with pytest.raises(RecipeError) as raised:
        trust.remember(source, {"exp/x@2": H2})
    assert str(raised.value) == f"{lock}: is writable by others (mode 0666); hint: chmod 600 {lock}"
    assert trust.known() == {(trust.place(source), "exp/x@1"): H1}  # nothing written


def test_a_shared_store_is_refused_by_the_cli_and_a_0755_folder_is_not(team, tmp_path):
    _, env = team
    store = Path(env["RECIPE_KNOWN_VERSIONS"])
    tmp_path.chmod(0o755)
    assert bounded_cli("show", "exp/x@1", env=env).returncode == 0
    store.chmod(0o644)
    assert bounded_cli("show", "exp/x@1", env=env).returncode == 0
    store.chmod(0o664)
    r = bounded_cli("show", "exp/x@1", env=env)
    one_line_error(r)
    assert r.stderr.strip() == f"recipe: error: {store}: is writable by others (mode 0664); hint: chmod 600 {store}"


# --- 6. no publish on top of a version changed since it was seen -------------------------------
def test_publishing_onto_a_refused_force_push_is_refused_until_accepted(tmp_path):
    remote = seeded_remote(tmp_path)
    a, b = user(tmp_path, "a", remote), user(tmp_path, "b", remote)
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "train.steps=100", "--to", "team-b", env=a)
    assert r.returncode == 0, r.stderr
    assert bounded_cli("source", "update", "team-b", env=b).returncode == 0
    evil = tmp_path / "evil"
    git("clone", "-q", str(remote), str(evil), cwd=tmp_path)
    new = rewrite_version(evil / "recipes", "exp/x", 1, "steps: 100", "steps: 7")
    git("commit", "-qa", "--amend", "-m", "rewritten", cwd=evil)
    git("push", "-qf", "origin", "HEAD", cwd=evil)
    refused_update(b)
    pushed = out("rev-parse", "main", cwd=remote)
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "train.steps=200", "--to", "team-b", env=b)
    one_line_error(r)  # before: exit 0, exp/x@2 pushed on top of the rewritten exp/x@1, and a note
    first = json.loads(Path(b["RECIPE_CONFIG"]).with_name("b-sources.known-versions.jsonl").read_text().split("\n")[0])
    assert r.stderr.strip() == (
        "recipe: error: cannot publish exp/x to team-b: 1 published version(s) changed since this machine first "
        f"saw them: team-b:exp/x@1: sha256 {new[:12]} now, {first['sha256'][:12]} when first seen; nothing was "
        "published (hint: if the change is deliberate, recipe source update team-b --accept exp/x@1; "
        "else recipe source remove team-b)"
    )
    assert out("rev-parse", "main", cwd=remote) == pushed  # nothing pushed
    work = Path(b["RECIPE_CACHE"], ".publish", "team-b")
    assert out("status", "--porcelain", "--untracked-files=all", cwd=work) == ""
    # accepted: the publish goes through, as the next number
    assert bounded_cli("source", "update", "team-b", "--accept", "exp/x@1", env=b).returncode == 0
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "train.steps=200", "--to", "team-b", env=b)
    assert r.returncode == 0 and "published team-b:exp/x@2" in r.stdout, r.stderr
    assert out("log", "--format=%s", "-1", "main", cwd=remote) == "publish exp/x@2"


def test_publishing_beside_a_version_edited_in_place_is_refused_until_accepted(team):
    root, env = team
    first = json.loads(Path(env["RECIPE_KNOWN_VERSIONS"]).read_text().splitlines()[0])["sha256"]
    new = rewrite_version(root, "exp/x", 1, "steps: 100", "steps: 7")
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "--to", "team-a", env=env)
    one_line_error(r)
    assert r.stderr.strip() == (
        "recipe: error: cannot publish exp/x to team-a: 1 published version(s) changed since this machine first "
        f"saw them: team-a:exp/x@1: sha256 {new[:12]} now, {first[:12]} when first seen; nothing was published "
        "(hint: if the change is deliberate, recipe source accept team-a exp/x@1; else recipe source remove team-a)"
    )
    assert not (root / "published" / "exp" / "x" / "2.yaml").exists()
    assert bounded_cli("source", "accept", "team-a", "exp/x@1", env=env).returncode == 0
    assert bounded_cli("publish", TINY, "recipe.name=exp/x", "--to", "team-a", env=env).returncode == 0


# --- 7. a changed published file is its own problem ---------------------------------------------
def test_a_changed_published_file_is_one_rule_one_message(team, tmp_path):
    root, env = team
    file = root / "published" / "exp" / "x" / "1.yaml"
    recorded = yaml.safe_load((root / "index.yaml").read_text())["versions"]["exp/x"][0]["sha256"]
    file.chmod(0o644)
    file.write_text(file.read_text().replace("steps: 100", "steps: 7"))
    actual = hashlib.sha256(file.read_bytes()).hexdigest()
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: [team-a:exp/x@1]\n")
    said = (
        f"{file}: error[hash-mismatch] published version team-a:exp/x@1 was changed after publishing "
        f"(sha256 {actual[:12]}, index says {recorded[:12]})"
    )
    r = bounded_cli("show", str(mine), env=env)
    assert r.returncode == 1 and r.stderr == said + "\n"  # before: error[unknown-name] ...: error[hash-mismatch]
    r = bounded_cli("validate", str(mine), env=env)
    assert r.returncode == 1 and r.stdout == said + "\n" and r.stderr == f"{mine}: invalid\n"
    r = bounded_cli("show", "exp/x@1", env=env)
    assert r.returncode == 1 and r.stderr == said + "\n"


# --- a published version gone from its source: a rewrite as surely as a changed one --------------
def test_a_version_dropped_from_a_directory_index_stops_the_next_publish_until_accepted(team):
    """Before: exp/x@1's file and index entry deleted, publish numbered the next version 1 again
    over the one this machine had seen, exit 0, and `recipe show exp/x@1` then failed for ever."""
    root, env = team
    index = root / "index.yaml"
    doc = yaml.safe_load(index.read_text())
    del doc["versions"]["exp/x"]
    index.write_text(yaml.safe_dump(doc))
    (root / "published" / "exp" / "x" / "1.yaml").unlink()  # the version gone, file and entry
    first = json.loads(Path(env["RECIPE_KNOWN_VERSIONS"]).read_text().splitlines()[0])["sha256"]
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "--to", "team-a", env=env)
    one_line_error(r)
    assert f"team-a:exp/x@1: no longer listed, sha256 {first[:12]} when first seen; nothing was published" in r.stderr
    assert "recipe source accept team-a exp/x@1" in r.stderr
    r = bounded_cli("source", "accept", "team-a", "exp/x@1", env=env)
    assert r.returncode == 0 and "team-a:exp/x@1: accepted as no longer listed; forgotten" in r.stdout, r.stderr
    assert bounded_cli("publish", TINY, "recipe.name=exp/x", "--to", "team-a", env=env).returncode == 0


def test_a_force_push_that_drops_a_seen_version_is_refused_by_update_and_publish(tmp_path):
    remote = seeded_remote(tmp_path)
    a, b = user(tmp_path, "a", remote), user(tmp_path, "b", remote)
    assert bounded_cli("publish", TINY, "recipe.name=exp/x", "--to", "team-b", env=a).returncode == 0
    assert bounded_cli("source", "update", "team-b", env=b).returncode == 0  # b has seen exp/x@1
    evil = tmp_path / "evil"
    git("clone", "-q", str(remote), str(evil), cwd=tmp_path)
    git("reset", "-q", "--hard", "HEAD~1", cwd=evil)  # the publish undone
    git("push", "-qf", "origin", "HEAD", cwd=evil)
    r = bounded_cli("source", "update", "team-b", env=b)
    assert r.returncode == 2 and "team-b:exp/x@1: no longer listed" in r.stderr, r.stderr  # before: exit 0
    pushed = out("rev-parse", "main", cwd=remote)
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "--to", "team-b", env=b)
    one_line_error(r)  # before: exit 0, a new exp/x@1 pushed in place of the one b had seen
    assert "team-b:exp/x@1: no longer listed" in r.stderr and out("rev-parse", "main", cwd=remote) == pushed
    assert bounded_cli("source", "update", "team-b", "--accept", "exp/x@1", env=b).returncode == 0
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "--to", "team-b", env=b)
    assert r.returncode == 0 and "published team-b:exp/x@1" in r.stdout, r.stderr


# --- a source is the place it was added from -----------------------------------------------------
def test_a_git_source_added_through_a_link_that_is_repointed_is_refused(tmp_path):
    """Its versions would each be a first sighting at the new place, trusted without a word."""
    remote = seeded_remote(tmp_path)
    (tmp_path / "link.git").symlink_to(remote)
    a = user(tmp_path, "a", tmp_path / "link.git")  # added as file://LINK
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "train.steps=100", "--to", "team-b", env=a)
    assert r.returncode == 0, r.stderr
    evil = tmp_path / "evil.git"
    git("clone", "-q", "--bare", str(remote), str(evil), cwd=tmp_path)
    work = tmp_path / "evil-work"
    git("clone", "-q", str(evil), str(work), cwd=tmp_path)
    rewrite_version(work / "recipes", "exp/x", 1, "steps: 100", "steps: 7")
    git("commit", "-qa", "--amend", "-m", "rewritten", cwd=work)
    git("push", "-qf", "origin", "HEAD", cwd=work)
    (tmp_path / "link.git").unlink()
    (tmp_path / "link.git").symlink_to(evil)
    for argv in (["source", "update", "team-b"], ["show", "team-b:exp/x@1"]):
        r = bounded_cli(*argv, env=a)
        one_line_error(r)  # before: update took the rewritten exp/x@1 as first seen at evil.git
        assert f"now leads to {evil}, not to {remote} where it was added" in r.stderr, r.stderr


def test_a_directory_source_whose_folder_is_replaced_by_a_link_is_refused(tmp_path):
    env = {
        "RECIPE_CONFIG": str(tmp_path / "sources.yaml"),
        "RECIPE_CACHE": str(tmp_path / "cache"),
        "RECIPE_KNOWN_VERSIONS": str(tmp_path / "known.jsonl"),
    }
    team_dir = tmp_path / "team"
    team_dir.mkdir()
    assert bounded_cli("source", "add", "team", str(team_dir), env=env).returncode == 0
    r = bounded_cli("publish", TINY, "recipe.name=exp/x", "train.steps=100", "--to", "team", env=env)
    assert r.returncode == 0, r.stderr
    other = tmp_path / "other"
    team_dir.rename(other)
    rewrite_version(other / "recipes" if (other / "recipes").is_dir() else other, "exp/x", 1, "steps: 100", "steps: 7")
    team_dir.symlink_to(other)
    r = bounded_cli("show", "team:exp/x@1", env=env)
    one_line_error(r)  # before: shown, exp/x@1 taken as first seen at other/
    assert f"now leads to {other}" in r.stderr and "where it was added" in r.stderr, r.stderr


def test_history_refuses_to_show_a_version_changed_since_it_was_first_seen(team):
    """show refuses a rewritten version; history listed its forged summary and rate as they were."""
    root, env = team
    assert bounded_cli("show", "team-a:exp/x@1", env=env).returncode == 0  # first seen, remembered
    index = yaml.safe_load((root / "index.yaml").read_text())
    file = root / index["versions"]["exp/x"][0]["file"]
    summary = yaml.safe_load(file.read_text())["recipe"]["summary"]
    rewrite_version(root, "exp/x", 1, summary, "EVIL rewritten")
    r = bounded_cli("history", "exp/x", "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["versions"]
    assert row["summary"] is None and row["samples_per_s"] is None, row
    assert "changed since this machine first saw it" in row["refused"], row
    text = bounded_cli("history", "exp/x", env=env).stdout
    assert "EVIL" not in text and "REFUSED: " in text, text


def test_a_bare_repository_given_by_its_path_is_a_git_source(tmp_path):
    """Read as a directory it offered nothing: its seen versions were said to be gone."""
    remote = seeded_remote(tmp_path)
    a = user(tmp_path, "a", remote)
    assert bounded_cli("publish", TINY, "recipe.name=exp/x", "train.steps=100", "--to", "team-b", env=a).returncode == 0
    assert bounded_cli("source", "remove", "team-b", env=a).returncode == 0
    for spelling in (str(remote), f"{remote}/"):
        r = bounded_cli("source", "add", "again", spelling, env=a)
        assert r.returncode == 0 and " at " in r.stdout, r.stdout + r.stderr  # cloned: NAME: URL at COMMIT
        assert bounded_cli("show", "again:exp/x@1", env=a).returncode == 0
        assert bounded_cli("source", "remove", "again", env=a).returncode == 0
