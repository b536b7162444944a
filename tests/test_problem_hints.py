"""The hint of each kind of structural problem, word for word and in-process: the YAML 1.1
readings a recipe's text is not (registry/validate/problems.py `_yaml11_hint`), an unknown key
with its near misses and a level too deep, and the command line's axis swap written in a file.
test_values.py and test_cli.py see the same hints through `recipe` processes; these pin every
branch of the functions that write them (docs/mutation.md: a hint no test reads word for word
can change unseen)."""

from __future__ import annotations

import pytest

from registry.validate.problems import _yaml11_hint
from registry.validate.report import validate_target

YAML12 = "is text in a recipe (YAML 1.2)"


@pytest.mark.parametrize(
    "text, types, hint",
    [
        ("yes", ["boolean"], f"`yes` {YAML12}; write true"),
        ("Off", ["boolean", "null"], f"`Off` {YAML12}; write false"),
        ("N", ["boolean"], f"`N` {YAML12}; write false"),
        ("yes", ["integer"], None),  # a boolean word is a hint only where a boolean may go
        ("1:30", ["integer"], f"`1:30` {YAML12}, not a base-60 number; write 90"),
        ("-1:30", ["integer"], f"`-1:30` {YAML12}, not a base-60 number; write -90"),
        ("+1:30", ["number"], f"`+1:30` {YAML12}, not a base-60 number; write 90"),
        ("1:30.5", ["number"], f"`1:30.5` {YAML12}, not a base-60 number; write 90.5"),
        ("1_0:00", ["integer"], f"`1_0:00` {YAML12}, not a base-60 number; write 600"),
        ("1:30:15", ["integer"], f"`1:30:15` {YAML12}, not a base-60 number; write 5415"),
        # underscores YAML 1.1 allows where Python's int() does not (trailing, doubled)
        ("1_:30", ["integer"], f"`1_:30` {YAML12}, not a base-60 number; write 90"),
        ("1__0:00", ["integer"], f"`1__0:00` {YAML12}, not a base-60 number; write 600"),
        ("1:70", ["integer"], None),  # no base-60 digit is 70
        ("0x1F", ["integer"], f"`0x1F` {YAML12}; write 31"),
        ("-0x10", ["integer"], f"`-0x10` {YAML12}; write -16"),
        ("0o17", ["integer"], f"`0o17` {YAML12}; write 15"),
        ("0b101", ["integer"], f"`0b101` {YAML12}; write 5"),
        ("1_000", ["integer"], f"`1_000` {YAML12}; write 1000"),
        ("1_000.5", ["number"], f"`1_000.5` {YAML12}; write 1000.5"),
        ("017", ["integer"], f"`017` {YAML12}; write 17 without the leading zero (YAML 1.1 read it as octal 15)"),
        ("-017", ["integer"], f"`-017` {YAML12}; write -17 without the leading zero (YAML 1.1 read it as octal -15)"),
        ("019", ["integer"], f"`019` {YAML12}; write 19"),  # not octal: no octal reading to name
        ("0", ["integer"], None),
        ("abc", ["integer"], None),
        ("1:30", ["string"], None),
        ("1:30", ["boolean"], None),
    ],
)
def test_yaml_1_1_readings(text, types, hint):
    assert _yaml11_hint(text, types) == hint


def problems(target: str, *overrides: str) -> list[tuple]:
    report = validate_target(target, list(overrides))
    assert report.failure is None, report.failure
    return [(p.severity, p.rule, p.path, p.message, p.hint) for p in report.problems]


def test_a_type_error_carries_the_yaml_hint():
    assert problems("tiny/ddp/cpu", "train.steps=1:30") == [
        (
            "error",
            "type",
            "train.steps",
            "'1:30' is not of type integer",
            f"`1:30` {YAML12}, not a base-60 number; write 90",
        )
    ]
    assert problems("tiny/ddp/cpu", "policy.gradient_checkpointing=yes") == [
        (
            "error",
            "type",
            "policy.gradient_checkpointing",
            "'yes' is not of type boolean",
            f"`yes` {YAML12}; write true",
        )
    ]


def test_an_unknown_key_names_the_nearest_known_one():
    assert problems("tiny/ddp/cpu", "train.stpes=3") == [
        ("error", "unknown-key", "train.stpes", "unknown key", "did you mean 'steps'?")
    ]


def test_an_unknown_key_with_no_near_miss_lists_the_known_keys():
    (found,) = problems("tiny/ddp/cpu", "train.qqqqqqq=3")
    assert found[:4] == ("error", "unknown-key", "train.qqqqqqq", "unknown key")
    assert found[4].startswith("known keys: micro_batch_size, gradient_accumulation_steps, batch_size, ")
    assert found[4].endswith(", output_dir")


