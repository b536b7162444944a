"""Pieces of sharing read by value in-process: `recipe cp` of a cell that has no file of its own,
a write that fails said by its reason, and the catalog's refusal to overwrite pages it did not
write."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.errors import RecipeError
from registry.sharing import binding, copying, site


def test_a_copy_of_a_cell_without_a_tuned_file_is_its_extends_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, name = copying.copy("tiny/ddp/8xA100", "mine.yaml", force=False)
    text = path.read_text()
    assert path == Path("mine.yaml") and name == "mine"
    assert text.endswith("extends: [tiny/ddp/8xA100]\n")  # no settings of its own to carry


def _full_disk(path, text):
    raise OSError(28, "No space left on device")


def test_a_write_that_fails_is_said_by_its_reason(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(copying, "write_atomic", _full_disk)
    with pytest.raises(RecipeError) as raised:
        copying.copy("tiny/ddp/cpu", "mine.yaml", force=False)
    assert str(raised.value) == "mine.yaml: cannot write the copy: No space left on device"
    monkeypatch.setattr(binding, "write_atomic", _full_disk)
    with pytest.raises(RecipeError) as raised:
        binding.write_schema(tmp_path / "schema.json")
    assert str(raised.value) == f"{tmp_path / 'schema.json'}: cannot write the schema: No space left on device"


def test_pages_the_catalog_did_not_write_are_not_overwritten_and_counted(tmp_path):
    out = tmp_path / "site"
    out.mkdir()
    (out / site.INDEX).write_text("mine")
    with pytest.raises(RecipeError) as raised:
        site.build(out)
    assert str(raised.value) == (
        f"{out / site.INDEX}: exists and was not written by recipe catalog; not overwritten (hint: -o a new or empty folder)"
    )
    assert [p.name for p in out.iterdir()] == [site.INDEX] and (out / site.INDEX).read_text() == "mine"


# --- the catalog's pages, piece by piece ------------------------------------------------------------
def test_the_line_chart_ticks_its_low_middle_and_high_in_the_first_colour():
    import re

    from registry.sharing.site import svg

    chart = svg.line([("@1", 10.0), ("@2", 20.0)], "samples/s")
    assert re.findall(r'text-anchor="end">([^<]*)<', chart) == ["0.0", "10.0", "20.0"]  # 0 is always on the axis
    assert re.findall(r'<circle [^>]*fill="([^"]+)"', chart) == [svg.PALETTE[0]] * 2


def test_the_bar_chart_is_as_tall_as_its_rows_and_the_total():
    from registry.sharing.site import svg

    chart = svg.bars([("weights", 1.0), ("activations", 2.0)], 4.0)
    assert 'height="126" viewBox="0 0 640 126"' in chart  # (2 rows + total + gap) x 24 + 30


def test_a_pages_head_sets_the_viewport():
    from registry.sharing.site import pages

    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in pages.document("t", "b")


def test_values_are_rendered_by_their_type_and_found_at_their_nearest_origin(monkeypatch):
    from types import SimpleNamespace

    from registry.sharing.site import pages

    monkeypatch.setattr(pages, "_SCALARS", {})
    assert [pages._scalar(v) for v in (1, True, 1.0, None, "1")] == ["1", "true", "1.0", "null", "'1'"]
    data = {"a": {"b": {"c": 1}}, "d": 2}
    origins = {("a", "b"): "part.yaml:4:3"}
    entry = SimpleNamespace(recipe=SimpleNamespace(data=data, origins=origins), target="x")
    html = pages._values(entry)
    assert '<td class="mono">a.b.c</td><td class="mono">1</td><td class="origin mono">part.yaml:4:3</td>' in html
    assert '<td class="mono">d</td><td class="mono">2</td><td class="origin mono">composed</td>' in html
    assert '<table id="values"><tr><th>key</th><th>value</th><th>set at (file:line:column)</th></tr>' in html


def test_a_recipe_composed_from_parts_is_filed_under_those_parts(tmp_path):
    from registry.compose import compose
    from registry.sharing.site import collect

    recipe = tmp_path / "r.yaml"
    recipe.write_text("extends: [policy/pi07, backend/zero2, hardware/8xA100]\n")
    assert collect._axes(None, compose(str(recipe))) == ("pi07", "zero2", "8xA100")


def _entry(**fields):
    from registry.sharing.site.collect import Entry

    return Entry(
        **{"source": "team-a", "name": "exp/a", "version": None, "kind": "free-standing", "target": "t", **fields}
    )


def test_a_working_recipes_results_are_labelled_by_date_with_every_column():
    from registry.sharing.site import pages

    results = [
        {"date": "2026-11-01", "samples_per_s": 12.5, "memory_fraction": 0.8, "hardware": "8xA100"},
        {"samples_per_s": 13.0},
    ]
    html = pages._results(_entry(results=results))
    assert "<table><tr><th>measurement</th><th>date</th><th>samples/s</th><th>memory</th><th>hardware</th>" in html
    assert (
        '<tr><td>2026-11-01</td><td>2026-11-01</td><td class="num">12.5</td><td class="num">80%</td>'
        "<td>8xA100</td>" in html
    )
    assert '<tr><td>#2</td><td></td><td class="num">13.0</td><td class="num"></td>' in html


def test_the_estimate_table_names_each_part_and_a_recipe_with_nothing_to_estimate_says_why():
    from registry.sharing.site import pages

    estimate = {
        "breakdown": {"weights": 1.0, "activations": 2.5},
        "describe": "ZeRO-2 over 8 ranks",
        "micro_batch_size": 4,
        "phase": "backward",
        "capacity_gib": 80.0,
        "total_gib": 3.5,
        "fraction": 0.05,
        "allocated_gib": 3.0,
        "reserved_gib": 3.5,
        "per_sample_gib": 0.5,
        "largest_micro_batch": 90,
        "largest_under_90": 80,
    }
    html = pages._estimate(_entry(estimate=estimate))
    assert (
        '<tr><td>weights</td><td class="num">1.00</td></tr><tr><td>activations</td><td class="num">2.50</td></tr>'
        in html
    )
    said = pages._estimate(_entry(estimate_note="runs on CPU"))
    assert said.endswith("<p>runs on CPU</p>")


def test_a_version_whose_neighbour_could_not_be_composed_has_no_diff():
    from registry.sharing.site import pages

    first = _entry(version=1)
    second = _entry(version=2, previous=first)
    first.siblings = second.siblings = [first, second]
    assert pages._versions(second).endswith("<p>One side could not be composed, so there is no diff.</p>")


def test_updating_a_directory_source_says_there_is_nothing_to_fetch(tmp_path, monkeypatch):
    from registry.sharing import manage

    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "sources.yaml"))
    (tmp_path / "team-a").mkdir()
    manage.add("team-a", str(tmp_path / "team-a"))
    assert manage.update(["team-a"]) == ["team-a: a directory, nothing to update"]


def test_a_cpu_recipe_in_the_catalog_says_why_it_has_no_estimate():
    from registry.compose import compose
    from registry.sharing.site import collect

    entry = _entry(recipe=compose("tiny/ddp/cpu"))
    collect._estimate(entry)
    assert entry.estimate is None
    assert entry.estimate_note == "runs on CPU or its policy declares no sizes (policy.memory): nothing to estimate"


def test_the_sources_file_says_what_it_is_and_a_bad_rules_scope_is_a_usage_error(tmp_path, monkeypatch):
    from registry.errors import Exit
    from registry.sharing import config, manage

    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "sources.yaml"))
    (tmp_path / "team-a").mkdir()
    manage.add("team-a", str(tmp_path / "team-a"))
    text = (tmp_path / "sources.yaml").read_text()
    assert text.startswith("# recipe sources, searched in this order after RECIPE_PATH; managed by `recipe source`\n")
    with pytest.raises(RecipeError) as raised:
        config.rules_everywhere({"name": "team-a", "rules": "all"})
    assert raised.value.exit_code == Exit.USAGE
    assert str(raised.value).endswith("source 'team-a': rules: 'all' is not one of own, everywhere")


def test_the_status_cache_is_keyed_on_the_packages_code(tmp_path, monkeypatch):
    """A changed module of registry/ (an edit, an upgrade) makes every kept status stale."""
    from registry.sharing import listing

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    before = listing._StatusCache().key
    stamp = listing._stamp
    module = str(Path(listing.__file__).resolve())
    monkeypatch.setattr(listing, "_stamp", lambda path: "edited" if str(path) == module else stamp(path))
    assert listing._StatusCache().key != before


def test_a_source_name_that_is_not_allowed_is_said(tmp_path, monkeypatch):
    from registry.sharing import sources

    (tmp_path / "x").mkdir()
    monkeypatch.setenv("RECIPE_PATH", f"bad name={tmp_path / 'x'}")
    with pytest.raises(RecipeError) as raised:
        sources.all_sources()
    assert str(raised.value).endswith("source name 'bad name' is not allowed (letters, digits, - and _; not 'bundled')")


def test_a_version_that_cannot_be_remembered_is_a_note_on_stderr(monkeypatch, capsys):
    from types import SimpleNamespace

    from registry.sharing import trust

    def read_only(source, entries, replace=False):
        raise RecipeError("known-versions.jsonl: read-only file system")

    monkeypatch.setattr(trust, "changed", lambda source, entries, whole=False, remembered=None: [])
    monkeypatch.setattr(trust, "known", dict)
    monkeypatch.setattr(trust, "remember", read_only)
    source = SimpleNamespace(kind="path", name="team-a", root=Path("/nowhere"), location="/nowhere")
    version = SimpleNamespace(source=source, name="exp/a", number=1, sha256="0" * 64, qualified="team-a:exp/a@1")
    monkeypatch.setattr(trust, "place", lambda source: "/nowhere")
    trust.check(version)
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err == "note: known-versions.jsonl: read-only file system; team-a:exp/a@1 was not remembered\n"


def test_a_recipe_whose_index_cannot_be_read_is_listed_with_why(monkeypatch):
    from registry.sharing import listing, sources, versions

    def lost(name):
        raise RecipeError("team-a: index.yaml: not a mapping")

    monkeypatch.setattr(versions, "lookup", lost)
    [row] = listing._rows("exp/a", None, [sources.bundled()], False)
    assert (row.status, row.summary, row.source) == ("invalid", "team-a: index.yaml: not a mapping", "bundled")
    assert row.tuned is False  # a boolean in `recipe list --format json`, never null


def test_the_sources_file_lies_under_the_users_config_folder(tmp_path, monkeypatch):
    from registry.sharing import config

    monkeypatch.delenv("RECIPE_CONFIG", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.config_file() == tmp_path / ".config" / "recipe" / "sources.yaml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config.config_file() == tmp_path / "xdg" / "recipe" / "sources.yaml"


# --- git: identity, a repository without a commit, the publish lock's exclude line ----------------
def _repo(path: Path) -> Path:
    import subprocess

    path.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    return path


def test_a_users_own_git_identity_is_kept(tmp_path):
    import subprocess

    from registry.sharing import git

    repo = _repo(tmp_path / "repo")
    for key, value in (("user.name", "Ada"), ("user.email", "ada@example.com")):
        subprocess.run(["git", "config", key, value], cwd=repo, check=True)
    assert git._identity(repo) == {}  # both the author's and the committer's identity are git's own


def test_a_repository_without_a_commit_holds_no_commit(tmp_path):
    from registry.sharing import git

    repo = _repo(tmp_path / "repo")
    assert git.committed([repo / "not-yet.yaml"]) is None  # HEAD is "(initial)": nothing to name


@pytest.mark.parametrize(
    "before, after",
    [
        (None, "{lock}\n"),
        ("", "{lock}\n"),
        ("*.tmp\n", "*.tmp\n{lock}\n"),
        ("*.tmp", "*.tmp\n{lock}\n"),
        ("*.tmp\n{lock}\n", "*.tmp\n{lock}\n"),
    ],
)
def test_the_publish_lock_is_excluded_once_on_its_own_line(tmp_path, before, after):
    from registry.sharing import gitpublish, versions

    exclude = tmp_path / ".git" / "info" / "exclude"
    if before is not None:
        exclude.parent.mkdir(parents=True)
        exclude.write_text(before.format(lock=versions.LOCK))
    gitpublish._exclude_lock(tmp_path)
    assert exclude.read_text() == after.format(lock=versions.LOCK)


# --- listing: kinds, statuses and the status cache's key -------------------------------------------
def test_a_free_standing_recipe_is_not_tuned(tmp_path, monkeypatch):
    from registry.sharing import listing, sources

    team = tmp_path / "team"
    (team / "exp").mkdir(parents=True)
    (team / "exp" / "mine.yaml").write_text("extends: [tiny/ddp/cpu]\nrecipe: {name: exp/mine}\n")
    monkeypatch.setenv("RECIPE_PATH", f"team-a={team}")
    [row] = listing._rows("exp/mine", None, [s for s in sources.all_sources() if s.name == "team-a"], False)
    assert (row.tuned, row.kind, row.source) == (False, "free-standing", "team-a")


def test_a_recipe_with_only_warnings_is_said_so():
    from registry.sharing import listing

    status, reasons, files = listing._validated("pi07/fsdp/8xA100")
    assert (status, reasons) == ("warnings", []) and files


def test_the_status_cache_is_keyed_on_a_sources_catalog_files(tmp_path, monkeypatch):
    """The catalog's descriptions change what a row says: an edit of one makes kept statuses stale."""
    from registry.sharing import listing

    team = tmp_path / "team"
    (team / "catalog").mkdir(parents=True)
    entry = team / "catalog" / "notes.yaml"
    entry.write_text("a: 1\n")
    monkeypatch.setenv("RECIPE_PATH", f"team-a={team}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = listing._StatusCache().key
    entry.write_text("a: 22\n")
    assert listing._StatusCache().key != before


# --- sources: add, remove, update, winners ---------------------------------------------------------
def _changed(*numbers):
    from registry.sharing import trust

    return [trust.Changed("team-a", f"exp/x@{n}", f"{n}" * 64, f"{n + 1}" * 64) for n in numbers]


def test_a_directory_source_whose_versions_changed_is_refused_naming_the_folder(tmp_path, monkeypatch):
    from registry.sharing import manage, trust

    folder = tmp_path / "team"
    folder.mkdir()
    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "sources.yaml"))
    monkeypatch.setattr(
        trust,
        "changed",
        lambda source, offered, whole=False, remembered=None: _changed(1, 3) if source.location else [],
    )
    with pytest.raises(RecipeError) as raised:
        manage.add("team-a", str(folder))
    assert str(raised.value) == (
        f"cannot add team-a: 2 published version(s) differ from the ones this machine saw from {folder}: "
        "team-a:exp/x@1: sha256 222222222222 now, 111111111111 when first seen; "
        "team-a:exp/x@3: sha256 444444444444 now, 333333333333 when first seen"
    )


