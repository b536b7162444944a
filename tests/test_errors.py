"""Bad input meets one structured problem: a rule id, where the value was set, an exit code,
never a traceback; rule files are checked as they load."""

import json
import shutil

import pytest
from conftest import run_cli

from registry import commands, files
from registry.errors import Exit, Problem, RecipeError
from registry.validate import schemas, verdicts


@pytest.mark.parametrize(
    ("override", "path", "expected"),
    [
        ("train.micro_batch_size=16x", "train.micro_batch_size", "integer"),
        ("hardware.nodes=x", "hardware.nodes", "integer"),
        ("backend.zero_stage=two", "backend.zero_stage", "integer"),
        ("policy.memory.params=x", "policy.memory.params", "number"),
    ],
)
def test_a_typo_is_one_type_error_with_its_location(override, path, expected):
    r = run_cli("validate", "pi07/zero2/8xA100", override)
    assert r.returncode == Exit.INVALID and "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stdout.splitlines() if "error[" in line]
    assert errors == [f"command line: error[type] {path}: '{override.split('=')[1]}' is not of type {expected}"]


def test_estimate_refuses_a_typo_without_a_traceback():
    r = run_cli("estimate", "pi07/zero2/8xA100", "train.micro_batch_size=16x")
    assert r.returncode == Exit.INVALID and "Traceback" not in r.stderr, r.stderr
    assert "error[type] train.micro_batch_size" in r.stderr


def test_non_finite_numbers_are_refused():
    r = run_cli("validate", "pi07/zero2/8xA100", "policy.memory.params=.nan")
    assert r.returncode == Exit.USAGE and "Traceback" not in r.stderr
    assert "command line: error[type] policy.memory.params: '.nan' is not a finite number" in r.stdout


def test_lerobot_accumulation_is_a_rule_at_validate_time():
    r = run_cli("validate", "act/ddp/8xA100", "train.gradient_accumulation_steps=2")
    assert r.returncode == Exit.INVALID
    assert r.stdout.startswith(
        "command line: error[lerobot-no-accumulation] train.gradient_accumulation_steps: 2 would be dropped:"
        " lerobot-train v0.6.1 cannot take it"
    )


def test_unknown_command_placeholder_is_a_rule_at_validate_time():
    args = ["trainer.kind=command", "trainer.command.program=./t.sh", "trainer.command.args=['--b={train.micro}']"]
    r = run_cli("validate", "tiny/ddp/cpu", *args)
    assert r.returncode == Exit.INVALID
    assert "error[command-placeholders] trainer.command.args.0: placeholder 'train.micro' names nothing" in r.stdout


@pytest.fixture
def schema_copy(tmp_path, monkeypatch):
    """The schemas in a folder of the test's own, loaded afresh."""
    folder = tmp_path / "schemas"
    shutil.copytree(files.SCHEMA_DIR, folder)
    monkeypatch.setattr(files, "SCHEMA_DIR", folder)
    monkeypatch.setattr(schemas, "SCHEMA_DIR", folder)
    for cached in (files.schema_documents, schemas.documents, schemas.computed_rules, schemas.referable):
        cached.cache_clear()
    schemas.validator.cache_clear()
    verdicts._installation.cache_clear()  # the schema files are part of every verdict's key
    yield folder
    for cached in (files.schema_documents, schemas.documents, schemas.computed_rules, schemas.referable):
        cached.cache_clear()
    schemas.validator.cache_clear()
    verdicts._installation.cache_clear()  # the schema files are part of every verdict's key


def _break_rule(folder, change):
    path = folder / "trainer.schema.json"
    doc = json.loads(path.read_text())
    change(doc["$defs"]["invariants"]["x-invariants"][0])
    path.write_text(json.dumps(doc))


def test_a_misspelt_rule_key_is_one_error_naming_the_file(schema_copy, capsys):
    _break_rule(schema_copy, lambda rule: rule.__setitem__("mesage", rule.pop("message")))
    assert commands.main(["validate", "tiny/ddp/cpu"]) == Exit.INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"{schema_copy / 'trainer.schema.json'}: error[rule-file] $defs/invariants/x-invariants/0")
    assert "(lerobot-no-deepspeed)" in err[0] and "'mesage' was unexpected" in err[0]


def test_an_unknown_computed_check_is_named(schema_copy, capsys):
    _break_rule(schema_copy, lambda rule: (rule.pop("require"), rule.__setitem__("compute", "no-such-check")))
    assert commands.main(["schema"]) in (Exit.OK, Exit.INVALID)  # printing the schema need not check rules
    capsys.readouterr()
    assert commands.main(["validate", "tiny/ddp/cpu"]) == Exit.INVALID
    assert "unknown computed check 'no-such-check'" in capsys.readouterr().err


def test_problems_travel_structured():
    e = RecipeError.at("a.yaml:3:5", "type", "is wrong", path="train.steps", hint="use a number")
    assert e.exit_code == Exit.INVALID
    assert e.problem == Problem("error", "type", "train.steps", "is wrong", "a.yaml:3:5", "use a number")
    assert e.render() == "a.yaml:3:5: error[type] train.steps: is wrong (hint: use a number)"
    assert RecipeError("no such recipe").render() == "recipe: error: no such recipe"


def test_every_field_of_a_gpu_recipe_survives_wrong_values():
    """Each leaf of a GPU recipe set to values of other types and ranges: a problem report or a
    clean RecipeError, never an exception from inside the pipeline (the estimator included)."""
    from registry.compose import compose
    from registry.doc import join, leaves
    from registry.validate import validate

    values = ["x", "-1", "[]", "{}", "null", "1.5", "true", "1e400"]
    target = "pi07/zero2/8xA100"
    crashes = []
    for path in leaves(compose(target).data):
        if any(isinstance(p, int) for p in path):
            continue
        for value in values:
            override = f"{join(path)}={value}"
            try:
                recipe = compose(target, [override])
                validate(recipe.data, recipe.origins)
            except RecipeError:
                pass
            except Exception as e:  # the point is to catch anything else
                crashes.append(f"{override}: {e!r}")
    assert not crashes, crashes[:10]


def test_the_placeholder_rule_knows_what_the_command_trainer_fills():
    from registry.compose import compose
    from registry.resolve.launch import context
    from registry.trainers.command import launch_values
    from registry.validate.checks import COMMAND_PLACEHOLDERS

    doc = compose("tiny/ddp/cpu", ["trainer.kind=command", "trainer.command.program=./t.sh"]).data
    assert set(launch_values(doc, context(doc))) == set(COMMAND_PLACEHOLDERS)


def test_messages_show_control_characters_escaped():
    """A name or value echoed in an error cannot act on the terminal (docs/failure-modes.md §36)."""
    r = run_cli("show", "tiny/ddp/cpu\x1b[2K\rpi07/zero2/8xA100")
    assert r.returncode == 2 and "\x1b" not in r.stderr and "\r" not in r.stderr
    assert "tiny/ddp/cpu\\x1b[2K\\rpi07/zero2/8xA100" in r.stderr
