"""Composition: parts, overlay, extends, overrides, swaps, origins, and every failure mode."""

import itertools
import json

import pytest
from conftest import run_cli
from omegaconf import OmegaConf

from registry.compose import Plan, compose
from registry.doc import merge
from registry.errors import RecipeError
from registry.sharing import sources

CELLS = list(itertools.product(*(sources.part_names(a) for a in ("policy", "backend", "hardware"))))


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# yaml-language-server: $schema=x\n" + text)
    return path


def test_cell_composes_parts_then_overlay():
    r = compose("pi07/zero2/8xA100")
    assert r.tuned
    assert [p.relative_to(sources.bundled().root).as_posix() for p in r.inputs] == [
        "base.yaml",
        "policy/pi07.yaml",
        "backend/zero2.yaml",
        "hardware/8xA100.yaml",
        "pi07/zero2/8xA100.yaml",
    ]
    assert r.data["train"]["micro_batch_size"] == 20  # overlay over the policy part's 2
    assert r.origins[("train", "micro_batch_size")].startswith("recipes/pi07/zero2/8xA100.yaml:")
    assert r.data["backend"]["zero_stage"] == 2
    assert r.data["hardware"]["gpu"]["compute_capability"] == 8.0  # expanded from the catalog
    assert r.origins[("hardware", "gpu", "memory_gib")].startswith("recipes/catalog/gpus.yaml:")
    assert r.data["results"][0]["samples_per_s"] == 13.7


def test_untuned_cell():
    r = compose("act/fsdp2/4xH100")
    assert not r.tuned and r.data["recipe"]["name"] == "act/fsdp2/4xH100"
    assert "results" not in r.data and r.data["hardware"]["gpus_per_node"] == 4


