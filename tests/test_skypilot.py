"""sky.yaml (launch.launcher: skypilot): a SkyPilot task that starts launch.sh once per node.

The run script is executed here against a stand-in `accelerate`, beside launch.sh as srun starts it
under Slurm: both must give the same per-node launch. The task itself is checked with SkyPilot's own
task loader (tests/upstream/skypilot_check.py) in a venv of its own: bash tests/upstream/skypilot_env.sh.
Every valid bundled cell goes to SkyPilot in one batch (one `import sky`, about 2 s), with broken
twins that it must refuse, so the check is known to bite."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, USER_ENV, bundled_matrix, run_cli, side_venv_python

from registry.compose import compose
from registry.errors import RecipeError
from registry.resolve import resolve, skypilot

HERE = Path(__file__).parent / "upstream"
BUILD = "bash tests/upstream/skypilot_env.sh"
# conftest removes RECIPE_* from the environment the registry sees; this one is for the tests
VENV = Path(USER_ENV.get("RECIPE_SKYPILOT_VENV") or ROOT / ".venv-skypilot")
MULTI = "ref-1b/zero2/2x8xH100"  # a bundled two-node cell of the built-in trainer
VALID = [name for name, cell in bundled_matrix().items() if cell.report.exit_code == 0]


def task_of(target, overrides=()) -> dict:
    return yaml.safe_load(skypilot.task(compose(target, list(overrides)).data))


# --- the task ---------------------------------------------------------------------------------
def test_every_catalog_gpu_has_a_skypilot_name():
    catalog = yaml.safe_load((ROOT / "recipes" / "catalog" / "gpus.yaml").read_text())
    assert set(skypilot.ACCELERATORS) | skypilot.UNNAMED == set(catalog)
    assert not set(skypilot.ACCELERATORS) & skypilot.UNNAMED


def test_a_gpu_skypilot_does_not_name_is_refused():
    with pytest.raises(RecipeError) as info:
        skypilot.accelerators(compose("ref-1b/ddp/2xRTX-4090", ["launch.launcher=skypilot"]).data)
    known = ", ".join(skypilot.ACCELERATORS)
    assert str(info.value) == (
        f"launch.launcher skypilot: hardware.gpu RTX-4090 has no SkyPilot accelerator name (known: {known})"
    )
    assert skypilot.accelerators(compose("tiny/ddp/2xT4").data) == "T4:2"
    doc = copy.deepcopy(compose("tiny/ddp/2xT4").data)
    del doc["hardware"]["gpu"]["name"]  # a GPU written out in full, without a catalog name
    with pytest.raises(RecipeError) as info:
        skypilot.accelerators(doc)
    assert "hardware.gpu (written out, no name) has no SkyPilot accelerator name" in str(info.value)


@pytest.mark.parametrize(
    ("name", "task"),
    [
        ("pi07/zero2/8xA100", "pi07-zero2-8xA100"),
        ("team-a:exp/mine@2", "team-a-exp-mine-2"),
        ("/mine/", "mine"),
        ("--x__y--", "x-y"),
        ("///", "recipe"),
        ("", "recipe"),
    ],
)
def test_task_name_is_letters_and_digits_joined_by_dashes(name, task):
    assert skypilot.task_name(name) == task


def test_the_task_keeps_its_order_and_long_lines_whole():
    text = skypilot.task(compose(MULTI, ["launch.launcher=skypilot"]).data)
    body = yaml.safe_load(text)
    assert list(body) == ["name", "resources", "num_nodes", "workdir", "setup", "run"]  # as written, not sorted
    long = [line for line in body["run"].splitlines() if len(line) > 100]
    assert long and all(line in text for line in long)  # no line folded at YAML's default width


def test_two_node_task():
    task = task_of(MULTI)
    assert task["name"] == "ref-1b-zero2-2x8xH100"
    assert task["resources"] == {"accelerators": "H100:8"}
    assert task["num_nodes"] == 2
    assert task["workdir"] == "."
    assert 'export MACHINE_RANK="$SKYPILOT_NODE_RANK"' in task["run"]
    assert task["run"].rstrip().endswith("bash ./launch.sh")


@pytest.mark.parametrize(
    ("cell", "accelerators"),
    [("ref-1b/zero2/8xA100", "A100-80GB:8"), ("ref-1b/zero2/8xA100-40GB", "A100:8"), ("ref-1b/ddp/1xH100", "H100:1")],
)
def test_one_node_task(cell, accelerators):
    task = task_of(cell)
    assert task["resources"] == {"accelerators": accelerators}
    assert task["num_nodes"] == 1
    assert "MACHINE_RANK" not in task["run"]  # launch.sh on one node takes no rank


def test_cpu_part_asks_for_cores():
    assert task_of("tiny/ddp/cpu")["resources"] == {"cpus": "2+"}


def test_deterministic():
    doc = compose(MULTI).data
    assert skypilot.task(doc) == skypilot.task(copy.deepcopy(doc))


def test_gpu_without_a_skypilot_name_is_one_line():
    doc = copy.deepcopy(compose("ref-1b/zero2/8xA100").data)
    doc["hardware"]["gpu"]["name"] = "RTX4090"
    with pytest.raises(RecipeError) as e:
        skypilot.task(doc)
    message = str(e.value)
    assert "\n" not in message
    assert "RTX4090 has no SkyPilot accelerator name" in message
    assert e.value.exit_code == 1


def test_launch_argv_names_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RecipeError) as e:
        skypilot.launch_argv()
    assert str(e.value) == f"sky not found on PATH (hint: {skypilot.SKY_HINT})"
    assert e.value.exit_code == 127
    (tmp_path / "sky").write_text("#!/bin/sh\n")
    (tmp_path / "sky").chmod(0o755)
    assert skypilot.launch_argv() == [str(tmp_path / "sky"), "launch", "sky.yaml"]


# --- the per-node launch, as Slurm starts it ---------------------------------------------------
@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """MULTI's files, sky.yaml, and a stand-in `accelerate` that prints its argv and its config."""
    folder = tmp_path_factory.mktemp("sky")
    bundle = resolve(compose(MULTI))
    assert bundle.program == "accelerate"
    for name, text in {**bundle.files, skypilot.TASK: skypilot.task(compose(MULTI).data)}.items():
        (folder / name).write_text(text)
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "accelerate"
    fake.write_text('#!/usr/bin/env bash\necho "argv: $*"\ncat "$3"\n')  # accelerate launch --config_file FILE
    fake.chmod(0o755)
    return folder


