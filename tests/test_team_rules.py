"""Team rules: a source's rules/*.json add x-invariants to its own recipes (or to every recipe,
opted in), fire named by the source, and a malformed or colliding rule file is one line."""

import json
import os

import pytest
from conftest import run_cli

LINK = "https://wiki.example/team-a/cluster"
RULE = {
    "id": "max-micro-batch",
    "severity": "error",
    "require": {"x-compare": {"left": "train.micro_batch_size", "op": "<=", "right": 8}},
    "message": "train.micro_batch_size is {train.micro_batch_size}; our cluster allows at most 8",
    "hint": "set train.micro_batch_size=8",
    "source": LINK,
}
FIRED = "error[team-a:max-micro-batch] train.micro_batch_size: train.micro_batch_size is 16"


def write_rules(folder, rules, name="cluster.json"):
    (folder / "rules").mkdir(parents=True, exist_ok=True)
    path = folder / "rules" / name
    path.write_text(json.dumps({"description": "team-a's cluster", "x-invariants": rules}, indent=2))
    return path


@pytest.fixture
def team_a(tmp_path):
    """Team A's directory source: the micro-batch rule and a free-standing recipe breaking it
    (pi07/zero2/8xA100 itself runs micro batch 20, so the bundled cell breaks it too)."""
    folder = tmp_path / "team-a"
    (folder / "exp").mkdir(parents=True)
    write_rules(folder, [RULE])
    (folder / "exp" / "big.yaml").write_text(
        "extends: [pi07/zero2/8xA100]\nrecipe:\n  name: exp/big\ntrain:\n  micro_batch_size: 16\n"
    )
    env = {"RECIPE_CONFIG": str(tmp_path / "sources.yaml"), "RECIPE_CACHE": str(tmp_path / "cache")}
    added = run_cli("source", "add", "team-a", str(folder), env=env)
    assert added.returncode == 0, added.stderr
    return folder, env


def opted_in(tmp_path, folder):
    env = {"RECIPE_CONFIG": str(tmp_path / "everywhere.yaml"), "RECIPE_CACHE": str(tmp_path / "cache")}
    added = run_cli("source", "add", "team-a", str(folder), "--rules-everywhere", env=env)
    assert added.returncode == 0, added.stderr
    return env


def test_a_team_rule_fires_on_the_team_recipe_named_by_its_source(team_a):
    folder, env = team_a
    for target in ("team-a:exp/big", str(folder / "exp" / "big.yaml")):
        r = run_cli("validate", target, env=env)
        assert r.returncode == 1, r.stderr
        assert r.stdout.startswith(f"{folder / 'exp' / 'big.yaml'}:5:3: {FIRED}; our cluster allows at most 8")
        # the rule's hint and its `source` link are shown: the team's page says why
        assert f"(hint: set train.micro_batch_size=8; see {LINK})" in r.stdout


def test_team_rules_only_add_to_the_bundled_rules(team_a):
    _, env = team_a
    r = run_cli("validate", "team-a:exp/big", "policy.n_obs_steps=8", env=env)
    assert r.returncode == 1
    assert "error[obs-history]" in r.stdout and "error[team-a:max-micro-batch]" in r.stdout


def test_the_same_values_in_a_bundled_recipe_pass_unless_opted_in(tmp_path, team_a):
    folder, env = team_a
    r = run_cli("validate", "pi07/zero2/8xA100", env=env)
    assert r.returncode == 0 and r.stdout == "", r.stdout
    everywhere = opted_in(tmp_path, folder)
    assert "rules: everywhere" in (tmp_path / "everywhere.yaml").read_text()
    r = run_cli("validate", "pi07/zero2/8xA100", env=everywhere)
    assert r.returncode == 1
    assert r.stdout.startswith(
        "recipes/pi07/zero2/8xA100.yaml:18:3: error[team-a:max-micro-batch] train.micro_batch_size: "
        "train.micro_batch_size is 20"
    )


