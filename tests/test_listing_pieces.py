"""registry/sharing/listing.py read by value, in-process: which rows `recipe list` gives for tuned,
free-standing, untuned and published recipes under each filter, every field of each row, their
order, how many untuned cells are hidden, and the status cache (where it lives, its key, when its
entries are trusted, when it is written)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from itertools import product
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from registry.compose import compose
from registry.errors import RecipeError
from registry.names import AXES, Name
from registry.sharing import listing, sources, versions
from registry.sharing.listing import Entry

BUNDLED = ROOT / "recipes"
UNFILTERED = dict.fromkeys(AXES)  # what the CLI passes when no filter is given
CELLS = {"/".join(c) for c in product(*(sources.bundled().parts(a) for a in AXES))}
TUNED = ["/".join(c) for c in sources.bundled().overlays()]
TINY = [BUNDLED / f for f in ("base.yaml", "policy/tiny.yaml", "backend/ddp.yaml", "hardware/cpu.yaml")]
TINY_INPUTS = [*TINY, BUNDLED / "tiny/ddp/cpu.yaml"]  # what tiny/ddp/cpu composes, in order
MINE = "extends: [tiny/ddp/cpu]\nrecipe: {name: exp/mine, summary: Mine, tags: [fast]}\n"
HINT = "(hint: restore index.yaml (e.g. git checkout -- index.yaml in the source); versions are never guessed)"
TAGS = [("pattern", "'Fast' does not match '^[a-z0-9][a-z0-9-]*$'"), ("type", "3 is not of type string")]


@pytest.fixture
def teams(tmp_path, monkeypatch):
    """teams({"team-a": {"exp/mine.yaml": TEXT}, ...}): directory sources searched in that order
    before the bundled recipes; returns their roots."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "sources.yaml"))

    def make(files: dict[str, dict[str, str]]) -> dict[str, Path]:
        roots = {}
        for team, texts in files.items():
            roots[team] = tmp_path / team
            roots[team].mkdir()
            for rel, text in texts.items():
                write(roots[team] / rel, text)
        monkeypatch.setenv("RECIPE_PATH", ":".join(f"{t}={r}" for t, r in roots.items()))
        return roots

    return make


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def row(name, source, **fields) -> Entry:
    """The row expected of a recipe: what the fields default to for a free-standing valid one."""
    defaults = {"version": None, "tuned": False, "summary": "", "target": name, "status": "valid"}
    return Entry(name=name, source=source, **{"path": name.split(":")[-1], **defaults, **fields})


def shipped(name, **fields) -> Entry:
    """A bundled overlay's row, its meta read from its file here rather than by listing.py."""
    path = name.split(":")[-1]
    meta = yaml.safe_load((BUNDLED / f"{path}.yaml").read_text())["recipe"]
    status = "warnings" if path == "pi07/fsdp/8xA100" else "valid"
    fields = {"status": status, "tags": meta["tags"], "cell": tuple(path.split("/")), **fields}
    return row(name, "bundled", version=meta["version"], tuned=True, summary=meta["summary"], **fields)


def stat4(path) -> list[int]:
    st = os.stat(path)
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_size]


def refusal(target) -> RecipeError:
    with pytest.raises(RecipeError) as raised:
        compose(target)
    return raised.value


# --- rows -------------------------------------------------------------------------------------
def test_an_entry_is_published_before_cell_before_tuned_before_free_standing():
    cell = ("tiny", "ddp", "cpu")
    assert Entry("n", 1, "s", True, "", cell=cell, published=True, parts_from=("s",)).kind == "published"
    assert Entry("n", None, "s", False, "", cell=cell, parts_from=("s",)).kind == "cell"
    assert Entry("n", None, "s", True, "", cell=cell).kind == "tuned"
    assert Entry("n", None, "s", False, "").kind == "free-standing"


def test_matching_case_folds_the_name_summary_and_tags_but_not_the_source():
    e = Entry("exp/Mine", None, "team-a", False, "Straße speed", ["Fast"])
    said = [e.matches(t) for t in ("MINE", "STRASSE", "strAßE", "speed", "fAST", "team-a", "slow")]
    assert said == [True] * 5 + [False] * 2  # ß folds to ss on both sides