def start(folder: Path, command: list, env: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}", **env}
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=30)


def sky_node(folder: Path, rank: int, gpus: str = "8") -> subprocess.CompletedProcess:
    run = yaml.safe_load((folder / skypilot.TASK).read_text())["run"]
    ips = "10.0.0.5\n10.0.0.6"  # SkyPilot lists the head node first
    env = {"SKYPILOT_NODE_RANK": str(rank), "SKYPILOT_NODE_IPS": ips, "SKYPILOT_NUM_GPUS_PER_NODE": gpus}
    return start(folder, ["bash", "-c", run], env)


def slurm_node(folder: Path, rank: int) -> subprocess.CompletedProcess:
    # what slurm.sbatch exports before srun starts launch.sh on each node
    env = {"SLURM_NODEID": str(rank), "MAIN_PROCESS_IP": "10.0.0.5", "MAIN_PROCESS_PORT": "29500"}
    return start(folder, ["bash", "./launch.sh"], env)


@pytest.mark.parametrize("rank", [0, 1])
def test_node_launch_matches_slurm(run_folder, rank):
    sky, slurm = sky_node(run_folder, rank), slurm_node(run_folder, rank)
    assert sky.returncode == 0, sky.stderr
    assert slurm.returncode == 0, slurm.stderr
    assert sky.stdout == slurm.stdout
    assert f"argv: launch --config_file accelerate.node-{rank}.yaml" in sky.stdout
    assert f"machine_rank: {rank}\nmain_process_ip: 10.0.0.5\nmain_process_port: 29500\n" in sky.stdout


