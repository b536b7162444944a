"""What the catalog gathers for a page, in-process and by value: each figure of the memory
estimate under its own key, the notes where there is nothing to estimate, a recipe that does
not compose, the axes named from values, the figures a shared file may hold, and the catalog of
a team source: versions chained in order, untuned cells that do not validate only counted."""

from __future__ import annotations

import pytest

from registry.doc import Recipe
from registry.errors import Problem
from registry.sharing import listing, sources
from registry.sharing.site import collect


def test_each_figure_of_the_estimate_is_kept_under_its_own_name():
    from registry import estimate as memory
    from registry import view

    entry = collect._entry("bundled", "pi07/zero2/8xA100", None, "tuned", "pi07/zero2/8xA100", None)
    est = memory.estimate(view.of(entry.recipe.data))
    assert entry.estimate == {
        "describe": memory.describe(entry.recipe.data),
        "breakdown": dict(est.breakdown),
        "capacity_gib": est.capacity_gib,
        "total_gib": est.total_gib,
        "allocated_gib": est.allocated_gib,
        "reserved_gib": est.reserved_gib,
        "fraction": est.fraction,
        "phase": est.phase,
        "micro_batch_size": est.micro_batch_size,
        "per_sample_gib": est.per_sample_gib,
        "largest_micro_batch": est.largest_micro_batch,
        "largest_under_90": est.largest_under(0.9),
    }
    assert entry.estimate_note == "" and entry.tuned and entry.axes == ("pi07", "zero2", "8xA100")
    assert entry.estimate["largest_under_90"] <= entry.estimate["largest_micro_batch"]


def test_a_recipe_the_schema_rejects_or_that_overflows_has_a_note_not_an_estimate(monkeypatch):
    from registry import estimate as memory

    entry = collect.Entry("team", "exp/x", None, "free-standing", "team:exp/x", recipe=Recipe("exp/x", {}, {}))
    entry.problems = [Problem("error", "type", "train.micro_batch_size", "is not an integer")]
    collect._estimate(entry)
    assert (entry.estimate, entry.estimate_note) == (
        None,
        "the schema rejects this recipe, so there is nothing to estimate",
    )

    class Overflowing:
        finite = False

    entry = collect._entry("bundled", "pi07/zero2/8xA100", None, "tuned", "pi07/zero2/8xA100", None)
    monkeypatch.setattr(memory, "estimate", lambda values: Overflowing())
    monkeypatch.setattr(memory, "overflow", lambda data: "too large to estimate: " + data["recipe"]["name"])
    entry.estimate, entry.estimate_note = None, ""
    collect._estimate(entry)
    assert (entry.estimate, entry.estimate_note) == (None, "too large to estimate: pi07/zero2/8xA100")


def test_a_recipe_that_does_not_compose_is_an_entry_with_its_failure():
    entry = collect._entry("team", "exp/none", None, "free-standing", "exp/none", ("a", "b", "c"))
    assert entry.recipe is None and entry.failure.startswith("exp/none: ")
    assert entry.axes == ("a", "b", "c") and entry.status == "invalid" and entry.estimate is None


@pytest.mark.parametrize(
    "data, axis, named",
    [
        ({"policy": {"type": None}}, "policy", ""),
        ({"policy": "act"}, "policy", ""),  # not a section: nothing to name
        ({}, "backend", ""),
        ({"backend": {"kind": "ddp"}}, "backend", "ddp"),
        ({"backend": {}}, "backend", ""),
        (
            {"backend": {"kind": "deepspeed", "zero_stage": 3, "offload": {"optimizer": "none", "param": None}}},
            "backend",
            "zero3",
        ),
        (
            {"backend": {"kind": "deepspeed", "zero_stage": 3, "offload": {"optimizer": "none", "param": "nvme"}}},
            "backend",
            "zero3-offload",
        ),
        ({"backend": {"kind": "deepspeed", "zero_stage": 1, "offload": "cpu"}}, "backend", "zero1"),
        ({"backend": {"kind": "fsdp", "version": 1, "sharding": "FULL_SHARD"}}, "backend", "fsdp"),
        ({"hardware": {"gpu": {"name": "A100-80GB"}, "gpus_per_node": 4, "nodes": "2"}}, "hardware", "4xA100-80GB"),
        ({"hardware": {"gpu": {}, "gpus_per_node": 4}}, "hardware", "cpu"),
    ],
)
def test_an_axis_named_from_values(data, axis, named):
    assert listing.described(data, axis) == named


@pytest.mark.parametrize(
    "value, figure",
    [
        (3, 3.0),
        (2.5, 2.5),
        (True, None),
        ("3", None),
        (None, None),
        (float("nan"), None),
        (float("inf"), None),
        (-float("inf"), None),
        (-2, -2.0),
    ],
)
def test_a_figure_is_a_plain_finite_number_or_none(value, figure):
    got = collect.number(value)
    assert got == figure and (got is None or isinstance(got, float))


