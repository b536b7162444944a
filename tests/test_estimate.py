"""The memory estimate: INVARIANTS 24's model-state formulas, and the pi07 parts against the
points OpenTau PR #273 published (seed 002)."""

import json

import pytest

from registry import memory
from registry.compose import compose
from registry.memory import GIB

GB = 1e9 / GIB  # the seed reports decimal GB


def states(backend: dict, n: int = 8, params: float = 1e9) -> float:
    doc = {"backend": {"mixed_precision": "bf16", **backend}, "hardware": {"gpu": {"memory_gib": 80}, "gpus_per_node": n, "nodes": 1},
           "policy": {"memory": {"params": params}}, "dataset": {}, "train": {"micro_batch_size": 1}}
    est = memory.estimate(doc)
    return sum(est.breakdown[k] for k in ("parameters", "gradients", "optimizer states")) * GIB / params


@pytest.mark.parametrize("backend, bytes_per_param", [
    ({"kind": "ddp"}, 16),
    ({"kind": "deepspeed", "zero_stage": 1}, 4 + 12 / 8),
    ({"kind": "deepspeed", "zero_stage": 2}, 2 + 14 / 8),
    ({"kind": "deepspeed", "zero_stage": 3}, 16 / 8),
    ({"kind": "deepspeed", "zero_stage": 2, "offload": {"optimizer": "cpu"}}, 2 + 2 / 8),
    ({"kind": "fsdp", "version": 1, "sharding": "FULL_SHARD"}, 16 / 8),
    ({"kind": "fsdp", "version": 1, "sharding": "NO_SHARD"}, 16),
])
def test_model_states_follow_invariants_24(backend, bytes_per_param):
    assert states(backend) == pytest.approx(bytes_per_param)


def estimate(name, *overrides):
    return memory.estimate(compose(name, list(overrides)).data)


def test_pi07_zero2_point():
    est = estimate("pi07/zero2/8xA100")  # micro batch 20, 4 cameras: 79% of HBM published
    assert est.largest_micro_batch >= 20 and 0.70 <= est.fraction <= 0.90


def test_pi07_fsdp_point():
    assert estimate("pi07/fsdp/8xA100").fraction <= 1.0  # micro batch 8 fits (91-98% published)
    assert estimate("pi07/fsdp/8xA100").fraction >= 0.80
    assert estimate("pi07/fsdp/8xA100", "train.micro_batch_size=12").fraction > 1.0  # and 12 does not


@pytest.mark.parametrize("backend, allocated_gb", [("zero2", 36.22), ("fsdp", 43.86)])
def test_pi07_one_camera_allocations_within_15_percent(backend, allocated_gb):
    overrides = ["dataset.num_cams=1", "train.micro_batch_size=8"] + (["policy.dtype=float32"] if backend == "fsdp" else [])
    est = estimate(f"pi07/{backend}/8xA100", *overrides)
    assert est.allocated_gib == pytest.approx(allocated_gb * GB, rel=0.15)


def test_pi07_ddp_fails_memory_fit(cli):
    r = cli("validate", "pi07/ddp/8xA100")
    assert r.returncode == 1 and "error[memory-fit]" in r.stdout
    assert states({"kind": "ddp"}, params=5e9) * 5e9 / 1e9 >= 80  # 80 GB of model states alone


def test_estimate_cli(cli):
    r = cli("estimate", "pi07/zero2/8xA100")
    assert r.returncode == 0
    for part in ("parameters", "gradients", "optimizer states", "activations", "allocator overhead", "largest micro batch that fits: 26"):
        assert part in r.stdout
    data = json.loads(cli("estimate", "pi07/zero2/8xA100", "--format", "json").stdout)
    assert data["largest_micro_batch"] == 26 and data["fraction"] < 0.9
    assert cli("estimate", "tiny/ddp/cpu").returncode == 1
