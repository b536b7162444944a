"""`recipe run` against a stand-in trainer program: argv, environment, output, exit code, Ctrl-C."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

STANDIN = """#!/usr/bin/env bash
printf '%s\\n' "$@" > "$STANDIN_OUT/argv"
env > "$STANDIN_OUT/env"
pwd > "$STANDIN_OUT/cwd"
if [ -n "${STANDIN_SLEEP:-}" ]; then
  trap 'echo terminated > "$STANDIN_OUT/signal"; exit 143' TERM
  sleep 1000 &
  echo $! > "$STANDIN_OUT/child"
  echo started > "$STANDIN_OUT/started"
  wait
fi
echo "standin says hello"
exit "${STANDIN_EXIT:-0}"
"""


@pytest.fixture
def standin(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "opentau-train"
    program.write_text(STANDIN)
    program.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}",
        "STANDIN_OUT": str(out),
    }
    return env, out


def test_run_passes_argv_env_output_and_exit_code(tmp_path, standin):
    env, out = standin
    run_dir = tmp_path / "run"
    r = run_cli(
        "run",
        "pi07/zero2/8xA100",
        "train.steps=3",
        "--allow-hardware-mismatch",
        "--output-dir",
        str(run_dir),
        env={**env, "STANDIN_EXIT": "3"},
    )
    assert r.returncode == 3, r.stderr
    assert "standin says hello" in r.stdout
    assert (out / "argv").read_text().splitlines() == [
        "--accelerate-config=accelerate.yaml",
        "--config_path=opentau.json",
    ]
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in (out / "env").read_text().splitlines()
    assert (out / "cwd").read_text().strip() == str(run_dir.resolve())
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "accelerate.yaml",
        "deepspeed.json",
        "launch.log",
        "launch.sh",
        "opentau.json",
        "recipe.lock.yaml",
    ]
    assert "standin says hello" in (run_dir / "launch.log").read_text()
    again = run_cli("run", "pi07/zero2/8xA100", "--allow-hardware-mismatch", "--output-dir", str(run_dir), env=env)
    assert again.returncode == 2 and "not empty" in again.stderr  # a run directory is never reused


def test_ctrl_c_stops_every_rank(tmp_path, standin):
    env, out = standin
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "registry",
            "run",
            "pi07/zero2/8xA100",
            "--allow-hardware-mismatch",
            "--output-dir",
            str(tmp_path / "run"),
        ],
        cwd=ROOT,
        env={**os.environ, **env, "STANDIN_SLEEP": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 30
    while not (out / "started").exists() and time.time() < deadline:
        time.sleep(0.05)
    assert (out / "started").exists(), proc.stderr.read() if proc.poll() is not None else "stand-in never started"
    child = int((out / "child").read_text())
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert (out / "signal").read_text().strip() == "terminated"  # the launcher got SIGTERM
    for _ in range(100):  # and its own children are gone too
        if not os.path.exists(f"/proc/{child}") or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"rank {child} outlived the run")


def test_missing_trainer_program(tmp_path):
    env = {"PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin:/bin"}
    r = run_cli("run", "pi07/zero2/8xA100", "--allow-hardware-mismatch", "--output-dir", str(tmp_path / "run"), env=env)
    assert r.returncode == 127
    assert "opentau-train not found on PATH (hint: pip install opentau" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "run").exists()


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has GPUs")
def test_hardware_check_on_a_cpu_host(tmp_path, standin):
    env, _ = standin
    r = run_cli("run", "pi07/zero2/8xA100", "--output-dir", str(tmp_path / "run"), env=env)
    assert r.returncode == 1 and "this host has no GPU" in r.stderr and "--allow-hardware-mismatch" in r.stderr


def test_invalid_recipe_is_not_launched(tmp_path, standin):
    env, out = standin
    r = run_cli("run", "pi07/zero3/8xA100", "--allow-hardware-mismatch", "--output-dir", str(tmp_path / "run"), env=env)
    assert r.returncode == 1 and "zero3-torch-checkpointing" in r.stderr
    assert not (out / "argv").exists() and not (tmp_path / "run").exists()


def test_machine_mismatch_rules():
    from registry.compose import compose
    from registry.run.machine import GPU, mismatch

    doc = compose("pi07/zero2/8xA100").data
    assert mismatch(doc, [GPU("NVIDIA A100-SXM4-80GB", 81920)] * 8) is None
    assert "has 4" in mismatch(doc, [GPU("NVIDIA A100-SXM4-80GB", 81920)] * 4)
    assert "H100" in mismatch(doc, [GPU("NVIDIA H100 80GB HBM3", 81559)] * 8)
    assert "MiB" in mismatch(doc, [GPU("NVIDIA A100-SXM4-40GB", 40960)] * 8)
    assert mismatch(compose("tiny/ddp/cpu").data, []) is None