def test_a_free_standing_recipe_is_listed_under_its_source_untuned_after_every_tuned_cell(teams):
    teams(
        {
            "team-a": {
                "exp/mine.yaml": MINE,
                "exp/broken.yaml": "extends: [nope/x]\n",
                "tiny/ddp/2x1.yaml": "recipe: {summary: ours, tags: [team, 7]}\n",  # a team overlay of an untuned cell
            }
        }
    )
    rows, hidden = listing.entries(UNFILTERED)
    ours = row("tiny/ddp/2x1", "team-a", tuned=True, summary="ours", tags=["team", "7"], cell=("tiny", "ddp", "2x1"))
    ours.status, ours.reasons = "invalid", [("type", "7 is not of type string")]  # tags read as text, judged as written
    broken = row(
        "exp/broken", "team-a", status="invalid", reasons=[("unknown-name", refusal("exp/broken").problem.message)]
    )
    tuned = sorted([*(shipped(n) for n in TUNED), ours], key=lambda e: e.name)
    assert rows == [*tuned, broken, row("exp/mine", "team-a", summary="Mine", tags=["fast"])]
    assert hidden == len(CELLS) - len(TUNED) - 1  # the team's overlay is a tuned cell now, not a hidden one
    rows, hidden = listing.entries(UNFILTERED, tuned_only=True)
    assert (rows, hidden) == (tuned, 0)  # nothing hidden: untuned cells are not asked for


def test_a_filter_lists_its_untuned_cells_and_the_free_standing_recipes_that_compose_its_parts(teams):
    teams(
        {
            "team-a": {
                "exp/mine.yaml": MINE,
                "exp/other.yaml": "extends: [pi07/zero2/8xA100]\n",
                "exp/broken.yaml": "extends: [nope/x]\n",  # composes nothing: no parts to match
                "tiny/ddp/2x1.yaml": "recipe: {summary: ours}\n",
            }
        }
    )
    rows, hidden = listing.entries({"policy": "tiny", "backend": "ddp", "hardware": None})
    untuned = [f"tiny/ddp/{h}" for h in sources.bundled().parts("hardware") if h not in ("2x1", "cpu")]
    assert hidden == 0 and [e.name for e in rows] == ["tiny/ddp/2x1", "tiny/ddp/cpu", "exp/mine", *untuned]
    summary = "composed from parts policy/tiny, backend/ddp, hardware/1xA100"
    cell = ("tiny", "ddp", "1xA100")
    assert rows[3] == row("tiny/ddp/1xA100", "bundled", summary=summary, cell=cell, parts_from=("bundled",))
    rows, hidden = listing.entries({"policy": "tiny", "backend": "ddp", "hardware": None}, tuned_only=True)
    assert ([e.name for e in rows], hidden) == (["tiny/ddp/2x1", "tiny/ddp/cpu"], 0)
    rows, _ = listing.entries({"policy": None, "backend": None, "hardware": "cpu"})
    cells = {f"{p}/{b}/cpu" for p in sources.bundled().parts("policy") for b in sources.bundled().parts("backend")}
    assert sorted(e.name for e in rows) == sorted([*cells, "exp/mine"])


def test_everything_lists_every_cell_with_nothing_hidden(teams, monkeypatch):
    teams({"team-a": {"exp/mine.yaml": MINE}})
    monkeypatch.setattr(listing, "_fill_status", lambda rows: None)  # validating 1,000 cells is not the point
    rows, hidden = listing.entries(UNFILTERED, everything=True)
    assert hidden == 0 and sorted(e.name for e in rows) == sorted([*CELLS, "exp/mine"])
    assert [e.name for e in listing.entries(UNFILTERED, tuned_only=True, everything=True)[0]] == TUNED