def test_overrides_and_origins():
    r = compose(
        "pi07/zero2/8xA100", ["train.micro_batch_size=16", "env.NCCL_DEBUG=INFO", "policy.block_classes=[A, B]"]
    )
    assert r.data["train"]["micro_batch_size"] == 16
    assert r.origins[("train", "micro_batch_size")] == "command line"
    assert r.data["env"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NCCL_DEBUG": "INFO"}
    assert r.data["policy"]["block_classes"] == ["A", "B"]  # lists replace
    assert r.origins[("policy", "block_classes", 1)] == "command line"


def test_axis_swap_replaces_the_part_and_keeps_the_overlay():
    r = compose("pi07/zero2/8xA100", ["hardware=4xH100"])
    assert r.name == "pi07/zero2/4xH100"
    assert r.data["hardware"]["gpus_per_node"] == 4
    assert r.data["train"]["micro_batch_size"] == 20
    assert "results" not in r.data  # measured on other hardware


def test_free_standing_file_extends(tmp_path):
    f = write(tmp_path / "mine.yaml", "recipe: {name: team/mine}\nextends: [pi07/zero2/8xA100]\ntrain: {steps: 5}\n")
    r = compose(str(f))
    assert r.name == "team/mine" and r.data["train"]["steps"] == 5
    assert r.data["train"]["micro_batch_size"] == 20
    assert "results" not in r.data  # the parent's measurements are not this recipe's
    assert r.data["recipe"] == {"name": "team/mine"}
    swapped = compose(str(f), ["backend=fsdp"])
    assert swapped.data["backend"]["kind"] == "fsdp"


def test_relative_extends(tmp_path):
    write(tmp_path / "lib" / "common.yaml", "train: {steps: 7}\n")
    f = write(tmp_path / "mine.yaml", "extends: [tiny/ddp/cpu, lib/common.yaml]\n")
    assert compose(str(f)).data["train"]["steps"] == 7


@pytest.mark.parametrize(
    "extends, message",
    [
        ("[../outside.yaml]", "error[unsafe-name]"),
        ("[/etc/passwd.yaml]", "error[unsafe-name]"),
        ("['../../etc/passwd']", "error[unsafe-name]"),
        ("[policy/pi08]", "unknown policy part 'pi08' (did you mean pi07"),
        ("[pi07/zero2/big]", "unknown hardware in pi07/zero2/big: 'big'"),
        ("[pi07/zero2/8xA1000]", "hardware '8xA1000': 'A1000' is not in the GPU catalog (hint: did you mean A100"),
        ("[nothing/here]", "unknown recipe 'nothing/here'"),
        ("[missing.yaml]", "no such file"),
        ("policy/pi07", "extends: must be a list"),
    ],
)
def test_bad_extends(tmp_path, extends, message):
    f = write(tmp_path / "mine.yaml", f"extends: {extends}\n")
    with pytest.raises(RecipeError, match=None) as info:
        compose(str(f))
    assert message in str(info.value)
    assert info.value.exit_code == 1
    assert str(info.value).startswith(str(f.name)) or "mine.yaml:" in str(info.value)


def test_cycle(tmp_path):
    write(tmp_path / "a.yaml", "extends: [b.yaml]\n")
    write(tmp_path / "b.yaml", "extends: [c.yaml]\n")
    write(tmp_path / "c.yaml", "extends: [a.yaml]\n")
    with pytest.raises(RecipeError) as info:
        compose(str(tmp_path / "a.yaml"))
    assert "error[extends-cycle]" in str(info.value)
    assert "a.yaml -> " in str(info.value) and str(info.value).endswith("a.yaml")


def test_an_extends_chain_1000_deep_is_one_error(tmp_path):
    """Not a RecursionError: the chain's depth is bounded and said so."""
    for i in range(1000):
        write(tmp_path / f"r{i}.yaml", f"extends: [r{i + 1}.yaml]\n" if i < 999 else "train: {steps: 3}\n")
    r = run_cli("validate", str(tmp_path / "r0.yaml"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "error[extends-depth]" in r.stdout and "deeper than 64 files" in r.stdout


def test_unknown_names_on_the_command_line():
    with pytest.raises(RecipeError) as info:
        compose("pi07/zero2/8xA1O0")
    assert info.value.exit_code == 2 and "'A1O0' is not in the GPU catalog (hint: did you mean" in str(info.value)
    assert "A100" in str(info.value).split("did you mean", 1)[1].split("?")[0]
    with pytest.raises(RecipeError, match="unknown hardware part 'nine'"):
        compose("pi07/zero2/8xA100", ["hardware=nine"])
    with pytest.raises(RecipeError, match="hardware '9xH10': 'H10' is not in the GPU catalog"):
        compose("pi07/zero2/8xA100", ["hardware=9xH10"])
    with pytest.raises(RecipeError, match="unsafe"):
        compose("../../etc/passwd")
    with pytest.raises(RecipeError, match="malformed override"):
        compose("pi07/zero2/8xA100", ["train..x=1"])


def test_unknown_gpu(tmp_path):
    f = write(tmp_path / "mine.yaml", "extends: [tiny/ddp/cpu]\nhardware: {gpu: A100-80G, gpus_per_node: 1}\n")
    with pytest.raises(RecipeError) as info:
        compose(str(f))
    assert "error[unknown-gpu]" in str(info.value) and "did you mean A100-80GB" in str(info.value)
    assert "mine.yaml:3:" in str(info.value)


def test_layers_are_not_mutated():
    first = compose("pi07/zero2/8xA100")
    first.data["train"]["optimizer"]["betas"].append(0.5)
    first.data["hardware"]["gpu"]["memory_gib"] = 1
    again = compose("pi07/zero2/8xA100")
    assert again.data["train"]["optimizer"]["betas"] == [0.9, 0.95]
    assert again.data["hardware"]["gpu"]["memory_gib"] == 79.25


@pytest.mark.parametrize(
    "a, b",
    [
        ({"a": {"b": 1, "c": [1, 2]}}, {"a": {"c": [3]}}),
        ({"a": {"b": 1}}, {"a": 5}),
        ({"a": 5}, {"a": {"b": 1}}),
        ({"a": {"b": 1}}, {"a": None}),
        ({"a": None}, {"a": {"b": {"c": 1}}}),
        ({"a": [{"x": 1}]}, {"a": [{"y": 2}]}),
        ({"a": "${oc.env:HOME}"}, {"b": "${x}"}),
    ],
)
def test_merge_matches_omegaconf(a, b):
    expected = OmegaConf.to_container(OmegaConf.merge(OmegaConf.create(a), OmegaConf.create(b)), resolve=False)
    assert merge(a, b) == expected


# OmegaConf's merge of the first N layers (keyed by their JSON), for every N short of a whole cell
_OMEGACONF_PREFIXES: dict[tuple[str, ...], object] = {}


def omegaconf_merge(layers: list[dict]) -> dict:
    """OmegaConf.merge(*layers) as a container. OmegaConf merges left to right into a copy of the
    first, so the merge of a prefix the cells share (base, policy, backend) is made once and the
    rest merged onto it: the same result as one merge of all layers, at a fifth of the time."""
    key: tuple[str, ...] = ()
    merged = None
    for i, layer in enumerate(layers):
        key += (json.dumps(layer, sort_keys=True, default=repr),)
        config = _OMEGACONF_PREFIXES.get(key)
        if config is None:
            config = OmegaConf.create(layer) if merged is None else OmegaConf.merge(merged, OmegaConf.create(layer))
            if i < len(layers) - 1:  # a whole cell's merge is never a prefix of another's
                _OMEGACONF_PREFIXES[key] = config
        merged = config
    return OmegaConf.to_container(merged, resolve=False)


@pytest.mark.parametrize("cell", ["/".join(c) for c in CELLS])
def test_every_cell_merges_as_omegaconf_does(cell):
    layers = [layer.data for layer in Plan.of(cell).layers if layer.data]
    expected = omegaconf_merge(layers)
    got = {}
    for layer in layers:
        got = merge(got, layer)
    assert got == expected


@pytest.mark.parametrize("cell", ["/".join(c) for c in CELLS[:: len(CELLS) // 7]])
def test_omegaconf_merge_of_shared_prefixes_is_one_merge_of_all_layers(cell):
    layers = [layer.data for layer in Plan.of(cell).layers if layer.data]
    once = OmegaConf.to_container(OmegaConf.merge(*map(OmegaConf.create, layers)), resolve=False)
    assert omegaconf_merge(layers) == once


# --- an `extends` entry that is a file path, in-process ------------------------------------------
@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A directory source `team` with a file and a link out of it; a free-standing folder with a
    link out of it; the folder both links point into."""
    for folder in ("team/exp", "free", "outside"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "outside" / "o.yaml").write_text("x: 1\n")
    (tmp_path / "team" / "exp" / "ok.yaml").write_text("x: 1\n")
    (tmp_path / "team" / "exp" / "link.yaml").symlink_to("../../outside/o.yaml")
    (tmp_path / "free" / "link.yaml").symlink_to("../outside/o.yaml")
    monkeypatch.setenv("RECIPE_PATH", f"team={tmp_path / 'team'}")
    return tmp_path


@pytest.mark.parametrize(
    ("recipe", "entry", "said"),
    [
        (
            "team/exp/mine.yaml",
            "/etc/passwd",
            "error[unsafe-name] extends entry '/etc/passwd' leaves the recipe's folder"
            " (hint: use a relative path below it, or a recipe name)",
        ),
        (
            "team/exp/mine.yaml",
            "../x.yaml",
            "error[unsafe-name] extends entry '../x.yaml' leaves the recipe's folder"
            " (hint: use a relative path below it, or a recipe name)",
        ),
        ("team/exp/mine.yaml", "nope.yaml", "error[unknown-name] extends entry 'nope.yaml': no such file"),
        (
            "team/exp/mine.yaml",
            "link.yaml",
            "error[unsafe-name] extends entry 'link.yaml' resolves outside source 'team' (a symlink?)"
            " (hint: extend a file inside it, or a recipe name)",
        ),
        (
            "free/mine.yaml",
            "link.yaml",
            "error[unsafe-name] extends entry 'link.yaml' resolves outside the recipe's folder {free} (a symlink?)"
            " (hint: extend a file inside it, or a recipe name)",
        ),
    ],
)
def test_a_file_entry_stays_inside_its_source_or_folder(folders, recipe, entry, said):
    from registry.compose import _relative
    from registry.errors import RecipeError

    with pytest.raises(RecipeError) as e:
        _relative(folders / recipe, entry, "mine.yaml:2:3")
    assert str(e.value) == "mine.yaml:2:3: " + said.format(free=folders / "free")


def test_a_file_entry_inside_its_source_is_that_file(folders):
    from registry.compose import _relative

    assert _relative(folders / "team" / "exp" / "mine.yaml", "ok.yaml", "mine.yaml:2:3") == (
        folders / "team" / "exp" / "ok.yaml"
    )


def test_what_compose_returns_whole():
    """The name, the overrides as typed, the fixes applied, the sections in the schema's order,
    and `composed` as the origin of a recipe section no file wrote."""
    from registry.compose import compose

    recipe = compose("pi07/fsdp/4xH100", ["train.steps=7"])
    assert recipe.name == "pi07/fsdp/4xH100" and recipe.overrides == ["train.steps=7"]
    assert recipe.fixed == ["fsdp-fp32-model"] and recipe.data["policy"]["dtype"] == "float32"
    assert list(recipe.data) == [
        "recipe",
        "trainer",
        "policy",
        "dataset",
        "backend",
        "hardware",
        "train",
        "env",
        "launch",
    ]
    assert recipe.origins[("recipe",)] == recipe.origins[("recipe", "name")] == "composed"
    assert recipe.origins[("train", "steps")] == "command line"
    plain = compose("tiny/ddp/cpu")
    assert plain.fixed == [] and plain.overrides == []
    assert plain.origins[("recipe", "name")].startswith("recipes/tiny/ddp/cpu.yaml:")  # a file that says its name


def test_a_name_is_looked_up_once_while_the_sources_are_pinned(monkeypatch):
    """recipe validate over many files pins the sources: each name's published version is looked
    up once for the whole command, and again in the next one."""
    from registry.names import parse
    from registry.sharing import sources, versions

    calls = []
    real = versions._lookup
    monkeypatch.setattr(versions, "_lookup", lambda name: calls.append(name) or real(name))
    name = parse("pi07/zero2/8xA100")
    for _ in range(2):
        assert versions.lookup(name) is None
    assert len(calls) == 2  # not pinned: every lookup reads the sources
    for expected in (3, 4):
        with sources.pinned():
            for _ in range(3):
                assert versions.lookup(name) is None
                compose("pi07/zero2/8xA100")
        assert len(calls) == expected  # once per pinned command


# --- pieces of composition, whole (mutation survivors of registry/compose) ----------------------
def test_the_command_line_layer_names_every_mapping_on_the_way():
    from registry.compose import COMMAND_LINE, _override_layer
    from registry.compose.overrides import parse as parse_overrides

    layer = _override_layer(parse_overrides(["a.b.c=1", "x=2"]))
    assert layer.data == {"a": {"b": {"c": 1}}, "x": 2}
    assert layer.origins == {
        ("a",): COMMAND_LINE,
        ("a", "b"): COMMAND_LINE,
        ("a", "b", "c"): COMMAND_LINE,
        ("x",): COMMAND_LINE,
    }


def test_sections_come_in_their_order_and_unknown_ones_after_by_name():
    from registry.compose import SECTION_ORDER, _section_order

    assert sorted(["zeta", "train", "alpha", "recipe", "env"], key=_section_order) == [
        "recipe",
        "train",
        "env",
        "alpha",
        "zeta",
    ]
    assert [_section_order(s)[0] for s in SECTION_ORDER] == list(range(len(SECTION_ORDER)))


def test_an_unknown_name_lists_the_closest_and_every_name_of_every_source(monkeypatch):
    from registry.compose import known_names
    from registry.sharing import sources

    names = known_names()
    assert {"pi07/zero2/8xA100", "policy/pi07", "backend/zero2", "hardware/8xA100"} <= set(names)
    assert names == sorted(set(names))
    with pytest.raises(RecipeError) as e:
        compose("pi07/zer02")
    assert str(e.value) == f"unknown recipe 'pi07/zer02' (did you mean pi07/zero2/8xA100?); known: {', '.join(names)}"
    # with a git source, what a teammate published since the last update may be the name
    team = sources.Source("team-a", sources.bundled().root, "git", "https://example.invalid/team-a.git")
    monkeypatch.setattr(sources, "all_sources", lambda: [team, sources.bundled()])
    with pytest.raises(RecipeError) as e:
        compose("qq/zz")
    assert str(e.value).endswith(
        " (hint: recipes published to team-a since the last update are not here yet: recipe source update)"
    )


def test_layers_rank_by_what_they_are_and_the_users_by_their_order(tmp_path):
    """Where a problem over several values is reported (registry/validate/problems.py locate): a
    generated hardware part is a part, and of two files of the user's the later outranks."""
    from registry.doc import PART_LAYER, USER_LAYER

    generated = compose("pi07/zero2/3xH100")
    assert generated.origins.rank(generated.origins[("hardware", "gpus_per_node")]) == (PART_LAYER, 0)
    assert [p.name for p in generated.inputs].count("gpus.yaml") == 1
    (tmp_path / "a.yaml").write_text("extends: [pi07/zero2/8xA100]\ntrain:\n  steps: 5\n")
    (tmp_path / "b.yaml").write_text("extends: [a.yaml]\ntrain:\n  micro_batch_size: 2\n")
    recipe = compose(str(tmp_path / "b.yaml"))
    first = recipe.origins.rank(recipe.origins[("train", "steps")])
    second = recipe.origins.rank(recipe.origins[("train", "micro_batch_size")])
    assert first[0] == second[0] == USER_LAYER and first[1] < second[1]
    assert recipe.origins.rank(recipe.origins[("policy", "type")])[1] == 0  # a part: no order among the parts


def test_an_override_drops_every_layers_results_and_keeps_the_recipes_own_section():
    tuned = compose("pi07/zero2/8xA100")
    assert "results" in tuned.data, "the tuned cell records its measured results"
    overridden = compose("pi07/zero2/8xA100", ["train.steps=7"])
    assert "results" not in overridden.data
    assert overridden.data["recipe"]["summary"] == tuned.data["recipe"]["summary"]
