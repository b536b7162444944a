"""Finding recipes (issue 14): `recipe list` and `recipe search` over every source, with each
row's source, version, validity and what it shadows; every listed name resolves; list, show and
estimate agree; `recipe cp` makes a recipe of its own; publishing a file never shadows by accident."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, run_cli
from jsonschema import Draft202012Validator

CELL = "pi07/zero2/8xA100"
BINDING = "# yaml-language-server: $schema="


@pytest.fixture
def team(tmp_path):
    """A directory source `team-a` on RECIPE_PATH, searched before the bundled recipes."""
    root = tmp_path / "team-a"
    root.mkdir()
    env = {
        "RECIPE_PATH": f"team-a={root}",
        "RECIPE_CONFIG": str(tmp_path / "sources.yaml"),
        "RECIPE_CACHE": str(tmp_path / "cache"),
    }
    return root, env


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def listing(*args, env=None):
    r = run_cli("list", *args, "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def row(rows, name):
    found = [r for r in rows if r["name"] == name]
    assert len(found) == 1, (name, [r["name"] for r in rows])
    return found[0]


def test_team_override_agrees_in_list_show_and_estimate(team):
    root, env = team
    write(
        root / "pi07" / "zero2" / "8xA100.yaml",
        f"recipe:\n  name: {CELL}\n  summary: team-a's pi07, micro batch 16\ntrain:\n  micro_batch_size: 16\n",
    )
    listed = row(listing(env=env), CELL)
    assert listed["source"] == "team-a" and listed["shadows"] == ["bundled"] and listed["tuned"] is True
    assert listed["summary"] == "team-a's pi07, micro batch 16" and listed["version"] is None
    table = run_cli("list", "--policy", "pi07", "--backend", "zero2", "--hardware", "8xA100", env=env).stdout
    assert table.splitlines()[0].split() == [
        "NAME",
        "VERSION",
        "SOURCE",
        "TUNED",
        "STATUS",
        "REASON",
        "SHADOWS",
        "SUMMARY",
    ]
    assert table.splitlines()[1].split()[:3] == [CELL, "-", "team-a"] and "bundled" in table.splitlines()[1]
    shown = yaml.safe_load(run_cli("show", CELL, env=env).stdout)
    assert shown["train"]["micro_batch_size"] == 16 and shown["recipe"]["summary"] == listed["summary"]
    estimate = run_cli("estimate", CELL, "--format", "json", env=env)
    assert estimate.returncode == 0, estimate.stderr
    assert json.loads(estimate.stdout)["micro_batch_size"] == 16
    # the shadowed bundled recipe is still listed (--versions) under a name that reaches it
    bundled = row(listing("--versions", env=env), f"bundled:{CELL}")
    assert bundled["version"] == 1 and "micro batch 20" in bundled["summary"]
    pinned = yaml.safe_load(run_cli("show", f"bundled:{CELL}@1", env=env).stdout)
    assert pinned["train"]["micro_batch_size"] == 20


def test_team_overlay_of_bundled_parts_is_tuned(team):
    root, env = team
    write(root / "smolvla" / "fsdp" / "4xH100.yaml", "recipe:\n  summary: team-a's smolvla\ntrain:\n  steps: 123\n")
    tuned = listing("--tuned", env=env)
    assert row(tuned, "smolvla/fsdp/4xH100")["source"] == "team-a"
    assert all(r["tuned"] for r in tuned)
    origin = run_cli("show", "smolvla/fsdp/4xH100", "--origin", env=env).stdout
    assert f"steps: 123  # {root / 'smolvla' / 'fsdp' / '4xH100.yaml'}" in origin


def test_every_listed_name_resolves(team):
    root, env = team
    for steps in (101, 102):
        r = run_cli("publish", "tiny/ddp/cpu", f"train.steps={steps}", "--replace", "--to", "team-a", env=env)
        assert r.returncode == 0, r.stderr
    write(root / "exp" / "foo.yaml", "extends: [tiny/ddp/cpu]\nrecipe:\n  summary: an experiment\n")
    newest = listing(env=env)
    tiny = row(newest, "tiny/ddp/cpu")
    assert tiny["version"] == 2 and tiny["source"] == "team-a" and tiny["shadows"] == ["bundled"]
    assert row(newest, "exp/foo")["source"] == "team-a"
    every = listing("--versions", env=env)
    assert {(r["name"], r["version"]) for r in every if "tiny/ddp/cpu" in r["name"]} == {
        ("tiny/ddp/cpu", 2),
        ("tiny/ddp/cpu", 1),
        ("bundled:tiny/ddp/cpu", 1),
    }
    for r in every:
        for target in (r["name"], r["target"]):
            shown = run_cli("show", target, env=env)
            assert shown.returncode == 0, (target, shown.stderr)
            if r["version"] and "@" in target:
                assert yaml.safe_load(shown.stdout)["recipe"].get("version") == r["version"], target
    # team-a's @1 and the bundled file's version 1: the bare pin names neither, and says so;
    # the listing gives each its qualified name
    assert {r["target"] for r in every if r["name"].endswith("tiny/ddp/cpu")} >= {
        "tiny/ddp/cpu@2",
        "team-a:tiny/ddp/cpu@1",
    }
    r = run_cli("show", "tiny/ddp/cpu@1", env=env)
    assert r.returncode == 2 and "ambiguous" in r.stderr and "team-a:tiny/ddp/cpu@1" in r.stderr
    assert yaml.safe_load(run_cli("show", "team-a:tiny/ddp/cpu@1", env=env).stdout)["train"]["steps"] == 101


def test_bundled_version_resolves():
    listed = row(listing(), "tiny/ddp/cpu")
    assert listed["version"] == 1 and listed["source"] == "bundled"
    r = run_cli("show", "tiny/ddp/cpu@1")
    assert r.returncode == 0 and yaml.safe_load(r.stdout)["recipe"]["name"] == "tiny/ddp/cpu"
    r = run_cli("show", "tiny/ddp/cpu@2")
    assert r.returncode == 2 and "the bundled file is version 1" in r.stderr and "Traceback" not in r.stderr
    untuned = row(listing("--policy", "tiny", "--backend", "ddp", "--hardware", "2x1"), "tiny/ddp/2x1")
    assert untuned["version"] is None and untuned["tuned"] is False  # nothing for @N to name


def test_status_column_and_valid_filter(team):
    root, env = team
    rows = listing("--policy", "pi07", "--backend", "zero2", env=env)
    hardware = sorted(p.stem for p in (ROOT / "recipes" / "hardware").glob("*.yaml"))
    assert {r["status"] for r in rows} == {"valid", "invalid"}
    assert sorted(r["name"] for r in rows) == [f"pi07/zero2/{h}" for h in hardware]  # one row per cell
    valid = listing("--policy", "pi07", "--backend", "zero2", "--valid", env=env)
    assert valid == [r for r in rows if r["status"] != "invalid"] and valid
    assert row(rows, "pi07/zero2/8xV100")["status"] == "invalid"
    # cached per file: a changed overlay is validated again
    overlay = root / "tiny" / "ddp" / "cpu.yaml"
    write(overlay, "train:\n  steps: 5\n")
    assert row(listing("--tuned", env=env), "tiny/ddp/cpu")["status"] == "valid"
    write(overlay, "train:\n  steps: -5\n")
    os.utime(overlay, ns=(1, 1))  # a new mtime, whatever the clock's resolution
    assert row(listing("--tuned", env=env), "tiny/ddp/cpu")["status"] == "invalid"
    assert "tiny/ddp/cpu" not in {r["name"] for r in listing("--tuned", "--valid", env=env)}


def test_status_cache_sees_rule_files_and_edits_that_keep_size_and_mtime(team):
    """STATUS comes from a cache: a team rule file added or edited changes it, and so does an edit
    that keeps the file's size and puts its mtime back (`touch -r`, a tool that restores times)."""
    root, env = team
    overlay = root / "tiny" / "ddp" / "cpu.yaml"
    rules = root / "rules" / "cluster.json"

    def status() -> str:
        return row(listing("--tuned", env=env), "tiny/ddp/cpu")["status"]

    def same_size_edit(path, old: str, new: str) -> None:
        before = path.stat()
        text = path.read_text()
        assert len(old) == len(new) and old in text
        path.write_text(text.replace(old, new))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)

    write(overlay, "train:\n  micro_batch_size: 16\n")
    assert status() == "valid"
    rule = {
        "id": "max-micro-batch",
        "severity": "error",
        "require": {"x-compare": {"left": "train.micro_batch_size", "op": "<=", "right": 15}},
        "message": "at most 15",
        "source": "https://wiki.example/team-a",
    }
    write(rules, json.dumps({"x-invariants": [rule]}))
    assert status() == "invalid"  # the team's rule applies to its own overlay
    same_size_edit(rules, '"right": 15', '"right": 16')
    assert status() == "valid"
    same_size_edit(overlay, "micro_batch_size: 16", "micro_batch_size: 17")
    assert status() == "invalid"
    rules.unlink()
    assert status() == "valid"


