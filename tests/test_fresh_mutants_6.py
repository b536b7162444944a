"""Classes of behaviour round 6 of the fresh hand-made mutants found unpinned (issue 41;
docs/mutation.md): the guards launch.sh runs, at their boundary values; the grace the surviving
ranks get once one fails; the slowest rank setting a rehearsal's pace; the latest of several
measurements being the one shown. Each test holds the class, not the one line that was broken."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import run_cli

from registry.compose import compose
from registry.resolve import resolve


# --- registry/resolve/launch.py: every guard of a multi-node launch.sh at its bounds -------------
@pytest.fixture(scope="module")
def two_node_launch(tmp_path_factory):
    """A 2-node launch.sh, its trainer a stand-in that records it was started."""
    run = tmp_path_factory.mktemp("launch")
    bundle = resolve(compose("tiny/ddp/2x1", ["launch.main_process_port=29511"]))
    for name, text in bundle.files.items():
        (run / name).write_text(text)
    stub = run / "bin"
    stub.mkdir()
    for program in ("accelerate", "torchrun", "python", "python3"):
        (stub / program).write_text('#!/bin/sh\necho started > "$RECIPE_TEST_OUT"\n')
        (stub / program).chmod(0o755)
    return run


@pytest.mark.parametrize(
    "env, said",
    [
        ({"MACHINE_RANK": "0"}, None),
        ({"MACHINE_RANK": "1"}, None),  # the last node
        ({"MACHINE_RANK": "2"}, "MACHINE_RANK must be below 2 (nodes)"),  # one past it
        ({"MACHINE_RANK": "-1"}, "MACHINE_RANK must be a number"),
        ({"MACHINE_RANK": ""}, None),  # unset: node 0
        ({"MACHINE_RANK": "1", "MAIN_PROCESS_PORT": "29500"}, None),
        ({"MACHINE_RANK": "1", "MAIN_PROCESS_PORT": "295a"}, "MAIN_PROCESS_PORT must be a number"),
        ({"MACHINE_RANK": "1", "MAIN_PROCESS_IP": "10.0.0.7"}, None),
        ({"MACHINE_RANK": "1", "MAIN_PROCESS_IP": "fe80::1"}, None),
        ({"MACHINE_RANK": "1", "MAIN_PROCESS_IP": "a;touch x"}, "MAIN_PROCESS_IP must be a host name or address"),
    ],
)
def test_a_multi_node_launch_sh_starts_exactly_the_nodes_it_has(two_node_launch, tmp_path, env, said):
    run, out = two_node_launch, tmp_path / "started"
    if env.get("MACHINE_RANK") == "":
        env = {k: v for k, v in env.items() if k != "MACHINE_RANK"}
    base = {"PATH": f"{run / 'bin'}:/usr/bin:/bin", "RECIPE_TEST_OUT": str(out), "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", "launch.sh"], cwd=run, env={**base, **env}, capture_output=True, text=True, timeout=30
    )
    if said is None:
        assert done.returncode == 0 and out.read_text() == "started\n", done.stderr
    else:
        assert done.returncode == 2 and said in done.stderr and not out.exists(), done.stderr
    assert not (run / "x").exists()


# --- registry/run/supervise.py: once a rank fails, the others get SIGTERM and the grace ------------
SURVIVOR = textwrap.dedent(
    """
    import pathlib, signal, sys, time
    def saved(signum, frame):
        time.sleep(1.0)  # a checkpoint written on SIGTERM, as trainers do
        pathlib.Path(sys.argv[1]).write_text("saved")
        sys.exit(0)
    signal.signal(signal.SIGTERM, saved)
    pathlib.Path(sys.argv[2]).write_text("ready")
    time.sleep(60)
    """
)


def test_after_one_rank_fails_the_others_get_sigterm_and_the_grace_to_save(tmp_path):
    import importlib

    supervise = importlib.import_module("registry.run.supervise")  # the package exports the function

    ready = tmp_path / "ready"
    failing = "import pathlib, sys, time\nwhile not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.02)\nsys.exit(3)"
    commands = [
        ([sys.executable, "-c", SURVIVOR, str(tmp_path / "saved"), str(ready)], dict(os.environ)),
        ([sys.executable, "-c", failing, str(ready)], dict(os.environ)),
    ]
    start = time.monotonic()
    code = supervise.supervise(commands, tmp_path, echo=False)
    took = time.monotonic() - start
    assert code == 3  # the first failure's code
    assert (tmp_path / "saved").read_text() == "saved"  # its handler ran to the end: not SIGKILLed at once
    assert took < supervise.GRACE_S  # and nothing waited for the whole grace


# --- registry/run/rehearse/report.py: the slowest rank sets each step's pace -----------------------
def test_a_rehearsals_step_rate_is_the_slowest_ranks_after_the_warm_up():
    from registry.run.rehearse.report import step_rates, throughput

    fast = {"rank": 0, "step_ends": [0, 1, 2, 3, 4, 5]}
    slow = {"rank": 1, "step_ends": [0, 1, 3, 5, 7, 9]}  # its steps 2 s, from the second on
    assert step_rates([fast, slow], 16, warmup=0) == [16.0, 8.0, 8.0, 8.0, 8.0]
    assert step_rates([fast, slow], 16, warmup=2) == [8.0, 8.0, 8.0]  # the first two timed steps left out
    assert step_rates([slow, fast], 16, warmup=2) == [8.0, 8.0, 8.0]  # whichever rank is listed first
    short = {"rank": 2, "step_ends": [0, 1, 2]}
    assert step_rates([fast, short], 16, warmup=0) == [16.0, 16.0]  # only the steps every rank took
    assert step_rates([{"rank": 0, "step_ends": [0, 0, 1]}], 4, warmup=0) == [4.0]  # no zero-length step
    assert throughput([fast], 8) is not None and throughput([{"rank": 0, "step_ends": [0, 1]}], 8) is None


# --- registry/commands/history.py: of several measurements, the latest is shown ----------------------
def test_history_shows_a_versions_latest_measurement(tmp_path):
    folder = tmp_path / "team"
    folder.mkdir()
    env = {"RECIPE_PATH": f"team={folder}", "RECIPE_KNOWN_VERSIONS": str(tmp_path / "known.jsonl")}
    recipe = tmp_path / "two.yaml"
    entry = "{{samples_per_s: {rate}, hardware: CPU, date: '2026-12-0{day}', command: recipe bench, steps: 4}}"
    recipe.write_text(
        "recipe: {name: exp/two}\nextends: [tiny/ddp/cpu]\nresults:\n"
        + "".join(f"  - {entry.format(rate=r, day=d)}\n" for r, d in ((11.0, 1), (14.2, 2)))
    )
    r = run_cli("publish", str(recipe), "--to", "team", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_cli("history", "exp/two", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()[:2]
    assert row[header.index("SAMPLES/S") :].split()[0] == "14.2", r.stdout
