"""Values that read as something else than they look: a trailing newline past a pattern, NaN and
infinity, YAML 1.1's readings of `yes`, `1:30` and `0x10`, and terminal control characters that
would hide text from a reviewer (issue 13). Each is one clear problem, never a traceback."""

import math

import pytest
from conftest import run_cli

from registry.errors import RecipeError
from registry.load import load_text, parse_value
from registry.validate import ROOT, validate


def problems(doc: dict) -> list:
    return validate(doc, {}, ROOT)


def assert_one_clear_line(r, *expected: str) -> str:
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "Traceback" not in out, out
    lines = [line for line in out.splitlines() if "error[" in line or "error:" in line]
    assert len(lines) == 1, out
    for text in expected:
        assert text in lines[0], out
    return lines[0]


# --- 1. patterns: `$` is the end of the string (ECMA-262), not "before a final newline" ---------
# One field of each pattern-bearing kind: names, tags, identifiers, launch fields, env, argv items,
# and the keys that propertyNames patterns check.
PATTERN_FIELDS = [
    ({"recipe": {"name": "foo\n"}}, "recipe.name"),
    ({"recipe": {"tags": ["cpu\n"]}}, "recipe.tags.0"),
    ({"policy": {"type": "act\n"}}, "policy.type"),
    ({"policy": {"block_classes": ["Block\n"]}}, "policy.block_classes.0"),
    ({"dataset": {"repo_id": "org/data\n"}}, "dataset.repo_id"),
    ({"hardware": {"gpu": "H100-SXM\n"}}, "hardware.gpu"),
    ({"launch": {"main_process_ip": "10.0.0.1\n"}}, "launch.main_process_ip"),
    ({"launch": {"slurm": {"partition": "gpu\n"}}}, "launch.slurm.partition"),
    ({"launch": {"slurm": {"time": "01:00:00\n"}}}, "launch.slurm.time"),
    ({"launch": {"slurm": {"extra": ["--exclusive\n"]}}}, "launch.slurm.extra.0"),
    ({"env": {"NCCL_DEBUG": "INFO\n"}}, "env.NCCL_DEBUG"),
    ({"env": {"NCCL_DEBUG\n": "INFO"}}, "env.NCCL_DEBUG\n"),
    ({"dataset": {"drop_probs": {"state\n": 0.1}}}, "dataset.drop_probs.state\n"),
    ({"trainer": {"env": "/opt/venv\n"}}, "trainer.env"),
    ({"trainer": {"opentau": {"program": "opentau-train\n"}}}, "trainer.opentau.program"),
    ({"trainer": {"lerobot": {"module": "lerobot.scripts.train\n"}}}, "trainer.lerobot.module"),
    ({"trainer": {"lerobot": {"args": ["--seed=1\n"]}}}, "trainer.lerobot.args.0"),
    ({"trainer": {"command": {"args": ["--x\n"]}}}, "trainer.command.args.0"),
]


@pytest.mark.parametrize("doc, path", PATTERN_FIELDS, ids=[p for _, p in PATTERN_FIELDS])
def test_a_trailing_newline_fails_every_pattern(doc, path):
    found = [(p.rule, p.path) for p in problems(doc)]
    assert any(rule in ("pattern", "key-name") and p == path for rule, p in found), found


def test_the_same_values_without_the_newline_pass():
    for doc, _ in PATTERN_FIELDS:
        clean = eval(repr(doc).replace("\\n", ""))  # the same document, newline dropped
        assert [p for p in problems(clean) if p.rule in ("pattern", "key-name")] == [], clean


def test_a_trailing_newline_from_the_command_line_is_refused():
    r = run_cli("validate", "tiny/ddp/cpu", 'recipe.name="foo\\n"')
    assert_one_clear_line(r, "error[pattern] recipe.name", "'foo\\n'")


def test_a_trailing_newline_from_a_block_scalar_is_refused(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("extends: [tiny/ddp/cpu]\nrecipe:\n  name: |\n    mine\nenv:\n  A: |\n    b\n")
    r = run_cli("validate", str(recipe), cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "r.yaml:3:3: error[pattern] recipe.name: 'mine\\n'" in r.stdout
    assert "error[pattern] env.A: 'b\\n'" in r.stdout


# --- 2. NaN and infinity ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "override",
    [
        "policy.memory.params=.nan",
        "train.optimizer.lr=.inf",
        "train.optimizer.lr=-.inf",
        "train.optimizer.lr=.NaN",
        "train.optimizer.lr=1e999",
    ],
)
def test_non_finite_overrides_are_one_type_error(override):
    key = override.split("=")[0]
    assert_one_clear_line(run_cli("validate", "tiny/ddp/cpu", override), f"error[type] {key}", "not a finite number")


def test_non_finite_file_values_are_one_type_error(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("extends: [tiny/ddp/cpu]\ntrain:\n  optimizer:\n    lr: .inf\n")
    assert_one_clear_line(run_cli("validate", str(recipe), cwd=tmp_path), "r.yaml:4:9: error[type]", "finite")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_fail_the_schema_in_memory(value):
    found = [(p.rule, p.path, p.hint) for p in problems({"train": {"optimizer": {"lr": value}}})]
    assert found and all(rule == "type" and path == "train.optimizer.lr" for rule, path, _ in found), found
    assert "finite" in found[0][2]


# --- 3. YAML 1.2 core schema -----------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("y", "y"),
        ("n", "n"),
        ("Yes", "Yes"),
        ("1:30", "1:30"),
        ("1:30:00", "1:30:00"),
        ("0x10", "0x10"),
        ("0o17", "0o17"),
        ("017", "017"),
        ("0b101", "0b101"),
        ("1_000", "1_000"),
        ("1_000.5", "1_000.5"),
        ("=", "="),
        ("true", True),
        ("True", True),
        ("FALSE", False),
        ("null", None),
        ("~", None),
        ("0", 0),
        ("-7", -7),
        ("+7", 7),
        ("1.5", 1.5),
        (".5", 0.5),
        ("1e-4", 1e-4),
        ("2026-01-01", "2026-01-01"),
    ],
)
def test_scalars_read_as_yaml_1_2(text, expected):
    got = parse_value(text)
    assert got == expected and type(got) is type(expected)
    assert load_text(f"a: {text}\n", "f.yaml").data["a"] == got