def test_removing_a_source_never_cloned_and_updating_unknown_ones(tmp_path, monkeypatch):
    from registry.sharing import config, manage

    folder = tmp_path / "team"
    folder.mkdir()
    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "sources.yaml"))
    monkeypatch.setenv("RECIPE_CACHE", str(tmp_path / "cache"))
    manage.add("team-a", str(folder))
    assert not (config.cache_dir() / "team-a").exists()  # a directory source has no clone to remove
    manage.remove("team-a")
    assert config.entries() == []
    with pytest.raises(RecipeError) as raised:
        manage.update(["team-z", "team-y"])
    assert str(raised.value) == "no source named team-y, team-z"


def test_a_hardware_part_in_two_sources_is_a_shadowed_name(tmp_path, monkeypatch):
    from registry.sharing import manage

    team = tmp_path / "team"
    (team / "hardware").mkdir(parents=True)
    (team / "hardware" / "8xA100.yaml").write_text("hardware: {gpus_per_node: 8}\n")
    monkeypatch.setenv("RECIPE_PATH", f"team-a={team}")
    assert ["hardware/8xA100", "team-a", "bundled"] in manage.winners()


def _remote_moved_on(monkeypatch) -> list:
    """A reading clone at aaa... whose remote is now at bbb...: the moves refresh makes, recorded."""
    from registry.sharing import git

    moved = []
    monkeypatch.setattr(git, "head", lambda clone: "a" * 40)
    monkeypatch.setattr(git, "fetch", lambda clone: None)
    monkeypatch.setattr(git, "rev", lambda clone, ref: "b" * 40)
    monkeypatch.setattr(git, "contains", lambda clone, old, new: True)
    monkeypatch.setattr(git, "move", lambda clone, commit: moved.append((clone, commit)))
    return moved