def test_search_and_grep(team):
    root, env = team
    write(root / "exp" / "fast.yaml", "extends: [tiny/ddp/cpu]\nrecipe:\n  summary: the FAST one\n  tags: [Speedy]\n")
    found = run_cli("search", "zero-2", "--format", "json", env=env)
    assert found.returncode == 0, found.stderr
    names = {r["name"] for r in json.loads(found.stdout)}
    assert CELL in names and "tiny/zero2/cpu" in names and "act/zero2/cpu" not in names  # summaries, any case
    assert {r["name"] for r in json.loads(run_cli("search", "speedy", "--format", "json", env=env).stdout)} == {
        "exp/fast"
    }  # tags
    by_name = json.loads(run_cli("search", "ACT/ZERO2/CPU", "--format", "json", env=env).stdout)
    assert [r["name"] for r in by_name] == ["act/zero2/cpu"]
    assert listing("--grep", "speedy", env=env) == json.loads(
        run_cli("search", "speedy", "--format", "json", env=env).stdout
    )
    table = run_cli("search", "smoke", env=env).stdout
    assert table.startswith("NAME ") and "tiny/ddp/cpu" in table
    r = run_cli("search", "", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    # a free-standing recipe matches a part filter by the parts it composes
    assert row(listing("--policy", "tiny", "--hardware", "cpu", env=env), "exp/fast")["source"] == "team-a"
    assert "exp/fast" not in {r["name"] for r in listing("--policy", "pi07", env=env)}


def test_cp_makes_a_recipe_of_its_own(tmp_path, team):
    root, env = team
    (tmp_path / "my").mkdir()
    r = run_cli("cp", CELL, "my/pi07-fast.yaml", cwd=tmp_path, env=env)
    assert r.returncode == 0 and "as pi07-fast" in r.stdout, r.stderr
    text = (tmp_path / "my" / "pi07-fast.yaml").read_text()
    assert text.startswith(BINDING)
    own = yaml.safe_load(text)
    assert own["recipe"] == {"name": "pi07-fast", "tags": ["full-unfreeze", "opentau"]}
    assert own["extends"] == [CELL] and "results" not in own and own["train"]["micro_batch_size"] == 20
    shown = yaml.safe_load(run_cli("show", "my/pi07-fast.yaml", cwd=tmp_path, env=env).stdout)
    original = yaml.safe_load(run_cli("show", CELL, env=env).stdout)
    assert shown["recipe"] == own["recipe"] and "results" not in shown
    assert {k: v for k, v in shown.items() if k not in ("recipe", "results")} == {
        k: v for k, v in original.items() if k not in ("recipe", "results")
    }
    # edited and published: its history carries none of the original's figures
    path = tmp_path / "my" / "pi07-fast.yaml"
    path.write_text(text.replace("micro_batch_size: 20", "micro_batch_size: 16"))
    r = run_cli("publish", str(path), "--to", "team-a", env=env)
    assert r.returncode == 0 and "team-a:pi07-fast@1" in r.stdout, r.stderr
    history = run_cli("history", "pi07-fast", env=env).stdout
    assert "13.7" not in history and "micro batch 20" not in history
    # a published version: the copy extends it pinned, wherever it is written
    r = run_cli("cp", "pi07-fast", "exp/pi07-faster", "--to", "team-a", env=env)
    assert r.returncode == 0, r.stderr
    copied = yaml.safe_load((root / "exp" / "pi07-faster.yaml").read_text())
    assert copied["extends"] == ["team-a:pi07-fast@1"] and copied["recipe"]["name"] == "exp/pi07-faster"
    assert run_cli("show", "exp/pi07-faster", env=env).returncode == 0
    # a file inside a source is named by its path there, so that the name reaches it
    r = run_cli("cp", "tiny/ddp/cpu", str(root / "exp" / "tiny-copy.yaml"), env=env)
    assert r.returncode == 0 and "as exp/tiny-copy" in r.stdout
    assert "version" not in yaml.safe_load(run_cli("show", "exp/tiny-copy", env=env).stdout)["recipe"]
    for bad in ([CELL, "my copy.yaml"], [CELL, "team-a:x"], [CELL, "policy/x"], ["no/such", "x.yaml"]):
        r = run_cli("cp", *bad, cwd=tmp_path, env=env)
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, bad


def test_cp_to_a_path_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "folder.yaml").mkdir()
    bad = [
        ["afile/copy.yaml"],  # a file where a folder should be
        ["afile/copy"],  # the same, as a NAME written here
        ["afile/sub/copy.yaml"],
        ["folder.yaml", "--force"],  # a folder where the file should be
    ]
    if sys.platform.startswith("linux"):
        bad.append(["/proc/copy.yaml"])  # a folder nothing can be created in
    for args in bad:
        r = run_cli("cp", "tiny/ddp/cpu", *args, cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and "cannot write" in r.stderr, (args, r.stderr)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["afile", "folder.yaml"]  # no temporary file left


def test_publishing_a_file_never_shadows_by_accident(tmp_path, team):
    _, env = team
    mine = tmp_path / "mine.yaml"
    mine.write_text(f"extends: [{CELL}]\nrecipe:\n  name: {CELL}\ntrain:\n  micro_batch_size: 16\n")
    r = run_cli("publish", str(mine), "--to", "team-a", env=env)
    assert r.returncode == 2 and "bundled already has this name" in r.stderr and "--replace" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run_cli("publish", str(mine), "--to", "team-a", "--replace", env=env)
    assert r.returncode == 0, r.stderr
    listed = row(listing(env=env), CELL)
    assert (listed["source"], listed["version"], listed["shadows"]) == ("team-a", 1, ["bundled"])
    # publishing the name itself is its next version: no --replace
    r = run_cli("publish", CELL, "train.micro_batch_size=12", "--to", "team-a", env=env)
    assert r.returncode == 0 and "@2" in r.stdout, r.stderr


def test_import_writes_the_schema_line(tmp_path):
    data = ROOT / "tests" / "data"
    dest = tmp_path / "imported.yaml"
    r = run_cli(
        "import",
        "--accelerate-config",
        str(data / "accelerate_zero2.yaml"),
        "--trainer",
        "opentau",
        "--trainer-config",
        str(data / "opentau_pi07.json"),
        "-o",
        str(dest),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    schema = dest.read_text().splitlines()[0].removeprefix(BINDING)
    assert schema == "recipe.schema.json" and json.loads((tmp_path / schema).read_text())["$id"] == schema
    assert_travels(tmp_path, dest)


def assert_travels(folder, recipe_file):
    """Copied elsewhere, the folder's recipe file still binds to a schema that exists, and that
    schema (self-contained) reads the file: an unknown top-level key is an error there too."""
    moved = folder.parent / f"{folder.name}-moved"
    shutil.copytree(folder, moved)
    shutil.rmtree(folder)
    try:
        copied = moved / recipe_file.relative_to(folder)
        line = copied.read_text().splitlines()[0]
        assert line.startswith(BINDING) and not Path(line.removeprefix(BINDING)).is_absolute()
        schema = json.loads((copied.parent / line.removeprefix(BINDING)).read_text())
        check = Draft202012Validator(schema)
        assert not list(check.iter_errors(yaml.safe_load(copied.read_text())))
        assert list(check.iter_errors({**yaml.safe_load(copied.read_text()), "trian": {}}))
    finally:
        shutil.copytree(moved, folder)


def test_cp_binds_a_schema_that_travels_with_the_source(tmp_path, team):
    root, env = team
    r = run_cli("cp", CELL, "exp/deep/pi07-fast", "--to", "team-a", env=env)
    assert r.returncode == 0, r.stderr
    copied = root / "exp" / "deep" / "pi07-fast.yaml"
    assert copied.read_text().startswith(f"{BINDING}../../recipe.schema.json\n")  # the source's root
    assert "written by recipe " in json.loads((root / "recipe.schema.json").read_text())["$comment"]
    assert_travels(root, copied)
    # a folder outside every source: the schema beside the file
    r = run_cli("cp", CELL, "mine.yaml", cwd=tmp_path, env=env)
    assert r.returncode == 0 and (tmp_path / "mine.yaml").read_text().startswith(f"{BINDING}recipe.schema.json\n")
    # a file of that name this tool did not write is left alone
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "recipe.schema.json").write_text("{}")
    r = run_cli("cp", CELL, "other/x.yaml", cwd=tmp_path, env=env)
    assert r.returncode == 2 and "is not a schema recipe wrote; not replaced" in r.stderr
    assert (tmp_path / "other" / "recipe.schema.json").read_text() == "{}" and not (
        tmp_path / "other" / "x.yaml"
    ).exists()


def test_in_process_what_a_row_says_of_a_recipe_that_does_not_compose():
    """The reasons of an invalid row (`recipe list`'s REASON column and JSON `reasons`), and which
    three-segment names are cells, read in the test process."""
    from registry.errors import RecipeError
    from registry.names import Name
    from registry.sharing.listing import _broken, _validated
    from registry.sharing.sources import is_cell

    status, reasons, files = _validated("nope/zero2/8xA100")
    assert (status, files) == ("invalid", None) and reasons[0][0] == "compose"
    assert reasons[0][1].startswith("unknown policy in nope/zero2/8xA100: 'nope'; known: act, ")
    row = _broken("exp/x", "team", False, RecipeError("index.yaml: malformed"), None, "exp/x", target="team:exp/x")
    assert (row.status, row.reasons, row.summary, row.target) == (
        "invalid",
        [("compose", "index.yaml: malformed")],
        "index.yaml: malformed",
        "team:exp/x",
    )
    assert is_cell(Name(("pi07", "zero2", "8xA100"))) and is_cell(Name(("tiny", "ddp", "2x8xH100")))
    assert not is_cell(Name(("pi07", "zero2", "nope"))) and not is_cell(Name(("pi07", "zero2")))


def test_the_schema_file_is_written_once_renewed_when_stale_and_never_over_a_foreign_file(tmp_path):
    """What `recipe cp`, `import` and `schema -o` write beside a recipe file, in-process."""
    from registry.errors import RecipeError
    from registry.sharing.binding import schema_text, write_schema

    path = tmp_path / "recipe.schema.json"
    write_schema(path)
    text = path.read_text()
    assert text == schema_text() and text.startswith('{\n  "$comment": "written by recipe ')  # indented, marked
    inode = path.stat().st_ino
    write_schema(path)
    assert path.stat().st_ino == inode  # the same text: not written again
    stale = json.loads(text) | {"$comment": "written by recipe 0.0.1 (an older one)", "title": "old"}
    path.write_text(json.dumps(stale))
    write_schema(path)
    assert path.read_text() == schema_text()  # an older version's file: renewed
    path.write_text('{"title": "the team\'s own"}')
    with pytest.raises(RecipeError, match="exists and is not a schema recipe wrote; not replaced"):
        write_schema(path)
    assert path.read_text() == '{"title": "the team\'s own"}'


def test_source_rows_shadowed_names_and_accept_read_in_process(tmp_path, monkeypatch):
    """`recipe source list`'s rows, the names one source shadows in another, and that the bundled
    recipes are no source whose versions could be accepted."""
    from registry.errors import RecipeError
    from registry.sharing import manage

    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "act.yaml").write_text("extends: [bundled:policy/act]\n")
    monkeypatch.setenv("RECIPE_PATH", f"team-x={tmp_path}")
    assert manage.winners() == [["policy/act", "team-x", "bundled"]]
    assert manage.rows() == [["team-x", "path", str(tmp_path), ""], ["bundled", "bundled", str(ROOT / "recipes"), ""]]
    with pytest.raises(RecipeError, match=r"^no source named 'bundled' \(hint: recipe source list\)$"):
        manage.accept("bundled", ["tiny/ddp/cpu@1"])


