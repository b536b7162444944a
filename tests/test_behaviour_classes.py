"""Classes of behaviour no other test pinned (issue 41): an import without an accelerate yaml,
LeRobot's own defaults on import, the quoting of every shell line the registry emits, the
LeRobot optimizer flags per type, and the item a bare `--resume` (or another sort) picks."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

from registry.compose import compose
from registry.resolve import importer, resolve

YAML = "compute_environment: LOCAL_MACHINE\ndistributed_type: NO\nmixed_precision: 'no'\nnum_machines: 1\nnum_processes: 1\n"
ACT = "--policy.type=act --dataset.repo_id=lerobot/aloha_sim_insertion_human --policy.push_to_hub=false"


def _exec_flags(bundle) -> list[str]:
    """The trainer's flags on launch.sh's exec line: what follows `-m <the training module>`."""
    argv = shlex.split(next(line for line in bundle.files["launch.sh"].splitlines() if line.startswith("exec ")))
    return argv[argv.index("-m") + 2 :]


def _yaml(tmp_path):
    (tmp_path / "a.yaml").write_text(YAML)
    return tmp_path / "a.yaml"


def _written(result, tmp_path, name="r.yaml"):
    path = tmp_path / name
    path.write_text(importer.render(result, "t/" + path.stem, path))
    return path


# ---- 1. an import without --accelerate-config


def test_a_lerobot_import_needs_no_accelerate_yaml(tmp_path):
    """Without the yaml the import takes what `accelerate launch` does without a config file (one
    process per GPU it sees, one machine, mixed_precision no), with one note; --launch-args still
    names the count."""
    r = run_cli("import", "--trainer", "lerobot", "--trainer-args", ACT, "-o", "r.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if line.startswith("note: accelerate:")]
    assert len(said) == 1 and "no --accelerate-config" in said[0] and "1 assumed" in said[0], r.stderr
    doc = yaml.safe_load((tmp_path / "r.yaml").read_text())
    assert doc["backend"] == {"kind": "ddp", "mixed_precision": "no"}
    assert (doc["hardware"]["gpus_per_node"], doc["hardware"]["nodes"]) == (1, 1)
    accelerate = yaml.safe_load(resolve(compose(str(tmp_path / "r.yaml"))).files["accelerate.yaml"])
    assert (accelerate["distributed_type"], accelerate["num_processes"]) == ("NO", 1)

    r = run_cli(
        "import", "--trainer", "lerobot", "--trainer-args", ACT, "--launch-args", "--num_processes 2",
        "-o", "two.yaml", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if line.startswith("note: accelerate:")]
    assert len(said) == 1 and "assumed" not in said[0] and "one machine" in said[0]
    accelerate = yaml.safe_load(resolve(compose(str(tmp_path / "two.yaml"))).files["accelerate.yaml"])
    assert (accelerate["distributed_type"], accelerate["num_processes"]) == ("MULTI_GPU", 2)


def test_a_deepspeed_json_without_its_yaml_is_one_line(tmp_path):
    (tmp_path / "ds.json").write_text("{}")
    r = run_cli("import", "--deepspeed-config", "ds.json", "-o", "r.yaml", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--deepspeed-config needs --accelerate-config" in r.stderr and not (tmp_path / "r.yaml").exists()


# ---- 2. LeRobot's own defaults on import


def test_flags_at_lerobots_defaults_are_dropped_or_carried_with_one_note(tmp_path):
    """Spelt-out defaults the recipe gives anyway are not written; those it would not give (the
    recipe's base has num_workers 2, log_every 10) are written; one note lists every one; and the
    imported recipe resolves to the flags LeRobot ran with."""
    spelt = "--wandb.enable=false --batch_size=8 --steps=100000 --seed=1000 --log_freq=200 --save_freq=20000"
    result = importer.read(importer.Setup(_yaml(tmp_path), trainer="lerobot", trainer_args=f"{ACT} {spelt}"))
    train = result.recipe.get("train", {})
    for gone in ("micro_batch_size", "steps", "seed"):
        assert gone not in train, gone
    assert "wandb" not in result.recipe["trainer"]["lerobot"]
    assert (train["log_every"], train["num_workers"], train["checkpoint"]["every"]) == (200, 4, 20000)
    said = [n for n in result.notes if "LeRobot's defaults" in n]
    assert len(said) == 1, result.notes
    dropped, carried = said[0].split("; written, as the recipe alone would give another value: ")
    for flag in ("--batch_size=8", "--steps=100000", "--seed=1000", "--wandb.enable=false"):
        assert flag in dropped and flag not in carried, flag
    assert "--log_freq=200 (given; the recipe alone gives 10)" in carried
    assert "--num_workers=4 (not given; the recipe alone gives 2)" in carried
    flags = _exec_flags(resolve(compose(str(_written(result, tmp_path)))))
    for ran in spelt.split() + ["--num_workers=4"]:
        assert ran in flags, ran


def test_a_flag_off_lerobots_default_is_an_ordinary_override(tmp_path):
    setup = importer.Setup(_yaml(tmp_path), trainer="lerobot", trainer_args=f"{ACT} --steps=500 --num_workers=3")
    result = importer.read(setup)
    assert (result.recipe["train"]["steps"], result.recipe["train"]["num_workers"]) == (500, 3)
    said = " ".join(n for n in result.notes if "LeRobot's defaults" in n)
    assert "--steps" not in said and "--num_workers" not in said


# ---- 4a. every value the registry writes into a shell line arrives as it was, and nothing runs

# spaces, both quotes, $() and backticks, ;, a newline, globs and a variable: each would run
# `touch pwned-N` (or change the value) if it reached the shell unquoted
HOSTILE = [
    "a b  c",
    'it\'s "quoted"',
    "$(touch pwned-1)",
    "`touch pwned-2`",
    "x; touch pwned-3",
    "line\nbreak; touch pwned-4",
    "$HOME * ? [a] \\ ~ ${PATH}",
    "'; touch pwned-5; '",
]
PRINTER = """#!/bin/bash
# the trainer's python, replaced: its argv and environment, NUL-separated, for the test to read
printf '%s\\0' "$@" > "$RECIPE_TEST_OUT/argv"
env -0 > "$RECIPE_TEST_OUT/env"
"""


def _printer_env(tmp_path, name: str) -> Path:
    """A trainer.env folder (named with every hostile character) whose bin/python prints what it got."""
    venv = tmp_path / name
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(PRINTER)
    (venv / "bin" / "python").chmod(0o755)
    return venv


def _launch(doc: dict):
    from registry.resolve import launch
    from registry.trainers import invocation

    return launch.script(doc, invocation(doc, launch.context(doc)))


def _nul(path: Path) -> list[str]:
    return path.read_bytes().decode().split("\0")[:-1]


def _nothing_ran(tmp_path):
    assert not [p.name for p in tmp_path.rglob("pwned-*")], "a value ran as shell code"


def test_launch_sh_exports_every_hostile_value_byte_for_byte(tmp_path):
    """env values, trainer.env's folder (on PATH) and a trainer flag with every hostile character:
    launch.sh, run by bash, hands each to the trainer as it was, and none of it runs."""
    doc = compose("act/ddp/8xA100").data
    venv = _printer_env(tmp_path, "env " + " ".join(HOSTILE).replace("\n", "\\n").replace("/", "|"))
    doc["env"] = {f"HOSTILE_{i}": value for i, value in enumerate(HOSTILE)}
    doc["trainer"]["env"] = str(venv)
    doc["dataset"]["repo_id"] = HOSTILE[4] + HOSTILE[2]
    run = tmp_path / "run"
    run.mkdir()
    (run / "launch.sh").write_text(_launch(doc))
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "RECIPE_TEST_OUT": str(out)}
    r = subprocess.run(["bash", "launch.sh", HOSTILE[3]], cwd=run, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    got = dict(item.split("=", 1) for item in _nul(out / "env"))
    for i, value in enumerate(HOSTILE):
        assert got[f"HOSTILE_{i}"] == value, i
    assert got["PATH"].startswith(str(venv / "bin") + ":")
    argv = _nul(out / "argv")
    assert f"--dataset.repo_id={HOSTILE[4]}{HOSTILE[2]}" in argv and argv[-1] == HOSTILE[3]
    _nothing_ran(tmp_path)


def test_the_dry_run_command_line_quotes_every_value(tmp_path):
    """`recipe run --dry-run`'s line (env, then argv), run by bash: the same values arrive."""
    from registry.resolve import launch
    from registry.trainers import invocation

    doc = compose("act/ddp/8xA100").data
    doc["env"] = {f"HOSTILE_{i}": value for i, value in enumerate(HOSTILE)}
    doc["trainer"]["env"] = str(_printer_env(tmp_path, "venv"))
    line = launch.command_line(doc, invocation(doc, launch.context(doc)))
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": os.environ["PATH"], "RECIPE_TEST_OUT": str(out)}
    r = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    got = dict(item.split("=", 1) for item in _nul(out / "env"))
    assert [got[f"HOSTILE_{i}"] for i in range(len(HOSTILE))] == HOSTILE
    _nothing_ran(tmp_path)


def test_values_that_quoting_cannot_reach_are_refused(tmp_path):
    """The rendezvous host goes inside "${MAIN_PROCESS_IP:-...}" and the recipe's name and Slurm
    lines into comments, where quoting ends at a line break: anything else is refused."""
    from registry.errors import RecipeError
    from registry.resolve import launch

    doc = compose("act/ddp/8xA100", ["hardware.nodes=2", "launch.launcher=slurm"]).data
    for value in ("$(touch pwned-1)", "`touch pwned-2`", "h; touch pwned-3", "a b"):
        doc["launch"]["main_process_ip"] = value
        with pytest.raises(RecipeError, match="main_process_ip"):
            _launch(doc)
    doc["launch"]["main_process_ip"] = "10.0.0.1"
    doc["recipe"]["name"] = "x\ntouch pwned-4"
    with pytest.raises(RecipeError, match="line break"):
        _launch(doc)
    with pytest.raises(RecipeError, match="line break"):
        launch.sbatch(doc)
    doc["recipe"]["name"] = "fine"
    doc["launch"]["slurm"] = {"extra": ["--comment=a\ntouch pwned-5"]}
    with pytest.raises(RecipeError, match=r"launch\.slurm\.extra"):
        launch.sbatch(doc)
    doc["launch"]["main_process_port"] = "29500; touch pwned-6"
    with pytest.raises(RecipeError, match="main_process_port"):
        _launch(doc)


STUBS = {
    # Slurm's and the launch's commands, replaced: each records its argv and environment
    "scontrol": '#!/bin/bash\n[ "$1 $2" = "show hostnames" ] && echo node-a && echo node-b\nexit 0\n',
    "srun": '#!/bin/bash\nprintf \'%s\\0\' "$@" > "$RECIPE_TEST_OUT/srun"\nenv -0 > "$RECIPE_TEST_OUT/srun-env"\n',
}


def _stubs(tmp_path) -> str:
    bin_dir = tmp_path / "stub-bin"
    bin_dir.mkdir()
    for name, text in STUBS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


def test_slurm_sbatch_runs_with_hostile_directives_and_runs_nothing_else(tmp_path):
    """Every #SBATCH value hostile (one line each, as the schema allows): bash reads them as
    comments, srun gets the recipe's counts, and the run folder is found by its launch.sh."""
    from registry.resolve import launch

    doc = compose("act/ddp/8xA100", ["hardware.nodes=2", "launch.launcher=slurm"]).data
    one_line = [v for v in HOSTILE if "\n" not in v]
    doc["launch"]["slurm"] = {
        "cpus_per_task": 6,
        "partition": one_line[0],
        "account": one_line[1],
        "qos": one_line[2],
        "constraint": one_line[3],
        "time": one_line[4],
        "extra": one_line[5:],
    }
    text = launch.sbatch(doc)
    directives = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert len(directives) == 4 + 1 + 5 + len(one_line[5:])  # each value stayed on its own line
    assert f"#SBATCH --partition={shlex.quote(one_line[0])}" in directives
    run = tmp_path / "run"
    run.mkdir()
    (run / "slurm.sbatch").write_text(text)
    (run / "launch.sh").write_text("exit 0\n")
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": _stubs(tmp_path), "RECIPE_TEST_OUT": str(out), "SLURM_JOB_NODELIST": "node-[a-b]"}
    env["MACHINE_RANK"] = "$(touch pwned-9)"  # exported at submission: unset, never evaluated
    r = subprocess.run(["bash", "slurm.sbatch"], cwd=run, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert _nul(out / "srun") == [
        "--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=6", "--kill-on-bad-exit=1", "bash", "./launch.sh",
    ]  # fmt: skip
    got = dict(item.split("=", 1) for item in _nul(out / "srun-env"))
    assert got["MAIN_PROCESS_IP"] == "node-a" and "MACHINE_RANK" not in got
    doc["launch"]["slurm"]["cpus_per_task"] = "6 $(touch pwned-10)"  # srun's line is not a comment
    (run / "slurm.sbatch").write_text(launch.sbatch(doc))
    r = subprocess.run(["bash", "slurm.sbatch"], cwd=run, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "--cpus-per-task=6 $(touch pwned-10)" in _nul(out / "srun"), r.stderr
    assert got["MAIN_PROCESS_PORT"] == str(doc["launch"]["main_process_port"])
    _nothing_ran(tmp_path)


def test_skypilot_run_and_the_kubernetes_command_pass_the_cluster_s_values_through(tmp_path):
    """SkyPilot's run: and the Kubernetes container's command take no recipe text, only counts;
    the cluster's own values (a node list, an address) reach launch.sh unevaluated."""
    from registry.resolve import kubernetes, skypilot

    doc = compose("act/ddp/8xA100", ["hardware.nodes=2"]).data
    run = tmp_path / "run"
    run.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (run / "launch.sh").write_text('env -0 > "$RECIPE_TEST_OUT/env"\n')
    hostile_ip = "$(touch pwned-7) `touch pwned-8`"
    env = {
        "PATH": os.environ["PATH"],
        "RECIPE_TEST_OUT": str(out),
        "SKYPILOT_NUM_GPUS_PER_NODE": "8",
        "SKYPILOT_NODE_RANK": "1",
        "SKYPILOT_NODE_IPS": f"{hostile_ip}\n10.0.0.2",
    }
    script = skypilot.run_script(doc)
    r = subprocess.run(["bash", "-c", script], cwd=run, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    got = dict(item.split("=", 1) for item in _nul(out / "env"))
    assert (got["MACHINE_RANK"], got["MAIN_PROCESS_IP"]) == ("1", hostile_ip)
    assert yaml.safe_load(skypilot.task(doc))["run"] == script  # the task holds that script as it is

    argv = kubernetes.pod_command(2)
    assert argv[:2] == ["bash", "-c"]
    files, run_dir = tmp_path / "files", tmp_path / "k8s-run"
    files.mkdir()
    run_dir.mkdir()
    (files / "launch.sh").write_text('env -0 > "$RECIPE_TEST_OUT/env"\n')
    mounts = {kubernetes.FILES_MOUNT: str(files), kubernetes.RUN_DIR: str(run_dir)}  # in one pass
    body = re.sub("|".join(map(re.escape, mounts)), lambda m: mounts[m.group(0)], argv[2])
    env = {"PATH": os.environ["PATH"], "RECIPE_TEST_OUT": str(out), "RANK": "1", "MASTER_PORT": "29500"}
    env["MASTER_ADDR"] = hostile_ip
    r = subprocess.run(["bash", "-c", body], cwd=run_dir, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    got = dict(item.split("=", 1) for item in _nul(out / "env"))
    assert (got["MACHINE_RANK"], got["MAIN_PROCESS_IP"], got["MAIN_PROCESS_PORT"]) == ("1", hostile_ip, "29500")
    _nothing_ran(tmp_path)


# ---- 4b. LeRobot's optimizer flags, per optimizer type the schema knows


def _optimizer_flags(kind: str, *more: str) -> list[str]:
    from registry.trainers import lerobot

    # sgd keeps the part's betas and eps here (validation refuses them): the flags still leave them out
    doc = compose("act/ddp/8xA100", [f"train.optimizer.type={kind}", *more]).data
    return [f for f in lerobot.flags(doc) if f.split("=")[0].startswith(("--optimizer.", "--use_policy"))]


def test_every_optimizer_type_gets_exactly_the_flags_its_lerobot_config_has():
    """LeRobot 0.6.1's AdamConfig and AdamWConfig take betas and eps, its SGDConfig does not
    (lerobot/optim/optimizers.py): an adam-only flag on sgd is a draccus error at start-up."""
    import json as json_

    from registry.validate.schemas import documents

    schema = documents()["train.schema.json"]["properties"]["optimizer"]["properties"]["type"]
    assert sorted(schema["enum"]) == ["adam", "adamw", "sgd"]  # a new type gets its row here
    common = ["--optimizer.lr=1e-05", "--optimizer.weight_decay=0.0001"]
    moments = ["--optimizer.betas=[0.9,0.999]", "--optimizer.eps=1e-08"]
    preset = ["--use_policy_training_preset=false"]
    for kind, middle in (("adamw", moments), ("adam", moments), ("sgd", [])):
        expected = [*preset, f"--optimizer.type={kind}", *common, *middle, "--optimizer.grad_clip_norm=10.0"]
        assert _optimizer_flags(kind) == expected, kind
    # no clipping is LeRobot's 0, for every type
    for kind in ("adamw", "adam", "sgd"):
        assert _optimizer_flags(kind, "train.optimizer.grad_clip_norm=null")[-1] == "--optimizer.grad_clip_norm=0"
    assert json_.loads(_optimizer_flags("adam", "train.optimizer.betas=[0.8,0.95]")[4].split("=", 1)[1]) == [0.8, 0.95]


def test_every_optimizer_type_imports_back_to_its_own_fields(tmp_path):
    for kind, extra in (("adamw", " --optimizer.betas=[0.9,0.95]"), ("adam", " --optimizer.eps=1e-06"), ("sgd", "")):
        flags = f"{ACT} --use_policy_training_preset=false --optimizer.type={kind} --optimizer.lr=0.001{extra}"
        result = importer.read(importer.Setup(_yaml(tmp_path), trainer="lerobot", trainer_args=flags))
        optimizer = result.recipe["train"]["optimizer"]
        assert (optimizer["type"], optimizer["lr"]) == (kind, 0.001), kind
        if kind == "adamw":
            assert optimizer["betas"] == [0.9, 0.95]
        if kind == "adam":
            assert optimizer["eps"] == 1e-06
        if kind == "sgd":
            assert "betas" not in optimizer and "eps" not in optimizer


# ---- 4c. the run a bare --resume picks


def _run(base: Path, name: str, *, lock: bool = True, mtime: float | None = None, doc=None) -> Path:
    folder = base / name
    folder.mkdir(parents=True)
    if lock:
        (folder / "recipe.lock.yaml").write_text(yaml.safe_dump({"resolved": doc or {}}))
    if mtime is not None:
        os.utime(folder, (mtime, mtime))
    return folder


def test_a_bare_resume_takes_the_newest_stamped_run_whatever_the_listing_or_mtimes(tmp_path, monkeypatch):
    from registry.run import resume

    monkeypatch.chdir(tmp_path)
    recipe = compose("tiny/ddp/cpu")
    base = resume.runs_of(recipe)
    # mtimes the other way round from the stamps: the oldest-looking folder is the newest run
    names = ["20261126-101500-9", "20261126-101500-10", "20261126-101500", "20261126-101500-2", "20261125-235959-99"]
    for i, name in enumerate(names):
        _run(base, name, mtime=1_000_000 + 1000 * (len(names) - i))
    _run(base, "20991231-235959", lock=False)  # no lock: not a run
    _run(base, "zz-copy-of-a-run", mtime=2_000_000)  # named by hand, newest mtime, sorts after digits by name
    assert resume.folder_of(recipe, "") == base / "20261126-101500-10"
    assert [p.name for p in sorted(base.iterdir(), key=resume.run_order)][-2:] == [
        "20261126-101500-10",
        "20991231-235959",
    ]


def test_a_tie_on_the_stamp_and_number_is_broken_by_the_name(tmp_path, monkeypatch):
    """`<stamp>` and `<stamp>-1` both count as the first run of that second: the name decides, not
    the order the folder is listed in (both listing orders forced)."""
    from registry.run import resume

    monkeypatch.chdir(tmp_path)
    recipe = compose("tiny/ddp/cpu")
    base = resume.runs_of(recipe)
    for name in ("20261126-101500", "20261126-101500-1", "20261126-101459-7"):
        _run(base, name)
    listed = Path.glob
    for reverse in (False, True):
        monkeypatch.setattr(
            Path, "glob", lambda self, pattern, r=reverse: iter(sorted(listed(self, pattern), reverse=r))
        )
        assert resume.folder_of(recipe, "").name == "20261126-101500-1", reverse


def test_the_newest_run_without_a_checkpoint_is_named_not_skipped(tmp_path, monkeypatch):
    """A newer run that died before its first checkpoint is the one a bare --resume means: it is
    refused by name, rather than an older run continued in its place."""
    from registry.errors import RecipeError
    from registry.run import resume
    from registry.train import state

    monkeypatch.chdir(tmp_path)
    recipe = compose("tiny/ddp/cpu")
    base = resume.runs_of(recipe)
    older = _run(base, "20261126-101500", doc=recipe.data)
    (older / "checkpoints" / "000010").mkdir(parents=True)
    (older / "checkpoints" / "000010" / state.FILE).write_text("x")
    newest = _run(base, "20261126-101501", doc=recipe.data)
    assert resume.folder_of(recipe, "") == newest
    with pytest.raises(RecipeError, match=r"20261126-101501: no checkpoint to resume from"):
        resume.plan(recipe, newest, "")


# ---- 4d. a choice made by a sort, pinned by the item chosen


def test_the_estimate_s_peak_phase_is_the_one_that_allocates_more():
    """By allocated memory (what torch.cuda.max_memory_allocated counts), not by the total with
    the allocator's overhead and the CUDA context; on a tie the first phase (forward/backward)."""
    from registry.estimate import FORWARD, STEP, Estimate

    forward = {"activations": 10.0, "allocator overhead": 9.0, "CUDA context": 0.5}
    step = {"optimizer temporaries": 11.0, "allocator overhead": 0.0, "CUDA context": 0.5}
    est = Estimate(80.0, {FORWARD: forward, STEP: step}, 1, 1, 0.1, 0.1)
    assert est.phase == STEP and est.breakdown is step
    tie = Estimate(80.0, {FORWARD: forward, STEP: {**step, "optimizer temporaries": 10.0}}, 1, 1, 0.1, 0.1)
    assert tie.phase == FORWARD


def test_a_key_no_row_maps_goes_to_the_deepest_extra_row_that_holds_it():
    """mapping.Reader._place tries the Extra rows deepest first: a key under x.y lands in the
    row for x.y, although the deep row for x could hold it too."""
    from registry.trainers.mapping import Extra, Field, Notes, Reader, Table

    table = Table(Field("a.kept", "x.kept"), Extra("a.outer", "x", mode="deep"), Extra("a.inner", "x.y"))
    recipe: dict = {}
    Reader(recipe, Notes()).read(table, {"x": {"kept": 1, "w": 2, "y": {"z": 3}}}, "f.json")
    assert recipe == {"a": {"kept": 1, "outer": {"w": 2}, "inner": {"z": 3}}}


def test_the_innermost_source_owns_a_file_inside_nested_sources(tmp_path):
    """A file in a source folder that lies inside another source's folder belongs to the inner one
    (registry/validate/team.py), whichever order the sources are listed in."""
    from collections import namedtuple

    from registry.validate import team

    source = namedtuple("source", "root name")  # hashable, as the cached lookup needs

    outer, inner = tmp_path / "outer", tmp_path / "outer" / "inner"
    (inner / "x").mkdir(parents=True)
    known = (source(outer, "outer"), source(inner, "inner"))
    for listed in (known, known[::-1]):
        assert team._source_of("inner/x/r.yaml", str(outer), listed) == "inner"
    assert team._source_of("y.yaml", str(outer), known) == "outer"
