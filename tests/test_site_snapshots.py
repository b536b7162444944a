"""The catalog's pages and charts, byte for byte, on hand-made entries that reach every branch of
pages.py and svg.py: a renderer's output is its specification, so a changed class, number,
word or link shows as a diff against the page it used to write.

The expected pages live in tests/snapshots/site/. After an intended change to the site, write
them again and read the diff before committing it:

    RECIPE_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_site_snapshots.py

Each snapshot is also parsed (every tag closed in order, every link inside the site) so that a
snapshot cannot freeze broken markup."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import USER_ENV

from registry.doc import Recipe
from registry.errors import Problem
from registry.sharing.site.collect import Catalog, Entry
from registry.sharing.site.pages import index_page, recipe_page
from registry.sharing.site.svg import bars, line

SNAPSHOTS = Path(__file__).parent / "snapshots" / "site"
UPDATE = USER_ENV.get("RECIPE_UPDATE_SNAPSHOTS") == "1"  # as the session found it (conftest seals the rest)
VOID = {"meta", "input", "br", "hr", "img", "link"}


def _estimate() -> dict:
    return {
        "describe": "pi07, ZeRO-2 over 8 GPUs",
        "breakdown": {"weights": 6.5, "gradients": 3.25, "optimizer": 13.0, "activations": 21.5},
        "capacity_gib": 80.0,
        "total_gib": 44.25,
        "allocated_gib": 42.0,
        "reserved_gib": 46.125,
        "fraction": 0.553125,
        "phase": "backward",
        "micro_batch_size": 8,
        "per_sample_gib": 2.6875,
        "largest_micro_batch": 17,
        "largest_under_90": 14,
    }


def _recipe(name: str, micro: int, lr: float) -> Recipe:
    data = {
        "recipe": {"name": name, "summary": "pi07 on <8> A100s & more"},
        "train": {"micro_batch_size": micro, "lr": lr, "steps": None},
        "results": [{"samples_per_s": 10.0, "notes": "first"}],
        "tags": ["a", "b"],
        "empty": {},
        "alike": {"one": 1, "yes": True, "float": 1.0, "zero": 0, "no": False},  # equal in Python, not on a page
    }
    origins = {
        ("recipe",): "recipes/exp.yaml:1:1",
        ("train", "micro_batch_size"): "recipes/exp.yaml:5:3",
        ("train",): "recipes/base.yaml:10:1",
    }
    return Recipe(name, data, origins)


def entries() -> dict[str, Entry]:
    """Every kind of entry a catalog holds, each with what makes its page differ."""
    v1, v2, v3 = (
        Entry("team-x", "exp/run", n, "published", f"team-x:exp/run@{n}", date=f"2026-11-2{n}") for n in (1, 2, 3)
    )
    v1.recipe, v2.recipe = _recipe("exp/run", 4, 0.001), _recipe("exp/run", 8, 0.002)
    v3.recipe = None
    v3.failure = "exp/run@3: cannot compose (hint: recipe validate team-x:exp/run@3)"
    for v in (v1, v2, v3):
        v.siblings = [v1, v2, v3]
        v.axes = ("pi07", "zero2", "8xA100")
    v2.previous, v3.previous = v1, v2
    v1.results = [{"samples_per_s": 101.25, "memory_fraction": 0.5, "date": "2026-11-21", "hardware": "8xA100"}]
    v2.results = [
        {"samples_per_s": 120.0, "memory_fraction": 0.625, "date": "2026-11-22", "micro_batch_size": 8},
        {"samples_per_s": 118.5, "date": "2026-11-23", "source": "bench run 7", "notes": "ignored"},
    ]
    v2.estimate = _estimate()
    v2.summary = "the second version"
    v2.problems = [
        Problem("warning", "lr-scale", "train.lr", "is <high>", origin="recipes/exp.yaml:6:3", hint="halve it"),
        Problem("warning", "steps", "train.steps", "unset", related=(("train.lr", None), ("train.x", "cli"))),
    ]
    v3.estimate_note = "not composed: nothing to estimate"

    tuned = Entry("bundled", "pi07/zero2/8xA100", None, "tuned", "pi07/zero2/8xA100", tuned=True)
    tuned.recipe = _recipe("pi07/zero2/8xA100", 8, 0.0002)
    tuned.axes = ("pi07", "zero2", "8xA100")
    tuned.summary = "quotes \" and ' and <b>tags</b>"
    tuned.results = [
        {"samples_per_s": 2.5e-05, "memory_fraction": 0.91, "notes": "cold"},
        {"samples_per_s": "fast", "memory_fraction": 0.905},
        {"memory_fraction": None, "date": "2026-11-26"},
    ]
    tuned.estimate = {**_estimate(), "fraction": 1.5, "total_gib": 120.0, "capacity_gib": 80.0}

    alone = Entry("team-a", "lab/try me", None, "free-standing", "team-a:lab/try me")
    alone.recipe = Recipe("lab/try me", {}, {})
    alone.results = [{"samples_per_s": 2.5e-05, "memory_fraction": 1e-05}]  # shown to one place, sorted exactly
    alone.problems = [Problem("error", "schema", "", "not a mapping")]
    alone.estimate_note = "the schema rejects this recipe, so there is nothing to estimate"

    cell = Entry("bundled", "tiny/ddp/cpu", None, "cell", "tiny/ddp/cpu", axes=("tiny", "ddp", "cpu"))
    cell.recipe = Recipe("tiny/ddp/cpu", {"backend": {"kind": "ddp"}}, {("backend", "kind"): "parts:2:3"})
    # a source named before "bundled": bundled rows still come first within a kind
    team_cell = Entry("acme", "tiny/ddp/cpu", None, "cell", "tiny/ddp/cpu", axes=("tiny", "ddp", "cpu"))
    team_tuned = Entry("team-z", "tiny/zero2/cpu", None, "tuned", "team-z:tiny/zero2/cpu", tuned=True)
    # two versions alike: their diff says so
    same1, same2 = (Entry("team-x", "exp/same", n, "published", f"team-x:exp/same@{n}") for n in (1, 2))
    same1.recipe, same2.recipe = _recipe("exp/same", 4, 0.001), _recipe("exp/same", 4, 0.001)
    same1.siblings = same2.siblings = [same1, same2]
    same2.previous = same1
    return {
        "v1": v1,
        "v2": v2,
        "v3": v3,
        "tuned": tuned,
        "alone": alone,
        "cell": cell,
        "team-cell": team_cell,
        "team-tuned": team_tuned,
        "same": same2,
    }


def rendered() -> dict[str, str]:
    made = entries()
    pages = {f"page-{key}.html": recipe_page(entry) for key, entry in made.items()}
    # given in reverse: the index orders rows itself (kind, bundled first, source, name, version)
    pages["index.html"] = index_page(Catalog(list(made.values())[::-1], left_out=3))
    pages["index-all-listed.html"] = index_page(Catalog([made["cell"]], left_out=0))
    pages["bars.svg"] = bars([("weights", 30.0), ("activations <x>", 10.0), ("zero", 0.0)], capacity=80.0)
    pages["bars-over.svg"] = bars([("weights", 60.0), ("activations", 40.0)], capacity=80.0, unit="MiB", width=500)
    pages["bars-no-gpu.svg"] = bars([("weights", 0.5)], capacity=0.0)
    pages["bars-one-gib.svg"] = bars([("weights", 0.25), ("optimizer", 0.5)], capacity=1.0)
    pages["bars-empty.svg"] = bars([], capacity=2.0)
    pages["bars-all-zero.svg"] = bars([("weights", 0.0)], capacity=0.0)  # nothing to scale by
    pages["line.svg"] = line([("@1", 3.0), ("@2", 5.5), ("@3", 4.25)], "global samples/s")
    pages["line-two.svg"] = line([("a", 0.5), ("b", 0.75)], "memory", "{:.0%}", width=400, height=150)
    pages["line-one.svg"] = line([("only", 7.0)], "one <point>")
    pages["line-flat.svg"] = line([("x", -2.0), ("y", -2.0), ("z", -2.0), ("w", -2.0)], "flat")
    return pages


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.links: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.open.append(tag)
        self.links += [v for k, v in attrs if k == "href" and v]

    def handle_startendtag(self, tag, attrs):
        self.links += [v for k, v in attrs if k == "href" and v]

    def handle_endtag(self, tag):
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
            return
        self.open.pop()


@pytest.mark.parametrize("name", sorted(rendered()))
def test_page_matches_its_snapshot(name):
    text = rendered()[name]
    path = SNAPSHOTS / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path}: no snapshot (RECIPE_UPDATE_SNAPSHOTS=1 writes it)"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        at = next(i for i, (a, b) in enumerate(zip(text + "\0", expected + "\0")) if a != b)
        near = slice(max(at - 60, 0), at + 60)
        pytest.fail(f"{name} differs at {at}: now {text[near]!r}, was {expected[near]!r}")


@pytest.mark.parametrize("name", sorted(rendered()))
def test_snapshot_is_well_formed_and_links_stay_in_the_site(name):
    tags = _Tags()
    tags.feed((SNAPSHOTS / name).read_text(encoding="utf-8"))
    tags.close()
    assert tags.problems == [] and tags.open == []
    assert all(not link.startswith(("/", "http:", "https:", "javascript:")) for link in tags.links), tags.links


def test_every_snapshot_is_still_rendered():
    """A snapshot that no case writes any more is a stale file, not a check."""
    assert sorted(p.name for p in SNAPSHOTS.iterdir()) == sorted(rendered())
