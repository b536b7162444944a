"""Slurm (docs/failure-modes.md §42): slurm.sbatch's directives, parsed back, equal the hardware part
and launch.slurm; slurm.sbatch and launch.sh pass `bash -n`; and run under stub `srun` and
`scontrol`, the sbatch starts exactly one launcher per node, ranks 0..N-1, rendezvous at the
allocation's first host. Cells are sampled: one per policy x backend, at 1, 2 and 4 nodes."""

import os
import shlex
import stat
import subprocess
import sys

import pytest
from conftest import bundled_matrix, run_cli
from stubs import write_launchers

from registry.compose import compose
from registry.errors import RecipeError
from registry.resolve import resolve
from registry.validate import validate

MULTI_NODE = {2: "2x8xH100", 4: "4x8xH100"}
SLURM = {
    "partition": "gpu",
    "account": "robots",
    "qos": "high",
    "time": "2-00:00:00",
    "cpus_per_task": 96,
    "mem": "500G",
    "constraint": "h100&ib",
}
EXTRA = ["--exclusive", "--signal=USR1@90"]
OPTION = {"cpus_per_task": "--cpus-per-task"}  # the other keys are their option's name


@pytest.fixture(autouse=True)
def no_git_in_the_lock(monkeypatch):
    """recipe.lock.yaml's source commits take a git call per input (3/4 of a resolve) and are
    test_resolve's to check, not these tests'."""
    monkeypatch.setattr(sys.modules["registry.resolve.lock"], "source_commits", lambda paths: {})


def sampled_cells() -> list[str]:
    """One valid one-node GPU cell of each policy x backend (every backend, every trainer), its
    hardware taken in turn from those valid for the pair: 1 to 8 GPUs per node."""
    options: dict[tuple[str, str], list[str]] = {}
    for name, cell in sorted(bundled_matrix().items()):
        hardware = cell.recipe.data["hardware"] if cell.report.exit_code == 0 else {}
        if hardware.get("gpu") and hardware["nodes"] == 1:
            options.setdefault(tuple(name.split("/")[:2]), []).append(name)
    return [names[i % len(names)] for i, names in enumerate(options.values())]


CELLS = sampled_cells()


def slurm_overrides(index: int) -> list[str]:
    """Every other cell sets every launch.slurm field, the rest none (nothing is written then)."""
    if index % 2:
        return ["launch.launcher=slurm"]
    fields = ", ".join(f"{k}: {v!r}" if isinstance(v, str) else f"{k}: {v}" for k, v in SLURM.items())
    return ["launch.launcher=slurm", f"launch.slurm={{{fields}, extra: {EXTRA!r}}}"]


def composed(cell: str, count: int, index: int):
    overrides = slurm_overrides(index) + ([f"hardware={MULTI_NODE[count]}"] if count > 1 else [])
    recipe = compose(cell, overrides)
    errors = [p.render() for p in validate(recipe.data, recipe.origins) if p.is_error]
    return recipe, errors


def directives(sbatch: str) -> dict[str, list[str]]:
    """#SBATCH options as sbatch reads them: option -> values, in order."""
    found: dict[str, list[str]] = {}
    for line in sbatch.splitlines():
        if line.startswith("#SBATCH "):
            for arg in shlex.split(line[len("#SBATCH ") :]):
                key, _, value = arg.partition("=")
                found.setdefault(key, []).append(value)
    return found


def directive_problems(sbatch: str, doc: dict) -> list[str]:
    """Where the sbatch disagrees with the recipe it came from."""
    hardware, slurm = doc["hardware"], doc["launch"].get("slurm") or {}
    want = {"--nodes": [str(hardware["nodes"])], "--ntasks-per-node": ["1"]}
    if hardware["gpus_per_node"]:
        want["--gpus-per-node"] = [str(hardware["gpus_per_node"])]
    for key, value in slurm.items():
        if key != "extra" and value is not None:
            want[OPTION.get(key, f"--{key}")] = [str(value)]
    for line in slurm.get("extra") or ():
        key, _, value = line.partition("=")
        want.setdefault(key, []).append(value)
    got = {k: v for k, v in directives(sbatch).items() if k != "--job-name"}
    problems = [f"{k}: sbatch {got.get(k)} != recipe {v}" for k, v in want.items() if got.get(k) != v]
    problems += [f"{k}: {v} not asked for" for k, v in got.items() if k not in want]
    srun = [line for line in sbatch.splitlines() if line.startswith("srun ")]
    expected = f"srun --nodes={hardware['nodes']} --ntasks-per-node=1"
    if len(srun) != 1 or not srun[0].startswith(expected):
        problems.append(f"srun line {srun} does not start with {expected!r}")
    return problems


