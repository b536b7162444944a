"""`recipe bench` on this CPU host: a real matrix, the measuring conditions, and --record."""

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, free_port, run_cli

from registry.run.bench import summarize

MINE = "# yaml-language-server: $schema=x\nrecipe: {name: team/mine}\nextends: [tiny/ddp/cpu]\ntrain: {steps: 7}\n"


def side_by_side(folder: Path, port: int) -> tuple[subprocess.CompletedProcess, Path]:
    """`recipe bench` over a matrix of 3 cells, one of them invalid, in `folder`."""
    r = run_cli(
        "bench",
        "tiny/{ddp,zero2,fsdp}/cpu",
        "--steps",
        "4",
        "--warmup",
        "1",
        "train.gradient_accumulation_steps=4",
        f"launch.main_process_port={port}",
        cwd=folder,  # run directories go to ./runs/bench
        timeout=600,
    )
    return r, folder


@dataclass
class Recorded:
    file: Path
    first: subprocess.CompletedProcess
    text: str = ""  # the file after the first --record
    validated: subprocess.CompletedProcess | None = None
    again: subprocess.CompletedProcess | None = None


def record_twice(folder: Path, port: int) -> Recorded:
    """`recipe bench FILE --record --format json` on a recipe file (6 measured steps, the fewest
    for a 95% interval); then `recipe validate FILE`, and --record again, by the recipe's name in a
    directory source (RECIPE_PATH) that holds the file. (DDP on CPU: torchrun picks its own port.)"""
    f = folder / "team" / "exp" / "mine.yaml"
    f.parent.mkdir(parents=True)
    f.write_text(MINE)
    options = ["--steps", "6", "--warmup", "1", "--record"]
    done = Recorded(f, run_cli("bench", str(f), *options, "--format", "json", cwd=folder, timeout=600))
    if done.first.returncode == 0:
        done.text = f.read_text()
        done.validated = run_cli("validate", str(f))
        env = {"RECIPE_PATH": f"team={folder / 'team'}"}
        done.again = run_cli("bench", "team:exp/mine", *options, cwd=folder, env=env, timeout=600)
    return done


def background_runs(items) -> dict:
    """The bench runs the selected tests read, for conftest's `background` to start with the session."""
    jobs = {"side_by_side_run": side_by_side, "recorded": record_twice}  # by fixture
    return {key: job for key, job in jobs.items() if any(key in item.fixturenames for item in items)}


@pytest.fixture(scope="module")
def side_by_side_run(background, request) -> tuple[subprocess.CompletedProcess, Path]:
    return background.of(request.module)["side_by_side_run"].result()


@pytest.fixture(scope="module")
def recorded(background, request) -> Recorded:
    return background.of(request.module)["recorded"].result()


def test_bench_json_carries_the_interval(recorded):
    r = recorded.first
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    doc = json.loads(r.stdout)
    row = doc["results"][0]
    ci = row["samples_per_s_interval"]
    assert ci["lower"] <= row["samples_per_s"] <= ci["upper"] and ci["lower"] > 0
    assert ci["confidence"] == 0.95 and ci["launches"] == 1 and ci["steps"] == 6
    assert doc["repeats"] == 1 and "order-statistic" in doc["interval_method"]


def test_cpu_matrix_side_by_side(side_by_side_run):
    r, folder = side_by_side_run
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["RECIPE", "SAMPLES/S", "ALLOC", "GiB"]
    rows = {line.split()[0]: line.split() for line in lines[1:4]}
    for name in ("tiny/ddp/cpu", "tiny/zero2/cpu"):
        assert float(rows[name][1]) > 0 and float(rows[name][2]) > 0
        shares = [int(x.rstrip("%")) for x in rows[name][4:9]]
        assert 98 <= sum(shares) <= 102  # the phase table adds up to 100%
    assert "tiny/fsdp/cpu: skipped: invalid: fsdp-needs-gpu" in r.stdout
    assert "tiny/ddp/cpu: " in r.stdout and "(88% CI, 1 launch x 4 steps)" in r.stdout  # too few steps for 95%
    assert "fastest: " in r.stdout  # resolved, or the cells within noise named
    bench_runs = folder / "runs" / "bench"
    assert sorted(p.name for p in bench_runs.iterdir()) == ["tiny_ddp_cpu", "tiny_zero2_cpu"]
    configs = [json.loads(f.read_text()) for f in bench_runs.glob("*/*/train_config.json")]
    assert len(configs) == 2 and all(c["train"]["gradient_accumulation_steps"] == 1 for c in configs)  # measured as 1


def test_summarize_adds_up():
    records = [
        {
            "step": s,
            "loss": 1.0,
            "samples_per_s": 100.0,
            "step_time_s": 0.1,
            "peak_allocated_gib": 1.0 + s,
            "peak_reserved_gib": 2.0,
            "phases_s": {"data": 0.01, "forward": 0.03, "backward": 0.05, "optimizer": 0.005},
        }
        for s in range(1, 6)
    ]
    out = summarize(records, warmup=2)
    assert abs(sum(out["shares"].values()) - 1) < 1e-9 and abs(out["shares"]["other"] - 0.05) < 1e-9
    assert abs(out["samples_per_s"] - 100.0) < 1e-9 and out["peak_allocated_gib"] == 6.0


