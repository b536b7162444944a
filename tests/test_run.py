"""`recipe run` against a stand-in trainer program: argv, environment, output, exit code, Ctrl-C."""

import io
import json
import os
import shlex
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


# a stand-in for the 8 x A100 trainer on this host: it writes no checkpoint and starts no
# data-loader worker, so the pre-flight's disk and /dev/shm errors are waived with that reason
ON_THIS_HOST = [
    "--allow-hardware-mismatch",
    "--waive=host-disk=a stand-in trainer writes no checkpoint",
    "--waive=host-shm=a stand-in trainer starts no data-loader worker",
]


class Chunks(io.RawIOBase):
    """A launcher's output pipe that gives these chunks, one per read."""

    def __init__(self, parts):
        self.parts = list(parts)

    def read1(self, n=-1):
        return self.parts.pop(0) if self.parts else b""


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
        *ON_THIS_HOST,
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
    assert sorted(p.name for p in run_dir.iterdir() if p.name != "preflight.json") == [  # kept where it found any
        "accelerate.yaml",
        "deepspeed.json",
        "launch.log",
        "launch.sh",
        "opentau.json",
        "recipe.lock.yaml",
    ]
    assert "standin says hello" in (run_dir / "launch.log").read_text()
    again = run_cli("run", "pi07/zero2/8xA100", *ON_THIS_HOST, "--output-dir", str(run_dir), env=env)
    assert again.returncode == 2 and "not empty" in again.stderr  # a run directory is never reused


def started_standin(tmp_path, env, out, output) -> subprocess.Popen:
    """`recipe run` of the stand-in trainer, sleeping in a child of its own, once it has started."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "registry", "run", "pi07/zero2/8xA100", *ON_THIS_HOST]
        + ["--output-dir", str(tmp_path / "run")],
        cwd=ROOT,
        env={**os.environ, **env, "STANDIN_SLEEP": "1"},
        stdout=output,
        stderr=output,
    )
    deadline = time.time() + 30
    while not (out / "started").exists() and time.time() < deadline:
        time.sleep(0.05)
    said = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
    assert (out / "started").exists(), said or "stand-in never started"
    return proc


def test_ctrl_c_stops_every_rank(tmp_path, standin):
    env, out = standin
    proc = started_standin(tmp_path, env, out, subprocess.PIPE)
    child = int((out / "child").read_text())
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert (out / "signal").read_text().strip() == "terminated"  # the launcher got SIGTERM
    for _ in range(100):  # and its own children are gone too
        if not alive(child):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"rank {child} outlived the run")


def test_missing_trainer_program(tmp_path):
    env = {"PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin:/bin"}
    r = run_cli("run", "pi07/zero2/8xA100", *ON_THIS_HOST, "--output-dir", str(tmp_path / "run"), env=env)
    assert r.returncode == 127
    assert "opentau-train not found on PATH (hint: bash tests/upstream/opentau_env.sh ENV builds one" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "run").exists()


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has GPUs")
def test_hardware_check_on_a_cpu_host(tmp_path, standin):
    env, _ = standin
    r = run_cli("run", "pi07/zero2/8xA100", "--output-dir", str(tmp_path / "run"), env=env)
    assert r.returncode == 1 and "this host has no GPU" in r.stderr and "--allow-hardware-mismatch" in r.stderr


def test_invalid_recipe_is_not_launched(tmp_path, standin):
    env, out = standin
    r = run_cli("run", "act/zero2/8xA100", "--allow-hardware-mismatch", "--output-dir", str(tmp_path / "run"), env=env)
    assert r.returncode == 1 and "lerobot-no-deepspeed" in r.stderr
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
    # 2 nodes x 1 GPU on a loopback rendezvous: this host plays both nodes, so it needs 2 GPUs
    two_nodes = compose("ref-100m/ddp/2x1xH100").data
    assert mismatch(two_nodes, [GPU("NVIDIA H100 80GB HBM3", 81559)] * 2) is None
    assert "needs 2 GPUs (2 nodes on this host)" in mismatch(two_nodes, [GPU("NVIDIA H100 80GB HBM3", 81559)])


@pytest.mark.parametrize(
    ("visible", "expected"), [(None, ["0", "1"]), ("2,3", ["2", "3"]), ("GPU-a,GPU-b", ["GPU-a", "GPU-b"])]
)
def test_each_local_node_gets_its_own_gpus(visible, expected):
    """One launcher per node on a loopback rendezvous, each with the GPUs a node of its own would
    have: else both nodes' local rank 0 takes the same device (benchmarks/multinode.py ran it)."""
    from registry.compose import compose
    from registry.errors import RecipeError
    from registry.run import local_nodes

    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    nodes = local_nodes(compose("ref-100m/zero2/2x1xH100").data, env)
    assert [n["MACHINE_RANK"] for n in nodes] == ["0", "1"]
    assert [n["CUDA_VISIBLE_DEVICES"] for n in nodes] == expected
    cpu = local_nodes(compose("tiny/ddp/2x1").data, {})
    assert [n.get("CUDA_VISIBLE_DEVICES") for n in cpu] == [None, None]
    assert local_nodes(compose("ref-100m/zero2/2xH100").data, env) == [env]
    with pytest.raises(RecipeError, match="need 2 GPUs, and CUDA_VISIBLE_DEVICES leaves 1"):
        local_nodes(compose("ref-100m/zero2/2x1xH100").data, {"CUDA_VISIBLE_DEVICES": "3"})