def test_a_section_one_level_too_deep_names_the_keys_where_they_go():
    said = "('fsdp' is no section of backend: its keys go right under it)"
    assert problems("tiny/ddp/cpu", "backend.fsdp.use_orig_params=true") == [
        ("error", "unknown-key", "backend.fsdp", "unknown key", f"did you mean backend.use_orig_params? {said}")
    ]
    # near misses count, each named once, at most three
    many = problems(
        "tiny/ddp/cpu",
        "backend.fsdp.use_orig_param=true",
        "backend.fsdp.use_orig_params=true",
        "backend.fsdp.kind=fsdp",
    )
    assert many == [
        (
            "error",
            "unknown-key",
            "backend.fsdp",
            "unknown key",
            f"did you mean backend.use_orig_params, backend.kind? {said}",
        )
    ]


def test_the_command_lines_swap_in_a_file_gets_the_file_form(tmp_path):
    part = tmp_path / "part.yaml"
    part.write_text("extends: [tiny/ddp/cpu]\nbackend: fsdp\n")
    assert problems(str(part)) == [
        (
            "error",
            "type",
            "backend",
            "'fsdp' is not of type object",
            "a recipe file names its parts in extends: write `extends: [..., backend/fsdp]` instead"
            " (backend=fsdp is the command line's swap; in a file, backend holds settings)",
        )
    ]
    cell = tmp_path / "cell.yaml"
    cell.write_text("policy: tiny\nbackend: fsdp\nhardware: cpu\n")
    hints = {path: hint for _, _, path, _, hint in problems(str(cell))}
    assert set(hints) == {"policy", "backend", "hardware"}
    for axis, value in (("policy", "tiny"), ("backend", "fsdp"), ("hardware", "cpu")):
        assert hints[axis] == (
            "a recipe file names its cell in extends: write `extends: [tiny/fsdp/cpu]` instead"
            f" ({axis}={value} is the command line's swap; in a file, {axis} holds settings)"
        )


DIFFUSION = (
    "the diffusion U-Net halves the horizon at each down-sampling stage, so the horizon (policy.chunk_size) must"
    " be a multiple of 2 ** len(down_dims)"
)


@pytest.mark.parametrize(
    "overrides, found",
    [
        ([], None),  # the part's horizon 16 over LeRobot's three stages
        (["policy.chunk_size=12"], "horizon 12 with 3 down_dims stages (a factor of 8) | (8 or 16)"),
        (
            ["policy.chunk_size=20", "policy.options.down_dims=[64,128,256]"],
            "horizon 20 with 3 down_dims stages (a factor of 8) | (16 or 24)",
        ),
        (["policy.chunk_size=24", "policy.options.down_dims=[64,128,256]"], None),
        # a flag's text, as LeRobot's command line writes the list
        (
            ["policy.chunk_size=12", "policy.options.down_dims='[64,128,256,512]'"],
            "horizon 12 with 4 down_dims stages (a factor of 16) | (16)",
        ),
        (["policy.chunk_size=16", "policy.options.down_dims='[64,'"], None),  # unreadable: the flag's own check says so
        (["policy.chunk_size=12", "policy.options.down_dims=[]"], None),
    ],
)
def test_the_diffusion_horizon_names_the_factor_and_the_nearest_horizons(overrides, found):
    report = validate_target("diffusion/ddp/1xH100", overrides)
    assert report.failure is None, report.failure
    got = [p for p in report.problems if p.rule == "lerobot-diffusion-horizon"]
    if found is None:
        assert got == []
        return
    said, nearest = found.split(" | ")
    (problem,) = got
    assert (problem.severity, problem.path) == ("error", "policy.chunk_size")
    assert problem.message == f"{DIFFUSION}: {said}"
    assert problem.hint == f"set policy.chunk_size to a multiple of the factor {nearest}"


def test_the_diffusion_horizon_defaults_to_lerobots_and_is_found_at_the_policy_type():
    """Without policy.chunk_size the horizon is LeRobot's default (16) and the problem sits at
    policy.type, the field that brought it; without options, LeRobot's three stages."""
    from registry import view
    from registry.validate import checks

    rule = {"severity": "error", "message": "m", "hint": "h"}
    five = {"policy": {"type": "diffusion", "chunk_size": None, "options": {"down_dims": [1, 2, 3, 4, 5]}}}
    [finding] = checks.diffusion_horizon(view.of(five), rule)
    assert finding.path == ("policy", "type")
    assert finding.message == "m: horizon 16 with 5 down_dims stages (a factor of 32)"
    assert finding.hint == "h (32)"
    assert (
        checks.diffusion_horizon(view.of({"policy": {"type": "diffusion", "chunk_size": None, "options": None}}), rule)
        == []
    )
    three = {"policy": {"type": "diffusion", "chunk_size": 20, "options": None}}
    assert (
        checks.diffusion_horizon(view.of(three), rule)[0].message
        == "m: horizon 20 with 3 down_dims stages (a factor of 8)"
    )
    text = {"policy": {"type": "diffusion", "chunk_size": 40, "options": {"down_dims": "[8,16,32,64]"}}}
    assert checks.diffusion_horizon(view.of(text), rule)[0].hint == "h (32 or 48)"
    assert checks.diffusion_horizon(view.of({"policy": {"chunk_size": "16", "options": None}}), rule) == []


