"""The built-in trainer for real: 2 processes over gloo on this CPU host, under DDP, ZeRO-2 and
ZeRO-3; crash and resume, a finished run extended to twice its steps (DDP), a damaged checkpoint
passed over; consolidated checkpoints loaded into a fresh policy."""

import functools
import json
import shutil
from concurrent.futures import Future
from pathlib import Path

import pytest
import torch
from conftest import run_cli
from safetensors.torch import load_file

from registry.train import CRASH_AFTER
from registry.train.policy import build

BACKENDS = ["ddp", "zero2", "zero3"]
# One schedule for 12 and 24 steps (decay_steps would otherwise follow train.steps), so that a run
# of 12 steps extended to 24 can match one of 24.
STEPS = ["train.steps=12", "train.log_every=1", "train.checkpoint.every=6", "train.scheduler.decay_steps=24"]


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def losses(run: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(run) if "loss" in r}


def train(*args, env=None) -> str:
    """`recipe run ARGS`, which must succeed; its output, a pipe, has no progress bar's carriage returns."""
    r = run_cli("run", *args, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "\r" not in r.stdout + r.stderr
    return r.stdout + r.stderr


def crash_and_resume(backend: str, base: Path, port: int) -> tuple[Path, Path, list[str]]:
    """An uninterrupted run of 24 steps, and one of 12 that crashes after step 6, resumes to its end
    and is then extended to 24 (under DDP; under ZeRO it resumes to 24 at once: extending a finished
    run takes the same path on every backend, and a ZeRO launch costs about 15 CPU-seconds on the
    2-core CI host); and the 12-step overrides."""
    overrides = [*STEPS, f"launch.main_process_port={port}"]
    whole, broken = base / "whole", base / "broken"
    said = train(f"tiny/{backend}/cpu", *overrides, "train.steps=24", "--output-dir", str(whole))
    (base / "whole.output").write_text(said)  # for test_a_run_ends_in_a_summary_without_banners
    crashed = run_cli(
        "run", f"tiny/{backend}/cpu", *overrides, "--output-dir", str(broken), env={CRASH_AFTER: "6"}, timeout=600
    )
    assert crashed.returncode != 0
    (base / "broken.output").write_text(crashed.stdout + crashed.stderr)
    assert (broken / "checkpoints" / "last").resolve().name == "000006"
    if backend == "ddp":
        train(f"tiny/{backend}/cpu", *overrides, "--resume", str(broken))
        assert max(losses(broken)) == 12
    train(f"tiny/{backend}/cpu", *overrides, "train.steps=24", "--resume", str(broken))
    return whole, broken, overrides


def lazy(base: Path, port: int) -> Path:
    run = base / "lazy"
    train(
        "tiny-lazy/zero3-offload/cpu",
        "train.steps=8",
        "train.log_every=1",
        "train.checkpoint.every=2",
        "train.checkpoint.keep=2",
        f"launch.main_process_port={port}",
        "--output-dir",
        str(run),
    )
    return run


def two_nodes(base: Path, port: int) -> Path:
    run = base / "nodes"
    train("tiny/ddp/2x1", "train.steps=6", f"launch.main_process_port={port}", "--output-dir", str(run))
    return run


def background_runs(items) -> dict:
    """The runs the selected tests read, for conftest's `background` to start with the session: a
    crash-and-resume run per backend a `runs` test is parametrized with (every backend for one that
    is not), the lazy policy's run and the two-node run."""
    backends = set()
    for item in items:
        if "runs" in item.fixturenames:
            callspec = getattr(item, "callspec", None)
            backends |= {callspec.params["backend"]} if callspec and "backend" in callspec.params else set(BACKENDS)
    jobs = {b: functools.partial(crash_and_resume, b) for b in BACKENDS if b in backends}  # the longest first
    for name, job in (("lazy", lazy), ("nodes", two_nodes)):
        if any(f"{name}_run" in item.fixturenames for item in items):
            jobs[name] = job
    return jobs


@pytest.fixture(scope="module")
def runs(background, request) -> dict[str, Future]:
    """Per backend, a future of (whole, broken, overrides): an uninterrupted run, and one that
    crashed after step 6 and resumed."""
    return {b: f for b, f in background.of(request.module).items() if b in BACKENDS}


@pytest.fixture(scope="module")
def lazy_run(background, request) -> Path:
    return background.of(request.module)["lazy"].result()


@pytest.fixture(scope="module")
def nodes_run(background, request) -> Path:
    return background.of(request.module)["nodes"].result()


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_real_ranks(runs, backend):
    whole, _, _ = runs[backend].result()
    start = records(whole)[0]
    assert start["event"] == "start" and start["world_size"] == 2 and len(start["ranks"]) == 2
    # where the start-up went (recipe tune and benchmarks/grid.py pay it once per launch)
    stages = start["startup_s"]
    assert list(stages) == ["launcher", "interpreter", "imports", "accelerator", "model", "prepare"]
    assert all(0 <= v < 120 for v in stages.values()) and stages["imports"] > 0.1, stages
    assert any(v != int(v) for v in stages.values()), stages  # to the millisecond, not whole seconds
    saved = [r for r in records(whole) if r.get("event") == "checkpoint"]
    assert saved and all(r["path"] == f"checkpoints/{r['step']:06d}" for r in saved), saved
    assert records(whole)[-1]["event"] == "end" and records(whole)[-1]["time"] > 0
    assert start["distributed_type"] == ("MULTI_CPU" if backend == "ddp" else "DEEPSPEED")
    first, second = (set(r["first_batch"]) for r in start["ranks"])
    assert first and second and not first & second  # each rank trains on its own samples
    for rank in start["ranks"]:
        if backend == "zero3":  # parameters partitioned across the ranks
            assert rank["local_param_numel"] < rank["param_numel"] / 2 + 1000
        else:
            assert rank["local_param_numel"] == rank["param_numel"]
    seen = losses(whole)
    assert sorted(seen) == list(range(1, 25))
    assert seen[24] < 0.8 * seen[1]  # it learns


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_ends_in_a_summary_without_banners(runs, backend):
    """No third-party banner that does not apply (DeepSpeed guessing the CPU, torchrun announcing
    OMP_NUM_THREADS: launch.sh tells both), and a closing summary of where everything went."""
    whole, broken, overrides = runs[backend].result()
    said = (whole.parent / "whole.output").read_text()
    assert "Setting accelerator to CPU" not in said and "Setting OMP_NUM_THREADS" not in said, said[-3000:]
    tail = said.splitlines()[-5:]
    assert tail[0].startswith(f"recipe: finished: tiny/{backend}/cpu, step 24/24, ") and "final loss" in tail[0]
    assert tail[0].split("final loss ")[1] == f"{losses(whole)[24]:.4g}"
    assert tail[1:] == [
        f"  model        {whole}/checkpoints/last/model.safetensors (last = 000024)",
        f"  checkpoints  {whole}/checkpoints",
        f"  metrics      {whole}/metrics.jsonl",
        f"  log          {whole}/launch.log",
    ]
    crashed = (whole.parent / "broken.output").read_text().splitlines()
    failed = next(line for line in crashed if line.startswith("recipe: failed (exit "))
    assert f": tiny/{backend}/cpu, step 6/12, " in failed, failed
    assert crashed[-1] == f"  go on with: recipe run tiny/{backend}/cpu {' '.join(overrides)} --resume {broken}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_resume_matches_an_uninterrupted_run(runs, backend):
    """Crashed after step 6, resumed to its end at 12, then extended to 24 steps (ZeRO: resumed to
    24): every loss is the uninterrupted 24-step run's."""
    whole, broken, _ = runs[backend].result()
    events = [r.get("event") for r in records(broken)]
    resumed = [6, 12] if backend == "ddp" else [6]
    assert events.count("start") == 1 and events.count("resume") == len(resumed)
    assert [r["step"] for r in records(broken) if r.get("event") == "resume"] == resumed
    a, b = losses(whole), losses(broken)
    assert sorted(b) == list(range(1, 25))
    for step in range(1, 25):
        assert abs(a[step] - b[step]) <= 1e-6, (step, a[step], b[step])


@pytest.mark.parametrize("backend", BACKENDS)
def test_consolidated_checkpoint_reproduces_the_trained_model(runs, backend):
    whole, _, _ = runs[backend].result()
    assert_consolidated(whole)


def assert_consolidated(run: Path):
    last = run / "checkpoints" / "last"
    doc = json.loads((run / "train_config.json").read_text())
    probe = load_file(str(last / "probe.safetensors"))
    model = build(doc)
    with torch.no_grad():
        model(probe["images"][:1], probe["state"][:1])  # gives lazy modules their shapes
    model.load_state_dict(load_file(str(last / "model.safetensors")))  # strict: every key, every shape
    model.eval()
    with torch.no_grad():
        out = model(probe["images"], probe["state"])
    assert torch.allclose(out, probe["actions"], atol=1e-5), (out - probe["actions"]).abs().max()


def test_lazy_policy_under_zero3_offload(lazy_run):
    assert records(lazy_run)[0]["distributed_type"] == "DEEPSPEED"
    # train.checkpoint.keep=2: of the checkpoints at 2, 4, 6 and 8 the two newest are left
    assert sorted(p.name for p in (lazy_run / "checkpoints").iterdir()) == ["000006", "000008", "last"]
    assert_consolidated(lazy_run)


def test_two_nodes_on_localhost(nodes_run):
    start = records(nodes_run)[0]
    assert start["world_size"] == 2 and start["ranks"][0]["first_batch"] != start["ranks"][1]["first_batch"]
    assert "--nnodes=2" in (nodes_run / "launch.sh").read_text()
    assert_consolidated(nodes_run)


@pytest.mark.parametrize("backend", ["ddp"])
def test_resume_refuses_a_changed_recipe(runs, backend):
    _, broken, overrides = runs[backend].result()
    r = run_cli(
        "run", f"tiny/{backend}/cpu", *overrides, "train.steps=30", "train.optimizer.lr=0.5", "--resume", str(broken)
    )
    assert r.returncode == 2 and "train.optimizer.lr: 0.001 -> 0.5" in r.stderr, r.stderr


@pytest.mark.parametrize("backend", ["ddp"])
def test_a_finished_run_is_not_trained_again(runs, backend):
    _, broken, overrides = runs[backend].result()
    before = (broken / "metrics.jsonl").read_text()
    r = run_cli("run", f"tiny/{backend}/cpu", *overrides, "train.steps=24", "--resume", str(broken))
    assert r.returncode == 0 and "finished at step 24; nothing to resume" in r.stderr
    assert (broken / "metrics.jsonl").read_text() == before


@pytest.mark.parametrize("backend", ["ddp"])
def test_a_damaged_last_checkpoint_falls_back_to_the_previous_one(runs, backend, tmp_path):
    """The last checkpoint lost part of a file: the resume says so, starts from the one before,
    and trains the same losses again."""
    whole, broken, overrides = runs[backend].result()
    copy = tmp_path / "copy"
    shutil.copytree(broken, copy, symlinks=True)
    damaged = next((copy / "checkpoints" / "000024" / "state").glob("*.bin"), None) or next(
        p for p in (copy / "checkpoints" / "000024" / "state").rglob("*") if p.is_file()
    )
    damaged.write_bytes(damaged.read_bytes()[:100])
    r = run_cli("run", f"tiny/{backend}/cpu", *overrides, "train.steps=24", "--resume", str(copy), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "skipping" in r.stderr and "000024" in r.stderr and "from step 18" in r.stderr
    resumed = [r for r in records(copy) if r.get("event") == "resume"]
    assert resumed[-1]["step"] == 18
    again = {r["step"]: r["loss"] for r in records(copy)[-12:] if "loss" in r}
    a = losses(whole)
    assert sorted(again) == list(range(19, 25))
    for step in again:
        assert abs(a[step] - again[step]) <= 1e-6, (step, a[step], again[step])


@pytest.mark.parametrize(("kind", "cls"), [("adamw", "AdamW"), ("adam", "Adam"), ("sgd", "SGD")])
def test_the_optimizer_type_is_the_recipes(kind, cls):
    """train.optimizer.type picks the torch optimizer; lr, weight decay (and Adam's betas, eps) follow."""
    import torch

    from registry import view
    from registry.compose import compose
    from registry.train.loop import make_optimizer

    doc = compose("tiny/ddp/cpu", [f"train.optimizer.type={kind}", "train.optimizer.lr=0.003"]).data
    optimizer = make_optimizer(torch.nn.Linear(2, 2), view.of(doc).train.optimizer)
    group = optimizer.param_groups[0]
    assert type(optimizer).__name__ == cls and group["lr"] == 0.003
    assert group["weight_decay"] == doc["train"]["optimizer"]["weight_decay"]
    assert ("betas" in group) == (kind != "sgd")