def test_a_remote_that_changed_two_seen_versions_names_both(tmp_path, monkeypatch):
    from registry.sharing import refresh, trust, versions

    moved = _remote_moved_on(monkeypatch)
    monkeypatch.setattr(versions, "hashes", lambda source: {})
    monkeypatch.setattr(trust, "changed", lambda source, offered, whole=False, remembered=None: _changed(1, 3))
    with pytest.raises(RecipeError) as raised:
        refresh.refresh("team-a", "file:///team.git", tmp_path)
    assert str(raised.value) == (
        "team-a: the remote changed 2 published version(s) this machine has seen: "
        "team-a:exp/x@1: sha256 222222222222 now, 111111111111 when first seen; "
        "team-a:exp/x@3: sha256 444444444444 now, 333333333333 when first seen; team-a stays at aaaaaaaaaaaa "
        "(hint: if deliberate, recipe source update team-a --accept exp/x@1 --accept exp/x@3)"
    )
    assert [commit for _, commit in moved] == ["b" * 40, "a" * 40]  # moved to look, then back


def test_a_sources_index_that_cannot_be_read_moves_the_clone_back(tmp_path, monkeypatch):
    from registry.sharing import refresh, versions

    moved = _remote_moved_on(monkeypatch)

    def unreadable(source):
        raise RecipeError("team-a: index.yaml: not a mapping")

    monkeypatch.setattr(versions, "hashes", unreadable)
    with pytest.raises(RecipeError) as raised:
        refresh.refresh("team-a", "file:///team.git", tmp_path)
    assert str(raised.value) == "team-a: index.yaml: not a mapping"
    assert moved == [(tmp_path, "b" * 40), (tmp_path, "a" * 40)]  # looked, then back where it was


