"""Published versions in-process, by value: the file and index entry a publish writes, each
malformed index entry said at its own key, a file too large or changed, the names a pin resolves
to and the messages of one that does not, and what a bundled file declares."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from registry.doc import Recipe
from registry.errors import RecipeError
from registry.names import parse
from registry.sharing import sources, versions

ENTRY = {"version": 1, "file": "published/exp/x/1.yaml", "sha256": "0" * 64}


@pytest.fixture
def team(tmp_path, monkeypatch):
    root = tmp_path / "team"
    root.mkdir()
    monkeypatch.setenv("RECIPE_PATH", f"team-a={root}")
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(tmp_path / "known.jsonl"))
    return sources.Source("team-a", root, "path", str(root))


def _recipe(name: str, **train) -> Recipe:
    return Recipe(name, {"recipe": {"name": name, "summary": "the first"}, "train": {"steps": 7, **train}}, {})


def test_a_publish_writes_an_immutable_file_and_its_index_entry(team, monkeypatch):
    monkeypatch.setattr(versions.time, "gmtime", lambda: versions.time.struct_time((2026, 11, 28, 5, 6, 7, 5, 332, 0)))
    made = versions.publish(_recipe("exp/x"), team)
    file = team.root / "published" / "exp" / "x" / "1.yaml"
    text = (
        "# exp/x@1: published by recipe; immutable (its sha256 is in index.yaml).\n"
        "recipe:\n  name: exp/x\n  summary: the first\n  version: 1\ntrain:\n  steps: 7\n"
    )
    assert file.read_text() == text and file.stat().st_mode & 0o777 == 0o444
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert made == versions.Version(team, "exp/x", 1, file, digest, "2026-11-28T05:06:07Z")
    index = (team.root / "index.yaml").read_text()
    assert index.startswith("# published versions: written by `recipe publish`, checked by `recipe validate --all`\n")
    assert yaml.safe_load(index) == {
        "versions": {
            "exp/x": [
                {
                    "version": 1,
                    "file": "published/exp/x/1.yaml",
                    "sha256": digest,
                    "date": "2026-11-28T05:06:07Z",
                    "summary": "the first",
                }
            ]
        }
    }
    second = versions.publish(_recipe("exp/x", steps=8), team)
    assert second.number == 2 and [v.number for v in versions.versions(team, "exp/x")] == [1, 2]
    assert versions.hashes(team) == {"exp/x@1": digest, "exp/x@2": second.sha256}


def test_a_publish_never_overwrites_and_never_goes_to_a_git_or_the_bundled_source(team):
    target = team.root / "published" / "exp" / "x" / "1.yaml"
    target.parent.mkdir(parents=True)
    target.write_text("# a version whose index entry was lost\n")
    (team.root / "index.yaml").write_text("versions: {}\n")
    with pytest.raises(RecipeError) as raised:
        versions.publish(_recipe("exp/x"), team)
    assert "index.yaml does not list them (hint: " in str(raised.value)  # never restarted at 1 beside it
    target.unlink()
    versions.publish(_recipe("exp/x"), team)
    planted = team.root / "published" / "exp" / "x" / "2.yaml"
    planted.write_text("# not a version\n")
    with pytest.raises(RecipeError) as raised:
        versions.publish(_recipe("exp/x"), team)
    assert str(raised.value) == f"{planted}: exists; a published version is never overwritten (hint: check index.yaml)"
    with pytest.raises(RecipeError) as raised:
        versions.publish(_recipe("exp/x"), sources.Source("team-g", team.root, "git", "file:///x.git"))
    assert str(raised.value) == "team-g is a git source: publish into a working copy (a path source) and push"
    with pytest.raises(RecipeError) as raised:
        versions.publish(_recipe("exp/x"), sources.bundled())
    assert str(raised.value) == (
        "the bundled recipes are part of the package; publish to a team source (recipe source add)"
    )


@pytest.mark.parametrize(
    "entry, key, message",
    [
        ("one", "one", "exp/x: a version must be a mapping"),
        ({"version": 1, "file": "f.yaml"}, "{", "exp/x: a version without sha256"),
        ({"file": "f.yaml"}, "{", "exp/x: a version without version, sha256"),
        ({**ENTRY, "version": 0}, "version:", "exp/x: version 0 is not a number >= 1"),
        ({**ENTRY, "version": True}, "version:", "exp/x: version True is not a number >= 1"),
        ({**ENTRY, "version": "1"}, "version:", "exp/x: version '1' is not a number >= 1"),
        ({**ENTRY, "file": "/etc/passwd"}, "file:", "exp/x@1: file '/etc/passwd' is not a path inside the source"),
        ({**ENTRY, "file": "a/../../b"}, "file:", "exp/x@1: file 'a/../../b' is not a path inside the source"),
        ({**ENTRY, "file": ""}, "file:", "exp/x@1: file '' is not a path inside the source"),
        ({**ENTRY, "file": 3}, "file:", "exp/x@1: file 3 is not a path inside the source"),
        ({**ENTRY, "sha256": "A" * 64}, "sha256", f"exp/x@1: sha256 {'A' * 64!r} is not 64 hex digits"),
        ({**ENTRY, "sha256": "0" * 63}, "sha256", f"exp/x@1: sha256 {'0' * 63!r} is not 64 hex digits"),
        ({**ENTRY, "date": 2026}, "date:", "exp/x@1: date 2026 is not text"),
    ],
)
def test_a_malformed_index_entry_is_said_at_its_own_key(team, entry, key, message):
    text = "# index\n" + yaml.safe_dump(
        {"versions": {"exp/x": [entry]}}, sort_keys=False, default_flow_style=None, width=1000
    )
    (team.root / "index.yaml").write_text(text)
    with pytest.raises(RecipeError) as raised:
        versions.index(team)
    problem = raised.value.problem
    # the line and column of the key at fault (or of the entry, or of the list holding it)
    number, line = next((n, line) for n, line in enumerate(text.splitlines(), 1) if key in line and n > 2)
    at = line.index(key) + 1
    assert (problem.message, problem.origin) == (
        f"malformed index.yaml: {message}",
        f"{team.root / 'index.yaml'}:{number}:{at}",
    )
    assert problem.hint == versions._INDEX_HINT


@pytest.mark.parametrize(
    "text, message",
    [
        ("versions: [a]\n", "versions must be a mapping of names to lists of versions"),
        ("versions: {exp/x: one}\n", "exp/x: must be a list of versions"),
        ("versions: {'team:exp/x': []}\n", "'team:exp/x' is not a recipe name"),
        ("versions: {'exp/x@2': []}\n", "'exp/x@2' is not a recipe name"),
    ],
)
def test_a_malformed_index_is_said_with_what_it_should_hold(team, text, message):
    (team.root / "index.yaml").write_text(text)
    with pytest.raises(RecipeError) as raised:
        versions.index(team)
    assert raised.value.problem.message == f"malformed index.yaml: {message}"


def test_a_file_too_large_or_unreadable_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (versions.MAX_BYTES + 1))
    with pytest.raises(RecipeError) as raised:
        versions.sha256(big)
    assert (
        raised.value.problem.message == f"{versions.MAX_BYTES + 1} bytes, larger than 1048576; not a published recipe"
    )
    exact = tmp_path / "exact.yaml"
    exact.write_bytes(b"#" * versions.MAX_BYTES)  # the limit itself is a recipe
    assert versions.sha256(exact) == hashlib.sha256(exact.read_bytes()).hexdigest()
    with pytest.raises(RecipeError) as raised:
        versions.sha256(tmp_path / "none.yaml")
    assert str(raised.value) == f"{tmp_path / 'none.yaml'}: cannot read: No such file or directory"


def test_a_changed_or_missing_published_file_is_said(team):
    made = versions.publish(_recipe("exp/x"), team)
    made.file.chmod(0o644)
    made.file.write_text(made.file.read_text() + "# edited\n")
    now = hashlib.sha256(made.file.read_bytes()).hexdigest()
    with pytest.raises(RecipeError) as raised:
        versions.verified_file(made)
    assert raised.value.problem.message == (
        f"published version team-a:exp/x@1 was changed after publishing (sha256 {now[:12]}, index says {made.sha256[:12]})"
    )
    assert raised.value.problem.rule == "hash-mismatch" and raised.value.problem.origin == str(made.file)
    made.file.unlink()
    with pytest.raises(RecipeError) as raised:
        versions.verified_file(made)
    assert raised.value.problem.message == "published version team-a:exp/x@1 is missing"


def test_what_a_name_with_or_without_a_version_denotes(team, tmp_path, monkeypatch):
    first = versions.publish(_recipe("exp/x"), team)
    second = versions.publish(_recipe("exp/x", steps=8), team)
    assert versions.lookup(parse("exp/x")) == second  # the newest
    assert versions.lookup(parse("exp/x@1")) == first
    assert versions.lookup(parse("team-a:exp/x@1")) == first
    assert versions.pin(first) == "team-a:exp/x@1"
    assert versions.lookup(parse("tiny/ddp/cpu")) is None  # not published: the working file
    assert versions.lookup(parse("tiny/ddp/cpu@1")) is None  # the bundled file as shipped
    shipped = sources.bundled()
    assert versions.pin(versions.Version(shipped, "tiny/ddp/cpu", 1, Path("x"), "", "")) == "tiny/ddp/cpu@1"
    for name, message in (
        ("exp/x@3", "team-a:exp/x has no version 3 (published: 1, 2)"),
        ("team-a:exp/x@3", "team-a:exp/x has no version 3 (published: 1, 2)"),
        ("tiny/ddp/cpu@2", "bundled:tiny/ddp/cpu has no version 2 (published: none; the bundled file is version 1)"),
        ("exp/nothing@1", "no source has published exp/nothing@1"),
        ("bundled:exp/nothing@1", "no source has published exp/nothing@1"),
    ):
        with pytest.raises(RecipeError) as raised:
            versions.lookup(parse(name))
        assert str(raised.value) == message, name
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("RECIPE_PATH", f"team-a={team.root}:team-b={other}")
    versions.publish(_recipe("exp/x"), sources.Source("team-b", other, "path", str(other)))
    with pytest.raises(RecipeError) as raised:
        versions.lookup(parse("exp/x@1"))
    assert str(raised.value) == (
        "exp/x@1 is ambiguous: 2 sources have a version 1 (hint: name the source: team-a:exp/x@1 or team-b:exp/x@1)"
    )
    assert versions.lookup(parse("exp/x@2")) == second  # only one source has a 2
    assert [(s.name, v.number if v else None) for s, v in versions.holders(parse("exp/x@1"))] == [
        ("team-a", 1),
        ("team-b", 1),
    ]
    assert [s.name for s, v in versions.holders(parse("tiny/ddp/cpu@1"))] == ["bundled"]


@pytest.mark.parametrize("declared, number", [("1", None), (True, None), (0, None), (3, 3), (None, None)])
def test_what_a_bundled_file_declares(tmp_path, monkeypatch, declared, number):
    from registry.load import _load_cached

    root = tmp_path / "bundled"
    (root / "exp").mkdir(parents=True)
    (root / "exp" / "x.yaml").write_text(yaml.safe_dump({"recipe": {"name": "exp/x", "version": declared}}))
    _load_cached.cache_clear()
    bundled = sources.Source("bundled", root, "bundled", None)
    assert versions.declared(bundled, parse("exp/x")) == number
    assert versions.declared(sources.Source("team-a", root, "path", str(root)), parse("exp/x")) is None
    assert versions.declared(bundled, parse("exp/none")) is None


# --- what this machine remembers of the versions it saw (trust.py) -------------------------------
def test_the_record_of_versions_seen_lies_beside_the_config_file(tmp_path, monkeypatch):
    from registry.sharing import trust

    monkeypatch.delenv("RECIPE_KNOWN_VERSIONS", raising=False)
    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "sources.yaml"))
    assert trust.store_file() == tmp_path / "known-versions.jsonl"
    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "team.yaml"))
    assert trust.store_file() == tmp_path / "team.known-versions.jsonl"
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(tmp_path / "mine.jsonl"))
    assert trust.store_file() == tmp_path / "mine.jsonl"


def test_versions_are_remembered_once_by_place_and_a_change_is_refused_until_accepted(team, tmp_path):
    import json

    from registry.sharing import trust

    store = tmp_path / "known.jsonl"
    first = versions.publish(_recipe("exp/x"), team)
    trust.check(first)  # first sight: remembered
    trust.check(first)  # seen: nothing added
    lines = [json.loads(line) for line in store.read_text().splitlines()]
    assert lines == [{"place": str(team.root.resolve()), "version": "exp/x@1", "sha256": first.sha256}]
    assert store.stat().st_mode & 0o777 == 0o600
    changed = versions.Version(team, "exp/x", 1, first.file, "f" * 64, "")
    with pytest.raises(RecipeError) as raised:
        trust.check(changed)
    problem = raised.value.problem
    assert (problem.rule, problem.origin) == ("version-changed", str(first.file))
    assert problem.message == (
        f"published version team-a:exp/x@1 changed since this machine first saw it "
        f"(sha256 ffffffffffff now, {first.sha256[:12]} first seen)"
    )
    assert problem.hint == "recipe source accept team-a exp/x@1 if the change is deliberate"
    assert trust.changed(team, {"exp/x@1": "f" * 64, "exp/x@9": "e" * 64}) == [
        trust.Changed("team-a", "exp/x@1", first.sha256, "f" * 64)
    ]
    trust.remember(team, {"exp/x@1": "f" * 64}, replace=True)
    assert trust.known() == {(str(team.root.resolve()), "exp/x@1"): "f" * 64}
    assert store.stat().st_mode & 0o777 == 0o600
    trust.remember(sources.bundled(), {"tiny/ddp/cpu@1": "a" * 64})  # the package's own: never recorded
    trust.check(versions.Version(sources.bundled(), "tiny/ddp/cpu", 1, Path("x"), "b" * 64, ""))
    assert len(store.read_text().splitlines()) == 1


def test_a_line_cut_off_mid_append_is_skipped_and_the_first_sighting_wins(tmp_path, monkeypatch):
    from registry.sharing import trust

    store = tmp_path / "known.jsonl"
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(store))
    store.write_text(
        f'{{"place": "/p", "version": "a@1", "sha256": "{"1" * 64}"}}\n'
        f'{{"place": "/p", "version": "a@1", "sha256": "{"2" * 64}"}}\n'
        '{"place": "/p", "version": "b@1"}\n'
        '["/p"]\n'
        '{"place": "/p", "vers'
    )
    store.chmod(0o600)
    assert trust.known() == {("/p", "a@1"): "1" * 64}
    store.write_bytes(b"\xff\xfe")
    with pytest.raises(RecipeError) as raised:
        trust.known()
    assert str(raised.value).startswith(f"{store}: cannot read the known versions (")
    assert str(raised.value).endswith("); hint: move it aside")


# --- registry/sharing's seed-3 draw: the four its GPU run did not reach ---------------------------------
def test_two_config_files_alike_in_time_are_two_sets_of_sources(tmp_path, monkeypatch):
    import os

    a, b = tmp_path / "a", tmp_path / "b"
    for folder, config in ((a, tmp_path / "a.yaml"), (b, tmp_path / "b.yaml")):
        folder.mkdir()
        config.write_text(f"sources: [{{name: {folder.name}-team, path: {folder}}}]\n")
        os.utime(config, ns=(1_000_000_000, 1_000_000_000))  # the same mtime: only the path tells them apart
    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "a.yaml"))
    assert [s.name for s in sources.all_sources()] == ["a-team", "bundled"]
    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "b.yaml"))
    assert [s.name for s in sources.all_sources()] == ["b-team", "bundled"]


def test_a_source_has_a_name_as_a_file_or_as_a_cell_of_its_parts():
    bundled = sources.bundled()
    assert sources.has(bundled, parse("tiny/ddp/cpu"))  # a file
    assert sources.has(bundled, parse("tiny/ddp/8xA100"))  # no file: a cell of its parts
    assert not sources.has(bundled, parse("tiny/ddp"))  # two parts are no cell
    assert not sources.has(bundled, parse("tiny/ddp/nothing"))


def test_a_published_file_linked_out_of_the_source_is_said_at_its_index_entry(team, tmp_path):
    outside = tmp_path / "outside.yaml"
    outside.write_text("recipe: {name: exp/x}\n")
    (team.root / "published" / "exp" / "x").mkdir(parents=True)
    (team.root / "published" / "exp" / "x" / "1.yaml").symlink_to(outside)
    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    text = f"versions:\n  exp/x:\n  - version: 1\n    file: published/exp/x/1.yaml\n    sha256: {digest}\n"
    (team.root / "index.yaml").write_text(text)
    with pytest.raises(RecipeError) as raised:
        versions.versions(team, "exp/x")
    problem = raised.value.problem
    assert problem.origin == f"{team.root / 'index.yaml'}:4:5"  # the entry's file key
    assert problem.message == "team-a:exp/x@1: published/exp/x/1.yaml resolves outside the source"


# --- the parts a version was composed from, recorded in its index entry ------------------------------
def test_a_publish_records_the_parts_composed_and_a_filter_or_page_reads_them(team, tmp_path):
    from registry.compose import compose
    from registry.sharing import listing
    from registry.sharing.site import collect

    recipe = compose("tiny/ddp/cpu")
    recipe.data["recipe"] = {**recipe.data["recipe"], "name": "exp/p"}
    made = versions.publish(recipe, team)
    parts = (("policy", "tiny"), ("backend", "ddp"), ("hardware", "cpu"))
    assert made.parts == parts and versions.versions(team, "exp/p")[0].parts == parts
    entry = yaml.safe_load((team.root / "index.yaml").read_text())["versions"]["exp/p"][0]
    assert entry["parts"] == {"policy": "tiny", "backend": "ddp", "hardware": "cpu"}
    assert listing.parts_of("team-a:exp/p@1") == dict(parts)
    page = collect._entry("team-a", "exp/p", 1, "published", "team-a:exp/p@1", None)
    assert page.axes == ("tiny", "ddp", "cpu")  # not the policy's type, "reference"
    # a version published before parts were recorded: named from its values, as well as they can
    del entry["parts"]
    (team.root / "index.yaml").write_text(yaml.safe_dump({"versions": {"exp/p": [entry]}}, sort_keys=False))
    assert listing.parts_of("team-a:exp/p@1") == {"policy": "reference", "backend": "ddp", "hardware": "cpu"}
    assert listing.parts_of("team-a:exp/none@1") is None  # does not compose


@pytest.mark.parametrize(
    "parts", [["tiny"], {"policy": ""}, {"policy": 3}, {"team": "x"}, {"policy": "a/b"}, {"policy": "t:x"}]
)
def test_an_index_entrys_parts_must_name_a_part_per_axis(team, parts):
    entry = {**ENTRY, "parts": parts}
    (team.root / "index.yaml").write_text(yaml.safe_dump({"versions": {"exp/x": [entry]}}, sort_keys=False))
    with pytest.raises(RecipeError) as raised:
        versions.index(team)
    assert raised.value.problem.message == (
        f"malformed index.yaml: exp/x@1: parts {parts!r} is not a mapping of axes to part names"
    )


def test_a_version_recording_some_parts_names_the_others_from_its_values(team):
    from registry.compose import compose
    from registry.sharing import listing

    recipe = compose("tiny/ddp/cpu")
    recipe.data["recipe"] = {**recipe.data["recipe"], "name": "exp/q"}
    recipe.inputs = [p for p in recipe.inputs if p.parent.name != "backend"]  # its backend set inline
    versions.publish(recipe, team)
    assert listing.parts_of("team-a:exp/q@1") == {"policy": "tiny", "backend": "ddp", "hardware": "cpu"}
    assert listing._extends_parts("team-a:exp/q@1", {"policy": None, "backend": "ddp", "hardware": None})


def test_a_working_recipe_is_filtered_by_its_part_files_only(team):
    from registry.sharing import listing

    (team.root / "exp").mkdir()
    (team.root / "exp" / "flat.yaml").write_text("policy: {type: reference}\nhardware: {gpus_per_node: 0}\n")
    assert listing.parts_of("exp/flat") == {}  # values are not parts: only a published file's are read
    assert not listing._extends_parts("exp/flat", {"policy": "reference", "backend": None, "hardware": None})


def test_published_files_an_emptied_index_entry_lost_are_still_said(team, monkeypatch):
    from registry.sharing import listing

    monkeypatch.setenv("XDG_CACHE_HOME", str(team.root.parent / "cache"))
    (team.root / "published" / "exp" / "y").mkdir(parents=True)
    (team.root / "published" / "exp" / "y" / "1.yaml").write_text("recipe: {name: exp/y}\n")
    (team.root / "index.yaml").write_text("versions: {exp/y: []}\n")
    rows, _ = listing.entries(dict.fromkeys(("policy", "backend", "hardware")), everything=True)
    [row] = [e for e in rows if e.name == "exp/y"]
    assert (row.source, row.status, row.reasons[0][0]) == ("team-a", "invalid", "index-missing")


def test_a_filter_lists_a_published_version_by_the_parts_it_recorded(team, tmp_path, monkeypatch):
    """A published file holds resolved values and no part files: `recipe list --policy P` reads
    the parts its index entry records."""
    from registry.compose import compose
    from registry.sharing import listing

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    recipe = compose("tiny/ddp/cpu")
    recipe.data["recipe"] = {**recipe.data["recipe"], "name": "exp/pub"}
    versions.publish(recipe, team)
    for filters, listed in (
        ({"policy": "tiny", "backend": "ddp", "hardware": "cpu"}, True),
        ({"policy": "tiny", "backend": None, "hardware": None}, True),
        ({"policy": None, "backend": "zero2", "hardware": None}, False),
        ({"policy": None, "backend": None, "hardware": "8xA100"}, False),
    ):
        rows, _ = listing.entries(filters)
        assert ("exp/pub" in [e.name for e in rows]) is listed, filters


def test_a_name_the_index_lists_without_versions_is_no_recipe(tmp_path, monkeypatch):
    from registry.sharing import listing

    team = tmp_path / "team"
    team.mkdir()
    (team / "index.yaml").write_text("versions: {exp/y: []}\n")
    monkeypatch.setenv("RECIPE_PATH", f"team-a={team}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rows, _ = listing.entries(dict.fromkeys(("policy", "backend", "hardware")), everything=True)
    assert "exp/y" not in [e.name for e in rows] and rows  # not an untuned cell of parts policy/exp, backend/y
