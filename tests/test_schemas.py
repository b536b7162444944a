"""The schema files themselves and the editor binding of every recipe file."""

import json
import re

import pytest
from jsonschema import Draft202012Validator

from registry.files import SCHEMA_DIR
from registry.sharing.sources import bundled
from registry.validate.schemas import SECTIONS

SCHEMAS = sorted(SCHEMA_DIR.glob("*.schema.json"))
RECIPE_FILES = sorted(bundled().root.rglob("*.yaml"))
BINDING = re.compile(r"# yaml-language-server: \$schema=(\S+)")


def test_one_file_per_section():
    assert {f"{s}.schema.json" for s in SECTIONS} <= {p.name for p in SCHEMAS}


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_schema_is_valid_draft_2020_12(path):
    doc = json.loads(path.read_text())
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(doc)


@pytest.mark.parametrize("path", RECIPE_FILES, ids=lambda p: str(p.relative_to(bundled().root)))
def test_every_recipe_file_binds_a_schema_in_the_repo(path):
    first = path.read_text().splitlines()[0]
    match = BINDING.fullmatch(first)
    assert match, f"{path}: first line must be '# yaml-language-server: $schema=...'"
    target = (path.parent / match.group(1)).resolve()
    assert target.is_file() and target.parent == SCHEMA_DIR.resolve()


def test_sections_reject_unknown_keys_but_options_are_open():
    from registry.validate import ROOT, validate

    assert (
        validate({"policy": {"options": {"anything": 1}}, "trainer": {"opentau": {"config": {"x": 1}}}}, {}, ROOT) == []
    )
    assert [p.rule for p in validate({"policy": {"nope": 1}}, {}, ROOT)] == ["unknown-key"]


def test_the_printed_schema_is_self_contained_and_judges_as_the_files_do():
    """`recipe schema` prints one document for editors that cannot follow references between
    files: every other file embedded under `$defs` by its own name, the root's own `$defs` kept."""
    import yaml
    from jsonschema.exceptions import best_match

    from registry.validate.schemas import ROOT, documents, joined

    bundle, docs = joined(), documents()
    assert bundle["$id"] == ROOT and "$schema" in bundle and docs[ROOT]["$defs"]
    assert {name: bundle["$defs"][name] for name in docs[ROOT]["$defs"]} == docs[ROOT]["$defs"]
    for name, doc in docs.items():
        if name != ROOT:
            assert bundle["$defs"][name] == {"$id": name, **{k: v for k, v in doc.items() if k != "$schema"}}
    assert set(bundle["$defs"]) == set(docs[ROOT]["$defs"]) | set(docs) - {ROOT}
    # read alone, with no access to schemas/: the same verdict as the files read together
    alone = Draft202012Validator(bundle)
    together = Draft202012Validator(docs[ROOT], registry=_registry(docs))
    broken = {"train": {"micro_batch_size": "8"}, "hardware": {"gpus": -1}, "backend": {"kind": 3}}
    for instance in [yaml.safe_load(p.read_text()) for p in RECIPE_FILES[:40]] + [broken]:
        assert sorted(e.json_path for e in alone.iter_errors(instance)) == sorted(
            e.json_path for e in together.iter_errors(instance)
        )
    assert best_match(alone.iter_errors(broken)) is not None


def _registry(docs):
    from referencing import Registry, Resource

    return Registry().with_resources((name, Resource.from_contents(doc)) for name, doc in docs.items())