# --- versions: an index that does not list what was published, a shipped version ------------------
def test_published_files_the_index_does_not_list_are_named_as_versions(tmp_path):
    from registry.sharing import sources, versions

    root = tmp_path / "team"
    (root / "published" / "exp" / "x").mkdir(parents=True)
    (root / "published" / "exp" / "x" / "2.yaml").write_text("recipe: {name: exp/x}\n")
    (root / versions.INDEX).write_text("versions: {}\n")
    found = versions._unlisted(sources.Source("team-a", root, "path", str(root)))
    assert found is not None
    assert found.problem.message == "source 'team-a' has published exp/x@2 but its index.yaml does not list them"


def test_a_shipped_version_is_named_in_its_history():
    from registry.sharing import versions

    [shipped] = versions.history("tiny/ddp/cpu")
    assert shipped.name == "tiny/ddp/cpu" and shipped.qualified == f"bundled:tiny/ddp/cpu@{shipped.number}"


@pytest.mark.parametrize("dest", ["team-a:mine", "mine@2"])
def test_a_copy_named_with_a_source_or_version_says_how_to_name_it(dest):
    with pytest.raises(RecipeError) as raised:
        copying.destination(dest, None)
    assert str(raised.value) == f"{dest}: a copy is named without a source or version (hint: --to SOURCE)"


