"""Bad YAML gets one clear RecipeError naming file:line:column, never a traceback."""

import time

import pytest

from registry.errors import RecipeError
from registry.load import MAX_BYTES, load_file, load_json, load_text, parse_value


def error(text: str) -> str:
    with pytest.raises(RecipeError) as info:
        load_text(text, "f.yaml")
    return str(info.value)


def test_values_and_origins():
    doc = load_text("a: 1\nb:\n  c: [x, 2.5]\n  d: 2026-01-01\n", "f.yaml")
    assert doc.data == {"a": 1, "b": {"c": ["x", 2.5], "d": "2026-01-01"}}
    assert doc.origins[("a",)] == "f.yaml:1:1"
    assert doc.origins[("b", "c")] == "f.yaml:3:3"
    assert doc.origins[("b", "c", 1)] == "f.yaml:3:10"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a: [1", "f.yaml:2:1: error[yaml]"),
        ("a: b: c", "f.yaml:1:5: error[yaml]"),
        ("a: !!python/object/apply:os.system [echo hacked]", "error[yaml-tag]"),
        ("a: !!python/name:os.system", "error[yaml-tag]"),
        ("a: !custom x", "error[yaml-tag]"),
        ("a: !!binary aGk=", "error[yaml-tag]"),
        ("a: !!set {x}", "error[yaml-tag]"),
        ("a: 1\nb: 2\na: 3", "f.yaml:3:1: error[duplicate-key] key 'a' already set at line 1"),
        ("", "error[empty]"),
        ("# only a comment\n", "error[empty]"),
        ("- 1\n- 2", "must be a mapping"),
        ("just a string", "must be a mapping"),
        ("1: x", "key 1 must be a string"),
        ("true: x", "key True must be a string"),
        ("a: 1" + "0" * 5000, "f.yaml:1:4: error[type] '1000000000000000000000000000000000000000' is not an integer"),
        ("a: !!int 0x10", "error[type] '0x10' is not an integer"),
        ("a: !!bool yes", "error[type] 'yes' is not a boolean"),
        ("a: 1\n---\nb: 2", "expected a single document"),
        ("<<: {a: 1}", "merge keys"),
        ("a: &r [*r]", "error[yaml]"),
        ("[" * 2000, "error[yaml]"),
    ],
)
def test_bad_yaml(text, expected):
    assert expected in error(text)


def test_alias_bomb_is_bounded():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    start = time.perf_counter()
    message = error("\n".join(lines))
    assert "alias bomb" in message
    assert time.perf_counter() - start < 2.0  # 9**10 nodes if expanded


def test_file_errors(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * (MAX_BYTES + 10))
    with pytest.raises(RecipeError, match="larger than"):
        load_file(big)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"a: \xff\xfe")
    with pytest.raises(RecipeError, match="not UTF-8"):
        load_file(binary)
    with pytest.raises(RecipeError, match="cannot read"):
        load_file(tmp_path / "missing.yaml")


def test_parse_value_is_yaml_typed():
    assert parse_value("8") == 8
    assert parse_value("1e-4") == 1e-4  # YAML 1.2's reading; PyYAML alone (YAML 1.1) gives a string
    assert parse_value("-3E+2") == -300.0
    assert parse_value("'1e-4'") == "1e-4"  # quoted stays text
    assert parse_value("e-4") == "e-4"
    assert parse_value("1.0e-4") == 1.0e-4
    assert parse_value("true") is True
    assert parse_value("[a, b]") == ["a", "b"]
    assert parse_value("expandable_segments:True") == "expandable_segments:True"
    with pytest.raises(RecipeError):
        parse_value("!!python/object/apply:os.system [ls]")


def test_yes_and_on_are_strings_in_keys_and_values():
    assert load_text("yes: on\nno: off\n", "f.yaml").data == {"yes": "on", "no": "off"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"lr": NaN}', "d.json:1:2: error[type] lr: NaN is not a finite number"),
        ('{\n  "a": {\n    "lr": -Infinity}}', "d.json:3:5: error[type] a.lr: -Infinity is not a finite number"),
        ('{"lr": 1e999}', "d.json:1:2: error[type] lr: 1e999 is not a finite number"),
        ('{"x": "a\\u001b[2Jb"}', "d.json:1:2: error[control-char] x: 'a\\x1b[2Jb' holds control character U+001B"),
        ("[" * 100_000 + "]" * 100_000, "d.json: error[json] not a DeepSpeed config: nested too deeply"),
        ('{"a":' * 100_000 + "1" + "}" * 100_000, "d.json: error[json] not a DeepSpeed config: nested too deeply"),
        ('{"a": ' + "1" * 5000 + "}", "error[json] not a DeepSpeed config: Exceeds the limit (4300 digits)"),
    ],
)
def test_json_values_a_recipe_cannot_hold(tmp_path, monkeypatch, text, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.json").write_text(text)
    with pytest.raises(RecipeError) as info:
        load_json(tmp_path / "d.json", "DeepSpeed config")
    assert expected in info.value.render()
