"""Pieces of validation read by value in-process: the memory check on a CPU and its breakdown, the
message of an x-compare, what the memo keys on, a rule's related places, the axis-swap hint only
where an axis is written as a word, a team's computed rule, and the verdicts kept on disk (the
batch written as a worker exits, the rules' mark, a cache that cannot be written)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import ROOT, run_cli
from test_team_rules import write_rules

from registry import view
from registry.compose import compose
from registry.validate import checks, engines, keywords, memo, problems, validate, verdicts

FIT = {"id": "memory-fit", "severity": "error", "compute": "memory-fit", "message": "does not fit in GPU memory"}


# --- the memory check (schemas/hardware.schema.json, memory-fit) ----------------------------------
def test_a_cpu_recipe_has_no_memory_check_even_where_a_gpu_size_is_unset():
    cpu = view.of(compose("tiny/ddp/cpu").data)
    assert cpu.policy.memory.params is not None and cpu.hardware.gpu is None
    assert checks.memory_fit(cpu, FIT) == []  # no "not checked: hardware.gpu.memory_gib is not set"


def test_the_breakdown_names_parts_of_a_twentieth_of_a_gib_and_more(monkeypatch):
    sizes = {"weights": 30.0, "at the threshold": 0.05, "under it": 0.049}
    est = SimpleNamespace(
        finite=True,
        breakdown=sizes,
        total_gib=76.0,
        capacity_gib=80.0,
        fraction=0.95,
        needed_fraction=0.94,
        largest_micro_batch=20,
    )
    monkeypatch.setattr(checks.memory, "estimate", lambda recipe: est)
    [said] = checks.memory_fit(view.of(compose("pi07/zero2/8xA100").data), FIT)
    assert said.severity == "warning" and said.path == ("train", "micro_batch_size")
    assert said.message == (
        "needs about 75.2 GiB per rank of 80.0 GiB (94%; 95% with the allocator's reserve: weights 30.0,"
        " at the threshold 0.1); the largest micro batch that fits is 20"
    )


def test_a_kubernetes_recipe_without_an_image_has_its_counts_read_back():
    """kubernetes-image reports the missing image; the counts check still reads the manifest, made
    with a placeholder that passes the image pattern."""
    doc = compose("pi07/zero2/2x8xH100", ["launch.launcher=kubernetes"]).data
    assert doc["launch"].get("image") is None
    assert engines.engine_file(doc) == (
        "kubernetes.yaml",
        "launch.launcher",
        {"nodes": "2", "gpus_per_node": "8", "processes_per_node": "8"},
    )


# --- x-compare's message ------------------------------------------------------------------------
def test_a_comparison_that_fails_names_both_sides_and_their_values():
    spec = {"left": "train.micro_batch_size", "op": "<=", "right": {"path": "train.cap", "default": 8}}
    [error] = keywords.x_compare(None, spec, {"train": {"micro_batch_size": 16}}, {})
    assert error.message == "train.micro_batch_size (16) <= 8 does not hold"
    assert tuple(error.path) == ("train", "micro_batch_size")
    assert list(keywords.x_compare(None, spec, {"train": {"micro_batch_size": 8}}, {})) == []


# --- the memo (registry/validate/memo.py): keyed on exactly what a rule reads -------------------
@pytest.fixture
def fresh_memo(monkeypatch):
    """Tables of this test's own: its rules are neither kept alive nor found by later tests."""
    for table in ("_READS", "_PLANS", "_OUTCOMES", "_KEPT"):
        monkeypatch.setattr(memo, table, {})


def test_the_paths_a_comparison_reads_include_its_defaults_and_factors(fresh_memo):
    rule = {
        "x-compare": {
            "left": {"path": "train.micro_batch_size", "default": "train.fallback"},
            "op": "<=",
            "right": {"product": ["hardware.nodes", {"path": "hardware.gpus_per_node", "default": 1}]},
        }
    }
    assert memo.reads(rule) == {"train.micro_batch_size", "train.fallback", "hardware.nodes", "hardware.gpus_per_node"}
    plan = memo.planned(("test-plan", id(rule)), (rule,))
    assert plan == (
        ("hardware", "gpus_per_node"),
        ("hardware", "nodes"),
        ("train", "fallback"),
        ("train", "micro_batch_size"),
    )


def test_a_reference_anywhere_under_a_where_is_never_memoised(fresh_memo):
    """A $ref resolves against the schema file it is read in, so the paths it reads are unknown."""
    assert memo.reads({"x-where": {"backend.kind": {"anyOf": [{"$ref": "#/$defs/kind"}, {"const": "ddp"}]}}}) is None
    assert memo.reads({"x-where": {"backend.kind": {"anyOf": [{"const": "fsdp"}, {"const": "ddp"}]}}}) == {
        "backend.kind"
    }