# --- the trainer's own environment (trainer.env) ------------------------------------------------

STANDIN_TRAIN = """import json, os, sys
out = os.environ["STANDIN_OUT"]
rank = os.environ.get("RANK", "0")
with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
    json.dump({"python": sys.executable, "prefix": sys.prefix, "argv": sys.argv[1:], "env": dict(os.environ)}, f)
os.makedirs("output/checkpoints/last/pretrained_model", exist_ok=True)  # what a resume reads back
open("output/checkpoints/last/pretrained_model/train_config.json", "w").write("{}")
print(f"stand-in lerobot rank {rank} in {sys.prefix}")
"""


def make_trainer_env(root: Path, version: str = "0.6.1") -> Path:
    """A virtualenv of its own holding a stand-in `lerobot` (metadata and the training module);
    accelerate and torch come from the registry's environment through a .pth file, so no
    download is needed."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python*/site-packages"))
    ours = next(Path(sys.prefix).glob("lib/python*/site-packages"))
    (site / "registry-deps.pth").write_text(f"{ours}\n")
    package = site / "lerobot"
    (package / "scripts").mkdir(parents=True)
    (package / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (package / "scripts" / "__init__.py").write_text("")
    (package / "scripts" / "lerobot_train.py").write_text(STANDIN_TRAIN)
    info = site / f"lerobot-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: lerobot\nVersion: {version}\n")
    return root


def test_trainer_env_runs_the_ranks_in_that_environment(tmp_path):
    env_dir = make_trainer_env(tmp_path / "lerobot-env")
    out = tmp_path / "out"
    out.mkdir()
    run_dir = tmp_path / "run"
    r = run_cli(
        "run",
        "act/ddp/cpu",
        "hardware.processes_per_node=1",
        f"trainer.env={env_dir}",
        "train.steps=3",
        "--output-dir",
        str(run_dir),
        env={"STANDIN_OUT": str(out)},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    ranks = [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]
    assert len(ranks) == 1  # lerobot-train runs one process on a CPU host (cpu-one-process)
    for rank in ranks:
        assert rank["python"] == str(env_dir / "bin" / "python") and rank["prefix"] == str(env_dir)
        assert "--steps=3" in rank["argv"] and "--use_policy_training_preset=false" in rank["argv"]
    assert "warning" not in r.stderr  # 0.6.1 is the proven version
    assert f"{env_dir}/bin/python -m accelerate.commands.launch" in (run_dir / "launch.sh").read_text()

    for p in out.glob("rank-*.json"):
        p.unlink()
    again = run_cli(
        "run",
        "act/ddp/cpu",
        "hardware.processes_per_node=1",
        f"trainer.env={env_dir}",
        "train.steps=3",
        "--resume",
        str(run_dir),
        env={"STANDIN_OUT": str(out)},
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    (resumed,) = [json.loads(p.read_text()) for p in out.glob("rank-*.json")]
    assert resumed["argv"][-2:] == [
        "--resume=true",
        "--config_path=output/checkpoints/last/pretrained_model/train_config.json",
    ]


def test_trainer_env_outside_the_proven_versions_warns(tmp_path):
    env_dir = make_trainer_env(tmp_path / "lerobot-env", version="0.8.0")
    out = tmp_path / "out"
    out.mkdir()
    r = run_cli(
        "run",
        "act/ddp/cpu",
        "hardware.processes_per_node=1",
        f"trainer.env={env_dir}",
        "--output-dir",
        str(tmp_path / "run"),
        env={"STANDIN_OUT": str(out)},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "lerobot 0.8.0 in trainer.env" in r.stderr and "proven against (>= 0.6.1, < 0.7)" in r.stderr


@pytest.mark.parametrize("case", ["missing", "without-lerobot", "registry-python"])
def test_a_trainer_environment_that_cannot_run_it_fails_before_launch(tmp_path, case):
    args = ["run", "act/ddp/cpu", "hardware.processes_per_node=1", "--output-dir", str(tmp_path / "run")]
    env = None
    if case == "missing":
        args.append(f"trainer.env={tmp_path / 'nowhere'}")
        expected = f"trainer.env {tmp_path / 'nowhere'}: no Python at {tmp_path / 'nowhere'}/bin/python"
    elif case == "without-lerobot":
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "empty")], check=True)
        args.append(f"trainer.env={tmp_path / 'empty'}")
        expected = f"trainer.env {tmp_path / 'empty'} ({tmp_path / 'empty'}/bin/python, Python"
    else:  # no trainer.env: accelerate on PATH is the registry's, which has no LeRobot
        env = {"PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin:/bin"}
        expected = "the Python behind accelerate"
    r = run_cli(*args, env=env)
    assert r.returncode == 127, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0]
    assert "has no lerobot" in lines[0] or "no Python" in lines[0]
    assert "pip install 'lerobot==0.6.1'" in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


# --- output that nobody reads, a log that cannot grow ------------------------------------------

LOUD = """#!/usr/bin/env bash
for i in $(seq 1 20000); do echo "line $i of a chatty trainer, padded to fill pipes quickly"; done
echo "the end"
"""


def test_a_reader_that_goes_away_does_not_hang_the_run(tmp_path, standin):
    """`recipe run X | head -c 100`: the run finishes (its output in launch.log) instead of
    blocking forever on a full pipe."""
    env, _ = standin
    program = Path(env["PATH"].split(os.pathsep)[0]) / "opentau-train"
    program.write_text(LOUD)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "registry", "run", "pi07/zero2/8xA100", *ON_THIS_HOST] + ["--output-dir", str(run_dir)],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert len(proc.stdout.read(100)) == 100
    proc.stdout.close()  # the reader goes away, as head does
    assert proc.wait(timeout=60) == 0
    err = proc.stderr.read().decode()
    assert "the output's reader went away" in err and "Traceback" not in err
    assert (run_dir / "launch.log").read_text().splitlines()[-1] == "the end"


def test_a_log_that_cannot_grow_neither_stops_the_copy_nor_the_echo(capfdbinary):
    """A full disk under launch.log: the echo goes on, the pipe is drained, one line says why."""
    import errno
    import threading

    from registry.run.supervise import Output, _copy

    class Full:
        def __init__(self):
            self.kept = b""

        def write(self, chunk):
            if len(self.kept) > 10:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.kept += chunk

        def flush(self):
            pass

    log, output = Full(), Output(echo=True)
    _copy(Chunks([b"first line\n", b"second\n", b"third\n"]), log, threading.Lock(), output)
    out, err = capfdbinary.readouterr()
    assert out == b"first line\nsecond\nthird\n" and log.kept == b"first line\n"
    assert output.broken == {"log": True} and b"launch.log stopped (No space left on device)" in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("status", [0, 3])
def test_a_full_disk_under_launch_log_keeps_the_trainers_exit_status(tmp_path, capfd, status):
    """Closing launch.log flushed again what the full disk had refused: a traceback after the
    trainer ended. Its exit status stands, and one line says the log stopped."""
    from registry.run.supervise import supervise

    log = open("/dev/full", "ab")  # noqa: SIM115 (supervise closes it)
    trainer = ["sh", "-c", f"echo one; echo two; exit {status}"]
    assert supervise([(trainer, dict(os.environ))], tmp_path, echo=False, log=log) == status
    assert log.closed
    err = capfd.readouterr().err
    assert err.splitlines() == ["recipe: launch.log stopped (No space left on device); the run goes on"], err


def test_a_line_every_rank_prints_is_shown_once_and_logged_each_time(capfdbinary):
    """Two ranks' copies of one library warning differ only in their time stamp: the terminal
    shows it once, launch.log keeps both; distinct lines and blank lines all pass."""
    import io
    import threading

    from registry.run.supervise import Output, _copy

    warning = b"[WARNING] [real_accelerator.py:213:get_accelerator] Setting accelerator to CPU.\n"
    lines = [
        b"[2026-11-26 11:38:58,075] " + warning,
        b"W1126 11:38:58.559000 12935 torch/distributed/run.py:874] banner\n",
        b"[2026-11-26 11:38:59,859] " + warning,
        b"W1126 11:38:58.561000 12936 torch/distributed/run.py:874] banner\n",
        b"\n",
        b"\n",
        b"step 1/2 loss 0.5\n",
        b"step 2/2 loss 0.4\n",
    ]
    log = io.BytesIO()
    _copy(Chunks(lines), log, threading.Lock(), Output(echo=True))
    out = capfdbinary.readouterr().out
    assert out == lines[0] + lines[1] + b"\n\n" + lines[6] + lines[7]
    assert log.getvalue() == b"".join(lines)


def test_a_progress_bar_reaches_the_terminal_as_it_is_drawn_and_the_log_as_it_ends(capfdbinary):
    import io
    import threading

    from registry.run.supervise import Output, _copy

    parts = [b"start\n\r 0%| 0/3", b"\r 33%| 1/3", b"\r 67%| 2/3\r", b"100%| 3/3\n", b"done\n"]
    log = io.BytesIO()
    _copy(Chunks(parts), log, threading.Lock(), Output(echo=True))
    assert capfdbinary.readouterr().out == b"".join(parts)  # every redraw, as it came
    assert log.getvalue() == b"start\n100%| 3/3\ndone\n"


# --- run folders and resume pre-checks -----------------------------------------------------------


def test_runs_started_in_the_same_second_get_folders_of_their_own(tmp_path):
    """16 claims at once, as 16 `recipe run`s into the default folder: 16 distinct folders."""
    from concurrent.futures import ThreadPoolExecutor

    from registry.compose import compose
    from registry.run import fresh_run_dir

    recipe = compose("tiny/ddp/cpu")
    with ThreadPoolExecutor(16) as pool:
        folders = list(pool.map(lambda _: fresh_run_dir(recipe, None, tmp_path), range(16)))
    assert len(set(folders)) == 16 and all(f.is_dir() for f in folders)


def test_sixteen_runs_at_once_into_the_default_folder(tmp_path, standin):
    """16 `recipe run`s started together, each into runs/NAME/<stamp>: 16 folders, each with its
    own complete files and its own launch's output, once."""
    env, _ = standin
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "registry", "run", "pi07/zero2/8xA100", *ON_THIS_HOST],
            cwd=tmp_path,
            env={**os.environ, **env, "STANDIN_EXIT": "0"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(16)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 16, errors
    folders = sorted((tmp_path / "runs" / "pi07_zero2_8xA100").iterdir())
    assert len(folders) == 16
    for folder in folders:
        assert sorted(p.name for p in folder.iterdir() if p.name != "preflight.json") == [
            "accelerate.yaml",
            "deepspeed.json",
            "launch.log",
            "launch.sh",
            "opentau.json",
            "recipe.lock.yaml",
        ]
        assert (folder / "launch.log").read_text().count("standin says hello") == 1
    said = [next(line for line in e.splitlines() if line.startswith("recipe: pi07/zero2/8xA100 in ")) for e in errors]
    assert sorted(line.split(" in ")[-1] for line in said) == sorted(str(f.relative_to(tmp_path)) for f in folders)
    # each ends in its own summary, naming its own folder
    logs = sorted(e.splitlines()[-1].split()[-1] for e in errors)
    assert logs == sorted(str(f.relative_to(tmp_path) / "launch.log") for f in folders)


def test_resume_without_a_folder_takes_the_newest_run(tmp_path):
    from registry.run.resume import run_order

    names = ["20261126-101500-10", "20261126-101500-9", "20261126-101500", "20261126-101500-2"]
    newest = max((tmp_path / n for n in names), key=run_order)
    assert newest.name == "20261126-101500-10"


@pytest.mark.parametrize("case", ["malformed-lock", "not-resumable", "output-is-a-file", "resolve-onto-a-file"])
def test_bad_resume_and_output_paths_are_one_line(tmp_path, case):
    run_dir = tmp_path / "run"
    args = ["run", "tiny/ddp/cpu", "--output-dir", str(run_dir)]
    if case == "malformed-lock":
        (run_dir / "checkpoints" / "last").mkdir(parents=True)
        (run_dir / "recipe.lock.yaml").write_text("resolved: [unclosed\n")
        args = ["run", "tiny/ddp/cpu", "--resume", str(run_dir)]
        expected = "recipe.lock.yaml: not a recipe lock this run wrote"
    elif case == "not-resumable":
        args = ["run", "tiny/ddp/cpu", "train.checkpoint.resumable=false", "--resume", str(run_dir)]
        expected = "train.checkpoint.resumable is false"
    else:
        run_dir.write_text("a file")
        expected = "is a file, not a folder"
        if case == "resolve-onto-a-file":
            args = ["resolve", "tiny/ddp/cpu", "-o", str(run_dir)]
    r = run_cli(*args)
    assert r.returncode == 2, r.stderr
    assert expected in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["SIGKILL", "SIGHUP"])
