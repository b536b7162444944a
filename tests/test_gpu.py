"""On a host with 2 GPUs (python3 -m pytest -m gpu): every backend trains, checkpoints and
resumes, and the consolidated model.safetensors reproduces the trained model."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import run_cli
from safetensors.torch import load_file

from registry.train import CRASH_AFTER
from registry.train.policy import build

pytestmark = pytest.mark.gpu
BACKENDS = ["ddp", "zero2", "zero3", "fsdp", "fsdp2"]
# a 2-step warm-up: under the recipes' 100 the learning rate is too small after 12 steps to see the loss fall
STEPS = [
    "train.steps=12",
    "train.log_every=1",
    "train.checkpoint.every=6",
    "train.micro_batch_size=8",
    "train.scheduler.warmup_steps=2",
]
RECIPE = "ref-100m/{}/2xH100"


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def losses(run: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(run) if "loss" in r}


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_trains_checkpoints_and_resumes(tmp_path, backend):
    name = RECIPE.format(backend)
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    common = ["--allow-hardware-mismatch"]  # H200 hosts stand in for H100 ones
    r = run_cli("run", name, *STEPS, *common, "--output-dir", str(whole), timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    start = records(whole)[0]
    assert start["world_size"] == 2
    assert start["distributed_type"] == {"ddp": "MULTI_GPU", "zero2": "DEEPSPEED", "zero3": "DEEPSPEED"}.get(
        backend, "FSDP"
    )
    if backend in ("zero3", "fsdp", "fsdp2"):
        assert all(rank["local_param_numel"] < rank["param_numel"] for rank in start["ranks"])
    seen = losses(whole)
    assert sum(seen[s] for s in (10, 11, 12)) / 3 < 0.8 * seen[1], seen  # the first Adam steps spike, then it learns
    assert all(r["peak_allocated_gib"] > 0 for r in records(whole) if "loss" in r)

    crashed = run_cli("run", name, *STEPS, *common, "--output-dir", str(broken), env={CRASH_AFTER: "6"}, timeout=900)
    assert crashed.returncode != 0
    resumed = run_cli("run", name, *STEPS, *common, "--resume", str(broken), timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-4000:] + resumed.stderr[-2000:]
    a, b = losses(whole), losses(broken)
    # bf16 kernels are not bit-reproducible on GPUs; resumed losses follow the uninterrupted run closely
    for step in range(7, 13):
        assert abs(a[step] - b[step]) <= 0.02 * abs(a[step]) + 1e-4, (step, a[step], b[step])

    last = whole / "checkpoints" / "last"
    doc = json.loads((whole / "train_config.json").read_text())
    model = build(doc)
    model.load_state_dict(load_file(str(last / "model.safetensors")))
    probe = load_file(str(last / "probe.safetensors"))
    model = model.cuda().eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(probe["images"].cuda(), probe["state"].cuda()).float().cpu()
    assert torch.allclose(out, probe["actions"], atol=0.05, rtol=0.05), (out - probe["actions"]).abs().max()
    shutil.rmtree(tmp_path)
