"""`recipe source add|list|update|remove|accept` in-process, each outcome read by value: the
names a source may take, a directory and a git repository added (what the config file holds
after), a clone that fails or is empty, a name taken, the rows `source list` shows, an update of
each kind of source, and the versions accepted by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_git_publish import out

from registry.errors import RecipeError
from registry.sharing import binding, config, manage, sources


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A user's config file and git cache of their own."""
    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "sources.yaml"))
    monkeypatch.setenv("RECIPE_CACHE", str(tmp_path / "cache"))
    return tmp_path


def _remote(tmp_path: Path, files: dict[str, str]) -> Path:
    """A bare repository whose one commit holds FILES (empty: no commit at all)."""
    bare, seed = tmp_path / "team.git", tmp_path / "seed"
    out("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    if files:
        out("clone", "-q", str(bare), str(seed), cwd=tmp_path)
        for rel, text in files.items():
            (seed / rel).parent.mkdir(parents=True, exist_ok=True)
            (seed / rel).write_text(text)
        out("add", ".", cwd=seed)
        out("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=seed)
        out("push", "-q", "origin", "HEAD", cwd=seed)
    return bare


def _saved(home: Path) -> dict:
    return yaml.safe_load((home / "sources.yaml").read_text())


@pytest.mark.parametrize("name", ["bundled", "-team", "_team", "team a", "a" * 65, ""])
def test_a_source_name_that_is_not_allowed_is_refused_before_anything_is_written(home, name):
    with pytest.raises(RecipeError) as raised:
        manage.add(name, str(home))
    assert str(raised.value) == f"source name {name!r} is not allowed (letters, digits, - and _; not 'bundled')"
    assert not (home / "sources.yaml").exists()


def test_a_directory_source_is_added_by_its_resolved_path_and_scope(home, monkeypatch):
    folder = home / "team"
    folder.mkdir()
    monkeypatch.chdir(home)
    assert manage.add("a" * 64, "team") == f"{'a' * 64}: {folder}"  # the longest name allowed
    assert manage.add("team-b", str(folder), rules_everywhere=True) == f"team-b: {folder}"
    text = (home / "sources.yaml").read_text()
    assert text.startswith("# recipe sources, searched in this order after RECIPE_PATH; managed by `recipe source`\n")
    assert _saved(home) == {
        "sources": [
            {"name": "a" * 64, "path": str(folder), "place": str(folder)},  # the default scope, own, left unwritten
            {"name": "team-b", "path": str(folder), "place": str(folder), "rules": "everywhere"},
        ]
    }
    assert list(_saved(home)["sources"][1]) == ["name", "path", "place", "rules"]  # in the order written
    with pytest.raises(RecipeError) as raised:
        manage.add("team-b", str(folder))
    assert str(raised.value) == "a source named 'team-b' exists (hint: recipe source remove team-b first)"
    with pytest.raises(RecipeError) as raised:
        manage.add("team-c", str(home / "nowhere"))
    assert str(raised.value) == f"cannot add team-c: {home / 'nowhere'} is not a directory"


def test_a_git_source_is_cloned_into_the_cache_and_listed_with_its_commit(home):
    bare = _remote(home, {"recipes/README.md": "team recipes\n"})
    url = f"file://{bare}"
    said = manage.add("team-g", url, rules_everywhere=True)
    clone = home / "cache" / "team-g"
    head = out("rev-parse", "HEAD", cwd=clone)
    assert said == f"team-g: {url} at {head[:12]}"
    place = url.removeprefix("file://")  # where the URL led when it was added (sources.where_added)
    assert _saved(home) == {"sources": [{"name": "team-g", "git": url, "place": place, "rules": "everywhere"}]}
    assert list(_saved(home)["sources"][0]) == ["name", "git", "place", "rules"]  # as written, not sorted
    assert [p.name for p in (home / "cache").iterdir()] == ["team-g"]  # no staging folder left
    folder = home / "team"
    folder.mkdir()
    manage.add("team-d", str(folder))
    rows = manage.rows()
    assert rows[:2] == [["team-g", "git", url, head[:12]], ["team-d", "path", str(folder), ""]]
    assert rows[2][:2] == ["bundled", "bundled"] and rows[2][3] == ""
    assert manage.update(["team-d"]) == ["team-d: a directory, nothing to update"]
    assert manage.update([]) == [f"team-g: {url} at {head[:12]}", "team-d: a directory, nothing to update"]


def test_an_update_clones_again_a_clone_removed_by_hand(home):
    import shutil

    bare = _remote(home, {"recipes/README.md": "x\n"})
    url = f"file://{bare}"
    manage.add("team-g", url)
    clone = home / "cache" / "team-g"
    head = out("rev-parse", "HEAD", cwd=clone)
    shutil.rmtree(clone)
    assert manage.update(["team-g"]) == [f"team-g: {url} at {head[:12]}"]
    assert (clone / ".git").is_dir()


def test_a_git_source_that_cannot_be_cloned_or_is_empty_is_not_recorded(home):
    gone = f"file://{home / 'gone.git'}"
    with pytest.raises(RecipeError) as raised:
        manage.add("team-g", gone)
    said = str(raised.value)
    assert said.startswith(f"cannot add team-g: {gone} is unreachable or not a git repository (git clone failed: ")
    assert said.endswith(")")
    empty = f"file://{_remote(home, {})}"
    with pytest.raises(RecipeError) as raised:
        manage.add("team-g", empty)
    assert str(raised.value) == (
        f"cannot add team-g: {empty} is an empty git repository (hint: push a first commit, "
        "e.g. a recipes/ folder, then add it again)"
    )
    assert not (home / "sources.yaml").exists() and list((home / "cache").iterdir()) == []


def test_a_path_ending_in_git_that_is_a_folder_is_a_directory_source(home):
    folder = home / "team.git"
    folder.mkdir()
    assert manage.add("team-d", str(folder)) == f"team-d: {folder}"
    assert _saved(home)["sources"] == [{"name": "team-d", "path": str(folder), "place": str(folder)}]


def test_a_clone_left_by_a_source_removed_by_hand_is_replaced(home):
    bare = _remote(home, {"recipes/README.md": "x\n"})
    stale = home / "cache" / "team-g"
    stale.mkdir(parents=True)
    (stale / "old.txt").write_text("left behind")
    manage.add("team-g", f"file://{bare}")
    assert not (stale / "old.txt").exists() and (stale / ".git").is_dir()


def test_removing_a_source_removes_its_clone_and_publishing_copy_only(home):
    from registry.sharing import gitpublish

    folder = home / "team"
    folder.mkdir()
    manage.add("team-a", str(folder))
    manage.add("team-b", str(folder))
    cache = config.cache_dir()
    for kept in (cache / "team-a", cache / gitpublish.WORK / "team-a", cache / "team-b"):
        kept.mkdir(parents=True)
    manage.remove("team-a")
    assert _saved(home) == {"sources": [{"name": "team-b", "path": str(folder), "place": str(folder)}]}
    assert not (cache / "team-a").exists() and not (cache / gitpublish.WORK / "team-a").exists()
    assert (cache / "team-b").is_dir()
    with pytest.raises(RecipeError) as raised:
        manage.remove("team-a")
    assert str(raised.value) == f"no source named 'team-a' in {home / 'sources.yaml'}"


def test_accepting_versions_by_hand(home, monkeypatch):
    from registry.sharing import trust, versions

    folder = home / "team"
    folder.mkdir()
    manage.add("team-a", str(folder))
    with pytest.raises(RecipeError) as raised:
        manage.accept("bundled", ["tiny/ddp/cpu@1"])
    assert str(raised.value) == "no source named 'bundled' (hint: recipe source list)"
    offered = {"exp/x@1": "a" * 64, "exp/x@2": "b" * 64}
    monkeypatch.setattr(versions, "hashes", lambda source: offered)
    with pytest.raises(RecipeError) as raised:
        manage.accept("team-a", ["exp/x@1", "exp/x@3", "exp/y@1"])
    assert str(raised.value) == "team-a has no published exp/x@3, exp/y@1 (hint: recipe history NAME)"
    checked, remembered = [], []
    monkeypatch.setattr(
        versions,
        "versions",
        lambda source, name: [versions.Version(source, name, n, Path(f"{n}.yaml"), "", "") for n in (1, 2)],
    )
    monkeypatch.setattr(versions, "verified_file", lambda v: checked.append(v.number))
    changed = [trust.Changed("team-a", "exp/x@2", "c" * 64, "d" * 64)]
    monkeypatch.setattr(trust, "changed", lambda source, wanted, whole=False, remembered=None: [] if whole else changed)
    monkeypatch.setattr(trust, "remember", lambda source, wanted, replace=False: remembered.append((wanted, replace)))
    assert manage.accept("team-a", ["exp/x@1", "exp/x@2"]) == [
        f"team-a:exp/x@1: sha256 {'a' * 12}, as remembered",
        f"team-a:exp/x@2: accepted sha256 {'b' * 12} (was {'c' * 12})",
    ]
    assert checked == [1, 2] and remembered == [(offered, True)]


def test_a_malformed_config_file_says_what_it_should_hold(home):
    (home / "sources.yaml").write_text("sources: [team-a]\n")
    with pytest.raises(RecipeError) as raised:
        config.entries()
    assert str(raised.value) == (
        f"{home / 'sources.yaml'}: malformed (hint: sources: [{{name: team-a, path: /dir}}, {{name: team-b, git: URL}}])"
    )
    assert raised.value.exit_code == 2
    (home / "sources.yaml").write_text("{}\n")
    assert config.entries() == []  # a file without sources holds none
    assert sources.all_sources()[-1].name == "bundled"


def test_the_git_cache_lies_under_the_users_cache_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("RECIPE_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.cache_dir() == tmp_path / ".cache" / "recipe" / "git"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert config.cache_dir() == tmp_path / "xdg" / "recipe" / "git"
    monkeypatch.setenv("RECIPE_CACHE", str(tmp_path / "mine"))
    assert config.cache_dir() == tmp_path / "mine"


# --- what a source's versions leave in this machine's record ----------------------------------------
def _publish_by_hand(root: Path, name: str, number: int, text: str) -> str:
    """A published file and its index entry, written as a publish would (the sha256 of its bytes)."""
    import hashlib

    file = root / "published" / name / f"{number}.yaml"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    index = root / "index.yaml"
    data = yaml.safe_load(index.read_text()) if index.exists() else {"versions": {}}
    data["versions"].setdefault(name, []).append(
        {"version": number, "file": f"published/{name}/{number}.yaml", "sha256": digest}
    )
    index.write_text(yaml.safe_dump(data, sort_keys=False))
    return digest


def test_adding_a_source_remembers_its_versions_by_where_it_came_from(home):
    from registry.sharing import trust

    folder = home / "team"
    folder.mkdir()
    digest = _publish_by_hand(folder, "exp/x", 1, "recipe: {name: exp/x, version: 1}\n")
    manage.add("team-a", str(folder))
    assert trust.known() == {(str(folder), "exp/x@1"): digest}
    draft = home / "draft"
    git_digest = _publish_by_hand(draft / "recipes", "exp/y", 1, "recipe: {name: exp/y, version: 1}\n")
    bare = _remote(home, {str(p.relative_to(draft)): p.read_text() for p in draft.rglob("*.yaml")})
    manage.add("team-g", f"file://{bare}")
    assert trust.known()[(str(bare.resolve()), "exp/y@1")] == git_digest  # the remote's place, not the clone's folder


def test_a_source_whose_index_cannot_be_read_is_not_added(home):
    folder = home / "team"
    folder.mkdir()
    (folder / "index.yaml").write_text("versions: [not, a, mapping]\n")
    with pytest.raises(RecipeError) as raised:
        manage.add("team-a", str(folder))
    assert str(raised.value).startswith(f"cannot add team-a: {folder / 'index.yaml'}:1:")
    assert not (home / "sources.yaml").exists()


def test_accepting_a_changed_version_takes_its_new_hash(home):
    from registry.sharing import trust

    folder = home / "team"
    folder.mkdir()
    first = _publish_by_hand(folder, "exp/x", 1, "recipe: {name: exp/x, version: 1}\n")
    other = _publish_by_hand(folder, "exp/x", 2, "recipe: {name: exp/x, version: 2}\n")
    manage.add("team-a", str(folder))
    # edited on purpose in the folder, the index's hash with it
    file = folder / "published" / "exp" / "x" / "1.yaml"
    file.write_text("recipe: {name: exp/x, version: 1}\ntrain: {steps: 7}\n")
    import hashlib

    now = hashlib.sha256(file.read_bytes()).hexdigest()
    (folder / "index.yaml").write_text((folder / "index.yaml").read_text().replace(first, now))
    assert manage.accept("team-a", ["exp/x@1", "exp/x@2"]) == [
        f"team-a:exp/x@1: accepted sha256 {now[:12]} (was {first[:12]})",
        f"team-a:exp/x@2: sha256 {other[:12]}, as remembered",
    ]
    assert trust.known() == {(str(folder), "exp/x@1"): now, (str(folder), "exp/x@2"): other}


def test_a_name_taken_meanwhile_by_another_add_is_refused_under_the_lock(home, monkeypatch):
    """Two `recipe source add` at once: the name is checked again once the config is locked."""
    folder = home / "team"
    folder.mkdir()
    manage.add("team-a", str(folder))
    real = config.entries
    calls = []

    def first_without_it():  # the early check ran before the other add wrote its entry
        calls.append(1)
        return [] if len(calls) == 1 else real()

    monkeypatch.setattr(config, "entries", first_without_it)
    with pytest.raises(RecipeError) as raised:
        manage.add("team-a", str(folder))
    assert str(raised.value) == "a source named 'team-a' exists (hint: recipe source remove team-a first)"
    bare = _remote(home, {"recipes/README.md": "x\n"})
    calls.clear()
    with pytest.raises(RecipeError) as raised:
        manage.add("team-a", f"file://{bare}")
    assert str(raised.value) == "a source named 'team-a' exists (hint: recipe source remove team-a first)"
    assert not (home / "cache" / "team-a").exists()  # the clone made meanwhile is not moved in


def test_a_taken_name_is_refused_before_a_clone_is_tried(home):
    folder = home / "team"
    folder.mkdir()
    manage.add("team-a", str(folder))
    with pytest.raises(RecipeError) as raised:
        manage.add("team-a", "file:///nowhere/team.git")  # unreachable: the name is said first
    assert str(raised.value) == "a source named 'team-a' exists (hint: recipe source remove team-a first)"


def test_what_is_cloned_and_where_the_clone_is_staged(home, monkeypatch):
    import tempfile

    bare = home / "team"  # a bare repository whose name does not end in .git
    out("init", "-q", "--bare", "-b", "main", str(bare), cwd=home)
    (home / "seed").mkdir()
    out("clone", "-q", str(bare), "seed", cwd=home)
    (home / "seed" / "README.md").write_text("x\n")
    out("add", ".", cwd=home / "seed")
    out("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "s", cwd=home / "seed")
    out("push", "-q", "origin", "HEAD", cwd=home / "seed")
    monkeypatch.setenv("RECIPE_CACHE", str(home / "deep" / "cache"))  # made, with its parents
    staged = []
    real = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: staged.append(kw) or real(**kw))
    assert manage.add("team-g", f"file://{bare}").startswith(f"team-g: file://{bare} at ")
    # beside the clone's final place, hidden (never a source's name): moved in by a rename
    assert staged == [{"prefix": ".team-g.", "dir": home / "deep" / "cache"}]
    missing = home / "missing.git"  # not a folder: read as a git URL, not a directory
    with pytest.raises(RecipeError) as raised:
        manage.add("team-h", str(missing))
    assert str(raised.value).startswith(f"cannot add team-h: {missing} is unreachable or not a git repository")


def test_source_rows_name_the_bundled_recipes_folder_and_update_only_the_names_given(home):
    folder = home / "team"
    folder.mkdir()
    manage.add("team-a", str(folder))
    manage.add("team-b", str(folder))
    assert manage.rows()[-1] == ["bundled", "bundled", str(sources.bundled().root), ""]
    assert manage.update(["team-b"]) == ["team-b: a directory, nothing to update"]


def test_a_remote_moved_on_is_followed_and_its_new_versions_remembered(home):
    from registry.sharing import trust

    seed = home / "seed"
    bare = _remote(home, {"recipes/README.md": "x\n"})
    url = f"file://{bare}"
    manage.add("team-g", url)
    digest = _publish_by_hand(seed / "recipes", "exp/y", 1, "recipe: {name: exp/y, version: 1}\n")
    out("add", ".", cwd=seed)
    out("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "publish", cwd=seed)
    out("push", "-q", "origin", "HEAD", cwd=seed)
    head = out("rev-parse", "HEAD", cwd=seed)
    assert manage.update(["team-g"]) == [f"team-g: {url} at {head[:12]}"]
    assert trust.known() == {(str(bare.resolve()), "exp/y@1"): digest}  # the URL's canonical place


def test_names_defined_by_several_sources_say_which_one_wins(home, monkeypatch):
    a, b = home / "a", home / "b"
    for rel in ("policy/act.yaml", "backend/zero2.yaml", "tiny/ddp/cpu.yaml", "exp/mine.yaml"):
        (a / rel).parent.mkdir(parents=True, exist_ok=True)
        (a / rel).write_text("{}\n")
    (b / "exp").mkdir(parents=True)
    (b / "exp" / "mine.yaml").write_text("{}\n")
    (b / "exp" / "only-b.yaml").write_text("{}\n")
    _publish_by_hand(b, "exp/pub", 1, "recipe: {name: exp/pub, version: 1}\n")
    _publish_by_hand(a, "exp/pub", 1, "recipe: {name: exp/pub, version: 1}\n")
    monkeypatch.setenv("RECIPE_PATH", f"team-a={a}:team-b={b}")
    assert manage.winners() == [
        ["backend/zero2", "team-a", "bundled"],
        ["exp/mine", "team-a", "team-b"],
        ["exp/pub", "team-a", "team-b"],
        ["policy/act", "team-a", "bundled"],
        ["tiny/ddp/cpu", "team-a", "bundled"],
    ]
    (b / "policy").mkdir()
    (b / "policy" / "act.yaml").write_text("{}\n")
    assert ["policy/act", "team-a", "team-b, bundled"] in manage.winners()


def test_an_update_goes_on_past_a_directory_and_passes_on_what_is_accepted(home, monkeypatch):
    from registry.sharing import trust

    folder = home / "team"
    folder.mkdir()
    manage.add("team-d", str(folder))
    bare = _remote(home, {"recipes/README.md": "x\n"})
    url = f"file://{bare}"
    manage.add("team-g", url)
    head = out("rev-parse", "HEAD", cwd=home / "cache" / "team-g")
    assert manage.update([]) == ["team-d: a directory, nothing to update", f"team-g: {url} at {head[:12]}"]
    rewritten = [trust.Changed("team-g", "exp/x@1", "a" * 64, "b" * 64)]
    monkeypatch.setattr(trust, "changed", lambda source, offered, whole=False, remembered=None: rewritten)
    with pytest.raises(RecipeError) as raised:
        manage.update(["team-g"])
    assert str(raised.value).startswith("team-g: the remote changed 1 published version(s) this machine has seen: ")
    assert manage.update(["team-g"], accept=("exp/x@1",)) == [f"team-g: {url} at {head[:12]}"]


def test_a_git_source_whose_index_cannot_be_read_is_not_added(home):
    bare = _remote(home, {"recipes/index.yaml": "versions: [not, a, mapping]\n"})
    with pytest.raises(RecipeError) as raised:
        manage.add("team-g", f"file://{bare}")
    assert str(raised.value).startswith("cannot add team-g: ")
    assert not (home / "sources.yaml").exists() and list((home / "cache").iterdir()) == []


# --- the schema beside a copy, a refresh that cannot read the index, the status cache's key -------------
@pytest.mark.parametrize("text", ["not json {", "[1, 2]", '"a string"'])
def test_a_schema_file_that_is_not_a_json_object_is_never_replaced(tmp_path, text):
    path = tmp_path / "recipe.schema.json"
    path.write_text(text)
    with pytest.raises(RecipeError) as raised:
        binding.write_schema(path)
    assert str(raised.value) == (
        f"{path}: exists and is not a schema recipe wrote; not replaced (hint: move it, and write again)"
    )
    assert path.read_text() == text


def test_a_status_cache_key_moves_when_a_recipe_is_renamed(tmp_path, monkeypatch):
    from registry.sharing import listing

    team = tmp_path / "team"
    (team / "exp").mkdir(parents=True)
    (team / "exp" / "a.yaml").write_text("extends: [tiny/ddp/cpu]\n")
    monkeypatch.setenv("RECIPE_PATH", f"team-a={team}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = listing._StatusCache().key
    (team / "exp" / "a.yaml").rename(team / "exp" / "b.yaml")  # as many files, another name
    assert listing._StatusCache().key != before
