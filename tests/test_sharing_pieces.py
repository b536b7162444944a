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

    monkeypatch.setattr(trust, "changed", lambda source, entries: [])
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