def test_validate_all_and_json_name_the_rule_source(team_a):
    folder, env = team_a
    r = run_cli("validate", "--all", "-q", env=env)
    assert r.returncode == 1
    fired = [line for line in r.stdout.splitlines() if "team-a:" in line]
    assert fired == [f"{folder / 'exp' / 'big.yaml'}:5:3: {FIRED}; our cluster allows at most 8 (hint: set "
                     f"train.micro_batch_size=8; see {LINK})"]  # fmt: skip
    doc = json.loads(run_cli("validate", "team-a:exp/big", "--format", "json", env=env).stdout)
    (problem,) = doc["reports"][0]["problems"]
    assert problem["rule"] == "team-a:max-micro-batch" and problem["from"] == "team-a"
    assert problem["source"] == LINK and problem["path"] == "train.micro_batch_size"


def test_resolve_refuses_a_team_recipe_its_rules_reject(tmp_path, team_a):
    _, env = team_a
    r = run_cli("resolve", "team-a:exp/big", "-o", str(tmp_path / "out"), env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "error[team-a:max-micro-batch]" in r.stderr and "nothing was resolved" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda rule: rule.__setitem__("mesage", rule.pop("message")), "'mesage' was unexpected"),
        (lambda rule: rule["require"]["x-compare"].__setitem__("op", "=<"), "require/x-compare: op '=<' is not one"),
        (lambda rule: rule.__setitem__("when", {"type": 3}), "when/type: 3 is not valid"),
        # a keyword the checker does not implement is refused, never checked otherwise than JSON Schema says
        (
            lambda rule: rule.__setitem__("when", {"properties": {"train": {"unevaluatedProperties": False}}}),
            "when/properties/train/unevaluatedProperties: unevaluatedProperties is not supported in rule files",
        ),
    ],
)
def test_a_malformed_rule_file_is_one_line(team_a, change, says):
    folder, env = team_a
    rule = json.loads(json.dumps(RULE))
    change(rule)
    path = write_rules(folder, [rule])
    for args in (["validate", "pi07/zero2/8xA100"], ["validate", "--all"], ["run", "tiny/ddp/cpu", "--dry-run"]):
        r = run_cli(*args, env=env)
        assert r.returncode == 1 and r.stdout == "", (args, r.stdout)
        (line,) = r.stderr.splitlines()
        assert line.startswith(f"{path}: error[rule-file] x-invariants/0 (max-micro-batch): ") and says in line


def test_a_rule_file_that_is_not_json_is_one_line(team_a):
    folder, env = team_a
    (folder / "rules" / "cluster.json").write_text('{"x-invariants": [')
    r = run_cli("validate", "tiny/ddp/cpu", env=env)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"{folder / 'rules' / 'cluster.json'}:1:19: error[rule-file] not JSON: Expecting value"
    ]


def test_rule_ids_collide_neither_with_bundled_rules_nor_within_a_source(team_a):
    folder, env = team_a
    bundled = write_rules(folder, [{**RULE, "id": "memory-fit", "severity": "warning"}])
    r = run_cli("validate", "team-a:exp/big", env=env)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"{bundled}: error[rule-file] x-invariants/0 (memory-fit): rule id 'memory-fit' is a bundled rule's id; "
        "team rules add to the bundled rules, never replace one (hint: pick an id of your own)"
    ]
    first = write_rules(folder, [RULE])
    second = write_rules(folder, [{**RULE, "severity": "warning"}], name="more.json")
    r = run_cli("validate", "team-a:exp/big", env=env)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"{second}: error[rule-file] x-invariants/0 (max-micro-batch): rule id 'max-micro-batch' is also defined in "
        f"{first} (x-invariants/0) (hint: rule ids are unique within a source)"
    ]


def test_the_same_id_in_two_sources_is_two_rules(tmp_path, team_a):
    _, env = team_a
    other = tmp_path / "team-b"
    write_rules(other, [{**RULE, "severity": "warning"}])
    assert run_cli("source", "add", "team-b", str(other), "--rules-everywhere", env=env).returncode == 0
    r = run_cli("validate", "team-a:exp/big", env=env)
    assert "error[team-a:max-micro-batch]" in r.stdout and "warning[team-b:max-micro-batch]" in r.stdout


def test_an_unknown_rules_setting_is_one_line(tmp_path, team_a):
    folder, env = team_a
    config = tmp_path / "sources.yaml"
    config.write_text(config.read_text().replace(f"path: {folder}", f"path: {folder}\n  rules: sometimes"))
    r = run_cli("validate", "tiny/ddp/cpu", env=env)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"recipe: error: {config}: source 'team-a': rules: 'sometimes' is not one of own, everywhere"
    ]