def test_every_recipe_is_every_cell_and_version_read_under_pinned_sources(teams, monkeypatch):
    teams({"team-a": {"exp/mine.yaml": MINE, "tiny/ddp/cpu.yaml": "recipe: {summary: ours}\n"}})
    calls, found = [], listing._found

    def spy(*args, **kwargs):
        calls.append(len(sources._pinned))
        return found(*args, **kwargs)

    monkeypatch.setattr(listing, "_found", spy)
    rows = listing.every_recipe()
    assert calls == [1]  # one read of the sources for the whole walk
    names = [e.name for e in rows]
    assert sorted(names) == sorted([*CELLS, "exp/mine", "bundled:tiny/ddp/cpu"])
    assert {e.status for e in rows} == {""}  # status is the caller's to fill in
    assert names.index("bundled:tiny/ddp/cpu") == names.index("tiny/ddp/cpu") + 1  # shadowed, under its winner
    assert [n for n in names if ":" not in n] == sorted(n for n in names if ":" not in n)


def test_a_recipe_under_a_cell_path_or_named_like_one_is_free_standing(teams):
    teams({"team-a": {"tiny/foo/bar.yaml": MINE, "tiny/ddp/cpu/extra.yaml": MINE}})
    rows, _ = listing._found({"policy": "tiny", "backend": "ddp", "hardware": "cpu"})
    mine = {"summary": "Mine", "tags": ["fast"], "status": ""}
    assert [e for e in rows if e.source == "team-a"] == [
        row("tiny/ddp/cpu/extra", "team-a", **mine),
        row("tiny/foo/bar", "team-a", **mine),
    ]


def test_an_untuned_cell_names_the_sources_of_its_parts_in_axis_order_once_each(teams):
    teams({"team-a": {"policy/mypol.yaml": "recipe: {summary: p}\n", "hardware/myhw.yaml": "recipe: {}\n"}})
    cell = ("mypol", "ddp", "myhw")
    summary = "composed from parts policy/mypol, backend/ddp, hardware/myhw"
    expected = row("mypol/ddp/myhw", "team-a+bundled", summary=summary, cell=cell, parts_from=("team-a", "bundled"))
    expected.status = ""  # filled in by entries()
    assert listing._rows("mypol/ddp/myhw", cell, [], True) == [expected]
    assert listing._source_of(Name(("policy", "nope"))) == "-"


def test_every_version_lists_other_versions_and_shadowed_sources_in_order(teams):
    ours, x = "recipe: {summary: ours}\n", "extends: [tiny/ddp/cpu]\nrecipe: {summary: b}\n"
    roots = teams(
        {
            "team-a": {"tiny/ddp/cpu.yaml": ours, "exp/y.yaml": "extends: [tiny/ddp/cpu]\nrecipe: {summary: y}\n"},
            "team-b": {"tiny/ddp/cpu.yaml": ours, "exp/x.yaml": x},
        }
    )
    a, b = sources.all_sources()[:2]
    first, second, y = (
        versions.publish(compose("tiny/zero2/cpu", [f"recipe.name=exp/{n}", f"recipe.summary={s}"]), to)
        for n, s, to in (("x", "first", a), ("x", "second", a), ("y", "by-b", b))
    )
    zero2 = versions.publish(compose("tiny/zero2/cpu"), a)  # the bundled file declares version 1 too
    write(roots["team-b"] / "published/tiny/ddp/cpu/1.yaml", "x: 1\n")  # versions team-b has lost the index of
    lost = "source 'team-b' has published tiny/ddp/cpu@1 but its index.yaml does not list them"
    cpu, smoke, z2 = ("tiny", "ddp", "cpu"), ["cpu", "smoke"], shipped("bundled:tiny/zero2/cpu")
    newest = [
        row("tiny/ddp/cpu", "team-a", tuned=True, summary="ours", cell=cpu, shadows=["team-b", "bundled"]),
        replace(z2, name="tiny/zero2/cpu", source="team-a", shadows=["bundled"], published=True, date=zero2.date),
        row("exp/x", "team-a", version=2, summary="second", tags=smoke, shadows=["team-b"], target="exp/x@2"),
        row("exp/y", "team-a", summary="y", shadows=["team-b"]),  # a file wins over a later source's versions
    ]
    newest[1].target = "team-a:tiny/zero2/cpu@1"  # the bundled file is version 1 too: a bare pin is ambiguous
    newest[2].published, newest[2].date = True, second.date
    paths = ("tiny/ddp/cpu", "tiny/zero2/cpu", "exp/x", "exp/y")
    assert [e for e in listing.entries(UNFILTERED)[0] if e.path in paths] == newest
    broken = row(
        "team-b:tiny/ddp/cpu", "team-b", tuned=True, summary=f"team-b/index.yaml: error[index-missing] {lost} {HINT}"
    )
    broken.status, broken.reasons, broken.target, broken.cell = "invalid", [("index-missing", lost)], "", cpu
    older = row("exp/x", "team-a", version=1, summary="first", tags=smoke, target="exp/x@1", published=True)
    theirs = row("team-b:exp/y", "team-b", version=1, summary="by-b", tags=smoke, target="team-b:exp/y@1")
    older.date, theirs.published, theirs.date = first.date, True, y.date
    assert [e for e in listing.entries(UNFILTERED, every_version=True)[0] if e.path in paths] == [
        newest[0],
        shipped("bundled:tiny/ddp/cpu"),
        broken,  # a version never read sorts as version 0, after the versioned ones
        newest[1],
        z2,
        newest[2],
        older,
        row("team-b:exp/x", "team-b", summary="b"),
        newest[3],
        theirs,
    ]