def test_ranks_die_with_their_launcher(tmp_path, standin, sig):
    """The terminal closes (SIGHUP) or `recipe run` is killed outright (SIGKILL): within 5 s no
    process of the launch is left."""
    env, out = standin
    proc = started_standin(tmp_path, env, out, subprocess.DEVNULL)
    child = int((out / "child").read_text())
    proc.send_signal(sig)
    proc.wait(timeout=30)
    for _ in range(100):
        if not alive(child):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"rank {child} outlived `recipe run` by 5 s after {sig.name}")


def alive(pid: int) -> bool:
    """A process that has not ended (a zombie has ended: it waits only for its parent to look)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between open and read
        return False


# --- resume: which checkpoint, which changes, one run per folder -----------------------------------
RESUME_ARGS = ["train.steps=12", "train.checkpoint.every=6"]


@pytest.fixture
def ended_run(tmp_path):
    """A run folder as the built-in trainer leaves it after 12 steps, checkpoints at 6 and 12 (the
    files are stand-ins; trainer_state.json lists them as the trainer does)."""
    from registry.train import state

    run_dir = tmp_path / "run"
    assert run_cli("resolve", "tiny/ddp/cpu", *RESUME_ARGS, "-o", str(run_dir)).returncode == 0
    for step in (6, 12):
        folder = run_dir / "checkpoints" / f"{step:06d}"
        (folder / "state").mkdir(parents=True)
        (folder / "state" / "optimizer.bin").write_bytes(b"x" * 1000)
        (folder / "model.safetensors").write_bytes(b"y" * 500)
        state.write(folder, step)
    (run_dir / "checkpoints" / "last").symlink_to("000012")
    return run_dir


def resume(run_dir, *overrides):
    return run_cli("run", "tiny/ddp/cpu", *RESUME_ARGS, *overrides, "--resume", str(run_dir))


def test_resuming_a_finished_run_says_so_and_trains_nothing(ended_run):
    r = resume(ended_run)
    assert r.returncode == 0, r.stderr
    assert "finished at step 12; nothing to resume" in r.stderr and "train.steps=N with N > 12" in r.stderr
    assert not (ended_run / "metrics.jsonl").exists()
    past = resume(ended_run, "train.steps=10")
    assert past.returncode == 2 and "past train.steps=10" in past.stderr


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda f: (f / "state" / "optimizer.bin").write_bytes(b"x" * 10), "state/optimizer.bin has 10 bytes, 1000"),
        (lambda f: (f / "model.safetensors").unlink(), "model.safetensors is missing"),
        (lambda f: (f / "trainer_state.json").write_text('{"step": '), "trainer_state.json is unreadable"),
        (lambda f: (f / "trainer_state.json").write_text('["step"]'), "trainer_state.json holds no step"),
        (
            lambda f: (f / "trainer_state.json").write_text('{"step": 7}'),
            "trainer_state.json says step 7, its folder 000012",
        ),
        # a checkpoint is never empty (the weights or state/ at least): no list vouches for nothing
        (
            lambda f: (f / "trainer_state.json").write_text('{"step": 12, "files": {}}'),
            "trainer_state.json lists no files",
        ),
        (lambda f: (f / "trainer_state.json").write_text('{"step": 12}'), "trainer_state.json lists no files"),
    ],
    ids=["truncated", "missing-file", "malformed-state", "no-step", "step-not-the-folders", "no-files", "files-unset"],
)
def test_a_damaged_last_checkpoint_is_skipped_with_a_warning(ended_run, damage, why, capsys):
    """The newest checkpoint is damaged: the resume names what is wrong and goes back to the
    previous complete one; with none left it stops in one line."""
    from registry.run.resume import _checkpoint

    damage(ended_run / "checkpoints" / "000012")
    assert _checkpoint(ended_run, "") == ("checkpoints/000006", 6)
    assert f"skipping {ended_run / 'checkpoints' / '000012'}: {why}" in capsys.readouterr().err
    shutil.rmtree(ended_run / "checkpoints" / "000006")
    r = resume(ended_run, "train.steps=13")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith("no complete checkpoint to resume from (1 damaged or incomplete)")


def test_resume_refuses_changes_to_the_saved_state_naming_each(ended_run):
    r = resume(ended_run, "train.optimizer.lr=0.5", "backend=zero2", "train.micro_batch_size=3")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    for field in ("train.optimizer.lr: 0.001 -> 0.5", "backend.kind: 'ddp' -> 'deepspeed'", "backend.zero_stage"):
        assert field in r.stderr, r.stderr
    assert "train.micro_batch_size" in r.stderr and "recipe.name" not in r.stderr
    assert "a resume may change only recipe, results, train.steps," in r.stderr


def test_one_launch_per_run_folder(ended_run):
    """A second `recipe run --resume` of a run that is still going is refused (launch.log is locked
    for as long as a launch lives)."""
    from registry.run.supervise import hold

    log = hold(ended_run)
    try:
        r = resume(ended_run, "train.steps=24")
        assert r.returncode == 2 and "a run is going on in this folder" in r.stderr, r.stderr
    finally:
        log.close()


def test_resume_refuses_a_launch_log_that_is_a_symbolic_link(ended_run, tmp_path):
    """launch.log is appended to on resume: a link would send the ranks' output (and the folder's
    lock) to whatever file it names, outside the run folder."""
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("not the run's\n")
    (ended_run / "launch.log").symlink_to(outside)
    r = resume(ended_run, "train.steps=24")
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "launch.log is a symbolic link" in r.stderr
    assert outside.read_text() == "not the run's\n" and (ended_run / "launch.log").is_symlink()


def test_a_terminal_sees_a_progress_bar_and_ctrl_c_ends_in_one_line(tmp_path):
    """`recipe run` under a pseudo-terminal, with real ranks: rank 0's bar reaches the terminal and
    updates; a second launch into the running folder is refused; Ctrl-C ends in one line that
    says how to go on, the launchers' tracebacks left to launch.log."""
    import pty
    import select

    from conftest import free_port

    run_dir = tmp_path / "run"
    args = ["tiny/ddp/cpu", "train.steps=100000", "train.log_every=1", "train.checkpoint.every=3"]
    args += [f"launch.main_process_port={free_port()}"]
    waiver = ["--waive", "host-disk=stopped long before its 33,334th checkpoint"]
    master, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "registry", "run", *args, *waiver, "--output-dir", str(run_dir)],
        cwd=ROOT,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    seen = b""

    def read(until, seconds):
        nonlocal seen
        end = time.time() + seconds
        while time.time() < end and not until():
            if select.select([master], [], [], 0.5)[0]:
                try:
                    seen += os.read(master, 65536)
                except OSError:  # the terminal's other side has closed: the run has ended
                    return

    try:
        read(lambda: seen.count(b"\r") >= 5 and (run_dir / "checkpoints" / "last").exists(), 180)
        assert seen.count(b"\r") >= 5, seen.decode(errors="replace")[-2000:]
        second = run_cli("run", *args, *waiver, "--resume", str(run_dir))
        assert second.returncode == 2 and "a run is going on in this folder" in second.stderr, second.stderr
        before = len(seen)
        proc.send_signal(signal.SIGINT)
        read(lambda: proc.poll() is not None, 60)
        assert proc.wait(timeout=30) == 130
        read(lambda: False, 1)
    finally:
        proc.kill()
        os.close(master)
    text = seen.decode(errors="replace")
    assert "step/s" in text and "/100000" in text  # tqdm's bar: steps of the total, rate
    after = seen[before:].decode(errors="replace").replace("\r", "\n")
    lines = [line for line in after.splitlines() if line.strip()]
    # the closing summary: how it ended, where the output is, how to go on (registry/run/summary.py)
    closing = next(
        i for i, line in enumerate(lines) if line.startswith("recipe: stopped (exit 130): tiny/ddp/cpu, step ")
    )
    assert lines[closing + 1 :] == [
        f"  model        {run_dir}/checkpoints/last/model.safetensors (last = {os.readlink(run_dir / 'checkpoints' / 'last')})",
        f"  checkpoints  {run_dir}/checkpoints",
        f"  metrics      {run_dir}/metrics.jsonl",
        f"  log          {run_dir}/launch.log",
        f"  go on with: recipe run {' '.join(args)} --resume {run_dir} {shlex.join(waiver)}",
    ], after
    assert "Traceback" not in text
    assert "\r" not in (run_dir / "launch.log").read_text()  # the log keeps each line's last state


