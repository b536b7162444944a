"""Pre-flight against the host (docs/preflight.md §host), on CPU with host facts written out by
hand: each finding and its absence. The trainer's extra (lerobot[diffusion] needs diffusers) is
asked of a real stand-in environment, through the same probe `recipe run` uses."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from registry.compose import compose
from registry.resolve import resolve
from registry.run import environment, preflight
from registry.run.machine import GPU
from registry.run.preflight import hostchecks
from registry.run.preflight.host import HostFacts, existing, gather

H100 = GPU("NVIDIA H100 80GB HBM3", 81559, "550.54.15")
TORCH = {"torch": "2.9.0", "accelerate": "1.11.0", "deepspeed": None, "transformers": None}
GIB = 1024**3


def facts(**changes) -> HostFacts:
    """A host that has what tiny/ddp/2xH100 needs."""
    trainer = {"python": "3.11.9", "packages": dict(TORCH), "torch_cuda": "12.8", "nccl": "2.27.3"}
    good = HostFacts(
        gpus=(H100, H100),
        python="/env/bin/python",
        trainer=trainer,
        shm_free=64 * GIB,
        disk_path="/scratch",
        disk_free=10 * 1024 * GIB,
    )
    return dataclasses.replace(good, **changes)


def host_problems(target: str, host: HostFacts, overrides=(), datasets=()) -> list:
    recipe = compose(target, list(overrides))
    bundle = resolve(recipe)
    report = preflight.Report()
    run = hostchecks.Run(recipe.data, bundle, tuple(datasets), recipe.data["trainer"].get("env"))
    preflight.check_host(recipe.data, recipe.origins, host, run, report)
    return report.problems


def rules(problems, severity=None) -> list[str]:
    return [p.rule for p in problems if severity is None or p.severity == severity]


def test_a_host_that_has_everything_has_no_finding():
    assert host_problems("tiny/ddp/2xH100", facts()) == []


@pytest.mark.parametrize(
    ("host", "said"),
    [
        (facts(gpus=()), "this host has no GPU"),
        (facts(gpus=(H100,)), "needs 2 GPUs per node and this host has 1"),
        (facts(gpus=(GPU("NVIDIA A100-SXM4-80GB", 81920, "550.54.15"),) * 2), "this host has NVIDIA A100-SXM4-80GB"),
    ],
)
def test_gpus_against_the_hardware_part(host, said):
    (found,) = host_problems("tiny/ddp/2xH100", host)
    assert found.rule == "host-gpus" and found.is_error and said in found.message
    assert found.origin.startswith("recipes/hardware/2xH100.yaml")


def test_the_driver_against_torchs_cuda():
    old = (dataclasses.replace(H100, driver="520.61.05"),) * 2
    (found,) = host_problems("tiny/ddp/2xH100", facts(gpus=old))
    assert found.rule == "host-driver" and "driver is 520.61.05" in found.message and "CUDA 12.8" in found.message
    assert "525.60.13" in found.message
    cu13 = facts(trainer={**facts().trainer, "torch_cuda": "13.0"})
    assert rules(host_problems("tiny/ddp/2xH100", cu13)) == ["host-driver"]  # 550 is older than 13.x's 580
    new = (dataclasses.replace(H100, driver="580.82.07"),) * 2
    assert host_problems("tiny/ddp/2xH100", dataclasses.replace(cu13, gpus=new)) == []
    cpu_build = facts(trainer={**facts().trainer, "torch_cuda": None, "nccl": None})
    (found,) = host_problems("tiny/ddp/2xH100", cpu_build)
    assert found.rule == "host-driver" and "is a CPU build" in found.message
    assert host_problems("tiny/ddp/cpu", cpu_build) == []  # a CPU recipe


def test_nccl_for_a_multi_gpu_run():
    lacking = facts(trainer={**facts().trainer, "nccl": None})
    (found,) = host_problems("tiny/ddp/2xH100", lacking)
    assert found.rule == "host-nccl" and found.severity == "warning" and "2 GPU ranks and no NCCL" in found.message
    one = dataclasses.replace(lacking, gpus=(H100,))
    assert host_problems("tiny/ddp/1xH100", one) == []  # one rank needs no NCCL
    assert host_problems("tiny/ddp/2xH100", facts(trainer={**facts().trainer, "nccl": "bundled"})) == []


def test_shm_against_the_data_loader_workers():
    act = ["trainer.env=/env"]
    # 2 ranks x 2 workers x 2 batches x 8 samples x one 480 x 640 camera as float32 (3.5 MiB): 225 MiB
    (found,) = [p for p in host_problems("act/ddp/2xH100", facts(shm_free=64 << 20), act) if p.rule == "host-shm"]
    assert found.is_error and "/dev/shm, which has 64 MiB free" in found.message and "bus error" in found.message
    assert found.path == "train.num_workers"
    near = [p for p in host_problems("act/ddp/2xH100", facts(shm_free=240 << 20), act) if p.rule == "host-shm"]
    assert [p.severity for p in near] == ["warning"]
    assert "host-shm" not in rules(
        host_problems("act/ddp/2xH100", facts(shm_free=64 << 20), [*act, "train.num_workers=0"])
    )
    assert "host-shm" not in rules(host_problems("tiny/ddp/2xH100", facts(shm_free=1)))  # no workers


def test_shm_counts_the_datasets_images():
    from test_preflight import DATASETS

    from registry import view
    from registry.run.preflight import metadata

    toy = metadata.read(DATASETS / "toy" / "meta" / "info.json")
    recipe = compose("act/ddp/2xH100").data

    at_part = hostchecks.sample_bytes(view.of(recipe), ())
    at_toy = hostchecks.sample_bytes(view.of(recipe), (toy,))
    assert at_part == 480 * 640 * 3 * 4
    assert at_toy == (96 * 96 * 3 + 14 + 14 * 100) * 4


def test_disk_against_the_checkpoints():
    # pi07: its parameters in bfloat16, resumable: + fp32 weights and Adam's two moments of the trainable ones
    params, trainable = 5921369488, 5508042400  # recipes/policy/pi07.yaml
    one = params * 2 + params * 4 + trainable * 8
    (found,) = [
        p for p in host_problems("pi07/zero2/8xA100", facts(disk_free=GIB, gpus=()), ()) if p.rule == "host-disk"
    ]
    assert found.is_error and f"{one / GIB:.1f} GiB" in found.message and "which has 1.0 GiB free" in found.message
    assert found.message.endswith("1.0 GiB free: the run dies at the first save that does not fit")
    assert found.path == "train.checkpoint"
    kept = host_problems("tiny/ddp/cpu", facts(disk_free=1), ["train.checkpoint.every=100", "train.steps=1000"])
    (tiny,) = [p for p in kept if p.rule == "host-disk"]
    assert "10 checkpoint(s)" in tiny.message
    fewer = host_problems("tiny/ddp/cpu", facts(disk_free=1), ["train.checkpoint.every=100", "train.checkpoint.keep=2"])
    assert "2 checkpoint(s)" in next(p.message for p in fewer if p.rule == "host-disk")
    assert "host-disk" not in rules(host_problems("pi07/zero2/8xA100", facts(gpus=())))


def test_the_trainers_environment_and_the_policys_extra():
    packages = {**TORCH, "lerobot": "0.6.1"}
    lacking = [{"name": "diffusers", "spec": "<0.40.0,>=0.38.0", "version": None, "ok": None}]
    trainer = {**facts().trainer, "packages": packages, "extras": {"lerobot[diffusion]": lacking}}
    (found,) = host_problems("diffusion/ddp/2xH100", facts(trainer=trainer), ["trainer.env=/env"])
    assert found.rule == "host-trainer-env" and found.is_error and found.origin == "command line"
    assert (
        "has lerobot 0.6.1 without its diffusion extra" in found.message
        and "diffusers<0.40.0,>=0.38.0" in found.message
    )
    assert found.hint == "/env/bin/python -m pip install 'lerobot[diffusion]==0.6.1'"
    present = [{**lacking[0], "version": "0.39.0", "ok": True}]
    fine = {**trainer, "extras": {"lerobot[diffusion]": present}}
    assert host_problems("diffusion/ddp/2xH100", facts(trainer=fine), ["trainer.env=/env"]) == []
    off = {**trainer, "extras": {"lerobot[diffusion]": [{**present[0], "version": "0.41.0", "ok": False}]}}
    assert rules(host_problems("diffusion/ddp/2xH100", facts(trainer=off), ["trainer.env=/env"]), "warning") == [
        "host-trainer-env"
    ]
    no_lerobot = {**facts().trainer, "packages": dict(TORCH, lerobot=None)}
    (gone,) = host_problems("act/ddp/2xH100", facts(trainer=no_lerobot), ["trainer.env=/env"])
    assert "has no lerobot" in gone.message


def test_a_stale_build_lock_is_a_warning():
    stale = facts(build_locks="recipe: warning: torch extension build lock /x/lock (30 min old): ...")
    (found,) = host_problems("tiny/zero2/2xH100", stale)
    assert (
        found.rule == "host-build-locks" and found.severity == "warning" and found.message.startswith("torch extension")
    )


def test_gather_reads_this_host(tmp_path):
    recipe = compose("tiny/ddp/cpu")
    got = gather(recipe.data, resolve(recipe), tmp_path / "runs" / "x", {})
    assert got.python == sys.executable and got.trainer["packages"]["torch"]
    assert got.disk_path == str(tmp_path) and got.disk_free > 0
    assert existing(tmp_path / "a" / "b") == tmp_path


# --- the extra, asked of a real interpreter --------------------------------------------------------
METADATA = """Metadata-Version: 2.1
Name: lerobot
Version: 0.6.1
Provides-Extra: diffusion
Requires-Dist: lerobot[diffusers-dep]; extra == "diffusion"
Provides-Extra: diffusers-dep
Requires-Dist: diffusers<0.40.0,>=0.38.0; extra == "diffusers-dep"
Provides-Extra: smolvla
Requires-Dist: num2words<0.6.0,>=0.5.14; extra == "smolvla"
Requires-Dist: pywin32; sys_platform == "win32" and extra == "smolvla"
"""


def trainer_env_with_extras(root: Path, diffusers: str | None = None) -> Path:
    from test_run import make_trainer_env

    make_trainer_env(root)
    site = next(root.glob("lib/python*/site-packages"))
    (site / "lerobot-0.6.1.dist-info" / "METADATA").write_text(METADATA)
    if diffusers:
        info = site / f"diffusers-{diffusers}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: diffusers\nVersion: {diffusers}\n")
    return root


def test_the_probe_follows_an_extra_through_the_packages_own_metadata(tmp_path):
    venv = trainer_env_with_extras(tmp_path / "env")
    python = str(venv / "bin" / "python")
    answer = environment.ask(python, "lerobot", "diffusion")
    assert answer["extras"]["lerobot[diffusion]"] == [
        {"name": "diffusers", "spec": "<0.40.0,>=0.38.0", "version": None, "ok": None}
    ]
    smolvla = environment.ask(python, "lerobot", "smolvla")["extras"]["lerobot[smolvla]"]
    assert [r["name"] for r in smolvla] == ["num2words"]  # pywin32's marker holds on Windows only
    assert environment.ask(python, "lerobot", "act")["extras"]["lerobot[act]"] is None  # no such extra: nothing


def test_run_refuses_a_policy_whose_extra_is_missing_and_says_how_to_install_it(tmp_path):
    venv = trainer_env_with_extras(tmp_path / "env")
    args = ["run", "diffusion/ddp/cpu", "hardware.processes_per_node=1", f"trainer.env={venv}"]
    r = run_cli(*args, "--output-dir", str(tmp_path / "run"), timeout=120)
    assert r.returncode == 127, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "has lerobot 0.6.1 without its diffusion extra, which the policy needs: no diffusers" in line
    assert f"(hint: {venv}/bin/python -m pip install 'lerobot[diffusion]==0.6.1')" in line
    with_it = trainer_env_with_extras(tmp_path / "env2", diffusers="0.39.0")
    r = run_cli("doctor", *args[1:3], f"trainer.env={with_it}", "--format", "json", timeout=120)
    assert "host-trainer-env" not in [p["rule"] for p in json.loads(r.stdout)["problems"]]


def test_the_probe_runs_as_a_program_of_its_own():
    source = Path(environment.probe.__file__).read_text()
    compile(source, "probe.py", "exec")  # its own text runs in the trainer's interpreter
    r = subprocess.run([sys.executable, "-c", source, "torch", "torch[opt-einsum]"], capture_output=True, text=True)
    assert r.returncode == 0 and '"extras"' in r.stdout
