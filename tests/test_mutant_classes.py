"""Classes of behaviour a mutation round found unpinned, each pinned as a class rather than one line:
resolved files of imported recipes write no empty name (registry/resolve/fsdp.py), the DeepSpeed
table's `absent` defaults are DeepSpeed's own (registry/resolve/deepspeed.py, judged by DeepSpeed's
code), every shell line the registry prints or writes survives hostile values (kubernetes.py,
launch.py, environment.py), a failing submission step stops the ones after it (run/submit.py), and
the host's unit conversions are exact (run/preflight/host.py, hostchecks.py, run/machine.py)."""

from __future__ import annotations

import copy
import json
import os
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

from registry.compose import compose
from registry.doc import MISSING
from registry.errors import RecipeError
from registry.resolve import deepspeed as deepspeed_table
from registry.resolve import importer, kubernetes, launch, resolve
from registry.trainers import invocation
from registry.trainers.mapping import Field, Section

GPU = "H100-SXM"
# spaces, a command separator, a command substitution, both quotes and a line break
HOSTILE = "a b; $(touch pwned) `touch pwned` 'q' \"d\"\nz"


def imported_files(tmp_path: Path, accelerate_yaml: str, ds: dict | None = None) -> dict[str, str]:
    """`recipe import` of a team's files, then resolve: the files the launchers would be given."""
    (tmp_path / "a.yaml").write_text(accelerate_yaml)
    setup = importer.Setup(accelerate=tmp_path / "a.yaml", gpu=GPU)
    if ds is not None:
        setup.deepspeed = tmp_path / "ds.json"
        setup.deepspeed.write_text(json.dumps(ds))
    result = importer.read(setup)
    path = tmp_path / "recipe.yaml"
    path.write_text(importer.render(result, "imported", path))
    return resolve(compose(str(path))).files


# --- 1. no empty or null value where the library reads a name ------------------------------------
FSDP = "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
IMPORTS = {
    "fsdp2-transformer-wrap-no-classes": FSDP + "  fsdp_version: 2\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n",
    "fsdp1-transformer-wrap-no-classes": FSDP + "  fsdp_version: 1\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n",
    "fsdp2-empty-class-list": FSDP + "  fsdp_version: 2\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
    "  fsdp_transformer_layer_cls_to_wrap: ''\n",
    "fsdp-size-wrap": FSDP + "  fsdp_auto_wrap_policy: SIZE_BASED_WRAP\n",
    "fsdp-empty-section": FSDP.rstrip(":\n") + ": {}\n",
    "deepspeed-yaml-only": "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n"
    "  offload_optimizer_device: cpu\n",
    "ddp": "distributed_type: MULTI_GPU\nnum_processes: 2\n",
}


def empty_values(node, path=""):
    if isinstance(node, dict):
        for key, item in node.items():
            yield from empty_values(item, f"{path}.{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from empty_values(item, f"{path}[{i}]")
    elif node is None or (isinstance(node, str) and not node.strip()):
        yield path, node


@pytest.mark.parametrize("case", sorted(IMPORTS))
def test_resolved_files_of_an_imported_recipe_hold_no_empty_or_null_value(tmp_path, case):
    """accelerate reads fsdp_transformer_layer_cls_to_wrap '' as a class named '' (and fails to find
    it) where no key wraps the model's own _no_split_modules; an empty value anywhere in the files is
    a name or number the team never gave."""
    files = imported_files(tmp_path, IMPORTS[case])
    accelerate = yaml.safe_load(files["accelerate.yaml"])
    assert not list(empty_values(accelerate)), files["accelerate.yaml"]
    if "fsdp_config" in accelerate and accelerate["fsdp_config"]["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP":
        assert "fsdp_transformer_layer_cls_to_wrap" not in accelerate["fsdp_config"]
    if "deepspeed.json" in files:
        assert not list(empty_values(json.loads(files["deepspeed.json"]))), files["deepspeed.json"]


def test_named_layer_classes_are_written_joined_as_accelerate_splits_them(tmp_path):
    text = IMPORTS["fsdp2-transformer-wrap-no-classes"] + "  fsdp_transformer_layer_cls_to_wrap: 'A, B'\n"
    fsdp = yaml.safe_load(imported_files(tmp_path, text)["accelerate.yaml"])["fsdp_config"]
    assert fsdp["fsdp_transformer_layer_cls_to_wrap"] == "A,B"


# --- 2. `absent` is what DeepSpeed itself reads for a missing key -----------------------------------
def absent_rows(table, prefix=""):
    for row in table.rows:
        if isinstance(row, Section):
            yield from absent_rows(row.table, f"{prefix}{row.foreign}.")
        elif isinstance(row, Field) and row.absent is not MISSING:
            yield f"{prefix}{row.foreign}", row


ABSENT = dict(absent_rows(deepspeed_table.TABLE))
# a recipe's null for these is DeepSpeed's "off" value
NULL_MEANS = {"gradient_clipping": 0.0}
# DeepSpeed 0.19 pins offloaded memory and clips at 1.0 by default (older releases did neither);
# the table still says False and null (no clip): what an import of a JSON without the key gets
# differs from what DeepSpeed ran. Strict: fixing the table (or another DeepSpeed) makes these pass.
STALE = {
    "gradient_clipping": "DeepSpeed >= 0.19 clips at GRADIENT_CLIPPING_DEFAULT = 1.0",
}
# a JSON holding the mappings every absent row lives in, and none of their keys
BARE = {
    "train_micro_batch_size_per_gpu": 1,
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}},
}