def test_a_stopped_file_recipe_is_resumed_by_its_file(tmp_path):
    """The summary's resume command repeats what the run was given: a file's `recipe.name` is no
    name `recipe run` can find (registry/run/summary.py)."""
    from registry.compose import compose
    from registry.run import summary

    mine = tmp_path / "my-tiny.yaml"
    mine.write_text("recipe:\n  name: my-tiny\nextends: [tiny/ddp/cpu]\n")
    folder = tmp_path / "run"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "metrics.jsonl").write_text('{"step": 10, "loss": 0.5}\n')
    target = str(mine)
    shown = summary.lines(compose(target, ["train.steps=40"]), target, ["train.steps=40"], folder, 130, 3.0)
    assert shown[0] == "recipe: stopped (exit 130): my-tiny, step 10/40, 3.0s wall time, final loss 0.5"
    assert shown[-1] == f"  go on with: recipe run {shlex.quote(target)} train.steps=40 --resume {folder}"
    finished = summary.lines(compose(target, []), target, [], folder, 0, 3.0)
    assert not any("go on with" in line for line in finished)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["SIGKILL", "SIGHUP"])
def test_real_ranks_die_with_their_launcher(tmp_path, sig):
    """The built-in trainer's ranks under torchrun, mid-training: within 5 s of SIGKILL or SIGHUP
    to `recipe run`, no rank is left (the watchdog, or the handler, stops their groups)."""
    from conftest import free_port

    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        # steps it never reaches; checkpoints kept to 2, or the pre-flight's disk check would ask
        # for room for 1,000 of them (20 GiB) and refuse the run on a fuller disk
        [sys.executable, "-m", "registry", "run", "tiny/ddp/cpu", "train.steps=100000", "train.log_every=1"]
        + ["train.checkpoint.keep=2", f"launch.main_process_port={free_port()}", "--output-dir", str(run_dir)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 180
        while time.time() < deadline and '"loss"' not in _read(run_dir / "metrics.jsonl"):
            time.sleep(0.2)
        ranks = _ranks_in(run_dir)
        assert len(ranks) >= 3, ranks  # torchrun and its two ranks, seen training
        proc.send_signal(sig)
        proc.wait(timeout=30)
        end = time.time() + 5
        while time.time() < end and any(alive(p) for p in ranks):
            time.sleep(0.05)
        assert not [p for p in ranks if alive(p)], f"ranks outlived `recipe run` by 5 s after {sig.name}"
    finally:
        proc.kill()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _ranks_in(run_dir: Path) -> list[int]:
    """The processes of a launch in a run folder: the launcher and the ranks, `registry.train` in their
    argv and the folder their working directory."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and Path(os.readlink(entry / "cwd")) == run_dir.resolve():
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if b"registry.train" in argv:
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize(("visible", "count"), [(None, 4), ("2,3", 2), ("GPU-c", 1), ("", 0)])
def test_the_host_has_the_gpus_cuda_visible_devices_leaves(tmp_path, monkeypatch, visible, count):
    """nvidia-smi lists the whole host; a run on two of four GPUs (CUDA_VISIBLE_DEVICES=2,3) has two,
    as its hardware check and its recorded `hardware` say."""
    from registry.run import machine

    smi = tmp_path / "nvidia-smi"
    rows = "\n".join(f"{i}, GPU-{'abcd'[i]}, NVIDIA H100 80GB HBM3, 81559" for i in range(4))
    smi.write_text("#!/bin/sh\ncat <<'EOF'\n" + rows + "\nEOF\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    found = machine.gpus()
    assert len(found) == count and all(g.name == "NVIDIA H100 80GB HBM3" and g.memory_mib == 81559 for g in found)


def test_every_cluster_engine_has_a_submission():
    from registry.run import CLUSTER_ENGINES, submit

    assert set(submit.ENGINES) == set(CLUSTER_ENGINES)


def test_a_stale_extension_build_lock_is_named_before_a_deepspeed_launch(tmp_path, standin):
    """A build killed midway leaves torch's `lock`; every later rank would wait on it without a
    word (docs/failure-modes.md §51). A fresh lock is a build in progress and is not named."""
    from registry.run.environment import STALE_LOCK_S, stale_build_locks

    root = tmp_path / "ext"
    stale, fresh = root / "deepspeed_shm_comm" / "lock", root / "py311_cpu" / "cpu_adam" / "lock"
    for lock in (stale, fresh):
        lock.parent.mkdir(parents=True)
        lock.touch()
    old = time.time() - 2 * STALE_LOCK_S
    os.utime(stale, (old, old))
    warning = stale_build_locks({"TORCH_EXTENSIONS_DIR": str(root)})
    assert str(stale) in warning and str(fresh) not in warning and "20 min old" in warning
    os.utime(fresh, (old, old))
    assert str(fresh) in stale_build_locks({"TORCH_EXTENSIONS_DIR": str(root)})
    assert stale_build_locks({"TORCH_EXTENSIONS_DIR": str(tmp_path / "none")}) is None
    assert stale_build_locks({"XDG_CACHE_HOME": str(tmp_path)}) is None  # <cache>/torch_extensions: none

    env, _ = standin
    env = {**env, "TORCH_EXTENSIONS_DIR": str(root)}
    r = run_cli("run", "pi07/zero2/8xA100", *ON_THIS_HOST, "--output-dir", str(tmp_path / "a"), env=env)
    assert r.returncode == 0 and "torch extension build locks" in r.stderr and str(fresh) in r.stderr, r.stderr
    r = run_cli("run", "pi07/fsdp/8xA100", *ON_THIS_HOST, "--output-dir", str(tmp_path / "b"), env=env)
    assert "build lock" not in r.stderr  # FSDP builds no DeepSpeed op
