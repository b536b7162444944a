"""Cells that work: a rule that declares its fix (schemas/*.json `fix`) has it applied at
composition where only parts set the value, never over the user; what stays invalid is listed
with its reasons."""

import json

from conftest import run_cli
from test_team_rules import write_rules

from registry.compose import compose
from registry.validate import validate
from registry.validate.fixes import fix_rules


def errors(recipe) -> set[str]:
    return {p.rule for p in validate(recipe.data, recipe.origins) if p.is_error}


def test_the_fsdp_cell_of_a_bfloat16_policy_is_valid_and_says_where_float32_came_from():
    r = run_cli("validate", "pi07/fsdp/4xH100")
    assert r.returncode == 0, r.stdout + r.stderr
    shown = run_cli("show", "pi07/fsdp/4xH100", "--origin").stdout
    line = next(x for x in shown.splitlines() if x.strip().startswith("dtype:"))
    assert line.strip() == (
        'dtype: float32  # schemas/policy.schema.json: fix of rule fsdp-fp32-model, in place of "bfloat16" '
        "from recipes/policy/pi07.yaml:20:3"
    )


def test_every_declared_fix_is_what_its_hint_names():
    """A fix is the hint's single setting, so the message a user reads and what composition does agree."""
    assert {rule["id"] for _, rule in fix_rules()} == {
        "fsdp-fp32-model",
        "zero3-torch-checkpointing",
        "bf16-compute-capability",
    }
    for _, rule in fix_rules():
        for path, value in rule["fix"].items():
            assert f"{path}={json.dumps(value)}".replace('"', "") in rule["hint"], rule["id"]


def test_the_other_fixes_apply_to_the_cells_they_name():
    zero3 = compose("pi07/zero3/8xA100")
    assert zero3.data["policy"]["gradient_checkpointing"] is False and zero3.fixed == ["zero3-torch-checkpointing"]
    v100 = compose("act/ddp/8xV100")
    assert v100.data["backend"]["mixed_precision"] == "fp16" and not errors(v100)
    generated = compose("tiny/zero2/4xV100")  # a generated hardware part, with no file to say it
    assert generated.data["backend"]["mixed_precision"] == "fp16" and not errors(generated)
    assert compose("pi07/zero2/8xA100").fixed == []  # nothing to fix: nothing changes


def test_a_fix_never_overrides_the_user(tmp_path):
    typed = run_cli("validate", "pi07/fsdp/4xH100", "policy.dtype=bfloat16")
    assert typed.returncode == 1 and "command line: error[fsdp-fp32-model]" in typed.stdout
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: [pi07/fsdp/4xH100]\npolicy:\n  dtype: bfloat16\n")
    r = run_cli("validate", str(mine))
    assert r.returncode == 1 and f"{mine}:3:3: error[fsdp-fp32-model]" in r.stdout, r.stdout