def test_an_edited_rule_file_is_read_again(tmp_path, team_a, monkeypatch):
    """Rules are cached per file mtime and size, in one process as the list and site commands run."""
    from registry.compose import compose
    from registry.validate import validate

    folder, env = team_a
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    recipe = compose("team-a:exp/big")
    assert [p.rule for p in validate(recipe.data, recipe.origins)] == ["team-a:max-micro-batch"]
    path = write_rules(folder, [{**RULE, "require": {"x-compare": {**RULE["require"]["x-compare"], "right": 32}}}])
    stamp = path.stat().st_mtime_ns + 10**9
    os.utime(path, ns=(stamp, stamp))
    assert validate(recipe.data, recipe.origins) == []
    assert validate(*(lambda r: (r.data, r.origins))(compose("pi07/zero2/8xA100"))) == []


def test_a_rule_file_is_validated_on_its_own(team_a):
    """What a pre-commit hook hands over: the rule file itself, checked as it would load."""
    folder, env = team_a
    good = folder / "rules" / "cluster.json"
    bad = write_rules(folder, [{**RULE, "id": "Max"}], name="bad.json")
    r = run_cli("validate", str(good), str(bad), env=env)
    assert r.returncode == 1
    assert r.stdout.startswith(f"{bad}: error[rule-file] x-invariants/0 (Max): ")
    assert f"{good}: valid" in r.stderr and f"{bad}: invalid" in r.stderr


# --- the project's own keywords in a team's rule, checked in-process -----------------------------
@pytest.mark.parametrize(
    ("node", "found"),
    [
        ({"x-compare": {"left": "a", "op": "==", "right": 1}}, []),
        ({"x-compare": {"left": "a", "right": 1}}, [("/x-compare", "needs left, op and right")]),
        ({"x-compare": {"left": "a", "op": "=="}}, [("/x-compare", "needs left, op and right")]),
        ({"x-compare": {"op": "==", "right": 1}}, [("/x-compare", "needs left, op and right")]),
        ({"x-compare": ["a", "==", 1]}, [("/x-compare", "needs left, op and right")]),
        (
            {"x-compare": {"left": "a", "op": "=>", "right": 1}},
            [("/x-compare", "op '=>' is not one of ==, !=, <, <=, >, >=")],
        ),
        ({"x-where": {"backend.kind": {"const": "fsdp"}, "x": True}}, []),
        ({"x-where": {"backend.kind": "fsdp"}}, [("/x-where", "maps dotted paths to subschemas")]),
        ({"x-where": ["backend.kind"]}, [("/x-where", "maps dotted paths to subschemas")]),
        ({"x-compare": None, "x-where": None}, []),  # absent as far as the keywords go
        # nested: each one at its own JSON pointer, inside lists and mappings alike
        (
            {"allOf": [{"x-where": 1}, {"not": {"x-compare": {}}}]},
            [
                ("/allOf/0/x-where", "maps dotted paths to subschemas"),
                ("/allOf/1/not/x-compare", "needs left, op and right"),
            ],
        ),
        # not descended into: one inside x-where fails when evaluated, and _failing names its rule
        ({"require": {"x-where": {"a": {"x-compare": {}}}}}, []),
        # values, not schemas: never read as keywords
        (
            {
                "const": {"x-compare": {}},
                "enum": [{"x-where": 1}],
                "default": {"x-where": 1},
                "examples": [{"x-compare": 1}],
            },
            [],
        ),
    ],
)
def test_keyword_errors(node, found):
    from registry.validate import team

    assert list(team._keyword_errors(node, "")) == found
    assert list(team._keyword_errors([node], "/x-invariants")) == [(f"/x-invariants/0{at}", why) for at, why in found]


def test_the_failing_rule_is_found_and_named_by_its_file():
    """A subschema the meta-schema let through that fails while evaluating: the rule is found by
    evaluating each alone, and named by the file and pointer it came from."""
    from registry.validate import team

    good = {
        "id": "t:ok",
        "severity": "error",
        "message": "m",
        "hint": "h",
        "source": "s",
        "require": {"type": "object"},
    }
    bad = {**good, "id": "t:bad", "require": {"x-compare": {"left": "train.steps", "right": 1}}}  # no "op"
    teams = [team.TeamRules("t", False, (good, bad), {"t:ok": ("rules/a.json", "/0"), "t:bad": ("rules/b.json", "/3")})]
    data = {"train": {"steps": 5}}
    assert team._failing([good, bad], data, teams) == ("rules/b.json", "/3")
    assert team._failing([good], data, teams) == ("team rules", "")