def test_an_outcome_is_decided_once_for_the_values_its_schemas_read(fresh_memo):
    rule = {"x-compare": {"left": "a", "op": "<=", "right": "b"}}
    decided = []

    def decide():
        decided.append(1)
        return len(decided)

    assert memo.outcome("test-outcome", (rule,), {"a": 1, "b": 2}, decide) == 1
    assert memo.outcome("test-outcome", (rule,), {"a": 1, "b": 2, "c": 3}, decide) == 1  # c is not read
    assert memo.outcome("test-outcome", (rule,), {"a": 2, "b": 2}, decide) == 2
    assert len(decided) == 2


# --- problems: placeholders, related places, hints ----------------------------------------------
def test_a_placeholder_of_an_unset_value_says_unset():
    assert problems._fill("{train.steps} steps of {train.nothing}", {"train": {"steps": 5}}) == "5 steps of unset"


def test_a_rule_over_two_values_names_where_the_other_was_set():
    recipe = compose("pi07/fsdp/4xH100", ["backend.cpu_ram_efficient_loading=true", "backend.sync_module_states=false"])
    [said] = [p for p in validate(recipe.data, recipe.origins) if p.rule == "fsdp-ram-efficient-sync"]
    assert said.path == "backend.sync_module_states" and said.origin == "command line"
    assert said.related == (("backend.cpu_ram_efficient_loading", "command line"),)


def test_the_swap_hint_is_for_an_axis_written_as_a_word_only():
    recipe = compose("pi07/fsdp/4xH100")
    for section, hint in (
        ("train", None),  # a section that is no axis: its type error has no swap to suggest
        ("backend", "a recipe file names its parts in extends: write `extends: [..., backend/fsdp]` instead"),
    ):
        data = copy.deepcopy(recipe.data)
        data[section] = "fsdp"
        [said] = [p for p in validate(data, recipe.origins) if p.path == section]
        assert said.message == "'fsdp' is not of type object"
        if hint is None:
            assert said.hint is None
        else:
            assert said.hint.startswith(hint)


# --- a team's computed rule ---------------------------------------------------------------------
def test_a_team_rule_that_computes_fires_on_the_team_recipe(tmp_path):
    folder = tmp_path / "team-a"
    (folder / "exp").mkdir(parents=True)
    write_rules(folder, [{**FIT, "id": "fits-our-cards", "message": "does not fit our cards", "source": "wiki"}])
    (folder / "exp" / "huge.yaml").write_text(
        "extends: [pi07/zero2/8xA100]\nrecipe:\n  name: exp/huge\ntrain:\n  micro_batch_size: 512\n"
    )
    env = {"RECIPE_CONFIG": str(tmp_path / "sources.yaml"), "RECIPE_CACHE": str(tmp_path / "cache")}
    assert run_cli("source", "add", "team-a", str(folder), env=env).returncode == 0
    r = run_cli("validate", "team-a:exp/huge", env=env)
    assert r.returncode == 1
    assert "error[memory-fit]" in r.stdout and "error[team-a:fits-our-cards]" in r.stdout, r.stdout


# --- verdicts kept on disk ----------------------------------------------------------------------
def test_a_batched_worker_writes_its_last_verdicts_as_it_exits(tmp_path):
    """`recipe validate` workers write verdicts in batches; what is left is written by a finalizer at
    exit, or the next run validates those files again."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "RECIPE_VERDICT_CACHE": "1"}
    code = (
        "from registry.validate import verdicts\n"
        "verdicts.batched()\n"
        "verdicts.put('k' * 40, [])\n"  # fewer than a batch: nothing written before the exit
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, timeout=60).returncode == 0
    code = "from registry.validate import verdicts\nprint(verdicts.get('k' * 40))\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout == "[]\n", out.stderr


def test_the_rules_mark_is_found_where_it_was_written(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("RECIPE_VERDICT_CACHE", "1")
    assert not verdicts.rules_checked() and not verdicts.rules_checked("preflight")
    verdicts.mark_rules_checked()
    assert verdicts.rules_checked() and not verdicts.rules_checked("preflight")


def test_a_cache_file_that_cannot_be_written_is_reported_not_raised(tmp_path):
    (tmp_path / "file").write_text("")
    assert verdicts.put_file(tmp_path / "file" / "below", "x") is False  # its folder is a file
    assert verdicts.put_file(tmp_path / "ok" / "mark", "x") is True
    assert (tmp_path / "ok" / "mark").read_text() == "x"
