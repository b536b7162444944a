"""The fuzz harness (tests/fuzz.py) in CI: 3,200 cases over the five strategies with fixed seeds
(`derandomize`), each a `recipe` call in-process that must return 0, 1 or 2 without a traceback,
a hang, a process, a socket or a write outside its folder. The regressions below are cases the
harness found, kept as explicit examples. benchmarks/fuzz.py runs the same strategies at length."""

from __future__ import annotations

import math

import fuzz
import pytest
from conftest import SESSION_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(str(SESSION_DIR / "hypothesis"))  # never .hypothesis/ in the checkout

# max_examples per strategy: 3,200 in all, about 45 s on 2 cores
EXAMPLES = {"files": 1000, "overrides": 900, "names": 400, "imports": 700, "datasets": 200}


def fixed(strategy: str) -> settings:
    """The CI settings: fixed seed, no example database, no deadline (a call has TIMEOUT_S)."""
    return settings(
        max_examples=EXAMPLES[strategy],
        derandomize=True,
        deadline=None,
        database=None,
        print_blob=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def check(case: fuzz.Case) -> None:
    outcome = fuzz.run_case(case)
    if outcome.ok:
        return
    pytest.fail(
        f"{outcome.key}: {outcome.message}\nrecipe {' '.join(map(repr, outcome.argv))}\n{outcome.traceback}",
        pytrace=False,
    )


@fixed("files")
@given(fuzz.STRATEGIES["files"])
def test_recipe_files(case):
    check(case)


@fixed("overrides")
@given(fuzz.STRATEGIES["overrides"])
def test_overrides(case):
    check(case)


@fixed("names")
@given(fuzz.STRATEGIES["names"])
def test_names(case):
    check(case)


@fixed("imports")
@given(fuzz.STRATEGIES["imports"])
def test_imports(case):
    check(case)


@fixed("datasets")
@given(fuzz.STRATEGIES["datasets"])
def test_dataset_metadata(case):
    check(case)


def test_the_budget_is_3200_cases():
    assert sum(EXAMPLES.values()) == 3200 and set(EXAMPLES) == set(fuzz.STRATEGIES)


# --- the harness itself ------------------------------------------------------------------------
def test_a_traceback_is_caught_and_located(monkeypatch):
    from registry import estimate

    def broken(*args):  # validation's memory check calls it, or the command when the verdict is on disk
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(estimate, "estimate", broken)
    outcome = fuzz.run_case(fuzz.Case({}, [["estimate", "pi07/zero2/8xA100"]]))
    assert outcome.kind == "traceback" and outcome.exc_type == "ZeroDivisionError"
    assert outcome.location.startswith("registry/") and outcome.location.endswith("broken)")


def test_a_hang_is_interrupted(monkeypatch):
    import time

    from registry.commands import estimate

    monkeypatch.setattr(estimate, "run", lambda args: time.sleep(5))
    monkeypatch.setattr(fuzz, "TIMEOUT_S", 0.2)
    outcome = fuzz.run_case(fuzz.Case({}, [["estimate", "pi07/zero2/8xA100"]]), timeout=0.2)
    assert outcome.kind == "hang"


def test_a_write_outside_the_folder_is_refused(monkeypatch, tmp_path):
    from registry.commands import estimate

    monkeypatch.setattr(estimate, "run", lambda args: (tmp_path / "escaped").write_text("x") and 0)
    outcome = fuzz.run_case(fuzz.Case({}, [["estimate", "pi07/zero2/8xA100"]]))
    assert outcome.kind == "forbidden" and not (tmp_path / "escaped").exists()


def test_the_doctor_reads_the_dataset_in_process_without_a_process(monkeypatch):
    """The datasets strategy's way in: trainer.env names no interpreter and the host's GPUs are the
    harness's stand-in, so `recipe doctor` reaches the dataset checks with no process started."""
    from registry.run.preflight import host, metadata

    read, gather, seen = metadata.read, host.gather, []
    monkeypatch.setattr(metadata, "read", lambda path: seen.append(read(path)) or seen[-1])
    monkeypatch.setattr(host, "gather", lambda *a, **k: seen.append(gather(*a, **k)) or seen[-1])
    info = (fuzz.ROOT / "tests" / "data" / "datasets" / "toy" / "meta" / "info.json").read_bytes()
    recipe = b"extends: [act/ddp/2xH100]\ndataset: {root: data}\ntrainer: {env: venvs/none}\n"
    case = fuzz.Case({"r.yaml": recipe, "data/meta/info.json": info}, [["doctor", "r.yaml", "--output-dir", "."]])
    outcome = fuzz.run_case(case)
    assert outcome.ok and outcome.rc == 1, f"{outcome.key}: {outcome.message}"
    meta, facts = seen
    assert meta.fps == 10 and meta.path.parts[-3:] == ("data", "meta", "info.json")
    assert len(facts.gpus) == fuzz.STAND_IN_GPUS and facts.trainer is None


def test_usage_errors_and_exit_codes_pass():
    assert fuzz.run_case(fuzz.Case({}, [["estimate"]])).ok  # argparse: SystemExit(2)
    assert fuzz.run_case(fuzz.Case({}, [["validate", "nope/nope/nope"]])).rc == 2
    assert fuzz.run_case(fuzz.Case({"r.yaml": b"train: [\n"}, [["validate", "r.yaml"]])).rc == 1


# --- regressions: cases the harness found ------------------------------------------------------
HUGE = str(10**400)
REGRESSIONS = [
    # an int beyond float range in the estimate's arithmetic: OverflowError (registry/estimate.py)
    ["estimate", "pi07/zero2/8xA100", f"policy.memory.params={HUGE}"],
    ["validate", "pi07/zero2/8xA100", f"policy.memory.params={HUGE}"],
    ["estimate", "pi07/zero2/8xA100", f"train.micro_batch_size={HUGE}"],
    ["validate", "pi07/fsdp/8xA100", f"hardware.nodes={HUGE}"],
    # finite inputs whose product overflows to inf, then inf - inf: int(nan) in largest_under
    ["estimate", "diffusion/zero2/8xH100", "policy.memory.activation_gib_per_frame=1.7976931348623157e+308"],
    ["validate", "pi07/zero2/8xA100", "policy.memory.activation_gib_per_frame=1.7976931348623157e+308"],
    ["estimate", "pi07/zero2/8xA100", "backend.memory.allocator_overhead=1e308", "--format", "json"],
    # HYBRID_SHARD shards over gpus_per_node, which may be 0: ZeroDivisionError
    [
        "run",
        "pi07/fsdp/8xA100",
        "backend.sharding=HYBRID_SHARD",
        "hardware.gpus_per_node=0",
        "hardware.processes_per_node=8",
        "--dry-run",
    ],
    ["estimate", "pi07/fsdp/8xA100", "backend.sharding=HYBRID_SHARD", "hardware.gpus_per_node=0"],
]


@pytest.mark.parametrize("argv", REGRESSIONS, ids=lambda argv: " ".join(argv)[:80])
def test_regression(argv):
    outcome = fuzz.run_case(fuzz.Case({}, [argv]))
    assert outcome.ok, f"{outcome.key}: {outcome.message}\n{outcome.traceback}"


def test_an_estimate_that_overflows_is_one_error(capsys):
    from registry.commands import main

    assert main(["estimate", "pi07/zero2/8xA100", f"policy.memory.params={HUGE}"]) == 2
    out = capsys.readouterr()
    assert "an integer of" in out.out + out.err and "out of range" in out.out + out.err  # refused where it is read
    big = "policy.memory.activation_gib_per_frame=1.7976931348623157e+308"
    assert main(["estimate", "pi07/zero2/8xA100", big]) == 1
    err = capsys.readouterr().err
    assert "does not come out finite" in err and "Traceback" not in err


def test_the_estimate_is_finite_or_refused():
    from registry import estimate
    from registry.compose import compose

    recipe = compose("pi07/zero2/8xA100", ["policy.memory.activation_gib_per_frame=1.7976931348623157e+308"])
    est = estimate.estimate(recipe.data)
    assert not est.finite and est.largest_micro_batch == 0
    fine = estimate.estimate(compose("pi07/zero2/8xA100").data)
    assert fine.finite and math.isfinite(fine.total_gib) and fine.largest_micro_batch > 0
