"""Classes of behaviour round 5 of the fresh hand-made mutants found unpinned (issue 41;
docs/mutation.md): each test holds a whole class (every place a version is remembered from, every
node range, every power of two of a rank's batch, every spelling of a recipe file), not the one
line that was broken."""

from __future__ import annotations

import shutil

import pytest

from registry.compose import catalog, compose
from registry.files import RECIPES_DIR
from registry.names import looks_like_file, parse
from registry.run.machine import GPU, mismatch
from registry.run.tune.space import micro_batches
from registry.sharing import sources, trust
from registry.validate.engines import slurm_counts

H1, H2 = "1" * 64, "2" * 64


# --- registry/sharing/trust.py: forgetting a version forgets it at its own place only ---------------
def test_forgetting_a_version_keeps_the_same_label_remembered_from_every_other_place(tmp_path, monkeypatch):
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(tmp_path / "store" / "known-versions.jsonl"))
    (tmp_path / "store").mkdir(mode=0o700)
    teams = []
    for name in ("team-a", "team-b", "team-c"):
        root = tmp_path / name
        root.mkdir()
        teams.append(sources.Source(name, root, "path", str(root)))
    for team in teams:
        trust.remember(team, {"exp/x@1": H1, "exp/x@2": H2})
    trust.forget(teams[0], ["exp/x@1"])
    remembered = trust.known()
    assert (trust.place(teams[0]), "exp/x@1") not in remembered
    assert remembered[(trust.place(teams[0]), "exp/x@2")] == H2  # another label of that place stays
    for team in teams[1:]:
        assert remembered[(trust.place(team), "exp/x@1")] == H1
        assert remembered[(trust.place(team), "exp/x@2")] == H2


# --- registry/validate/engines.py: --nodes=MIN-MAX is one count only where MIN is MAX --------------
@pytest.mark.parametrize(("value", "nodes"), [("2", "2"), ("2-2", "2"), ("3-3", "3"), ("2-4", "2-4"), ("1-3", "1-3")])
def test_a_node_range_is_a_count_only_when_its_ends_agree(value, nodes):
    assert slurm_counts(f"#!/bin/bash\n#SBATCH --nodes={value}\n")["nodes"] == nodes


# --- registry/compose/catalog.py: digits that end a model's name (A10G) are no memory size ---------
@pytest.mark.parametrize("name", ["A10G", "a10g", "NVIDIA A10G", "H100", "GH200", "L40S", "RTX4090"])
def test_a_model_number_followed_by_a_letter_is_no_memory_size(name):
    assert catalog._memory(name) is None


@pytest.mark.parametrize(("name", "gb"), [("H100-80GB", 80), ("A100 40G", 40), ("A10G-24GB", 24), ("h200_141gib", 141)])
def test_a_memory_size_after_the_model_is_read(name, gb):
    assert catalog._memory(name) == gb


# --- registry/run/machine.py: a loopback multi-node recipe needs every node's GPUs on this host ----
H100 = GPU("NVIDIA H100 80GB HBM3", 81559)


def test_every_node_of_a_loopback_recipe_needs_its_gpus_here_and_a_cluster_one_needs_a_node():
    loopback = compose("tiny/ddp/2x1xH100").data  # 2 nodes of 1 GPU, rendezvous on 127.0.0.1
    assert mismatch(loopback, [H100]) is not None
    assert mismatch(loopback, [H100] * 2) is None
    cluster = compose("tiny/ddp/2x8xH100").data  # 2 nodes of 8 GPUs, each its own host
    assert mismatch(cluster, [H100] * 7) is not None
    assert mismatch(cluster, [H100] * 8) is None


