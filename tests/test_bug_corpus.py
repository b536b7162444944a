"""The mistakes people report in public bug trackers (issue 25): tests/data/bugs/*.yaml, one file
per area, each case a minimal broken configuration taken from a thread (its repository and issue
or pull request, or its forum URL), its corrected twin, and whether the registry catches it.

- every twin validates: no false alarm;
- every case marked `caught` is refused before launch (naming `rule` where the case gives one),
  and a case marked `caught: false` (a known miss) that is caught now fails until it is marked;
- at least 60 cases over every area, and at least 90% caught.

A case is either a recipe (`recipe:` text, validated as a file) or what a team ships (`accelerate:`
yaml text, optional `deepspeed:` JSON text, `trainer`/`trainer_args`/`trainer_config` text, `gpu`,
`launch_args`), imported with `recipe import` and validated as the real-config corpus is."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pytest
import yaml

from registry.errors import RecipeError
from registry.resolve import importer
from registry.validate.report import validate_target

BUGS = Path(__file__).parent / "data" / "bugs"
AREAS = ("deepspeed", "accelerate", "fsdp", "lerobot", "opentau", "hardware", "multinode")
MIN_CASES, MIN_CAUGHT = 60, 0.90


def _cases() -> dict[str, dict]:
    found = {}
    for path in sorted(BUGS.glob("*.yaml")):
        for case in yaml.safe_load(path.read_text())["cases"]:
            assert case["id"] not in found, f"{path.name}: {case['id']} twice"
            found[case["id"]] = {**case, "file": path.name}
    return found


CASES = _cases()


def judge(config: dict) -> list[str]:
    """The errors the registry reports for one side of a case (empty: it validates)."""
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        if "recipe" in config:
            path = folder / "recipe.yaml"
            path.write_text(config["recipe"])
            return _errors(validate_target(str(path)))
        return _imported(config, folder)


def _imported(config: dict, folder: Path) -> list[str]:
    (folder / "accelerate.yaml").write_text(config["accelerate"])
    setup = importer.Setup(
        accelerate=folder / "accelerate.yaml",
        gpu=config.get("gpu", "H100-SXM"),
        launch_args=config.get("launch_args", ""),
        policy=config.get("policy"),
    )
    if "deepspeed" in config:
        setup.deepspeed = folder / "ds_config.json"
        setup.deepspeed.write_text(config["deepspeed"])
    if config.get("trainer"):
        setup.trainer = config["trainer"]
        setup.trainer_args = config.get("trainer_args")
        if "trainer_config" in config:
            setup.trainer_config = folder / "trainer.json"
            setup.trainer_config.write_text(config["trainer_config"])
    try:
        result = importer.read(setup)
    except RecipeError as e:
        return [str(e)]
    path = folder / "recipe.yaml"
    path.write_text(importer.render(result, "bugs/case", path))
    return [p.render() for p in result.notes.conflicts] + _errors(validate_target(str(path)))


def _errors(report) -> list[str]:
    errors = [p.render() for p in report.problems if p.is_error]
    return errors + ([str(report.failure)] if report.failure else [])


@functools.cache
def verdict(case_id: str, side: str) -> tuple[str, ...]:
    return tuple(judge(CASES[case_id][side]))


def test_the_corpus_is_real_and_covers_every_area():
    assert len(CASES) >= MIN_CASES, f"{len(CASES)} cases"
    assert {c["area"] for c in CASES.values()} >= set(AREAS)
    for case in CASES.values():
        source = case["source"]
        assert source.get("url") or (source.get("repo") and (source.get("issue") or source.get("pr"))), case["id"]
        assert case["what"] and "broken" in case and "fixed" in case, case["id"]
    caught = sum(c.get("caught", True) for c in CASES.values())
    assert caught / len(CASES) >= MIN_CAUGHT, f"{caught} of {len(CASES)} caught"


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_the_twin_validates(case_id):
    errors = verdict(case_id, "fixed")
    assert not errors, "false alarm on the corrected twin:\n" + "\n".join(errors)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_the_mistake_is_caught(case_id):
    case = CASES[case_id]
    errors = verdict(case_id, "broken")
    if not case.get("caught", True):
        assert not errors, "a known miss is caught now: mark it `caught: true`\n" + "\n".join(errors)
        return
    assert errors, f"not caught: {case['what']}"
    if case.get("rule"):
        assert any(f"[{case['rule']}]" in e for e in errors), (case["rule"], errors)


def test_every_rule_added_for_the_corpus_has_its_case():
    """The rules written for what the corpus found each name a case that they catch."""
    named = {c.get("rule") for c in CASES.values()}
    added = {
        "fsdp-ram-efficient-sync",
        "fsdp1-orig-params-compile",
        "fsdp-sharded-consolidated",
        "fsdp-hybrid-one-node",
        "lerobot-act-temporal-ensemble",
        "lerobot-diffusion-horizon",
    }
    assert added <= named, added - named


AREA_LABELS = {
    "deepspeed": "DeepSpeed",
    "accelerate": "accelerate",
    "multinode": "multi-node",
    "hardware": "hardware and precision",
    "fsdp": "FSDP",
    "lerobot": "LeRobot",
    "opentau": "OpenTau",
}


def test_the_figures_the_docs_quote_are_the_corpus_s():
    """docs/rules.md's table and totals and the README's summary are this corpus's counts: a case
    added or a miss fixed fails here until the text follows."""
    root = BUGS.parent.parent.parent
    rules_page = (root / "docs" / "rules.md").read_text()
    readme = (root / "README.md").read_text()
    total = len(CASES)
    caught = sum(c.get("caught", True) for c in CASES.values())
    assert f"{total} minimal configurations" in rules_page
    assert f"**{caught} of {total} are caught before launch" in rules_page
    assert f"Against {total} mistakes taken from public bug reports, {caught} are caught" in " ".join(readme.split())
    for area, label in AREA_LABELS.items():
        cases = [c for c in CASES.values() if c["area"] == area]
        row = f"| {label} | {len(cases)} | {sum(c.get('caught', True) for c in cases)} |"
        assert row in rules_page, row
    assert set(AREA_LABELS) == {c["area"] for c in CASES.values()}