def test_a_team_rule_is_namespaced_and_its_link_rides_in_the_hint():
    from registry.validate import team

    rule = {"id": "max-mb", "severity": "error", "message": "m", "hint": "lower it", "source": "https://x/y"}
    assert team._namespaced("team-a", rule) == {**rule, "id": "team-a:max-mb", "hint": "lower it; see https://x/y"}
    bare = {k: v for k, v in rule.items() if k != "hint"}
    assert team._namespaced("team-a", bare) == {**bare, "id": "team-a:max-mb", "hint": "see https://x/y"}
    assert team._namespaced("team-a", {**rule, "hint": ""})["hint"] == "see https://x/y"
    assert rule["id"] == "max-mb"  # the rule itself is left as it was


def test_unsupported_keywords_are_found_in_schemas_not_in_values():
    from registry.validate import team
    from registry.validate.standard import STANDARD, UNSUPPORTED

    assert not UNSUPPORTED & set(STANDARD)
    node = {
        "allOf": [{"$dynamicRef": "#x"}, {"type": "object"}],
        "const": {"$id": "a value"},
        "enum": [{"unevaluatedItems": 1}],
        "default": {"$anchor": "v"},
        "examples": [{"$id": "e"}],
        "not": {"$id": "n"},
    }
    assert [at for at, _ in team._unsupported(node, "")] == ["/allOf/0/$dynamicRef", "/not/$id"]
    assert list(team._unsupported({"x-where": {"train.steps": {"minimum": 1}}}, "")) == []


def test_a_subschemas_first_error_is_at_its_pointer():
    from registry.validate import team

    assert list(team._schema_errors({"type": "object"})) == []
    [(at, why)] = team._schema_errors({"properties": {"a": {"type": "nope"}}})
    assert at == "properties/a/type" and "'nope' is not valid under any of the given schemas" in why
    # the meta-schema's error first, then the project's keywords
    both = list(team._schema_errors({"minimum": "x", "x-where": 1}))
    assert both[0][0] == "minimum" and both[1] == ("/x-where", "maps dotted paths to subschemas")


@pytest.mark.parametrize(
    ("origin", "file"),
    [
        ("team/exp/mine.yaml:3:5", "team/exp/mine.yaml"),
        ("C:/x/y.yaml:10:2", "C:/x/y.yaml"),
        ("composed", None),
        ("command line", None),
        ("mine.yaml:3", None),  # a line without a column is no location this code writes
        (None, None),
        (("mine.yaml", 3), None),
    ],
)
def test_the_file_of_a_location(origin, file):
    from registry.validate import team

    assert team._file_of(origin) == file


def test_the_owner_of_a_recipe_is_the_source_of_its_own_file(tmp_path, monkeypatch):
    """The sections only a recipe's own file gives (`recipe`, `results`) say whose it is; without
    them, every composed file's source counts; the innermost source holding a file names it."""
    from registry.validate import team

    outer, inner = tmp_path / "outer", tmp_path / "outer" / "inner"
    (inner / "exp").mkdir(parents=True)
    monkeypatch.setenv("RECIPE_PATH", os.pathsep.join([f"outer={outer}", f"inner={inner}"]))
    monkeypatch.chdir(tmp_path)
    team._source_of.cache_clear()
    mine, base = f"{inner}/exp/mine.yaml", f"{outer}/base.yaml"
    assert team._owners({("recipe", "name"): f"{mine}:2:3", ("train", "steps"): f"{base}:4:1"}) == {"inner"}
    assert team._owners({("train", "steps"): f"{base}:4:1", ("policy",): f"{mine}:1:1"}) == {"outer", "inner"}
    assert team._owners({("train", "steps"): "outer/base.yaml:4:1"}) == {"outer"}  # relative to the working folder
    assert team._owners({("train", "steps"): "command line", (): "composed"}) == set()
    assert team._owners({("train", "steps"): f"{tmp_path}/elsewhere.yaml:1:1"}) == set()