def test_a_name_whose_versions_cannot_be_read_is_an_invalid_row_not_a_failure(teams):
    lost = {"published/tiny/ddp/cpu/1.yaml": "x: 1\n", "published/tiny/ddp/2x1/1.yaml": "x: 1\n"}
    roots = teams({"team-a": {"tiny/ddp/cpu.yaml": "recipe: {summary: ours}\n", **lost}})
    assert not (roots["team-a"] / "index.yaml").exists()
    rows, _ = listing.entries({"policy": "tiny", "backend": "ddp", "hardware": None})
    said = {e.name: e for e in rows}
    # the source whose index is lost is named, whether or not it has a file of the name
    for hardware, source, tuned in (("cpu", "team-a", True), ("2x1", "team-a", False)):
        name = f"tiny/ddp/{hardware}"
        lost = f"source 'team-a' has published {name}@1 but its index.yaml is missing"
        summary = f"team-a/index.yaml: error[index-missing] {lost} {HINT}"
        expected = row(name, source, tuned=tuned, summary=summary, status="invalid", reasons=[("index-missing", lost)])
        expected.cell = ("tiny", "ddp", hardware)
        assert said[name] == expected


def test_grep_and_valid_only_narrow_the_rows(teams):
    teams({"team-a": {"exp/mine.yaml": MINE, "exp/broken.yaml": "extends: [nope/x]\n"}})
    rows, hidden = listing.entries(UNFILTERED, grep="MINE")
    assert (rows, hidden) == ([row("exp/mine", "team-a", summary="Mine", tags=["fast"])], len(CELLS) - len(TUNED))
    assert [e.name for e in listing.entries(UNFILTERED, grep="smoke")[0]] == [n for n in TUNED if "cpu" in n]
    assert [e.name for e in listing.entries(UNFILTERED, grep="")[0]] == [*TUNED, "exp/broken", "exp/mine"]
    assert [e.name for e in listing.entries(UNFILTERED, valid_only=True)[0]] == [*TUNED, "exp/mine"]  # warnings kept


def test_a_pin_names_its_source_only_where_another_source_has_that_number(teams):
    teams({"team-a": {}})
    a = sources.all_sources()[0]
    versions.publish(compose("tiny/zero2/cpu", ["recipe.name=exp/x"]), a)
    assert listing._pinned("exp/x", a, 1) == "exp/x@1"
    versions.publish(compose("tiny/zero2/cpu"), a)
    assert listing._pinned("tiny/zero2/cpu", a, 1) == "team-a:tiny/zero2/cpu@1"


