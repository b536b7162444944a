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