def hints_of(schema: dict, instance) -> list[tuple[str, str, str | None]]:
    """(path, rule, hint) of each problem the checker's errors over INSTANCE become, in-process
    (as registry/validate's `_validate`, one of each: every missing key's error names them all)."""
    from registry.validate.checker import Checker
    from registry.validate.keywords import KEYWORDS
    from registry.validate.problems import from_error

    found = []
    for error in Checker(schema, {}, KEYWORDS).iter_errors(instance):
        found += [(p.path, p.rule, p.hint) for p in from_error(error, instance, {})]
    return sorted(set(found))


SECTIONS = {"type": "object", "properties": {"train": {}, "policy": {}, "backend": {}, "hardware": {}}}


@pytest.mark.parametrize(
    "schema, instance, expected",
    [
        # a missing key's hint is its description, where it has one
        (
            {"properties": {"lr": {"description": "the learning rate"}, "steps": {}}, "required": ["lr", "steps"]},
            {},
            [("lr", "required", "the learning rate"), ("steps", "required", None)],
        ),
        ({"required": ["lr"]}, {}, [("lr", "required", None)]),  # a schema with no properties at all
        # a key a pattern allows is no unknown key; one that neither names nor patterns allow is
        (
            {"properties": {"a": {}}, "patternProperties": {"^x_": {}}, "additionalProperties": False},
            {"a": 1, "x_b": 2, "zz": 3},
            [("zz", "unknown-key", "known keys: a")],
        ),
        (
            {"patternProperties": {"^x_": {}}, "additionalProperties": False},
            {"x_b": 2, "zz": 3},
            [("zz", "unknown-key", "known keys: ")],
        ),
        # a section one level too deep at the top: "the recipe", at most three keys, misspelt ones
        # matched to the nearest, keys that match nothing left out
        (
            {**SECTIONS, "additionalProperties": False},
            {"extra": {"trian": 1, "policy": 2, "backend": 3, "hardware": 4, "qqqq": 5}},
            [
                (
                    "extra",
                    "unknown-key",
                    "did you mean train, policy, backend? ('extra' is no section of the recipe: its keys go right under it)",
                )
            ],
        ),
        (
            {**SECTIONS, "additionalProperties": False},
            {"polcy": 1},
            [("polcy", "unknown-key", "did you mean 'policy'?")],
        ),
    ],
)
def test_the_hint_of_each_missing_and_unknown_key(schema, instance, expected):
    assert hints_of(schema, instance) == expected


def test_a_problem_over_two_values_is_reported_where_the_user_set_one():
    """Two places: the command line's wins over the cell's file, and the path itself joins the
    related ones so that both stay in the message (problems.locate)."""
    from registry.compose import compose
    from registry.validate.problems import locate

    origins = compose("tiny/ddp/cpu", ["train.micro_batch_size=3"]).origins
    related = (("train.micro_batch_size", "command line"),)
    assert locate(("train", "steps"), related, origins) == (
        "command line",
        (("train.steps", "recipes/tiny/ddp/cpu.yaml:10:3"), ("train.micro_batch_size", "command line")),
    )
    same = (("train.lr", origins.get(("train", "steps"))),)  # one place only: there, as it is
    assert locate(("train", "steps"), same, origins) == ("recipes/tiny/ddp/cpu.yaml:10:3", same)


@pytest.mark.parametrize(
    "cell, override, rule, hint",
    [
        (
            "act/ddp/2xH100",
            "policy.use_torch_compile=true",
            "lerobot-policy-compile",
            "remove it, or pass the policy's own option through policy.options; its default is False",
        ),
        (  # no default to name
            "act/ddp/2xH100",
            "policy.freeze_vision_encoder=true",
            "lerobot-policy-freeze",
            "remove it, or pass the policy's own option through policy.options",
        ),
        (
            "tiny/ddp/cpu",
            "trainer.lerobot.module=x",
            "builtin-not-applicable",
            "remove it, or use the trainer it belongs to; its default is 'lerobot.scripts.lerobot_train'",
        ),
    ],
)
def test_a_value_that_would_be_dropped_names_its_default_where_it_has_one(cell, override, rule, hint):
    from registry.compose import compose
    from registry.validate import validate

    recipe = compose(cell, [override])
    found = [(p.severity, p.hint) for p in validate(recipe.data, recipe.origins) if p.rule == rule]
    assert found == [("error", hint)]