def test_an_entry_reads_summary_and_tags_from_its_file_as_text(tmp_path):
    odd = tmp_path / "odd.yaml"
    odd.write_text("recipe: {summary: 42, tags: [1, b]}\n")
    assert listing._entry("team-b:exp/x", odd, 3, "team-b", True, ["s"], ("c",)) == Entry(
        "team-b:exp/x", 3, "team-b", True, "42", ["1", "b"], ["s"], cell=("c",), path="exp/x"
    )
    odd.write_text("recipe: {tags: fast}\n")  # tags that are no list: none
    assert listing._entry("exp/x", odd, None, "a", False, [], None) == Entry(
        "exp/x", None, "a", False, "", path="exp/x"
    )
    assert listing._entry("exp/x", None, None, "a", False, [], None) == Entry(
        "exp/x", None, "a", False, "", path="exp/x"
    )


def test_meta_is_the_recipe_block_and_nothing_for_an_odd_file(tmp_path):
    for i, text in enumerate(("", "- a\n", "a: [\n", "recipe: [1]\n", "recipe: 3\n", "train: {}\n")):
        write(tmp_path / f"{i}.yaml", text)
        assert listing.meta_of(tmp_path / f"{i}.yaml") == {}, text
    write(tmp_path / "good.yaml", "recipe: {summary: s, version: 2}\n")
    assert listing.meta_of(tmp_path / "good.yaml") == {"summary": "s", "version": 2}


def test_parts_are_every_axis_part_with_the_winning_files_summary(teams):
    teams({"team-a": {"policy/act.yaml": "recipe: {summary: ours}\n", "policy/zzz.yaml": "trainer: {}\n"}})
    said = {("policy", "act"): "ours", ("policy", "zzz"): ""}  # the team's act wins; zzz has no summary
    expected = []
    for axis in AXES:
        for part in sorted({*sources.bundled().parts(axis), *(["zzz"] if axis == "policy" else [])}):
            if (axis, part) not in said:
                said[axis, part] = yaml.safe_load((BUNDLED / axis / f"{part}.yaml").read_text())["recipe"]["summary"]
            expected.append([axis, part, said[axis, part]])
    assert listing.parts() == expected


def test_extends_parts_reads_the_parts_composed_from_source_roots_only(teams, tmp_path):
    teams(
        {
            "team-a": {
                "exp/mine.yaml": MINE,
                "exp/policy/tiny.yaml": "recipe: {summary: a folder named policy, not a part}\n",
                "exp/fake.yaml": "extends: [exp/policy/tiny]\n",
                "exp/broken.yaml": "extends: [nope/x]\n",
            }
        }
    )
    tiny = {"policy": "tiny", "backend": None, "hardware": "cpu"}
    assert listing._extends_parts("exp/mine", tiny) and listing._extends_parts("exp/mine", UNFILTERED)
    assert not listing._extends_parts("exp/mine", {"policy": "tiny", "backend": "zero2", "hardware": None})
    assert not listing._extends_parts("exp/fake", {"policy": "tiny"}) and listing._extends_parts("exp/fake", {})
    assert not listing._extends_parts("exp/broken", {})


def test_parts_of_a_source_reached_through_a_symlink_are_still_its_parts(tmp_path, monkeypatch):
    real = tmp_path / "real"
    write(real / "policy/mypol.yaml", "extends: [policy/tiny]\n")
    write(real / "exp/mine.yaml", "extends: [mypol/ddp/cpu]\n")
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "sources.yaml").write_text(f"sources: [{{name: team-c, path: {tmp_path / 'link'}}}]\n")
    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "sources.yaml"))  # a config path is not resolved
    assert listing._extends_parts("exp/mine", {"policy": "mypol"})


# --- status -----------------------------------------------------------------------------------
def test_validated_says_valid_warnings_or_invalid_with_each_error_once_in_order(tmp_path):
    assert listing._validated("tiny/ddp/cpu") == ("valid", [], TINY_INPUTS)
    assert listing._validated("pi07/fsdp/8xA100")[:2] == ("warnings", [])
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: [pi07/fsdp/8xA100]\nrecipe: {tags: [3, Fast, 3]}\n")  # errors beside warnings
    status, reasons, inputs = listing._validated(str(bad))
    assert (status, reasons, inputs[-1]) == ("invalid", TAGS[::-1], bad)  # as validation found them, once each
    assert listing._validated("nope/ddp/cpu") == ("invalid", [("compose", str(refusal("nope/ddp/cpu")))], None)


