"""`recipe cp` in-process, read by value: the whole file a copy writes (its binding line, header,
meta, extends and SRC's settings as written), each destination it refuses with its message, and
where a NAME, a file inside a source and `--to` put the copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.errors import RecipeError
from registry.sharing import binding, copying

SRC = """\
# what exp/base is for: not carried
extends: [tiny/ddp/cpu]
recipe:
  name: exp/base
  summary: the original
  tags: [tuned, fast, tuned, small]
results:
  - {samples_per_s: 3.5}
train:
  steps: 7  # why seven
# the optimizer as measured
optimizer:
  lr: 0.001
"""


@pytest.fixture
def team(tmp_path, monkeypatch):
    root = tmp_path / "team"
    (root / "exp").mkdir(parents=True)
    (root / "exp" / "base.yaml").write_text(SRC)
    (root / "exp" / "bare.yaml").write_text("recipe: {name: exp/bare}\nextends: [tiny/ddp/cpu]\n")
    monkeypatch.setenv("RECIPE_PATH", f"team-a={root}")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return root


def test_a_copy_holds_its_name_srcs_tags_but_tuned_and_srcs_settings_as_written(team):
    path, name = copying.copy("team-a:exp/base", "mine.yaml", force=False)
    assert (path, name) == (Path("mine.yaml"), "mine")
    assert path.read_text() == (
        f"{binding.modeline(path)}\n"
        "# copied from team-a:exp/base by `recipe cp`\n"
        "recipe:\n  name: mine\n  tags:\n  - fast\n  - small\n"
        "extends: [team-a:exp/base]\n"
        "train:\n  steps: 7  # why seven\n# the optimizer as measured\noptimizer:\n  lr: 0.001\n"
    )


def test_a_copy_of_a_recipe_with_no_settings_of_its_own_is_its_extends(team):
    path, _ = copying.copy("exp/bare", "mine.yaml", force=False)
    assert path.read_text().endswith("recipe:\n  name: mine\nextends: [exp/bare]\n")


def test_an_existing_file_is_replaced_only_when_forced(team):
    Path("mine.yaml").write_text("mine\n")
    with pytest.raises(RecipeError) as raised:
        copying.copy("exp/bare", "mine.yaml", force=False)
    assert str(raised.value) == "mine.yaml: exists (hint: --force to replace it)"
    assert Path("mine.yaml").read_text() == "mine\n"
    copying.copy("exp/bare", "mine.yaml", force=True)
    assert "extends: [exp/bare]" in Path("mine.yaml").read_text()


def test_an_unknown_recipe_is_said_and_nothing_written(team):
    with pytest.raises(RecipeError) as raised:
        copying.copy("exp/nothing", "mine.yaml", force=False)
    assert str(raised.value) == "unknown recipe 'exp/nothing'"
    assert not Path("mine.yaml").exists()


def test_a_destination_that_is_a_folder_or_below_a_file_is_refused(team):
    Path("folder.yaml").mkdir()
    Path("afile").write_text("x")
    with pytest.raises(RecipeError) as raised:
        copying.copy("exp/bare", "folder.yaml", force=True)
    assert str(raised.value) == (
        "folder.yaml: cannot write the copy: it is a folder (hint: give a file name, DIR/NAME.yaml)"
    )
    with pytest.raises(RecipeError) as raised:
        copying.copy("exp/bare", "afile/sub/copy.yaml", force=False)
    assert str(raised.value) == "afile/sub/copy.yaml: cannot write the copy: afile is a file, not a folder"


@pytest.mark.parametrize(
    "dest, into, message",
    [
        ("x.yaml", "team-a", "--to takes a NAME for the copy, not a file (hint: recipe cp SRC NAME --to SOURCE)"),
        (
            "my copy.yaml",
            None,
            "my copy.yaml: cannot make a recipe name of 'my copy' (hint: letters, digits, . _ + -; "
            "or give the copy a NAME: recipe cp SRC NAME)",
        ),
        ("policy/x", None, "policy/x: policy/ holds parts or published files, not recipes"),
        ("hardware/x", None, "hardware/x: hardware/ holds parts or published files, not recipes"),
        ("base", None, "base: base/ holds parts or published files, not recipes"),
        ("catalog/x", None, "catalog/x: catalog/ holds parts or published files, not recipes"),
        ("published/x", None, "published/x: published/ holds parts or published files, not recipes"),
        ("exp/x", "team-q", "--to team-q: not a directory source (recipe source list)"),
        ("exp/x", "bundled", "--to bundled: not a directory source (recipe source list)"),
    ],
)
def test_a_destination_that_cannot_be_a_recipe_says_why(team, dest, into, message):
    with pytest.raises(RecipeError) as raised:
        copying.destination(dest, into)
    assert str(raised.value) == message


def test_where_a_name_a_file_in_a_source_and_to_put_the_copy(team):
    assert copying.destination("exp/mine", None) == (Path.cwd() / "exp" / "mine.yaml", "exp/mine")
    assert copying.destination("exp/mine", "team-a") == (team / "exp" / "mine.yaml", "exp/mine")
    inside = team / "exp" / "deep" / "copy.yaml"
    inside.parent.mkdir()
    assert copying.destination(str(inside), None) == (inside, "exp/deep/copy")  # the name that reaches it
    assert copying.destination(str(team / "top.yaml"), None) == (team / "top.yaml", "top")
    assert copying.destination("new/dir/copy.yaml", None) == (Path("new/dir/copy.yaml"), "copy")  # not yet a folder


CUT = """\
recipe: {name: exp/odd, tags: [tuned]}
extends: [tiny/ddp/cpu]
results:
# measured on the team's A100s
  - {samples_per_s: 3.5}