def deepspeed_reads(config: dict, world: int = 2):
    """DeepSpeed's own DeepSpeedConfig parse of a JSON (no process group: a parse, not a run)."""
    import deepspeed.comm
    from deepspeed.runtime.config import DeepSpeedConfig

    mpu = types.SimpleNamespace(get_data_parallel_world_size=lambda: world)
    original = deepspeed.comm.get_rank
    deepspeed.comm.get_rank = lambda *a, **k: 0
    try:
        return DeepSpeedConfig(copy.deepcopy(config), mpu=mpu)
    finally:
        deepspeed.comm.get_rank = original


def read_at(parsed, path: str):
    """The value DeepSpeed holds for a JSON path: top-level keys on the config, zero_optimization.*
    through DeepSpeedZeroConfig and its offload models (a key may be a field's alias)."""
    first, *rest = path.split(".")
    if first != "zero_optimization":
        return getattr(parsed, first)
    node = parsed.zero_config
    for key in rest:
        name = next(n for n, f in type(node).model_fields.items() if key in (n, f.alias))
        node = getattr(node, name)
    return node


def test_the_absent_rows_are_the_ones_this_file_knows():
    assert set(STALE) <= set(ABSENT) and len(ABSENT) >= 5, sorted(ABSENT)


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=STALE[p])) if p in STALE else p for p in ABSENT],
)
def test_every_absent_default_is_what_deepspeed_reads_for_a_missing_key(path):
    for part in path.split(".")[:-1]:
        assert part in (BARE if part == "zero_optimization" else BARE["zero_optimization"]), path
    row = ABSENT[path]
    ours = row.absent({"backend": {"kind": "deepspeed", "zero_stage": 3}}) if callable(row.absent) else row.absent
    ours = NULL_MEANS.get(path, ours) if ours is None else ours
    assert ours == read_at(deepspeed_reads(BARE), path)


ACCELERATE_DS = "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n"


def offload_pinning(tmp_path: Path, offload: dict) -> tuple[bool, bool]:
    """(DeepSpeed's pin_memory for the team's JSON, for the resolved deepspeed.json of its import)."""
    team = {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2, "offload_optimizer": offload}}
    resolved = json.loads(imported_files(tmp_path, ACCELERATE_DS, team)["deepspeed.json"])
    assert resolved["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    return tuple(
        read_at(deepspeed_reads(c), "zero_optimization.offload_optimizer.pin_memory") for c in (team, resolved)
    )


@pytest.mark.parametrize("pin", [True, False])
def test_a_stated_pin_memory_survives_import_and_resolve_as_deepspeed_reads_it(tmp_path, pin):
    assert offload_pinning(tmp_path, {"device": "cpu", "pin_memory": pin}) == (pin, pin)


def test_an_offload_without_pin_memory_resolves_to_what_deepspeed_ran(tmp_path):
    team, resolved = offload_pinning(tmp_path, {"device": "cpu"})
    assert resolved == team


# --- 3. shell lines survive hostile values ---------------------------------------------------------
def hostile_command_doc(tmp_path: Path) -> dict:
    doc = copy.deepcopy(compose("tiny/ddp/cpu").data)
    program = tmp_path / f"bin {HOSTILE}" / "trainer"
    doc["trainer"] = {
        "kind": "command",
        "command": {"program": str(program), "args": [HOSTILE, "--steps={train.steps}"]},
    }
    doc["env"] = {"HOSTILE": HOSTILE}
    return doc