def test_a_failure_is_its_problem_or_else_the_message():
    assert listing._failure(RecipeError.at("f.yaml", "rule-x", "why")) == [("rule-x", "why")]
    assert listing._failure(RecipeError("plain")) == [("compose", "plain")]


def test_a_stamp_is_mtime_ctime_inode_and_size_and_zeros_when_missing(tmp_path):
    (tmp_path / "f").write_text("abc")
    os.utime(tmp_path / "f", ns=(1, 1))  # a time put back: the ctime still moved
    st = os.stat(tmp_path / "f")
    assert listing._stamp(tmp_path / "f") == [1, st.st_ctime_ns, st.st_ino, 3] and st.st_ctime_ns != 1
    assert listing._stamp(tmp_path / "missing") == listing._stamp(tmp_path / "f" / "x") == [0, 0, 0, 0]


def test_the_cache_is_named_by_its_sources_and_holds_what_each_entry_composed(teams, tmp_path, monkeypatch):
    import hashlib

    roots = teams({"team-a": {}})
    where = hashlib.sha256(f"team-a={roots['team-a']}\0bundled={BUNDLED}".encode()).hexdigest()[:16]
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert listing._StatusCache().path == tmp_path / "home" / ".cache" / "recipe" / "status" / f"{where}.json"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = listing._StatusCache()
    assert cache.path == tmp_path / "cache" / "recipe" / "status" / f"{where}.json"
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: [tiny/ddp/cpu]\nrecipe: {tags: [Fast, 3]}\n")
    assert cache.status("tiny/ddp/cpu") == ("valid", []) and cache.status(str(bad)) == ("invalid", TAGS)
    cache.save()
    assert json.loads(cache.path.read_text()) == {
        "key": cache.key,
        "entries": {
            "tiny/ddp/cpu": {"status": "valid", "reasons": [], "inputs": [[str(p), stat4(p)] for p in TINY_INPUTS]},
            str(bad): {
                "status": "invalid",
                "reasons": [list(r) for r in TAGS],
                "inputs": [[str(p), stat4(p)] for p in [*TINY_INPUTS, bad]],
            },
        },
    }
    assert listing._StatusCache().entries == json.loads(cache.path.read_text())["entries"]


def test_a_cache_of_another_key_or_shape_or_unreadable_is_ignored(teams):
    teams({"team-a": {}})
    cache = listing._StatusCache()
    good = {"tiny/ddp/cpu": {"status": "invalid", "reasons": [], "inputs": []}}
    for text in (
        json.dumps({"key": "other", "entries": good}),
        json.dumps({"key": cache.key, "entries": list(good)}),
        json.dumps([cache.key]),
        "not json",
    ):
        write(cache.path, text)
        assert listing._StatusCache().entries == {}, text
    cache.path.unlink()
    cache.path.mkdir()  # unreadable
    assert listing._StatusCache().entries == {}


def test_a_kept_status_is_trusted_only_when_whole_and_its_inputs_unchanged(teams):
    teams({"team-a": {}})
    key, path = listing._StatusCache().key, listing._StatusCache().path
    inputs = [[str(p), stat4(p)] for p in TINY_INPUTS]

    def said(**kept):
        write(path, json.dumps({"key": key, "entries": {"tiny/ddp/cpu": {"reasons": [], "inputs": inputs, **kept}}}))
        return listing._StatusCache().status("tiny/ddp/cpu")

    for status in ("valid", "warnings", "invalid"):
        assert said(status=status, reasons=[["r", 5]]) == (status, [("r", "5")])  # as kept, as text
    fresh = ("valid", [])
    assert said(status="bogus") == fresh
    assert said(status="invalid", inputs=[]) == fresh
    assert said(status="invalid", reasons={}) == fresh
    assert said(status="invalid", reasons=["ab"]) == fresh
    assert said(status="invalid", reasons=[["a", "b", "c"]]) == fresh
    assert said(status="invalid", inputs=[*inputs[:-1], [inputs[-1][0], [0, 0, 0, 0]]]) == fresh