"quoted": 3  # a top-level line that is not a plain key is kept
train:
  steps: 7
"""


def test_a_top_level_line_that_is_not_a_plain_key_ends_a_dropped_section(team):
    (team / "exp" / "odd.yaml").write_text(CUT)
    path, _ = copying.copy("exp/odd", "odd.yaml", force=False)
    text = path.read_text()
    # the copy's meta has no tags (SRC's only one was `tuned`); SRC's settings as written, comments kept
    assert text.endswith(
        "recipe:\n  name: odd\nextends: [exp/odd]\n"
        '"quoted": 3  # a top-level line that is not a plain key is kept\ntrain:\n  steps: 7\n'
    )


def test_settings_that_do_not_survive_the_cut_are_written_plainly_in_their_order(team):
    long = "words " * 15 + "end"  # 93 characters: one line at the copy's width of 100
    (team / "exp" / "alias.yaml").write_text(
        f"results: &r\n  - samples_per_s: 1\nzeta: *r\nalpha: {long}\nrecipe: {{name: exp/alias}}\n"
    )
    path, _ = copying.copy("exp/alias", "alias.yaml", force=False)
    assert path.read_text().endswith(f"extends: [exp/alias]\nzeta:\n- samples_per_s: 1\nalpha: {long}\n")


def test_a_long_tag_stays_on_one_line_and_a_shipped_version_stays_pinned(team):
    long = "measured " * 10 + "twice"  # 95 characters with spaces: folded at YAML's default width of 80
    (team / "exp" / "tagged.yaml").write_text(f"recipe: {{name: exp/tagged, tags: [{long}]}}\n")
    path, _ = copying.copy("exp/tagged", "tagged.yaml", force=False)
    assert f"  tags:\n  - {long}\nextends: [exp/tagged]\n" in path.read_text()
    path, _ = copying.copy("tiny/ddp/cpu@1", "shipped.yaml", force=False)  # the bundled file as shipped
    assert "\nextends: [tiny/ddp/cpu@1]\n" in path.read_text()


def test_a_copy_into_a_directory_source_lands_at_its_name_there(team):
    path, name = copying.copy("exp/bare", "exp/deep/mine", force=False, into="team-a")
    assert (path, name) == (team / "exp" / "deep" / "mine.yaml", "exp/deep/mine")
    assert path.read_text().endswith("recipe:\n  name: exp/deep/mine\nextends: [exp/bare]\n")
    assert copying.destination("a/b/c", None) == (Path.cwd() / "a" / "b" / "c.yaml", "a/b/c")


def test_a_file_in_a_folder_not_made_yet_is_named_by_its_file_name(team):
    dest = team / "exp" / "new" / "c.yaml"
    assert copying.destination(str(dest), None) == (dest, "c")


def test_a_complex_key_after_a_dropped_section_is_kept_as_written(team):
    (team / "exp" / "complex.yaml").write_text("results:\n  - 1\n? odd  # a complex key\n: 3\nrecipe: {name: exp/c}\n")
    path, _ = copying.copy("exp/complex", "complex.yaml", force=False)
    assert path.read_text().endswith("extends: [exp/complex]\n? odd  # a complex key\n: 3\n")