def bash_n(path) -> str:
    out = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    return out.stderr if out.returncode else ""


# --- stub executables ------------------------------------------------------------------------
SRUN = r"""#!/usr/bin/env bash
# srun in an allocation: the command once per task, SLURM_NODEID 0..N-1; counts default to the job's
nodes="${SLURM_JOB_NUM_NODES:-1}"; per_node="${SLURM_NTASKS_PER_NODE:-1}"
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes=*) nodes="${1#*=}";;
    --ntasks-per-node=*) per_node="${1#*=}";;
    -*) ;;
    *) break;;
  esac
  shift
done
pids=()
for ((node = 0; node < nodes; node++)); do
  for ((task = 0; task < per_node; task++)); do
    SLURM_NODEID=$node SLURM_LOCALID=$task SLURM_PROCID=$((node * per_node + task)) "$@" &
    pids+=($!)
  done
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit "$status"
"""
SCONTROL = r"""#!/usr/bin/env bash
# scontrol: the job's hosts (a comma list here), and the job's submitted script
case "$1 $2" in
  "show hostnames") tr ',' '\n' <<< "${3:-$SLURM_JOB_NODELIST}";;
  "show job") echo "   Command=$STUB_SUBMITTED";;
  *) exit 1;;
esac
"""


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    folder = write_launchers(tmp_path_factory.mktemp("stubs"))
    for name, text in [("srun", SRUN), ("scontrol", SCONTROL)]:
        (folder / name).write_text(text)
        (folder / name).chmod(0o755 | stat.S_IXUSR)
    return folder