def test_an_index_listing_a_version_twice_is_said_at_the_second_entry(tmp_path):
    from registry.sharing import sources, versions

    root = tmp_path / "team"
    root.mkdir()
    entry = "    - {{version: 1, file: published/exp/x/1.yaml, sha256: {}}}\n".format("0" * 64)
    (root / versions.INDEX).write_text("versions:\n  exp/x:\n" + entry + entry)
    with pytest.raises(RecipeError) as raised:
        versions.index(sources.Source("team-a", root, "path", str(root)))
    problem = raised.value.problem
    assert problem.origin == f"{root / versions.INDEX}:4:7"  # the second entry, not the file
    assert problem.message == "malformed index.yaml: exp/x@1 is listed twice"


def test_an_unreachable_directory_source_and_an_unknown_source_say_what_to_do(tmp_path, monkeypatch):
    from registry.names import parse
    from registry.sharing import sources

    gone, there = tmp_path / "gone", tmp_path / "there"
    there.mkdir()
    monkeypatch.setenv("RECIPE_PATH", f"team-a={gone}")
    with pytest.raises(RecipeError) as raised:
        sources.all_sources()
    assert str(raised.value) == f"source 'team-a': {gone} is not reachable here (hint: check the path)"
    monkeypatch.setenv("RECIPE_PATH", f"team-a={there}:team-b={there}")
    with pytest.raises(RecipeError) as raised:
        sources.candidates(parse("team-q:exp/x"))
    assert str(raised.value) == "unknown source 'team-q' in team-q:exp/x (known: team-a, team-b, bundled)"
