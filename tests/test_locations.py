"""Where a problem over several values is reported (registry/validate/problems.py `locate`): the
place the user can change, their own file where they set one of the values, else the most specific
layer; every other place stays in `related` and in the message (issue 25)."""

import json

from conftest import run_cli

from registry.compose import compose
from registry.validate import validate

PART = "recipes/policy/pi07.yaml:8:3"  # policy.n_obs_steps: 6
OVERLAY = "recipes/pi07/zero2/8xA100.yaml"  # dataset.n_obs_history: 6 at 16:3, gradient_checkpointing at 11:3


def _mine(tmp_path, text: str, name: str = "my.yaml"):
    f = tmp_path / name
    f.write_text(text)
    return f


def test_a_rule_is_reported_at_the_users_line(tmp_path):
    my = _mine(tmp_path, "extends: [pi07/zero2/8xA100]\ndataset:\n  n_obs_history: 4\n")
    r = run_cli("validate", str(my))
    assert r.returncode == 1
    (line,) = r.stdout.splitlines()
    assert line.startswith(f"{my}:3:3: error[obs-history] policy.n_obs_steps:"), line
    # the rule's own value, set in the package, is still named: nothing is lost by moving
    assert f"policy.n_obs_steps set at {PART}; dataset.n_obs_history set at {my}:3:3" in line


def test_json_lists_every_involved_place(tmp_path):
    my = _mine(tmp_path, "extends: [pi07/zero2/8xA100]\ndataset:\n  n_obs_history: 4\n")
    r = run_cli("validate", str(my), "--format", "json")
    (problem,) = json.loads(r.stdout)["reports"][0]["problems"]
    assert problem["path"] == "policy.n_obs_steps" and problem["origin"] == f"{my}:3:3"
    assert problem["related"] == [
        {"path": "policy.n_obs_steps", "origin": PART},
        {"path": "dataset.n_obs_history", "origin": f"{my}:3:3"},
    ]


def test_a_file_of_the_users_that_the_target_extends_counts_as_theirs(tmp_path):
    _mine(tmp_path, "dataset:\n  n_obs_history: 4\n", "history.yaml")
    my = _mine(tmp_path, "extends: [pi07/zero2/8xA100, history.yaml]\ntrain: {steps: 10}\n")
    r = run_cli("validate", str(my))
    assert r.stdout.startswith(f"{tmp_path / 'history.yaml'}:2:3: error[obs-history]"), r.stdout


def test_the_command_line_is_the_users_too():
    r = run_cli("validate", "pi07/zero2/8xA100", "dataset.n_obs_history=4")
    assert r.stdout.startswith("command line: error[obs-history] policy.n_obs_steps:"), r.stdout
    assert f"policy.n_obs_steps set at {PART}; dataset.n_obs_history set at command line" in r.stdout


def test_values_all_in_the_package_point_at_the_most_specific_layer(tmp_path):
    """The user's file sets none of the values: the tuned overlay beats the part, as the rule reads."""
    my = _mine(tmp_path, "extends: [pi07/zero2/8xA100]\ntrain: {steps: 10}\n")
    recipe = compose(str(my))
    recipe.data["policy"]["n_obs_steps"] = 8  # the part's value, as if the part had changed
    (p,) = [p for p in validate(recipe.data, recipe.origins) if p.rule == "obs-history"]
    overlay = recipe.origins[("dataset", "n_obs_history")]
    assert overlay.endswith(f"{OVERLAY}:16:3") and p.origin == overlay
    assert p.related == (
        ("policy.n_obs_steps", recipe.origins[("policy", "n_obs_steps")]),
        ("dataset.n_obs_history", overlay),
    )
    # a part beats the base: the base's n_obs_steps against the act part's n_obs_history
    parts = _mine(tmp_path, "extends: [policy/act, backend/ddp, hardware/8xA100]\n", "parts.yaml")
    recipe = compose(str(parts))
    base = recipe.origins[("launch", "main_process_port")].rsplit(":", 2)[0]
    assert base.endswith("recipes/base.yaml")
    recipe.origins[("policy", "n_obs_steps")] = f"{base}:7:3"
    recipe.data["policy"]["n_obs_steps"] = 3
    (p,) = [p for p in validate(recipe.data, recipe.origins) if p.rule == "obs-history"]
    assert p.origin == recipe.origins[("dataset", "n_obs_history")] and "recipes/policy/act.yaml:" in p.origin


def test_a_rule_the_user_touched_none_of_stays_where_it_was(tmp_path):
    """A swap puts act's n_obs_steps against the overlay's n_obs_history; the user's file sets neither."""
    my = _mine(tmp_path, "extends: [pi07/zero2/8xA100]\ntrain: {steps: 10}\n")
    r = run_cli("validate", str(my), "policy=act")
    line = next(x for x in r.stdout.splitlines() if "error[obs-history]" in x)
    assert line.startswith(f"{OVERLAY}:16:3: error[obs-history] policy.n_obs_steps:"), line
    assert "policy.n_obs_steps set at recipes/policy/act.yaml:" in line
    # two parts: a tie keeps the rule's own path (the part's value put back: composition fixes it)
    parts = _mine(tmp_path, "extends: [policy/pi07, backend/zero3, hardware/8xA100]\n", "parts.yaml")
    recipe = compose(str(parts))
    assert recipe.fixed == ["zero3-torch-checkpointing"]
    recipe.data["policy"]["gradient_checkpointing"] = True
    recipe.origins[("policy", "gradient_checkpointing")] = "recipes/policy/pi07.yaml:14:3"
    (p,) = [p for p in validate(recipe.data, recipe.origins) if p.rule == "zero3-torch-checkpointing"]
    assert p.origin == "recipes/policy/pi07.yaml:14:3" and p.related[0][1].startswith("recipes/backend/zero3.yaml:")