def test_a_team_sources_catalog_chains_versions_and_counts_cells_it_leaves_out(tmp_path, monkeypatch):
    from registry.errors import RecipeError
    from registry.sharing import listing, versions
    from registry.sharing.sources import Source

    root = tmp_path / "team"
    recipe = Recipe("exp/x", {"recipe": {"name": "exp/x"}}, {})
    source = Source("team-a", root, "path", str(root))
    published = [
        versions.Version(source, "exp/x", n, root / "published" / "exp" / "x" / f"{n}.yaml", "0" * 64, f"d{n}")
        for n in (2, 1, 3)
    ]
    rows = [
        listing.Entry(
            f"team-a:exp/x@{v.number}",
            v.number,
            "team-a",
            False,
            "",
            target=f"team-a:exp/x@{v.number}",
            path="exp/x",
            published=True,
            date=v.date,
        )
        for v in published
    ]
    cells = [
        listing.Entry(
            f"broken/ddp/{h}",
            None,
            "team-a+bundled",
            False,
            "",
            target=f"broken/ddp/{h}",
            cell=("broken", "ddp", h),
            path=f"broken/ddp/{h}",
            parts_from=("team-a", "bundled"),
        )
        for h in ("cpu", "1xA100")
    ]
    monkeypatch.setattr(listing, "every_recipe", lambda: rows + cells)

    def compose(target):
        if "@" not in target:  # an untuned cell of a part that does not compose
            raise RecipeError(f"{target}: policy/broken.yaml: not a mapping")
        return recipe

    monkeypatch.setattr(collect, "compose", compose)
    catalog = collect.gather()
    assert catalog.left_out == 2 and [e.version for e in catalog.entries] == [2, 1, 3]
    v2, v1, v3 = catalog.entries
    assert [e.date for e in (v1, v2, v3)] == ["d1", "d2", "d3"]
    assert v1.previous is None and v2.previous is v1 and v3.previous is v2
    assert v1.siblings == v2.siblings == [v1, v2, v3] and v1.source == "team-a" and v1.target == "team-a:exp/x@1"


def _listed(**fields):
    from registry.sharing import listing

    base = {"name": "exp/x", "version": None, "source": "bundled", "tuned": False, "summary": "", "path": "exp/x"}
    return listing.Entry(**{**base, **fields})


@pytest.mark.parametrize(
    "fields, target",
    [
        ({"parts_from": ("bundled",), "name": "tiny/ddp/cpu", "source": "-"}, "tiny/ddp/cpu"),  # a cell by its name
        ({"parts_from": ("team-a", "bundled"), "name": "x/ddp/cpu", "source": "team-a"}, "x/ddp/cpu"),
        ({}, "exp/x"),  # a bundled working recipe, bare
        ({"published": True, "version": 3, "name": "exp/x@3"}, "bundled:exp/x@3"),
        ({"source": "team-a", "name": "team-a:exp/x"}, "team-a:exp/x"),
        ({"source": "team-a", "published": True, "version": 2}, "team-a:exp/x@2"),
        ({"source": "team-a", "version": 4}, "team-a:exp/x"),  # a working file's own number is no pin
    ],
)
def test_what_a_page_runs_names_exactly_that_recipe(fields, target):
    assert collect._target(_listed(**fields)) == target


@pytest.mark.parametrize(
    "fields, source",
    [
        ({"parts_from": ("bundled", "team-b", "team-a")}, "team-b"),  # the first team source of its parts
        ({"parts_from": ("bundled", "bundled")}, "bundled"),
        ({"source": "team-a"}, "team-a"),
        ({"source": "team-a", "parts_from": ()}, "team-a"),
    ],
)
def test_which_source_files_a_page(fields, source):
    assert collect._source(_listed(**fields)) == source


def test_axes_from_the_parts_composed_else_from_values():
    from registry.compose import compose

    assert collect._axes(None, None) == ("", "", "")
    recipe = compose("tiny/ddp/cpu")
    assert collect._axes(None, recipe) == ("tiny", "ddp", "cpu")
    assert collect._axes(("a", "b", "c"), recipe) == ("a", "b", "c")  # a cell's own names first
    plain = Recipe("exp/x", {"policy": {"type": "act"}, "backend": {"kind": "ddp"}, "hardware": {}}, {})
    plain.inputs = [sources.bundled().root / "base.yaml"]  # a file, but not a part
    assert collect._axes(None, plain) == ("act", "ddp", "cpu")


def test_a_catalogs_working_recipe_keeps_no_version_and_each_name_is_its_own_group(monkeypatch):
    from registry.sharing import listing

    rows = [
        _listed(name="tiny/ddp/cpu", path="tiny/ddp/cpu", version=1, cell=("tiny", "ddp", "cpu")),  # declares 1
        _listed(name="a@1", source="team-a", path="exp/a", version=1, published=True, date="d"),
        _listed(name="b@1", source="team-a", path="exp/b", version=1, published=True, date="e"),
    ]
    monkeypatch.setattr(listing, "every_recipe", lambda: rows)
    monkeypatch.setattr(collect, "compose", lambda target: Recipe(target, {"recipe": {"name": target}}, {}))
    catalog = collect.gather()
    working, a, b = catalog.entries
    assert working.version is None and working.axes == ("tiny", "ddp", "cpu") and working.target == "tiny/ddp/cpu"
    assert a.siblings == [a] and b.siblings == [b] and a.previous is None and (a.date, b.date) == ("d", "e")