@pytest.mark.parametrize(
    "override, hint",
    [
        ("policy.gradient_checkpointing=yes", "write true"),
        ("policy.gradient_checkpointing=off", "write false"),
        ("train.steps=1:30", "write 90"),
        ("train.steps=0x10", "write 16"),
        ("train.steps=0o17", "write 15"),
        ("train.steps=1_000", "write 1000"),
        ("train.steps=0b101", "write 5"),
    ],
)
def test_yaml_1_1_spellings_are_type_errors_with_a_hint(override, hint):
    key, value = override.split("=")
    line = assert_one_clear_line(run_cli("validate", "tiny/ddp/cpu", override), f"error[type] {key}: '{value}'")
    assert hint in line and "YAML 1.2" in line, line


def test_a_yaml_1_1_boolean_word_is_the_string_it_looks_like():
    r = run_cli("validate", "tiny/ddp/cpu", "backend.mixed_precision=no")
    assert r.returncode == 0, r.stdout + r.stderr


# --- 4. terminal control characters ----------------------------------------------------------
HIDDEN = ["\x1b[2K", "\r", "\x7f", "\x9b", "\u202e", "\x00", "\x08", "\u2028"]


@pytest.mark.parametrize("char", HIDDEN, ids=repr)
def test_control_characters_are_refused_at_load(char):
    with pytest.raises(RecipeError) as info:
        load_text(f'a:\n  b: "x{char.encode("unicode_escape").decode()}y"\n', "f.yaml")
    message = info.value.render()
    assert "f.yaml:2:6: error[control-char]" in message and char not in message


def test_control_characters_in_keys_are_refused():
    with pytest.raises(RecipeError, match="control-char"):
        load_text('"a\\e[8m": 1\n', "f.yaml")


def test_tabs_and_newlines_stay_text():
    assert load_text('a: "x\\ty"\nb: |\n  one\n  two\n', "f.yaml").data == {"a": "x\ty", "b": "one\ntwo\n"}


def test_a_hidden_export_on_the_command_line_is_refused_and_shown_escaped():
    r = run_cli("validate", "tiny/ddp/cpu", 'env.A="x\\rexport LD_PRELOAD=/tmp/evil.so"')
    line = assert_one_clear_line(r, "command line: error[control-char] env.A")
    assert "\\r" in line and "\r" not in r.stdout + r.stderr


@pytest.mark.parametrize("char", HIDDEN, ids=repr)
def test_control_characters_fail_the_schema_in_memory(char):
    found = problems({"env": {"A": f"x{char}y"}, "recipe": {"summary": f"s{char}"}})
    assert {(p.rule, p.path) for p in found} >= {("control-char", "env.A"), ("control-char", "recipe.summary")}
    for p in found:
        assert char not in p.render()


def test_dry_run_files_are_shown_escaped(capsys):
    from types import SimpleNamespace

    from registry.run import show

    bundle = SimpleNamespace(
        files={"launch.sh": "export A='x\rexport LD_PRELOAD=/evil.so'\n\tindented\n"},
        command="bash launch.sh \x1b[8mhidden",
    )
    show(bundle)
    out = capsys.readouterr().out
    assert "\r" not in out and "\x1b" not in out
    assert "export A='x\\rexport LD_PRELOAD=/evil.so'" in out and "\tindented" in out
    assert "\\x1b[8mhidden" in out


def test_invariant_messages_show_values_escaped():
    from registry.validate.problems import _show

    assert _show("a\x1b[2Jb\r") == "a\\x1b[2Jb\\r"


@pytest.mark.parametrize("override", ["hardware.gpus_per_node=8.0", "train.steps=3.0", "hardware.nodes=1.0"])
def test_a_whole_float_is_not_an_integer(override):
    """JSON Schema counts 8.0 as an integer; a recipe does not: it would reach the launcher as 16.0
    or a batch product as a float (found by the fuzz harness as a traceback in resolve)."""
    r = run_cli("resolve", "pi05/zero3/8xH100", override, "-o", "/nonexistent/never-written")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    key, value = override.split("=")
    assert f"{key}: {value} is not of type integer (hint: an integer is written without a point: write" in r.stderr