# --- registry/run/tune/space.py: every power of two dividing a rank's batch, the whole batch too ---
@pytest.mark.parametrize("world", [1, 2, 3, 8])
@pytest.mark.parametrize("per_rank", [1, 2, 3, 4, 6, 8, 12, 16, 64])
def test_micro_batches_are_every_power_of_two_dividing_the_rank_batch(world, per_rank):
    want = [m for m in (1 << k for k in range(per_rank.bit_length(), -1, -1)) if m <= per_rank and per_rank % m == 0]
    assert micro_batches(per_rank * world, world) == want
    assert micro_batches(per_rank * world, world)[0] == per_rank & -per_rank  # its largest power of two


# --- registry/names.py: a recipe file ends in .yaml or .yml; a segment holds at most 64 chars ------
@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_a_recipe_file_of_either_suffix_composes_as_the_cell_it_copies(tmp_path, suffix):
    copy = tmp_path / f"mine{suffix}"
    shutil.copy(RECIPES_DIR / "tiny" / "ddp" / "cpu.yaml", copy)
    assert looks_like_file(str(copy)) and looks_like_file(f"dir/x{suffix}")
    assert compose(str(copy)).data == compose(str(RECIPES_DIR / "tiny" / "ddp" / "cpu.yaml")).data
    assert not looks_like_file("tiny/ddp/cpu")


@pytest.mark.parametrize("first", ["a", "Z", "0"])
def test_a_name_segment_holds_at_most_64_characters(first):
    for length in (1, 63, 64):
        assert parse(f"{first}{'b' * (length - 1)}/x").segments[0] == first + "b" * (length - 1)
    for length in (65, 66, 200):
        with pytest.raises(Exception, match="malformed recipe name"):
            parse(f"{first}{'b' * (length - 1)}/x")
        with pytest.raises(Exception, match="malformed recipe name"):
            parse(f"x/{first}{'b' * (length - 1)}")


# --- registry/validate/problems.py: a value of up to 60 characters is shown whole, a longer one cut -
@pytest.mark.parametrize("length", [1, 40, 57, 58, 59, 60, 61, 62, 120])
def test_a_wrong_value_is_shown_whole_up_to_sixty_characters_and_cut_past_them(length):
    from registry.validate import validate

    recipe = compose("tiny/ddp/cpu")
    shown = repr("x" * (length - 2)) if length >= 2 else None
    value = "x" * (length - 2) if length >= 2 else 7  # repr adds the two quotes; 7 is one character
    recipe.data["backend"]["mixed_precision"] = value
    (problem,) = [p for p in validate(recipe.data, recipe.origins) if p.rule == "enum"]
    text = problem.render()
    if length <= 60:
        assert f"{shown if shown else value} is not one of" in text
    else:
        assert f"{shown[:57]}... is not one of" in text


# --- registry/resolve/deepspeed.py: a sequence-parallel size is a whole number of 1 or more ---------
@pytest.mark.parametrize(
    ("size", "read"), [(1, 1), (2, 2), (4, 4), (0, 1), (-1, 1), (-4, 1), (True, 1), (2.0, 1), ("2", 1)]
)
def test_a_sequence_parallel_size_below_one_or_not_an_integer_is_one(size, read):
    from registry.resolve.deepspeed import sequence_parallel

    doc = compose("tiny/zero2/cpu").data
    doc["backend"].setdefault("accelerate", {})["parallelism_config"] = {"parallelism_config_sp_size": size}
    assert sequence_parallel(doc) == read


# --- registry/run/resume.py: a run folder is stamped only when its whole name is a stamp -----------
@pytest.mark.parametrize("suffix", ["-x", "x", "-2-3", "-2x", ".old", " copy", "-"])
def test_a_folder_named_a_stamp_and_more_sorts_with_the_hand_named_below_every_run(suffix):
    from pathlib import Path

    from registry.run.resume import run_order

    stamped = ["20260101-120000", "20260101-120000-2", "20260101-120000-10", "20260102-000000"]
    hand = f"20260103-000000{suffix}"  # the newest stamp of all, and more
    order = sorted([Path(n) for n in [*stamped, hand, "mine"]], key=run_order)
    assert [p.name for p in order][:2] == sorted([hand, "mine"])
    assert [p.name for p in order][2:] == stamped
