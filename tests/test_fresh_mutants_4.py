"""Classes of behaviour round 4 of the fresh hand-made mutants found unpinned (issue 41;
docs/mutation.md): each test holds a whole class (every kind of empty value, every tie budget,
every character an override key lacks, every CUDA major's minimum driver), not the one line that
was broken."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from registry import commands
from registry.compose import _standing, compose
from registry.doc import BASE_LAYER, PART_LAYER, RECIPE_LAYER, USER_LAYER
from registry.names import is_override
from registry.resolve import resolve
from registry.run import preflight
from registry.run.bench import Outcome, result_entry
from registry.run.machine import GPU
from registry.run.preflight import hostchecks, rules
from registry.run.preflight.host import HostFacts
from registry.run.supervise import Output
from registry.run.tune import MEASURED, Candidate, Point, Search
from registry.sharing import sources


# --- registry/commands/diff.py: an empty list or section set is one left out ---------------------
@pytest.mark.parametrize(
    "path", ["launch.slurm.extra", "dataset.episodes", "policy.fsdp2_extra_block_classes", "dataset.drop_probs", "env"]
)
@pytest.mark.parametrize("empty", [[], {}])
def test_diff_reads_an_empty_value_as_one_left_out(tmp_path, capsys, path, empty):
    """A copy of a cell that writes an empty list or mapping where the cell leaves the key out trains
    the same: exit 0, nothing on stdout; the same key given a value is a difference."""
    data = compose("tiny/ddp/cpu").data
    *parents, key = path.split(".")
    node = data
    for name in parents:
        node = node.setdefault(name, {})
    assert key not in node or node[key] in ({}, []), f"tiny/ddp/cpu sets {path}"
    node[key] = empty
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(data))
    assert commands.main(["diff", "tiny/ddp/cpu", str(tmp_path / "mine.yaml")]) == 0
    assert capsys.readouterr().out == ""
    node[key] = ["--x"] if isinstance(empty, list) else {"X": "1"}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(data))
    assert commands.main(["diff", "tiny/ddp/cpu", str(tmp_path / "mine.yaml")]) == 1
    assert capsys.readouterr().out.startswith(path)


# --- registry/run/tune/search.py: at most tie_runs launches to separate the leaders --------------
@pytest.mark.parametrize("rivals", [1, 2, 3])
@pytest.mark.parametrize("tie_runs", [0, 1, 2, 3, 5])
def test_leaders_that_never_separate_get_exactly_tie_runs_launches(rivals, tie_runs):
    """Backends whose per-step rates are the same never part: after rung 0 (one launch each) the
    search launches them again exactly tie_runs times in all, whatever the number of rivals."""
    backends = ["ddp", "zero1", "zero2", "fsdp2"][: rivals + 1]
    runs = []

    def measure(c: Candidate, warmup: int, steps: int) -> Point:
        runs.append(c.backend)
        got = Point(c, MEASURED, peak_allocated_gib=2.0, peak_reserved_gib=2.0, launches=[[100.0, 90.0, 110.0]])
        got.samples_per_s = got.figure.median
        return got

    def launches(allowed: int) -> int:
        runs.clear()
        search = Search([Point(Candidate(b, 8, 1)) for b in backends], warmup=0, steps=3, tie_runs=allowed)
        search.run(measure)
        assert search.tie_runs_used == allowed
        return len(runs)

    assert launches(tie_runs) == launches(0) + tie_runs  # the rungs' launches, then tie_runs more


# --- registry/names.py: an override's key is the whole text before "=" ---------------------------
@pytest.mark.parametrize("key", ["a b", "a/b", "a..b", "a.b.", "a!", "a:b", "a@2", "train.steps ", "a.b c"])
def test_a_key_with_any_character_an_override_key_lacks_is_no_override(key):
    assert not is_override(f"{key}=1")


@pytest.mark.parametrize("key", ["a", "_a", "train.steps", "a_b.c-d", "env.CUDA_VISIBLE_DEVICES", "x.0"])
def test_a_dotted_key_of_names_is_an_override(key):
    assert is_override(f"{key}=1") and is_override(f"{key}=")


# --- registry/run/preflight/hostchecks.py: a driver at the minimum is enough ---------------------
H100 = GPU("NVIDIA H100 80GB HBM3", 81559, "550.54.15")
TRAINER = {
    "python": "3.11.9",
    "packages": {"torch": "2.9.0", "accelerate": "1.11.0", "deepspeed": None, "transformers": None},
    "nccl": "2.27.3",
}


def _driver_problems(cuda: str, driver: str) -> list[str]:
    recipe = compose("tiny/ddp/2xH100")
    gpu = dataclasses.replace(H100, driver=driver)
    host = HostFacts(
        gpus=(gpu, gpu),
        python="/env/bin/python",
        trainer={**TRAINER, "torch_cuda": cuda},
        shm_free=64 << 30,
        disk_path="/scratch",
        disk_free=10 << 40,
    )
    report = preflight.Report()
    run = hostchecks.Run(recipe.data, resolve(recipe), (), recipe.data["trainer"].get("env"))
    preflight.check_host(recipe.data, recipe.origins, host, run, report)
    return [p.rule for p in report.problems]


@pytest.mark.parametrize("major", sorted(rules.document()["cuda_drivers"]))
def test_a_driver_at_the_oldest_a_cuda_major_needs_is_accepted_and_one_below_refused(major):
    oldest = rules.document()["cuda_drivers"][major]
    first = int(oldest.split(".")[0])
    assert _driver_problems(f"{major}.0", oldest) == []
    assert _driver_problems(f"{major}.1", f"{first + 1}.0.1") == []
    assert _driver_problems(f"{major}.0", f"{first - 1}.999.99") == ["host-driver"]


# --- registry/run/supervise.py: every rank's copy of a line is shown once, its stamp aside -------
@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            b"[2026-12-02 10:00:00,123] WARNING: x is deprecated\n",
            b"[2026-12-02 10:00:00,456] WARNING: x is deprecated\n",
        ),
        (b"[2026-12-02 10:00:00.1] x is deprecated\n", b"[2026-12-02 10:00:01.9]   x is deprecated\n"),
        (
            b"W1202 10:00:00.123456  1234 init.py:10] x is deprecated\n",
            b"W1202 10:00:00.654321  5678 init.py:10] x is deprecated\n",
        ),
        (b"I1202 10:00:00.1 7 a.cc:3] ready\n", b"I1202 10:00:00.2 8 a.cc:3] ready\n"),
    ],
)
def test_copies_of_a_line_that_differ_in_their_stamp_or_pid_are_shown_once(first, second):
    out = Output(echo=True)
    assert out.line(first) == first
    assert out.line(second) == b""
    other = second.replace(b"deprecated", b"gone").replace(b"ready", b"done")
    assert out.line(other) == other  # another message is shown


# --- registry/compose/__init__.py: a layer is what the innermost source holding it says ----------
@pytest.mark.parametrize("order", [1, -1])
def test_a_layer_is_judged_by_the_innermost_source_that_holds_it(tmp_path, order):
    outer_path = sources.Source("mine", tmp_path, "path", str(tmp_path))
    inner_bundled = sources.Source("bundled", tmp_path / "recipes", "bundled")
    for rel in (
        "recipes/base.yaml",
        "recipes/policy/x.yaml",
        "recipes/x/y/z.yaml",
        "other/policy/x.yaml",
        "hardware/x.yaml",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}\n")
    known = (outer_path, inner_bundled)[::order]
    assert _standing((tmp_path / "recipes/base.yaml").resolve(), known) == BASE_LAYER
    assert _standing((tmp_path / "recipes/policy/x.yaml").resolve(), known) == PART_LAYER
    assert _standing((tmp_path / "recipes/x/y/z.yaml").resolve(), known) == RECIPE_LAYER
    assert _standing((tmp_path / "other/policy/x.yaml").resolve(), known) == USER_LAYER
    # the other way in: a folder of the user's inside a bundled or git source is the user's
    outer_git = sources.Source("team", tmp_path, "git", "https://example.com/team.git")
    inner_path = sources.Source("mine", tmp_path / "recipes" / "policy", "path", "")
    known = (outer_git, inner_path)[::order]
    assert _standing((tmp_path / "recipes/policy/x.yaml").resolve(), known) == USER_LAYER
    assert _standing((tmp_path / "hardware/x.yaml").resolve(), known) == PART_LAYER
    assert _standing((tmp_path / "other/policy/x.yaml").resolve(), known) == RECIPE_LAYER


# --- registry/run/bench.py: loop_uses_accumulate only where the loop accumulates -----------------
@pytest.mark.parametrize("accumulation", [1, 2, 4, 16])
def test_a_result_says_the_loop_accumulates_only_past_one_micro_step(accumulation):
    outcome = Outcome(
        "tiny/ddp/cpu",
        samples_per_s=100.0,
        micro_batch_size=2,
        gradient_accumulation_steps=accumulation,
        world_size=1,
        doc=compose("tiny/ddp/cpu").data,
    )
    entry = result_entry(outcome, "recipe bench tiny/ddp/cpu", 3)
    assert entry["gradient_accumulation_steps"] == accumulation
    assert entry.get("loop_uses_accumulate", False) is (accumulation > 1)
