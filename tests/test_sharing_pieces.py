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
