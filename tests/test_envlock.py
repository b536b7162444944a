"""The environment a run launched in, in its recipe.lock.yaml: recorded by a real CPU `recipe run`,
compared with this host by `recipe verify` and before `recipe run --resume`; trainers in an
environment of their own are asked through their own interpreter."""

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import free_port, heavy_imports, run_cli

RUN = ["tiny/ddp/cpu", "train.steps=2", "train.log_every=1", "train.checkpoint.every=1"]
PACKAGES = ("torch", "accelerate", "deepspeed", "transformers")


def installed(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def lock_of(folder: Path) -> dict:
    return yaml.safe_load((folder / "recipe.lock.yaml").read_text())


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> tuple[Path, list[str]]:
    """A real two-rank CPU run of the tiny built-in recipe, 2 steps with a checkpoint each."""
    run_dir = tmp_path_factory.mktemp("envlock") / "run"
    args = [*RUN, f"launch.main_process_port={free_port()}"]
    r = run_cli("run", *args, "--output-dir", str(run_dir), timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return run_dir, args


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy, symlinks=True)
    return copy


def edit_deepspeed(lock: Path, version: str = "0.0.1") -> str:
    """The lock's recorded deepspeed version replaced, as if the run had had another; the real one."""
    content = yaml.safe_load(lock.read_text())
    real = content["environment"]["packages"]["deepspeed"]
    content["environment"]["packages"]["deepspeed"] = version
    lock.write_text(yaml.safe_dump(content, sort_keys=False, width=100))
    return real


# --- what a run records ------------------------------------------------------------------------
def test_a_run_records_the_environment_it_launched_in(real_run):
    import torch  # only to check the version file read without it

    from registry.run import machine

    run_dir, _ = real_run
    env = lock_of(run_dir)["environment"]
    assert env["python"] == sys.version.split()[0]
    assert env["packages"] == {name: installed(name) for name in PACKAGES}
    assert env["torch_cuda"] == torch.version.cuda
    host = machine.gpus()
    assert env["gpu_count"] == len(host)
    if not host:  # a CPU host: no driver, no model
        assert env["nvidia_driver"] is None and env["gpu_model"] is None
    assert env["dataset"] == {"source": "synthetic"}  # the built-in trainer generates its data
    assert env["interpreter"] == sys.executable


def test_the_environment_is_the_runs_alone(real_run, tmp_path):
    """`recipe resolve` runs nothing and is host-independent: the run's lock is resolve's lock
    of the same recipe, byte for byte, followed by the environment."""
    run_dir, args = real_run
    r = run_cli("resolve", *args, "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    resolved = (tmp_path / "out" / "recipe.lock.yaml").read_text()
    ran = (run_dir / "recipe.lock.yaml").read_text()
    assert "environment" not in yaml.safe_load(resolved)
    assert ran.startswith(resolved) and ran[len(resolved) :].startswith("environment:\n")


# --- recipe verify -----------------------------------------------------------------------------
def test_verify_on_an_unchanged_host_exits_0(real_run):
    run_dir, _ = real_run
    r = run_cli("verify", str(run_dir))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "this host has the environment" in r.stdout and f"deepspeed {installed('deepspeed')}" in r.stdout
    assert run_cli("verify", str(run_dir / "recipe.lock.yaml")).returncode == 0


def test_verify_names_each_field_that_differs(real_run, tmp_path):
    run_dir, _ = real_run
    lock = copy_of(run_dir, tmp_path) / "recipe.lock.yaml"
    real = edit_deepspeed(lock)
    r = run_cli("verify", str(lock))
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == f"environment.packages.deepspeed: recorded 0.0.1, this host {real}"
    assert lines[-1].endswith("records in 1 field") and len(lines) == 2


def test_verify_sees_the_hosts_gpus_and_driver(real_run, tmp_path):
    """nvidia-smi's answer (a stand-in for 2 x H100) reaches the comparison: model, count, driver."""
    run_dir, _ = real_run
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    rows = "0, GPU-a, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n1, GPU-b, NVIDIA H100 80GB HBM3, 81559, 550.54.15"
    smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{rows}\nEOF\n")
    smi.chmod(0o755)
    r = run_cli("verify", str(run_dir), env={"PATH": f"{smi.parent}{os.pathsep}{os.environ['PATH']}"})
    assert r.returncode == 1, r.stdout + r.stderr
    recorded = lock_of(run_dir)["environment"]
    if recorded["gpu_count"] == 0:  # a CPU host recorded no GPU
        for line in (
            "environment.nvidia_driver: recorded none, this host 550.54.15",
            "environment.gpu_model: recorded none, this host NVIDIA H100 80GB HBM3",
            "environment.gpu_count: recorded 0, this host 2",
        ):
            assert line in r.stdout.splitlines(), r.stdout


@pytest.mark.parametrize("case", ["missing", "folder-without-lock", "unreadable-yaml", "not-a-lock", "resolved-only"])
def test_verify_bad_input_is_one_line_and_exit_2(tmp_path, case):
    target = tmp_path / "recipe.lock.yaml"
    if case == "folder-without-lock":
        target = tmp_path
    elif case == "unreadable-yaml":
        target.write_text("lock_version: 1\nresolved: [unclosed\n")
    elif case == "not-a-lock":
        target.write_text("name: something else\n")
    elif case == "resolved-only":
        assert run_cli("resolve", "tiny/ddp/cpu", "-o", str(tmp_path / "out")).returncode == 0
        target = tmp_path / "out"
    r = run_cli("verify", str(target))
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr and not r.stdout
    expected = {
        "missing": "no such file",
        "folder-without-lock": "no such file",
        "unreadable-yaml": "error[yaml]",
        "not-a-lock": "not a recipe lock",
        "resolved-only": "records no environment",
    }[case]
    assert expected in r.stderr


def test_verify_imports_nothing_heavy(real_run):
    run_dir, _ = real_run
    r = heavy_imports([["verify", str(run_dir)]], heavy=("torch", "accelerate", "deepspeed", "transformers"))
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stderr and "this host has the environment" in r.stdout


# --- recipe run --resume -------------------------------------------------------------------------
def test_resume_reports_each_difference_and_keeps_both(real_run, tmp_path):
    run_dir, args = real_run
    copy = copy_of(run_dir, tmp_path)
    real = edit_deepspeed(copy / "recipe.lock.yaml")
    before = (copy / "recipe.lock.yaml").read_text()

    refused = run_cli("run", *args, "train.steps=3", "--resume", str(copy), "--require-same-env")
    assert refused.returncode == 1, refused.stderr
    assert f"environment.packages.deepspeed: recorded 0.0.1, this host {real}" in refused.stderr
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .endswith("(hint: match the versions above, or drop --require-same-env to resume anyway)")
    )
    assert (copy / "recipe.lock.yaml").read_text() == before  # nothing launched, nothing written
    assert "step 3/3" not in refused.stdout

    r = run_cli("run", *args, "train.steps=3", "--resume", str(copy), timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"recipe: warning: environment.packages.deepspeed: recorded 0.0.1, this host {real}" in r.stderr
    lock = lock_of(copy)
    assert lock["environment"]["packages"]["deepspeed"] == real  # this launch's
    assert [e["packages"]["deepspeed"] for e in lock["earlier_environments"]] == ["0.0.1"]
    assert run_cli("verify", str(copy)).returncode == 0


def test_a_lock_without_an_environment_cannot_be_required_the_same(tmp_path):
    """A run folder from before the environment was recorded (here: resolve's files and a stand-in
    checkpoint): --require-same-env has nothing to compare, and refuses before launching."""
    from registry.train import state

    run_dir = tmp_path / "run"
    args = ["tiny/ddp/cpu", "train.steps=12", "train.checkpoint.every=6"]
    assert run_cli("resolve", *args, "-o", str(run_dir)).returncode == 0
    folder = run_dir / "checkpoints" / "000006"
    (folder / "state").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"y" * 500)
    state.write(folder, 6)
    before = (run_dir / "recipe.lock.yaml").read_text()
    r = run_cli("run", *args, "--resume", str(run_dir), "--require-same-env")
    assert r.returncode == 1, r.stderr
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "records no environment to compare this host with; not resumed (hint: drop --require-same-env:"
            " the resume records this host's)"
        )
    )
    assert (run_dir / "recipe.lock.yaml").read_text() == before and not (run_dir / "metrics.jsonl").exists()