def test_the_cache_is_written_only_when_an_entry_changed(teams):
    teams({"team-a": {}})
    first = listing._StatusCache()
    first.status("tiny/ddp/cpu")
    first.save()
    again = listing._StatusCache()
    again.path.unlink()
    assert again.status("tiny/ddp/cpu") == ("valid", []) and again.status("nope/ddp/cpu")[0] == "invalid"
    again.save()
    assert not again.path.exists()  # read back, or not composed: nothing to keep
    again.status("tiny/zero2/cpu")
    again.save()
    assert set(json.loads(again.path.read_text())["entries"]) == {"tiny/ddp/cpu", "tiny/zero2/cpu"}


def test_a_cache_that_cannot_be_written_is_left_unwritten(teams, tmp_path, monkeypatch):
    teams({"team-a": {}})
    (tmp_path / "plain").write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "plain"))
    cache = listing._StatusCache()
    cache.status("tiny/ddp/cpu")
    cache.save()
    assert (tmp_path / "plain").read_text() == "x"


def test_the_key_moves_with_the_files_indexes_catalogs_rules_scope_version_code_and_schemas(
    teams, tmp_path, monkeypatch
):
    import registry

    roots = teams({"team-a": {"exp/mine.yaml": MINE, "index.yaml": "versions: {}\n", "catalog/gpus.yaml": "{}\n"}})
    a = roots["team-a"]
    package = tmp_path / "pkg"
    write(package / "sharing" / "listing.py", "")
    write(package / "other.py", "")
    write(tmp_path / "schemas" / "recipe.schema.json", "{}")
    monkeypatch.setattr(listing, "__file__", str(package / "sharing" / "listing.py"))
    monkeypatch.setattr("registry.files.SCHEMA_DIR", tmp_path / "schemas")
    keys = [listing._StatusCache().key]

    def moved(change) -> bool:
        change()
        keys.append(listing._StatusCache().key)
        return keys[-1] != keys[-2]

    assert not moved(lambda: (a / "exp/mine.yaml").write_text(MINE + "# an edit: each entry stamps its files\n"))
    assert moved(lambda: write(a / "exp/new.yaml", MINE))
    assert moved(lambda: (a / "index.yaml").write_text("versions: {}\n# edited\n"))
    assert moved(lambda: (a / "catalog/gpus.yaml").write_text("{} # edited\n"))
    assert moved(lambda: write(a / "rules/mine.json", "{}"))
    assert moved(lambda: write(a / "rules/mine.json", "{ }"))
    assert moved(lambda: (package / "other.py").write_text("# edited\n"))
    assert moved(lambda: (tmp_path / "schemas" / "recipe.schema.json").write_text("{ }"))
    assert moved(lambda: monkeypatch.setattr(registry, "__version__", "0.0.0+test"))
    config = tmp_path / "sources.yaml"
    assert moved(lambda: config.write_text(f"sources: [{{name: team-c, path: {a}}}]\n"))
    assert moved(lambda: config.write_text(f"sources: [{{name: team-c, path: {a}, rules: everywhere}}]\n"))


def test_filling_status_keeps_a_given_one_and_validates_the_target_else_the_name(teams):
    teams({"team-a": {}})
    rows = [
        Entry("nope/x", None, "a", False, "", target="tiny/ddp/cpu"),
        Entry("tiny/ddp/cpu", None, "a", False, ""),
        Entry("nope/y", None, "a", False, "", status="warnings"),
    ]
    listing._fill_status(rows)
    assert [(e.status, e.reasons) for e in rows] == [("valid", []), ("valid", []), ("warnings", [])]
    assert set(json.loads(listing._StatusCache().path.read_text())["entries"]) == {"tiny/ddp/cpu"}