def test_record_appends_results_with_provenance(recorded):
    r = recorded.first
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    text = recorded.text
    assert text.startswith(
        "# yaml-language-server: $schema=x\nrecipe: {name: team/mine}\n"
    )  # the file is kept, not rewritten
    entry = yaml.safe_load(text)["results"][0]
    assert entry["gradient_accumulation_steps"] == 1 and entry["samples_per_s"] > 0 and entry["steps"] == 6
    ci = entry["samples_per_s_interval"]
    assert ci["lower"] <= entry["samples_per_s"] <= ci["upper"] and (ci["launches"], ci["steps"]) == (1, 6)
    assert ci == json.loads(r.stdout)["results"][0]["samples_per_s_interval"]  # what it printed is what it kept
    assert (
        entry["hardware"].startswith("CPU")
        and "torch" in entry["versions"]
        and entry["command"].startswith("recipe bench")
    )
    assert abs(sum(entry["phases"].values()) - 1) < 0.01
    assert recorded.validated.returncode == 0


def test_record_by_name_into_a_directory_source(recorded):
    """What --record is for: a name whose file lies in a directory source (RECIPE_PATH, recipe
    source add DIR) gets the measurement appended to that file, after the one already there."""
    again = recorded.again
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    assert f"recorded in {recorded.file}" in again.stderr
    results = yaml.safe_load(recorded.file.read_text())["results"]
    assert len(results) == 2 and results[0] == yaml.safe_load(recorded.text)["results"][0]
    assert results[1]["steps"] == 6 and results[1]["command"].startswith("recipe bench team:exp/mine")


def test_bench_refuses_bad_patterns():
    assert run_cli("bench", "tiny/*/nowhere").returncode == 2
    assert run_cli("bench", "tiny/*").returncode == 2


def test_bench_starts_every_node_of_a_loopback_multi_node_recipe(tmp_path):
    """2 nodes on this host: one launcher per node, as `recipe run` starts them (docs/failure-modes.md
    §44); with one, node 0 would wait for node 1 until killed."""
    args = ["bench", "tiny/ddp/2x1", "--steps", "1", "--warmup", "1", "train.micro_batch_size=2"]
    # a port of its own: the suite runs test files side by side, and the bundled 29500 may be taken
    r = run_cli(*args, f"launch.main_process_port={free_port()}", cwd=tmp_path, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "tiny/ddp/2x1" in r.stdout and "failed" not in r.stdout + r.stderr


# --- where --record may write ------------------------------------------------------------------
def refused_before_running(tmp_path, *args, env=None) -> str:
    """`recipe bench ARGS --record` refused in one line, exit 2, before anything was launched."""
    r = run_cli("bench", *args, "--record", "--steps", "1", "--warmup", "0", cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stdout + r.stderr[-3000:]
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert not (tmp_path / "runs").exists()  # nothing was benchmarked
    return r.stderr


def test_record_never_writes_into_the_package(tmp_path):
    """The bundled recipes are the installed package's files: --record of one, by name or by its
    file, is refused (record into a copy of it instead)."""
    bundled = ROOT / "recipes" / "tiny" / "ddp" / "cpu.yaml"
    before = bundled.read_bytes()
    try:
        for args in (["tiny/ddp/cpu"], [str(bundled)], ["tiny/ddp/cpu", "--format", "json"]):
            said = refused_before_running(tmp_path, *args)
            assert "package" in said and "recipe cp tiny/ddp/cpu" in said, said
    finally:
        after = bundled.read_bytes()
        if after != before:  # the bug this guards against: leave the checkout as it was
            bundled.write_bytes(before)
    assert after == before


def test_record_never_writes_into_a_git_clone_or_a_published_version(tmp_path):
    """A git source's clone is replaced by `recipe source update`, and a published version is
    frozen under its sha256: neither is recorded into."""
    import os

    remote, work = tmp_path / "remote.git", tmp_path / "work"
    git = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "A"}
    git["GIT_COMMITTER_EMAIL"] = "a@x"
    (work / "exp").mkdir(parents=True)
    (work / "exp" / "mine.yaml").write_text(MINE)
    for cmd in (["init", "-q", "-b", "main", "--bare", str(remote)], ["-C", str(work), "init", "-q", "-b", "main"]):
        subprocess.run(["git", *cmd], check=True, env=git)
    for cmd in (["add", "."], ["commit", "-qm", "x"], ["push", "-q", str(remote), "HEAD:refs/heads/main"]):
        subprocess.run(["git", "-C", str(work), *cmd], check=True, env=git, capture_output=True)
    env = {"RECIPE_CONFIG": str(tmp_path / "sources.yaml"), "RECIPE_CACHE": str(tmp_path / "cache")}
    assert run_cli("source", "add", "team-g", f"file://{remote}", env=env).returncode == 0
    assert "git source" in refused_before_running(tmp_path, "team-g:exp/mine", env=env)

    team = tmp_path / "team-d"
    (team / "exp").mkdir(parents=True)
    (team / "exp" / "mine.yaml").write_text(MINE)
    env = {"RECIPE_PATH": f"team-d={team}"}
    published = run_cli("publish", str(team / "exp" / "mine.yaml"), "--to", "team-d", env=env)
    assert published.returncode == 0, published.stderr
    assert "published" in refused_before_running(tmp_path, "team/mine", env=env)