def test_require_same_env_goes_with_resume(tmp_path):
    r = run_cli("run", "tiny/ddp/cpu", "--require-same-env", "--output-dir", str(tmp_path / "run"))
    assert r.returncode == 2 and "--require-same-env goes with --resume" in r.stderr
    assert not (tmp_path / "run").exists()


# --- a trainer in an environment of its own -------------------------------------------------------
def trainer_env(root: Path, version: str = "0.6.1") -> Path:
    """A virtualenv holding a stand-in `lerobot` (metadata only); the registry's packages (torch
    among them) reach it through a .pth file."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python*/site-packages"))
    ours = next(Path(sys.prefix).glob("lib/python*/site-packages"))
    (site / "registry-deps.pth").write_text(f"{ours}\n")
    info = site / f"lerobot-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: lerobot\nVersion: {version}\n")
    return root


def test_an_external_trainer_is_asked_through_its_own_interpreter(tmp_path):
    from registry.compose import compose
    from registry.resolve import resolve
    from registry.run import envlock, launch_env

    venv = trainer_env(tmp_path / "lerobot-env")
    data = tmp_path / "data"
    (data / "meta").mkdir(parents=True)
    (data / "meta" / "info.json").write_text('{"codebase_version": "v2.1"}')
    overrides = ["hardware.processes_per_node=1", f"trainer.env={venv}", f"dataset.root={data}"]
    recipe = compose("act/ddp/cpu", overrides)
    bundle = resolve(recipe)
    env = envlock.collect(bundle, recipe.data, tmp_path, [], launch_env(bundle))
    assert env["interpreter"] == str(venv / "bin" / "python")
    assert env["packages"] == {**{name: installed(name) for name in PACKAGES}, "lerobot": "0.6.1"}
    assert env["dataset"] == {
        "repo_id": recipe.data["dataset"]["repo_id"],
        "revision": "not declared",
        "root": str(data),
        "info_sha256": hashlib.sha256(b'{"codebase_version": "v2.1"}').hexdigest(),
    }
    pinned = compose("act/ddp/cpu", [*overrides, "dataset.revision=v2.1", "dataset.root=nowhere"])
    found = envlock.dataset(pinned.data, tmp_path)
    assert found["revision"] == "v2.1" and found["info_sha256"].startswith("not found")


def test_an_interpreter_that_cannot_be_asked_is_recorded_as_unknown(tmp_path):
    from registry.compose import compose
    from registry.run import envlock

    doc = compose("tiny/ddp/cpu").data
    binary = SimpleNamespace(same_python=False, python=None, program="/bin/true", package=None)
    env = envlock.collect(binary, doc, tmp_path, [], dict(os.environ))
    assert env["interpreter"] is None
    assert env["packages"]["deepspeed"].startswith("unknown (/bin/true is not a Python script")
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    gone = SimpleNamespace(same_python=False, python=str(broken), program="lerobot-train", package="lerobot")
    env = envlock.collect(gone, doc, tmp_path, [], dict(os.environ))
    assert env["packages"]["lerobot"].startswith(f"unknown ({broken}: cannot ask it for its packages")
    assert env["python"] == env["torch_cuda"] == env["packages"]["lerobot"]


@pytest.mark.parametrize(
    ("text", "cuda"),
    [
        ("__version__ = '2.5.1+cu124'\ncuda: Optional[str] = '12.4'\ngit_version = 'abc'\n", "12.4"),
        ("cuda: Optional[str] = None\nhip: Optional[str] = None\n", None),
        ('cuda = "11.8"\n', "11.8"),
        ("__version__ = '1.0'\n", "unknown (torch/version.py names no cuda)"),
    ],
)
def test_torchs_cuda_is_read_from_its_version_file(text, cuda):
    from registry.run.probe import cuda_in

    assert cuda_in(text) == cuda


def test_the_probe_reads_what_importlib_metadata_reads():
    """The probe's own scan of the dist-info headers (no importlib.metadata, no email parser) gives
    the versions importlib.metadata gives, for any spelling of a name, absent ones included."""
    from registry.run import probe

    names = ("torch", "accelerate", "deepspeed", "transformers", "PyYAML", "pyyaml", "typing-extensions")
    names += ("typing_extensions", "recipe-registry", "no-such-package", "lerobot")
    found = probe.report(names)
    assert found["packages"] == {name: probe._version(importlib.metadata, name) for name in names}
    assert found["packages"]["torch"] and found["packages"]["no-such-package"] is None
    assert found["torch_cuda"] == probe._torch_cuda(importlib.metadata)


def test_the_probe_takes_the_first_distribution_on_the_path(tmp_path, monkeypatch):
    from registry.run import probe

    first, second = tmp_path / "first", tmp_path / "second"
    for folder, version in ((first, "1.0"), (second, "2.0")):
        info = folder / f"demo_pkg-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: demo-pkg\nVersion: {version}\n\nBody: x\n")
    liar = second / "other-9.dist-info"  # found by its folder's name, as importlib.metadata finds it
    liar.mkdir()
    (liar / "METADATA").write_text("Name: something-else\nVersion: 9\n")
    (second / "legacy-3.1-py3.11.egg-info").write_text("Metadata-Version: 1.0\nName: legacy\nVersion: 3.1\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    found = probe.report(("demo_pkg", "Demo.Pkg", "other", "legacy"))
    assert found["packages"] == {"demo_pkg": "1.0", "Demo.Pkg": "1.0", "other": "9", "legacy": "3.1"}
    assert found["packages"] == {n: probe._version(importlib.metadata, n) for n in found["packages"]}


def test_a_trainer_program_missing_from_path_is_said_so_not_called_no_python_script(tmp_path):
    import json
    from types import SimpleNamespace

    from registry.run import envlock

    inv = SimpleNamespace(package=None, same_python=False, python=None, program="accelerate")
    _, said = envlock._asked(inv, {"PATH": str(tmp_path)})
    assert "accelerate is not on PATH: no interpreter to ask" in json.dumps(said), said
    (tmp_path / "accelerate").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "accelerate").chmod(0o755)
    _, said = envlock._asked(inv, {"PATH": str(tmp_path)})
    assert "accelerate is not a Python script: no interpreter to ask" in json.dumps(said), said
