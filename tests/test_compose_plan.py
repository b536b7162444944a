"""The plan composition follows, in-process: a published version as one frozen layer, axis swaps
that stop at a part's own extends, errors in a file at their line with their rule, the words of
an unknown name and a malformed pattern, and the per-part layer cache. tests/test_compose.py
covers the merged result."""

from __future__ import annotations

import pytest

from registry.compose import Plan, compose
from registry.errors import Problem, RecipeError
from registry.load import Loaded
from registry.sharing import sources, versions


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# yaml-language-server: $schema=x\n" + text)
    return path


def refused(recipe) -> Problem:
    """The one problem composing RECIPE (a file) is refused with."""
    with pytest.raises(RecipeError) as raised:
        compose(str(recipe))
    return raised.value.problem


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
    said = refused(recipe)
    assert (said.rule, said.origin) == ("unknown-name", f"{recipe}:3:5")
    assert said.message.startswith("bundled:pi07/zero2/8xA100 has no version 9")
    write(recipe, "extends:\n  - pi07/zer02/8xA100x\n")
    said = refused(recipe)
    assert (said.rule, said.origin) == ("unknown-name", f"{recipe}:3:5")
    assert said.message.startswith("unknown backend in pi07/zer02/8xA100x: 'zer02'")


def test_a_chain_too_deep_is_said_at_the_extends_line(tmp_path):
    for i in range(70):
        write(tmp_path / f"r{i}.yaml", f"train: {{}}\nextends: [r{i + 1}.yaml]\n" if i < 69 else "train: {}\n")
    said = refused(tmp_path / "r0.yaml")
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


# --- names inside a file ------------------------------------------------------------------------
def test_a_file_may_extend_a_published_version(two_teams, tmp_path):
    recipe = write(tmp_path / "r.yaml", "extends: [team-a:pi07/zero2/8xA100@1]\ntrain:\n  steps: 7\n")
    composed = compose(str(recipe))
    assert composed.data["train"]["steps"] == 7 and composed.data["backend"]["zero_stage"] == 2
    assert [p.name for p in composed.inputs][-2:] == ["1.yaml", "r.yaml"]


def test_a_qualified_part_stays_in_its_source_when_swapped(tmp_path, monkeypatch):
    """`bundled:backend/zero2` swapped to fsdp is bundled's fsdp, not the one a team's source shadows
    it with (RECIPE_PATH's sources come first for a plain name)."""
    from registry.files import RECIPES_DIR

    shadow = tmp_path / "team-a" / "backend" / "fsdp.yaml"  # before any lookup: a process sees one state
    shadow.parent.mkdir(parents=True)
    shadow.write_text((RECIPES_DIR / "backend" / "fsdp.yaml").read_text())
    monkeypatch.setenv("RECIPE_PATH", f"team-a={tmp_path / 'team-a'}")
    recipe = write(tmp_path / "r.yaml", "extends: [policy/pi07, bundled:backend/zero2, hardware/8xA100]\n")
    swapped = compose(str(recipe), ["backend=fsdp"])
    assert swapped.data["backend"]["kind"] == "fsdp"
    assert RECIPES_DIR.resolve() / "backend" / "fsdp.yaml" in swapped.inputs and shadow not in swapped.inputs
    plain = write(tmp_path / "u.yaml", "extends: [policy/pi07, backend/zero2, hardware/8xA100]\n")
    assert shadow in compose(str(plain), ["backend=fsdp"]).inputs


def test_a_name_in_a_file_that_is_no_name_says_why_at_its_line(tmp_path):
    recipe = write(tmp_path / "r.yaml", "extends:\n  - 'pi07/zero2/8xA100;rm'\n")
    said = refused(recipe)
    assert (said.rule, said.origin) == ("unsafe-name", f"{recipe}:3:5")
    assert said.message == (
        "unsafe or malformed recipe name 'pi07/zero2/8xA100;rm' (hint: names look like pi07/zero2/8xA100;"
        " no '..', absolute paths or special characters)"
    )


def test_a_file_extended_through_a_link_is_recorded_as_the_file_it_names(tmp_path):
    """Paths are resolved before they are compared and recorded: a part reached through a link and
    by its own name is one input, listed where it lies."""
    part = write(tmp_path / "part.yaml", "train:\n  steps: 5\n")
    (tmp_path / "link.yaml").symlink_to(part)
    recipe = write(tmp_path / "r.yaml", "extends: [pi07/zero2/8xA100, link.yaml, part.yaml]\n")
    composed = compose(str(recipe))
    assert composed.data["train"]["steps"] == 5
    assert [p for p in composed.inputs if p.parent == tmp_path] == [part, recipe]


def test_a_missing_recipe_file_is_named():
    with pytest.raises(RecipeError) as raised:
        compose("no/such/recipe.yaml")
    assert str(raised.value) == "no/such/recipe.yaml: no such file"


def test_no_gpu_catalog_in_any_source_is_said(monkeypatch):
    from registry.compose import catalog

    monkeypatch.setattr(catalog.sources, "find", lambda name: None)
    with pytest.raises(RecipeError) as raised:
        catalog.entries()
    assert str(raised.value) == "no GPU catalog (catalog/gpus.yaml) in any source"


def test_the_update_hint_names_every_git_source(monkeypatch):
    from types import SimpleNamespace

    from registry import compose as composing

    found = [SimpleNamespace(name="team-a", kind="git"), SimpleNamespace(name="lab", kind="dir")]
    found.append(SimpleNamespace(name="team-b", kind="git"))
    monkeypatch.setattr(composing.sources, "all_sources", lambda: found)
    assert composing._update_hint() == (
        " (hint: recipes published to team-a, team-b since the last update are not here yet: recipe source update)"
    )
    monkeypatch.setattr(composing.sources, "all_sources", lambda: found[1:2])
    assert composing._update_hint() == ""


def test_a_recipe_named_from_a_source_is_the_users_own_layer(tmp_path, monkeypatch):
    """`team-a:exp/big` is the target itself: its recipe section (summary, tags) is kept, and a fix
    never replaces a value it sets (fsdp-fp32-model leaves its bfloat16 for the rule to report)."""
    text = "extends: [pi07/fsdp/4xH100]\nrecipe:\n  name: exp/big\n  summary: our run\npolicy:\n  dtype: bfloat16\n"
    write(tmp_path / "team-a" / "exp" / "big.yaml", text)
    monkeypatch.setenv("RECIPE_PATH", f"team-a={tmp_path / 'team-a'}")
    composed = compose("team-a:exp/big")
    assert composed.data["recipe"]["summary"] == "our run" and composed.data["recipe"]["name"] == "exp/big"
    assert composed.data["policy"]["dtype"] == "bfloat16" and composed.fixed == []