def test_node_with_other_gpus_stops(run_folder):
    done = sky_node(run_folder, 0, gpus="4")
    assert done.returncode == 2
    assert done.stderr.strip() == "sky.yaml: this recipe needs 8 GPUs per node, SkyPilot gave 4"
    assert "argv:" not in done.stdout


def test_resolve_writes_sky_yaml_beside_the_same_launch_sh():
    sky = resolve(compose(MULTI, ["launch.launcher=skypilot"]))
    slurm = resolve(compose(MULTI, ["launch.launcher=slurm"]))
    assert sky.files[skypilot.TASK] == skypilot.task(compose(MULTI, ["launch.launcher=skypilot"]).data)
    assert sky.files["launch.sh"] == slurm.files["launch.sh"]


# --- SkyPilot's own loader ---------------------------------------------------------------------
def venv_python() -> Path:
    return side_venv_python(VENV, "SkyPilot", BUILD, "RECIPE_SKYPILOT_VENV")


def broken(text: str, change) -> str:
    task = yaml.safe_load(text)
    change(task)
    return yaml.safe_dump(task, sort_keys=False)


# id -> (how the two-node task is broken, the stage SkyPilot refuses it at, a piece of its message)
BROKEN = {
    "num-nodes-text": (lambda t: t.update(num_nodes="two"), "load", "'two' is not of type 'integer'"),
    "unknown-key": (lambda t: t.update(nodes=2), "load", "'nodes'"),
    "catalog-gpu-name": (lambda t: t["resources"].update(accelerators="H100-SXM:8"), "accelerator", "H100-SXM"),
    "recipe-name": (lambda t: t.update(name="ref-1b/zero2/2x8xH100"), "validate", "Invalid task name"),
    "no-workdir": (lambda t: t.update(workdir="./missing"), "validate", "missing"),
}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> dict:
    """{"results": {case id: SkyPilot's result}, "folders": {case id: its run folder}, "docs": {cell:
    composed recipe}}. Ids: the cell name for bundled cells, 'broken/<id>', and 'name/<SkyPilot
    name>' for each accelerator name the registry maps to."""
    python, root = venv_python(), tmp_path_factory.mktemp("skypilot")
    matrix = bundled_matrix()
    texts, docs = {}, {}
    for name in VALID:
        docs[name] = matrix[name].recipe.data
        texts[name] = skypilot.task(docs[name])
    for key, (change, _, _) in BROKEN.items():
        texts[f"broken/{key}"] = broken(texts[MULTI], change)
    for name in sorted(set(skypilot.ACCELERATORS.values())):
        texts[f"name/{name}"] = broken(texts[MULTI], lambda t, n=name: t["resources"].update(accelerators=f"{n}:1"))
    cases = []
    for n, (case_id, text) in enumerate(texts.items()):
        folder = root / f"case{n}"
        folder.mkdir()
        (folder / skypilot.TASK).write_text(text)
        cases.append({"id": case_id, "folder": str(folder)})
    done = subprocess.run(
        [str(python), "-I", str(HERE / "skypilot_check.py"), "-"],
        input=json.dumps(cases),
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode not in (0, 1):
        pytest.fail(f"skypilot_check.py exited {done.returncode}:\n{done.stderr[-3000:]}", pytrace=False)
    results = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    missing = [c["id"] for c in cases if c["id"] not in results]
    assert not missing, f"skypilot_check.py gave no result for {missing}:\n{done.stderr[-3000:]}"
    return {"results": results, "folders": {c["id"]: c["folder"] for c in cases}, "docs": docs}


@pytest.mark.upstream
def test_every_valid_cell_loads_in_skypilot(upstream):
    results, folders, docs = upstream["results"], upstream["folders"], upstream["docs"]
    nodes = {doc["hardware"]["nodes"] for doc in docs.values() if doc["hardware"]["gpu"]}
    assert {1, 2} <= nodes  # one-node parts and the bundled 2x8xH100
    wrong = {}
    for name, doc in docs.items():
        result, hardware = results[name], doc["hardware"]
        gpu = hardware["gpu"]
        expected = {
            "ok": True,
            "num_nodes": hardware["nodes"],
            "accelerators": {skypilot.ACCELERATORS[gpu["name"]]: hardware["gpus_per_node"]} if gpu else None,
            "workdir": folders[name],
        }
        got = {key: result[key] for key in expected}
        if got != expected:
            wrong[name] = (got, expected, result["error"])
    assert not wrong, f"{len(wrong)} cells: {dict(list(wrong.items())[:3])}"


@pytest.mark.upstream
@pytest.mark.parametrize("key", list(BROKEN))
def test_skypilot_refuses_a_broken_task(upstream, key):
    result = upstream["results"][f"broken/{key}"]
    _, stage, says = BROKEN[key]
    assert not result["ok"]
    assert result["stage"] == stage, result["error"]
    assert says in result["error"]


@pytest.mark.upstream
@pytest.mark.parametrize("name", sorted(set(skypilot.ACCELERATORS.values())))
def test_accelerator_name_is_skypilots(upstream, name):
    result = upstream["results"][f"name/{name}"]
    assert result["ok"], result["error"]
    assert result["accelerators"] == {name: 1}


def test_recipe_run_launches_the_task_from_the_run_folder(tmp_path):
    """`recipe run` with launcher skypilot writes the run folder and starts `sky launch sky.yaml`
    there (SkyPilot syncs the working directory as `workdir: .`); no sky is one line, exit 127."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sky = bin_dir / "sky"
    sky.write_text('#!/usr/bin/env bash\necho "$PWD $*" > "$SKY_LOG"\n')
    sky.chmod(0o755)
    log, run_dir = tmp_path / "sky.log", tmp_path / "run"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SKY_LOG": str(log)}
    args = ["run", "pi07/zero2/2x8xH100", "launch.launcher=skypilot"]
    r = run_cli(*args, "--output-dir", str(run_dir), env=env)
    assert r.returncode == 0, r.stderr
    assert log.read_text().split() == [str(run_dir.resolve()), "launch", "sky.yaml"]
    assert (run_dir / "sky.yaml").is_file() and (run_dir / "launch.sh").is_file()
    bare = run_cli(*args, "--output-dir", str(tmp_path / "run2"), env={"PATH": os.path.dirname(sys.executable)})
    assert bare.returncode == 127 and "sky not found on PATH (hint: pip install" in bare.stderr
    assert not (tmp_path / "run2").exists()  # nothing written when it cannot launch


@pytest.mark.parametrize(
    "task, counts",
    [
        ("num_nodes: 2\nresources:\n  accelerators: H100:8\n", {"nodes": "2", "gpus_per_node": "8"}),
        ("resources:\n  accelerators: H100\n", {"nodes": "1", "gpus_per_node": "1"}),  # SkyPilot's defaults
        ("resources:\n  accelerators: 'vendor:H100:4'\n", {"nodes": "1", "gpus_per_node": "4"}),  # the last colon's
        ("resources:\n  cpus: 4+\n", {"nodes": "1"}),
        ("name: x\n", {"nodes": "1"}),
    ],
)
def test_the_counts_read_back_from_a_task(task, counts):
    """What rule engine-counts compares with the hardware part, read the way SkyPilot reads it."""
    from registry.validate.engines import sky_counts

    assert sky_counts(task) == counts