def test_a_fix_does_not_depend_on_the_order_of_extends(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: [backend/fsdp, policy/pi07, hardware/4xH100]\n")
    recipe = compose(str(mine))
    assert recipe.data["policy"]["dtype"] == "float32" and not errors(recipe)


def test_a_fix_that_would_not_make_its_rule_hold_is_not_applied():
    """pi05 holds a bfloat16 model: fp16 mixed precision alone leaves bf16 on a V100, so the
    cell stays as composed and the rule says why."""
    recipe = compose("pi05/zero2/8xV100")
    assert recipe.data["backend"]["mixed_precision"] == "bf16" and recipe.fixed == []
    assert recipe.origins[("backend", "mixed_precision")].startswith("recipes/backend/zero2.yaml:")
    assert "bf16-compute-capability" in errors(recipe)


def test_list_states_why_an_invalid_cell_is_invalid():
    table = run_cli("list", "--policy", "act", "--backend", "zero2", "--hardware", "8xA100").stdout.splitlines()
    assert table[0].split() == ["NAME", "VERSION", "SOURCE", "TUNED", "STATUS", "REASON", "SHADOWS", "SUMMARY"]
    assert table[1].split()[:6] == ["act/zero2/8xA100", "-", "bundled", "-", "invalid", "lerobot-no-deepspeed"]
    listed = json.loads(run_cli("list", "--all", "--format", "json").stdout)
    by_name = {e["name"]: e for e in listed}
    assert by_name["act/zero2/8xA100"]["reasons"] == [
        {"rule": "lerobot-no-deepspeed", "message": "LeRobot has no DeepSpeed path"}
    ]
    assert by_name["pi07/fsdp/4xH100"]["status"] == "valid" and by_name["pi07/fsdp/4xH100"]["reasons"] == []
    invalid = [e for e in listed if e["status"] == "invalid"]
    assert invalid and all(e["reasons"] for e in invalid)
    # no invalid cell is left for want of a declared fix whose rule it breaks alone
    fixable = {"fsdp-fp32-model", "zero3-torch-checkpointing"}
    assert not [e["name"] for e in invalid if {r["rule"] for r in e["reasons"]} & fixable]
    valid = json.loads(run_cli("list", "--all", "--valid", "--format", "json").stdout)
    assert {e["status"] for e in valid} == {"valid", "warnings"}


def test_a_team_rule_cannot_declare_a_fix(tmp_path):
    folder = tmp_path / "team"
    rule = {
        "id": "dtype-fix",
        "severity": "error",
        "require": {"x-where": {"policy.dtype": {"const": "float32"}}},
        "message": "m",
        "fix": {"policy.dtype": "float32"},
        "source": "s",
    }
    write_rules(folder, [rule])
    env = {"RECIPE_CONFIG": str(tmp_path / "sources.yaml"), "RECIPE_CACHE": str(tmp_path / "cache")}
    assert run_cli("source", "add", "team", str(folder), env=env).returncode == 0
    r = run_cli("validate", "tiny/ddp/cpu", env=env)
    assert r.returncode == 1 and "`fix` is for the bundled rules only" in r.stdout + r.stderr


def test_what_a_fix_records_in_process():
    """The value, the rule's id and the origin that names the rule and what it replaced, read in
    the test process (the checks above that go through `recipe` cannot tell which line wrote it)."""
    fsdp = compose("pi07/fsdp/4xH100")
    assert fsdp.fixed == ["fsdp-fp32-model"] and fsdp.data["policy"]["dtype"] == "float32"
    assert fsdp.origins[("policy", "dtype")] == (
        'schemas/policy.schema.json: fix of rule fsdp-fp32-model, in place of "bfloat16" from recipes/policy/pi07.yaml:20:3'
    )
    assert not errors(fsdp)
    zero3 = compose("pi07/zero3/8xA100")
    assert zero3.origins[("policy", "gradient_checkpointing")] == (
        "schemas/policy.schema.json: fix of rule zero3-torch-checkpointing, in place of true from recipes/policy/pi07.yaml:14:3"
    )
    generated = compose("tiny/zero2/4xV100")
    assert generated.fixed == ["bf16-compute-capability"]
    assert generated.origins[("backend", "mixed_precision")] == (
        'schemas/hardware.schema.json: fix of rule bf16-compute-capability, in place of "bf16" from recipes/backend/zero2.yaml:7:3'
    )


def test_the_users_value_stays_and_its_rule_reports_it_in_process():
    typed = compose("pi07/fsdp/4xH100", ["policy.dtype=bfloat16"])
    assert typed.fixed == [] and typed.data["policy"]["dtype"] == "bfloat16"
    assert typed.origins[("policy", "dtype")] == "command line"
    assert "fsdp-fp32-model" in errors(typed)


def test_a_fix_that_fails_leaves_the_value_and_its_origin_as_composed():
    recipe = compose("pi05/zero2/8xV100")
    assert recipe.fixed == [] and recipe.data["backend"]["mixed_precision"] == "bf16"
    assert recipe.origins[("backend", "mixed_precision")] == "recipes/backend/zero2.yaml:7:3"


def test_a_failed_fix_is_undone_key_by_key():
    """What `_try` undoes when a fix does not make its rule hold: a value the fix replaced comes
    back, one it added goes, however deep the path."""
    from registry.doc import MISSING
    from registry.validate.fixes import _restore

    data = {"backend": {"fsdp": {"sharding": "FULL_SHARD", "added": 1}, "kind": "fsdp"}}
    _restore(data, ("backend", "fsdp", "added"), MISSING)
    _restore(data, ("backend", "fsdp", "sharding"), "NO_SHARD")
    _restore(data, ("backend", "fsdp", "never"), MISSING)  # nothing to take away
    assert data == {"backend": {"fsdp": {"sharding": "NO_SHARD"}, "kind": "fsdp"}}


def test_a_fix_where_nothing_was_set_and_where_a_section_is_no_mapping():
    """A fix that adds a value says only which rule set it (nothing replaced); one whose way
    passes through a value that is no mapping is not set (the schema reports that value)."""
    from registry.validate.fixes import _settable, _try
    from registry.validate.schemas import validator

    rule = {
        "id": "test-fix",
        "require": {"required": ["a"], "properties": {"a": {"required": ["b"], "properties": {"b": {"const": 1}}}}},
        "fix": {"a.b": 1},
    }
    data, origins = {"x": 1}, {}
    assert _try(validator(), "policy.schema.json", rule, data, origins)
    assert data == {"x": 1, "a": {"b": 1}} and origins == {
        ("a", "b"): "schemas/policy.schema.json: fix of rule test-fix"
    }
    assert not _settable({"policy": "fp32"}, {}, ("policy", "dtype"))
    assert not _settable({"a": {"b": 5}}, {}, ("a", "b", "c")) and _settable({"a": {}}, {}, ("a", "b", "c"))