def test_the_kubectl_lines_are_the_argv_they_stand_for_whatever_the_run_folder(tmp_path):
    doc, run_dir = hostile_command_doc(tmp_path), str(tmp_path / HOSTILE)
    words = shlex.split(kubernetes.submit_lines(doc, run_dir))
    assert words == [
        *kubernetes.configmap_argv(doc, run_dir),
        *["|", "kubectl", "apply", "-f", "-"],
        *kubernetes.apply_argv(f"{run_dir}/{kubernetes.MANIFEST}"),
    ]
    assert f"--from-file={run_dir}" in words


def test_the_launch_command_line_is_the_argv_and_environment_it_stands_for(tmp_path):
    doc = hostile_command_doc(tmp_path)
    inv = invocation(doc, launch.context(doc))
    assert shlex.split(launch.command_line(doc, inv)) == [f"HOSTILE={HOSTILE}", *inv.argv]
    assert inv.argv[-3:] == [str(tmp_path / f"bin {HOSTILE}" / "trainer"), HOSTILE, "--steps=200"]


ARGV_PRINTER = '#!/usr/bin/env bash\n{ printf \'%s\\0\' "$@"; printf \'%s\' "$HOSTILE"; } > "$ARGV_LOG"\n'


def test_launch_sh_run_by_bash_hands_the_trainer_exactly_its_argv_and_environment(tmp_path):
    """launch.sh in a hostile folder, naming a hostile program and arguments, with a stand-in
    accelerate on PATH: bash gives accelerate exactly the argv the bundle says, runs no substitution."""
    doc = hostile_command_doc(tmp_path)
    inv = invocation(doc, launch.context(doc))
    program = Path(inv.argv[-3])
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    tools, run_dir = tmp_path / "tools", tmp_path / f"run {HOSTILE}"
    tools.mkdir()
    run_dir.mkdir()
    (tools / "accelerate").write_text(ARGV_PRINTER)
    (tools / "accelerate").chmod(0o755)
    (run_dir / launch.SCRIPT).write_text(launch.script(doc, inv))
    env = {"PATH": f"{tools}:/usr/bin:/bin", "ARGV_LOG": str(tmp_path / "argv"), "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(run_dir / launch.SCRIPT), HOSTILE], env=env, cwd=tmp_path, capture_output=True)
    assert done.returncode == 0, done.stderr
    *argv, environ = (tmp_path / "argv").read_bytes().decode().split("\0")
    assert argv == [*inv.argv[1:], HOSTILE] and environ == HOSTILE
    assert not list(tmp_path.rglob("pwned"))


def test_sbatch_lines_quote_hostile_values_and_refuse_a_line_break():
    doc = copy.deepcopy(compose("tiny/ddp/2x1").data)
    one_line = HOSTILE.replace("\n", " ")
    doc["recipe"]["name"] = one_line
    doc.setdefault("launch", {})["slurm"] = {"partition": one_line, "account": one_line, "cpus_per_task": 4}
    directives = [shlex.split(line) for line in launch.sbatch(doc).splitlines() if line.startswith("#SBATCH")]
    assert ["#SBATCH", f"--job-name={one_line}"] in directives
    assert ["#SBATCH", f"--partition={one_line}"] in directives and ["#SBATCH", f"--account={one_line}"] in directives
    assert all(len(words) == 2 for words in directives), directives
    doc["launch"]["slurm"]["partition"] = HOSTILE
    with pytest.raises(RecipeError, match="has a line break"):
        launch.sbatch(doc)


def test_the_pip_install_hint_is_the_argv_it_stands_for():
    from registry.run.environment import extra_hint

    python = f"/opt/{HOSTILE}/bin/python"
    assert shlex.split(extra_hint(python, "lerobot", "pi0", "0.4.1")) == [
        python,
        *["-m", "pip", "install", "lerobot[pi0]==0.4.1"],
    ]


# --- 4. a failing submission step stops the ones after it -----------------------------------------
KUBECTL = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$TOOL_LOG"
step="$1"; [ "$1 $2 $3" = "apply -f -" ] && step=stdin && cat > /dev/null; [ "$step" = apply ] && step=job
if [ "$step" = "$FAIL_AT" ]; then echo "error: $step refused" >&2; exit 3; fi
if [ "$step" = create ]; then echo "kind: ConfigMap"; fi
"""
ONE_TOOL = '#!/usr/bin/env bash\nprintf \'%s\\n\' "$*" >> "$TOOL_LOG"\n[ -z "$FAIL_AT" ] || exit 4\n'
SUBMIT = ["run", "pi07/zero2/2x8xH100"]


def submit(tmp_path: Path, tool: str, script: str, launcher: str, fail_at: str = ""):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / tool).write_text(script)
    (bin_dir / tool).chmod(0o755)
    log = tmp_path / f"{tool}-{fail_at}.log"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TOOL_LOG": str(log), "FAIL_AT": fail_at}
    args = [*SUBMIT, f"launch.launcher={launcher}"] + (
        ["launch.image=ghcr.io/team/train:1"] if tool == "kubectl" else []
    )
    done = run_cli(*args, "--output-dir", str(tmp_path / f"run-{fail_at}"), env=env)
    return done, log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize(
    ("fail_at", "calls", "what"),
    [
        ("create", 1, "the ConfigMap (exit 3: error: create refused)"),
        ("stdin", 2, "the ConfigMap (exit 3)"),
        ("job", 3, "the job (exit 3)"),
    ],
)
def test_a_failing_kubectl_step_is_followed_by_nothing_and_said_in_one_line(tmp_path, fail_at, calls, what):
    done, log = submit(tmp_path, "kubectl", KUBECTL, "kubernetes", fail_at)
    assert done.returncode == 2 and len(log) == calls, log
    errors = [line for line in done.stderr.splitlines() if line.startswith("recipe: error:")]
    assert errors == [f"recipe: error: kubectl could not make {what}; the files are in {tmp_path / f'run-{fail_at}'}"]
    assert "Traceback" not in done.stderr and "follow it with" not in done.stderr


@pytest.mark.parametrize(("tool", "launcher"), [("sbatch", "slurm"), ("sky", "skypilot")])
def test_a_failing_sbatch_or_sky_is_its_exit_code_and_nothing_after_it(tmp_path, tool, launcher):
    done, log = submit(tmp_path, tool, ONE_TOOL, launcher, "yes")
    assert done.returncode == 4 and len(log) == 1 and "Traceback" not in done.stderr, done.stderr
    ok, log = submit(tmp_path, tool, ONE_TOOL, launcher)
    assert ok.returncode == 0 and len(log) == 1, ok.stderr


# --- 5. unit conversions of what the host reports -------------------------------------------------
def fake_torch(*total_memory: int) -> types.ModuleType:
    torch = types.ModuleType("torch")
    props = [types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", total_memory=m) for m in total_memory]
    torch.cuda = types.SimpleNamespace(
        is_available=lambda: bool(props), device_count=lambda: len(props), get_device_properties=lambda i: props[i]
    )
    return torch


def test_torch_s_total_memory_in_bytes_is_reported_in_mib(monkeypatch):
    from registry.run.preflight import host

    monkeypatch.setitem(sys.modules, "torch", fake_torch(80 * 2**30, 81559 * 2**20 + 2**20 - 1))
    gpus, why = host.torch_gpus()
    assert [g.memory_mib for g in gpus] == [81920, 81559] and gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert why == "nvidia-smi found no GPU; the GPUs are torch's"


def test_the_host_s_gpu_memory_is_compared_in_mib_against_the_catalog_s_gb():
    """H100-SXM is 80 GB (10^9 bytes), 76294 MiB; a card below 85 % of that (64850 MiB) is refused."""
    from registry.run.machine import GPU, mismatch

    doc = compose("tiny/ddp/1xH100").data
    assert mismatch(doc, [GPU("NVIDIA H100 80GB HBM3", 64850)]) is None
    said = mismatch(doc, [GPU("NVIDIA H100 80GB HBM3", 64849)])
    assert said == "the recipe is for H100-SXM and this host's GPUs have 64849 MiB"


def test_host_check_sizes_are_binary_gib_and_mib():
    from registry.run.preflight.hostchecks import _size

    assert [_size(n) for n in (2**30, 1.5 * 2**30, 512 * 2**20, 2**30 / 10 - 1, 2**30 / 10)] == [
        *["1.0 GiB", "1.5 GiB", "0.5 GiB", "102 MiB", "0.1 GiB"],
    ]