def submit(tmp_path, stubs, files: dict[str, str], count: int) -> list[list[str]]:
    """Runs slurm.sbatch as sbatch would: a spooled copy, started in the folder it was submitted
    from, with the job's variables (read from its directives); returns one record per launcher."""
    run, spool, records = tmp_path / "run", tmp_path / "spool", tmp_path / "records"
    for folder in (run, spool, records):
        folder.mkdir()
    for name, text in files.items():
        (run / name).write_text(text)
    (spool / "slurm_script").write_text(files["slurm.sbatch"])
    found = directives(files["slurm.sbatch"])
    env = {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RECORD_DIR": str(records),
        "STUB_SUBMITTED": str(run / "slurm.sbatch"),
        "SLURM_JOB_ID": "42",
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "SLURM_JOB_NUM_NODES": found["--nodes"][-1],
        "SLURM_NTASKS_PER_NODE": found["--ntasks-per-node"][-1],
        "SLURM_JOB_NODELIST": ",".join(f"gpu-{i:03d}" for i in range(count)),
        # left over in the submitting shell: must reach no node
        "MACHINE_RANK": "0",
        "MAIN_PROCESS_IP": "stale.example",
    }
    out = subprocess.run(
        ["bash", "spool/slurm_script"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    return sorted(p.read_text().split()[:4] for p in records.iterdir())  # NAME NODE RANK HOST


def launch_problems(records: list[list[str]], count: int, program: str) -> list[str]:
    """One launcher per node, node i given rank i, all meeting at the first host."""
    problems = []
    nodes = sorted(int(r[1]) for r in records)
    if nodes != list(range(count)):
        problems.append(f"launchers started on nodes {nodes}, not once on each of {count}")
    for name, node, rank, ip in records:
        if name != program:
            problems.append(f"{name} started, not {program}")
        if count > 1 and (rank, ip) != (node, "gpu-000"):
            problems.append(f"node {node}: rank {rank} at {ip}, not rank {node} at gpu-000")
        if count == 1 and rank not in ("0", "-"):
            problems.append(f"one node given rank {rank}")
    return problems


# --- tests -----------------------------------------------------------------------------------
def test_sample_covers_every_backend_and_trainer():
    matrix = bundled_matrix()
    backends = {name.split("/")[1] for name in CELLS}
    assert backends == {name.split("/")[1] for name in matrix}
    assert {matrix[c].recipe.data["trainer"]["kind"] for c in CELLS} >= {"builtin", "lerobot", "opentau"}


@pytest.mark.parametrize("count", [1, 2, 4])
def test_directives_equal_the_hardware_part_and_scripts_parse(tmp_path, count):
    backends = set()
    for index, cell in enumerate(CELLS):
        recipe, errors = composed(cell, count, index)
        if errors:  # a swap the rules refuse is no cell to launch (it must stay rare)
            continue
        backends.add(cell.split("/")[1])
        doc = recipe.data
        assert doc["hardware"]["nodes"] == count
        files = resolve(recipe).files
        assert directive_problems(files["slurm.sbatch"], doc) == [], cell
        for name in ("slurm.sbatch", "launch.sh"):
            (tmp_path / name).write_text(files[name])
            assert bash_n(tmp_path / name) == "", (cell, name)
    assert backends == {c.split("/")[1] for c in CELLS}


def test_every_valid_cell_reads_back_its_own_counts():
    """Every valid bundled one-node GPU cell at 1, 2 and 4 nodes: its sbatch's directives, parsed
    back, are the hardware part's (the bash -n check above runs on the sample)."""
    from registry.resolve import launch
    from registry.validate import engines

    matrix = bundled_matrix()
    cells = [
        name
        for name, cell in matrix.items()
        if cell.report.exit_code == 0
        and cell.recipe.data["hardware"].get("gpu")
        and cell.recipe.data["hardware"]["nodes"] == 1
    ]
    assert len(cells) > 100
    for cell in cells:
        for count in (1, 2, 4):
            doc = compose(
                cell, ["launch.launcher=slurm"] + ([f"hardware={MULTI_NODE[count]}"] if count > 1 else [])
            ).data
            assert directive_problems(launch.sbatch(doc), doc) == [], (cell, count)
            assert engines.disagreements(doc) == [], (cell, count)


def test_a_wrong_directive_fails_the_check():
    recipe, errors = composed("pi07/zero2/8xH100", 2, 0)
    assert not errors
    sbatch = resolve(recipe).files["slurm.sbatch"]
    assert directive_problems(sbatch, recipe.data) == []
    broken = sbatch.replace("--gpus-per-node=8", "--gpus-per-node=4")
    assert directive_problems(broken, recipe.data) == ["--gpus-per-node: sbatch ['4'] != recipe ['8']"]
    two = sbatch.replace("srun --nodes=2 --ntasks-per-node=1", "srun --nodes=2 --ntasks-per-node=8")
    assert directive_problems(two, recipe.data)
    assert directive_problems(sbatch, {**recipe.data, "hardware": {**recipe.data["hardware"], "nodes": 4}})


def stub_sample() -> list[tuple[str, int]]:
    """Each backend and each trainer once per node count, from a different policy at each."""
    matrix, picked = bundled_matrix(), []
    for k, count in enumerate((1, 2, 4)):
        start = len(CELLS) * k // 3
        backends, trainers = set(), set()
        for cell in CELLS[start:] + CELLS[:start]:
            backend, trainer = cell.split("/")[1], matrix[cell].recipe.data["trainer"]["kind"]
            if backend not in backends or trainer not in trainers:
                backends.add(backend)
                trainers.add(trainer)
                picked.append((cell, count))
    return picked


@pytest.mark.parametrize("cell,count", stub_sample())
def test_sbatch_starts_one_launcher_per_node(tmp_path, stubs, cell, count):
    recipe, errors = composed(cell, count, CELLS.index(cell))
    if errors:
        pytest.skip(f"{cell} on {count} nodes is refused: {errors[0]}")
    bundle = resolve(recipe)
    records = submit(tmp_path, stubs, bundle.files, count)
    assert launch_problems(records, count, os.path.basename(bundle.program)) == []


def test_two_tasks_per_node_fail_the_check(tmp_path, stubs):
    """The published failure: srun starting the launcher once per GPU (here twice per node)."""
    recipe, _ = composed("act/ddp/8xH100", 2, 1)
    bundle = resolve(recipe)
    files = dict(bundle.files)
    files["slurm.sbatch"] = files["slurm.sbatch"].replace("--ntasks-per-node=1", "--ntasks-per-node=2")
    problems = launch_problems(submit(tmp_path, stubs, files, 2), 2, "accelerate")
    # two launchers of one node write one record, so what follows the first problem may vary
    assert problems[0] == "launchers started on nodes [0, 0, 1, 1], not once on each of 2"


def test_sbatch_outside_an_allocation_says_so(tmp_path, stubs):
    recipe, _ = composed("act/ddp/8xH100", 2, 1)
    (tmp_path / "run").mkdir()
    for name, text in resolve(recipe).files.items():
        (tmp_path / "run" / name).write_text(text)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(tmp_path), "SLURM_JOB_NODELIST": ""}
    out = subprocess.run(["bash", "run/slurm.sbatch"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "slurm.sbatch: no host in SLURM_JOB_NODELIST (submit it with sbatch)"
    ]


@pytest.mark.parametrize(
    "override,rule",
    [
        ("launch.slurm.extra=['--ntasks-per-node=8']", "slurm-one-task-per-node"),
        ("launch.slurm.extra=['--exclusive', '-n 16']", "slurm-one-task-per-node"),
        ("launch.slurm.ntasks_per_node=8", "slurm-one-task-per-node"),
        ('launch.slurm.partition="gpu\\n#SBATCH --nodes=9"', "pattern"),
        ('launch.slurm.time="1:00\\n"', "pattern"),
        ('launch.slurm.constraint="h100\\n"', "pattern"),
        ('launch.slurm.extra=["--exclusive\\n--nodes=9"]', "pattern"),
        ("launch.slurm.mem=500GB", "pattern"),
        ("launch.slurm.cpus_per_task=0", "range"),
    ],
)
def test_bad_slurm_fields_are_one_clear_line(override, rule):
    recipe = compose("pi07/zero2/2x8xH100", ["launch.launcher=slurm", override])
    errors = [p.render() for p in validate(recipe.data, recipe.origins) if p.is_error]
    assert len(errors) == 1 and f"error[{rule}]" in errors[0] and "\n" not in errors[0], errors


def test_readme_example(tmp_path):
    """docs/clusters.md's Slurm example resolves (the CLI, as a user types it)."""
    r = run_cli("resolve", "pi07/zero2/2x8xH100", "launch.launcher=slurm", "-o", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    sbatch = (tmp_path / "run" / "slurm.sbatch").read_text()
    assert directive_problems(sbatch, compose("pi07/zero2/2x8xH100").data) == []


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--nodes=3"], "asks for 3 nodes and the hardware part has 2"),
        (["-N 4"], "asks for 4 nodes"),
        (["--gpus-per-node=4"], "asks for 4 GPUs per node and the hardware part has 8"),
        (["--gres=gpu:h100:4"], "asks for 4 GPUs per node"),
        (["-G 8"], "asks for 8 GPUs in all and the hardware part has 16"),
        (["--gpus-per-task=4"], "asks for 4 GPUs per task (one task per node) and the hardware part has 8"),
        (["--gpus-per-task 4"], "asks for 4 GPUs per task"),
        (["--gpus-per-task=h100:16"], "asks for 16 GPUs per task"),
        (["--exclusive --nodes=3"], "asks for 3 nodes"),  # several options on one line, a flag first
        (["--exclusive -N 3 --requeue"], "asks for 3 nodes"),
    ],
)
def test_counts_set_again_in_extra_lines_are_refused(extra, said):
    """The engine file read back (registry/validate/engines.py) must ask for the hardware part's
    nodes and GPUs, which launch.sh and the accelerate yaml start ranks for (docs/failure-modes.md §44)."""
    recipe = compose("pi07/zero2/2x8xH100", ["launch.launcher=slurm", f"launch.slurm.extra={extra!r}"])
    errors = [p for p in validate(recipe.data, recipe.origins) if p.is_error]
    assert [p.rule for p in errors] == ["engine-counts"] and said in errors[0].message, errors
    assert errors[0].path == "launch.slurm"


def test_gpus_per_task_that_matches_the_hardware_part_passes():
    """One task per node: --gpus-per-task is the node's GPU count, and the hardware part's passes."""
    recipe = compose("pi07/zero2/2x8xH100", ["launch.launcher=slurm", "launch.slurm.extra=['--gpus-per-task 8']"])
    assert [p.render() for p in validate(recipe.data, recipe.origins) if p.is_error] == []


def test_engine_files_read_back_agree_for_every_sampled_cell():
    from registry.validate import engines

    checked = 0
    for cell in CELLS:
        for count in (1, 2, 4):
            for engine in ("slurm", "skypilot", "kubernetes"):
                sets = [f"launch.launcher={engine}"] + (
                    ["launch.image=ghcr.io/t/x:1"] if engine == "kubernetes" else []
                )
                doc = compose(cell, sets + ([f"hardware={MULTI_NODE[count]}"] if count > 1 else [])).data
                assert engines.disagreements(doc) == [], (cell, count, engine)
                try:
                    counts = engines.engine_file(doc)[2]
                except RecipeError:  # a GPU SkyPilot has no name for: the resolve says so
                    continue
                hardware = doc["hardware"]
                assert counts["nodes"] == str(count), (cell, count, engine, counts)
                assert counts["gpus_per_node"] == str(hardware["gpus_per_node"]), (cell, count, engine, counts)
                checked += 1
    assert checked >= 3 * len(CELLS) * 2


def test_recipe_run_submits_with_sbatch_from_the_run_folder(tmp_path):
    """`recipe run` with launcher slurm writes the run folder and sbatches slurm.sbatch from there
    (Slurm's output lands in the folder); no sbatch is one line, exit 127, nothing written."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        '#!/usr/bin/env bash\necho "$PWD $*" > "$SBATCH_LOG"\necho "Submitted batch job 7"\n'
    )
    (bin_dir / "sbatch").chmod(0o755)
    log, run_dir = tmp_path / "sbatch.log", tmp_path / "run"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SBATCH_LOG": str(log)}
    args = ["run", "pi07/zero2/2x8xH100", "launch.launcher=slurm"]
    r = run_cli(*args, "--output-dir", str(run_dir), env=env)
    assert r.returncode == 0 and "Submitted batch job 7" in r.stdout, r.stderr
    assert log.read_text().split() == [str(run_dir.resolve()), "slurm.sbatch"]
    assert (run_dir / "launch.sh").is_file() and (run_dir / "slurm.sbatch").is_file()
    bare = run_cli(*args, "--output-dir", str(tmp_path / "run2"), env={"PATH": os.path.dirname(sys.executable)})
    assert bare.returncode == 127 and "sbatch not found on PATH" in bare.stderr
    assert not (tmp_path / "run2").exists()


def test_recipe_run_of_a_multi_node_recipe_without_an_engine_is_refused(tmp_path):
    """Without an engine `recipe run` starts this host only, and the rendezvous would wait for the
    others: one line, exit 1, nothing written (docs/failure-modes.md §44). A rank and the first
    node's address in the environment mean the user starts every node."""
    r = run_cli("run", "pi07/zero2/2x8xH100", "--allow-hardware-mismatch", "--output-dir", str(tmp_path / "run"))
    assert r.returncode == 1 and "2 nodes, and with launch.launcher auto" in r.stderr, r.stderr
    assert "launch.launcher=slurm, skypilot or kubernetes" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()
    for env in ({"MACHINE_RANK": "1"}, {"SLURM_NODEID": "1"}):  # a rank, but the rendezvous is still this host
        r = run_cli("run", "pi07/zero2/2x8xH100", "--output-dir", str(tmp_path / "run"), env=env)
        assert r.returncode == 1 and "2 nodes, and with launch.launcher auto" in r.stderr, r.stderr
    manual = run_cli(
        "run",
        "pi07/zero2/2x8xH100",
        "--output-dir",
        str(tmp_path / "run"),
        env={"MACHINE_RANK": "1", "MAIN_PROCESS_IP": "10.0.0.1"},
    )
    # past the multi-node check: this host's hardware is what stops it now
    assert "2 nodes, and with" not in manual.stderr and "host" in manual.stderr, manual.stderr


def test_a_broken_engine_file_reads_back_broken():
    """The read-back can fail: a sky.yaml or PyTorchJob edited to other counts shows them."""
    from registry.resolve import kubernetes, skypilot
    from registry.validate import engines

    doc = compose("pi07/zero2/2x8xH100").data
    sky = skypilot.task(doc)
    assert engines.sky_counts(sky) == {"nodes": "2", "gpus_per_node": "8"}
    broken = engines.sky_counts(sky.replace("num_nodes: 2", "num_nodes: 3").replace("H100:8", "H100:4"))
    assert broken == {"nodes": "3", "gpus_per_node": "4"}
    job = kubernetes.manifest(doc, "ghcr.io/t/x:1")
    assert engines.kubernetes_counts(job) == {"nodes": "2", "gpus_per_node": "8", "processes_per_node": "8"}
    assert engines.kubernetes_counts(job.replace("replicas: 1\n", "replicas: 2\n"))["nodes"] == "4"


SCRIPT = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH -N3
# a comment between directives
#SBATCH --gres gpu:h100:8
#SBATCH --exclusive
#SBATCH --job-name="a
#SBATCH -G 16 --gpus-per-task=2
#SBATCH --gpus-per-node=h100:4
srun true
#SBATCH --nodes=9
"""


def test_sbatch_directives_are_read_as_sbatch_reads_them():
    """Long and short forms, `=` or a space, flags, a line shlex cannot split (skipped), and
    nothing after the first command line; the last spelling of each count wins."""
    from registry.validate import engines

    assert engines.sbatch_options(SCRIPT) == [  # by the canonical long name (tests/test_rough_edges.py)
        ("--nodes", "2"),
        ("--nodes", "3"),
        ("--gres", "gpu:h100:8"),
        ("--exclusive", ""),
        ("--gpus", "16"),
        ("--gpus-per-task", "2"),
        ("--gpus-per-node", "h100:4"),
    ]
    assert engines.slurm_counts(SCRIPT) == {"nodes": "3", "gpus_per_node": "4", "gpus": "16", "gpus_per_task": "2"}


@pytest.mark.parametrize(
    "gres, gpus",
    [("gpu:8", "8"), ("gpu:h100:8", "8"), ("gpu", "1"), ("gpu:h100", "1"), ("mps:100,gpu:4", "4"), ("mps:100", None)],
)
def test_a_gres_list_gives_its_gpu_count(gres, gpus):
    from registry.validate import engines

    assert engines._gres_gpus(gres) == gpus


@pytest.mark.parametrize(("cpus", "srun"), [(None, ""), (8, " --cpus-per-task=8")])
def test_srun_is_given_the_tasks_cpus_again(cpus, srun):
    """Slurm 22.05 and later no longer pass the job's --cpus-per-task on to srun: the step asks
    again, or its one task per node gets one CPU."""
    from registry.compose import compose
    from registry.resolve import launch

    overrides = ["launch.launcher=slurm"] + ([f"launch.slurm.cpus_per_task={cpus}"] if cpus else [])
    lines = launch.sbatch(compose("ref-1b/zero2/2x8xH100", overrides).data).splitlines()
    assert [line for line in lines if line.startswith("srun ")] == [
        f"srun --nodes=2 --ntasks-per-node=1{srun} --kill-on-bad-exit=1 bash ./launch.sh"
    ]
    assert ("#SBATCH --cpus-per-task=8" in lines) is bool(cpus)
