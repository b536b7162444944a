"""The validation memos (registry/validate/memo.py, and the checker's of `properties`) are keyed by values: a document validated
after another that shares its sections, or after it was changed in place, gets exactly the
problems a fresh process would report."""

import copy
import json
import subprocess
import sys
from pathlib import Path

from registry.compose import compose
from registry.validate import RESOLVED, _validate, memo, standard, validate

ROOT = Path(__file__).resolve().parent.parent


def _fresh(data: dict, origins: dict) -> list:
    saved = (set(standard._ACCEPTED), dict(memo._OUTCOMES))
    standard._ACCEPTED.clear()
    memo._OUTCOMES.clear()
    try:
        return _validate(data, origins, RESOLVED)  # not from the verdicts kept on disk either
    finally:
        standard._ACCEPTED.clear()
        memo._OUTCOMES.clear()
        standard._ACCEPTED.update(saved[0])
        memo._OUTCOMES.update(saved[1])


def test_a_changed_section_is_checked_again():
    recipe = compose("pi07/zero2/8xA100")
    assert validate(recipe.data, recipe.origins) == _fresh(recipe.data, recipe.origins)
    data = copy.deepcopy(recipe.data)
    data["train"]["micro_batch_size"] = "16x"  # the same document, one value no longer an integer
    broken = validate(data, recipe.origins)
    assert any(p.path == "train.micro_batch_size" and p.is_error for p in broken)
    assert broken == _fresh(data, recipe.origins)
    data["train"]["micro_batch_size"] = recipe.data["train"]["micro_batch_size"]
    assert validate(data, recipe.origins) == validate(recipe.data, recipe.origins)


def test_a_rule_follows_the_values_it_reads():
    ok = compose("pi07/zero2/8xA100")
    v100 = compose("pi07/zero2/8xA100", ["hardware=8xV100"])
    for recipe in (ok, v100, ok, v100):  # each verdict as a fresh process gives it, in any order
        assert validate(recipe.data, recipe.origins) == _fresh(recipe.data, recipe.origins)
    assert validate(v100.data, v100.origins) != validate(ok.data, ok.origins)


def test_one_call_over_many_files_reports_as_one_call_per_file(tmp_path):
    """Files of one cell with different values, in one call (forked workers past 200) and alone."""
    texts = []
    for i in range(210):
        hardware = "8xV100" if i % 3 == 0 else "8xA100"
        texts.append(f"extends: [pi07/zero2/{hardware}]\ntrain:\n  micro_batch_size: {1 + i % 4}\n  steps: {100 + i}\n")
    paths = []
    for i, text in enumerate(texts):
        path = tmp_path / f"r{i:03d}.yaml"
        path.write_text(text)
        paths.append(str(path))
    run = [sys.executable, "-m", "registry", "validate", "--format", "json"]
    many = subprocess.run([*run, *paths], cwd=ROOT, capture_output=True, text=True)
    reports = json.loads(many.stdout)["reports"]
    assert [r["target"] for r in reports] == paths
    for index in (0, 1, 2, 5, 209):
        one = subprocess.run([*run, paths[index]], cwd=ROOT, capture_output=True, text=True)
        assert json.loads(one.stdout)["reports"] == [reports[index]]


def test_every_rule_twin_gets_a_fresh_processs_verdict_after_its_sibling():
    """Each pair of tests/test_rule_twins.py differs in the one value its rule reads. Validated one
    after the other in this process, each twin must get the problems it gets with every memo
    empty: a rule whose paths (memo.reads) missed one it reads would hand the second twin its
    sibling's outcome."""
    from test_rule_twins import TWINS

    composed = []
    for _, target, shared, breaking, passing in TWINS:
        for value in (breaking, passing):
            recipe = compose(target, [*shared, value])
            composed.append(((target, *shared, value), recipe))
    for order in (composed, composed[::-1]):
        for name, recipe in order:
            assert _validate(recipe.data, recipe.origins, RESOLVED) == _fresh(recipe.data, recipe.origins), name
