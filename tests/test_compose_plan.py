"""The plan composition follows, in-process: a published version as one frozen layer, axis swaps
that stop at a part's own extends, errors in a file at their line with their rule, the words of
an unknown name and a malformed pattern, and the per-part layer cache. tests/test_compose.py
covers the merged result."""

from __future__ import annotations

import pytest

from registry.compose import Plan, compose
from registry.errors import RecipeError
from registry.load import Loaded
from registry.sharing import sources, versions


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# yaml-language-server: $schema=x\n" + text)
    return path


@pytest.fixture
def two_teams(tmp_path, monkeypatch):
    """Two folder sources on RECIPE_PATH, each with a version of its own published."""
    for team in ("team-a", "team-b"):
        (tmp_path / team).mkdir()
    monkeypatch.setenv("RECIPE_PATH", f"team-a={tmp_path / 'team-a'}:team-b={tmp_path / 'team-b'}")
    by_name = {s.name: s for s in sources.all_sources()}
    versions.publish(compose("pi07/zero2/8xA100"), by_name["team-a"])
    versions.publish(compose("act/ddp/8xA100"), by_name["team-b"])
    return by_name


def test_a_published_version_is_one_frozen_layer(two_teams):
    plan = Plan.of("team-a:pi07/zero2/8xA100@1")
    assert plan.name == "pi07/zero2/8xA100" and len(plan.inputs) == 1  # no base, no parts
    assert plan.inputs[0].name == "1.yaml" and plan.inputs[0].parent.name == "8xA100"
    assert compose("team-a:pi07/zero2/8xA100@1").data["recipe"]["version"] == 1
    with pytest.raises(RecipeError) as raised:
        Plan.of("team-a:pi07/zero2/8xA100@1", ["backend=fsdp"])
    assert str(raised.value) == (
        "team-a:pi07/zero2/8xA100@1 is a published version: axis swaps need the composable recipe"
    )


def test_every_sources_published_names_are_suggested(two_teams):
    from registry.compose import known_names

    for team, name in (("team-a", "exp/alpha"), ("team-b", "exp/beta")):  # names only an index holds
        recipe = compose("tiny/ddp/cpu")
        recipe.data["recipe"]["name"] = name
        versions.publish(recipe, two_teams[team])
    names = known_names()
    assert "exp/alpha" in names and "exp/beta" in names


def test_a_swap_replaces_the_cells_part_not_what_the_part_extends():
    """zero3-offload extends zero3: swapping a cell's backend to zero3-offload keeps that extends
    (it is the part's own), rather than swapping it into a cycle."""
    swapped = compose("ref-1b/zero2/8xA100", ["backend=zero3-offload"])
    assert swapped.data["backend"]["zero_stage"] == 3 and swapped.data["backend"]["offload"]["optimizer"] == "cpu"
    assert [p.name for p in swapped.inputs].count("zero3.yaml") == 1


def test_an_unknown_name_in_a_file_is_its_error_at_its_line(tmp_path):
    recipe = write(tmp_path / "r.yaml", "extends:\n  - pi07/zero2/8xA100@9\n")
    with pytest.raises(RecipeError) as raised:
        compose(str(recipe))
    said = raised.value.problem
    assert (said.rule, said.origin) == ("unknown-name", f"{recipe}:3:5")
    assert said.message.startswith("bundled:pi07/zero2/8xA100 has no version 9")
    write(recipe, "extends:\n  - pi07/zer02/8xA100x\n")
    with pytest.raises(RecipeError) as raised:
        compose(str(recipe))
    assert (raised.value.problem.rule, raised.value.problem.origin) == ("unknown-name", f"{recipe}:3:5")
    assert raised.value.problem.message.startswith("unknown backend in pi07/zer02/8xA100x: 'zer02'")


def test_a_chain_too_deep_is_said_at_the_extends_line(tmp_path):
    for i in range(70):
        write(tmp_path / f"r{i}.yaml", f"train: {{}}\nextends: [r{i + 1}.yaml]\n" if i < 69 else "train: {}\n")
    with pytest.raises(RecipeError) as raised:
        compose(str(tmp_path / "r0.yaml"))
    said = raised.value.problem
    assert said.rule == "extends-depth" and said.origin.endswith("r64.yaml:3:1"), said


def test_an_unknown_name_lists_up_to_three_close_ones():
    from registry.compose import _unknown

    assert _unknown("part", "zero", ["zero1", "zero2", "zero3", "fsdp"]) == (
        "unknown part 'zero' (did you mean zero3, zero2, zero1?); known: zero1, zero2, zero3, fsdp"
    )


@pytest.mark.parametrize("pattern", ["tiny/*", "tiny/*/cpu/x", "tiny/a b/cpu"])
def test_a_malformed_pattern_says_the_form(pattern):
    from registry.compose.patterns import expand

    with pytest.raises(RecipeError) as raised:
        expand(pattern)
    assert str(raised.value) == (
        f"malformed pattern {pattern!r} (hint: policy/backend/hardware, e.g. 'tiny/*/cpu' or"
        " 'ref-1b/{zero2,fsdp}/2xH100')"
    )


def test_a_malformed_catalog_entry_lists_no_names():
    from registry.compose.catalog import _listed

    assert _listed({"aliases": ["H100", 3, "h100-sxm"]}, "aliases") == [(0, "H100"), (2, "h100-sxm")]
    assert _listed("H100", "aliases") == [] and _listed(["H100"], "aliases") == []
    assert _listed({"aliases": "H100"}, "aliases") == []


def test_a_parts_layer_is_worked_out_once_and_never_for_another_file():
    """The cache is keyed by id(): an entry left by a file whose id a new one reuses is not its."""
    from registry.compose import _STRIPPED, _strip

    part = Loaded("p.yaml", {"recipe": {"name": "p"}, "train": {"steps": 3}}, {})
    layer = _strip(part, own=False)
    assert layer.data == {"train": {"steps": 3}} and _strip(part, own=False) is layer
    stale = Loaded("old.yaml", {"train": {"steps": 9}}, {})
    _STRIPPED[id(part)] = (Loaded("old.yaml", {}, {}), stale)  # as if another file had had this id
    assert _strip(part, own=False).data == {"train": {"steps": 3}}