def test_the_status_cache_is_read_back_and_lives_in_the_users_cache(tmp_path, monkeypatch):
    """`recipe list`'s statuses, kept between calls: a kept entry whose inputs are unchanged is
    what the next call says (here a planted one), under XDG_CACHE_HOME, else ~/.cache."""
    from registry.sharing.listing import _StatusCache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = _StatusCache()
    assert cache.path.parent == tmp_path / "xdg" / "recipe" / "status"
    assert cache.status("tiny/ddp/cpu") == ("valid", [])
    cache.save()
    kept = json.loads(cache.path.read_text())
    assert set(kept) == {"key", "entries"} and kept["entries"]["tiny/ddp/cpu"]["status"] == "valid"
    kept["entries"]["tiny/ddp/cpu"] |= {"status": "invalid", "reasons": [["planted", "read back"]]}
    cache.path.write_text(json.dumps(kept))
    assert _StatusCache().status("tiny/ddp/cpu") == ("invalid", [("planted", "read back")])
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _StatusCache().path.parent == tmp_path / "home" / ".cache" / "recipe" / "status"


def test_parts_are_listed_with_their_summaries_in_process():
    from registry.load import load_file
    from registry.sharing.listing import parts

    rows = parts()
    act = load_file(ROOT / "recipes" / "policy" / "act.yaml").data["recipe"]["summary"]
    assert ["policy", "act", act] in rows and act
    assert {axis for axis, _, _ in rows} == {"policy", "backend", "hardware"}


def test_a_copys_settings_and_meta_in_process(tmp_path):
    """`recipe cp`'s body: SRC's settings as written when the cut reads back the same, else
    written out plainly (an alias to an anchor in a section the copy drops); its meta: the name,
    and SRC's tags but `tuned`."""
    from registry.sharing.copying import _body, _meta

    kept = tmp_path / "kept.yaml"
    kept.write_text("# a recipe\nrecipe:\n  name: exp/a\n  tags: [tuned, fast]\ndefaults: &d\n  lr: 0.1\ntrain: *d\n")
    assert _body(kept) == "defaults: &d\n  lr: 0.1\ntrain: *d\n"
    assert _meta(kept, "exp/b") == {"name": "exp/b", "tags": ["fast"]}
    cut = tmp_path / "cut.yaml"
    cut.write_text("results: &r\n  - samples_per_s: 1\ntrain:\n  notes: *r\n")
    assert _body(cut) == "train:\n  notes:\n  - samples_per_s: 1\n"
    assert _meta(None, "exp/c") == {"name": "exp/c"} and _meta(cut, "exp/c") == {"name": "exp/c"}
