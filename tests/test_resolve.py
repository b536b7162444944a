"""Resolution: the files launchers take, checked with accelerate's and DeepSpeed's own parsers."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from conftest import bundled_matrix, run_cli

from registry import __version__
from registry.compose import compose
from registry.resolve import resolve

VALID = [name for name, cell in bundled_matrix().items() if cell.report.exit_code == 0]


def bundle(target, overrides=()):
    return resolve(compose(target, list(overrides)))


def load_accelerate(tmp_path, text, name="accelerate.yaml"):
    from accelerate.commands.config.config_args import load_config_from_file

    path = tmp_path / name
    path.write_text(text)
    return load_config_from_file(str(path))


def test_enough_valid_cells():
    assert len(VALID) > 300


@pytest.mark.parametrize("cell", VALID)
def test_accelerate_yaml_loads_with_accelerates_parser(tmp_path, matrix, cell):
    recipe = matrix[cell].recipe
    files = matrix[cell].bundle.files
    doc = recipe.data
    world = doc["hardware"]["nodes"] * (doc["hardware"].get("processes_per_node") or doc["hardware"]["gpus_per_node"])
    if "accelerate.yaml" not in files:  # torchrun launches take no accelerate yaml
        assert "exec torchrun " in files["launch.sh"]
        return
    config = load_accelerate(tmp_path, files["accelerate.yaml"])
    assert config.num_processes == world
    assert config.num_machines == doc["hardware"]["nodes"]
    kind = doc["backend"]["kind"]
    if kind == "deepspeed":
        assert config.distributed_type.value == "DEEPSPEED"
        assert config.deepspeed_config["deepspeed_config_file"] == "deepspeed.json"
        assert config.mixed_precision is None  # docs/failure-modes.md §12
        assert set(config.deepspeed_config) <= {
            "deepspeed_config_file",
            "zero3_init_flag",
            "deepspeed_multinode_launcher",
        }
    elif kind == "fsdp":
        assert config.distributed_type.value == "FSDP"
        fsdp = config.fsdp_config
        assert fsdp["fsdp_version"] == doc["backend"]["version"]
        assert (
            fsdp["fsdp_transformer_layer_cls_to_wrap"].split(",")[: len(doc["policy"]["block_classes"])]
            == doc["policy"]["block_classes"]
        )
        if fsdp["fsdp_version"] == 2:
            assert "fsdp_use_orig_params" not in fsdp and isinstance(fsdp["fsdp_reshard_after_forward"], bool)
        else:
            # accelerate launch exports fsdp_sharding_strategy, which FSDP1 prefers (docs/failure-modes.md §8)
            assert fsdp["fsdp_use_orig_params"] is True and fsdp["fsdp_sharding_strategy"] == doc["backend"]["sharding"]
            assert "fsdp_reshard_after_forward" not in fsdp
    else:
        assert config.distributed_type.value in ("MULTI_GPU", "MULTI_CPU", "NO")
        assert config.mixed_precision == doc["backend"]["mixed_precision"]


@pytest.fixture(scope="module")
def deepspeed_parser():
    import deepspeed.comm
    from deepspeed.runtime.config import DeepSpeedConfig

    class DataParallel:  # DeepSpeed reads the data-parallel world size from an mpu
        def __init__(self, n):
            self.n = n

        def get_data_parallel_world_size(self):
            return self.n

    def parse(config, world):
        original = deepspeed.comm.get_rank
        deepspeed.comm.get_rank = lambda *a, **k: 0  # no process group: this is a parse, not a run
        try:
            return DeepSpeedConfig(config, mpu=DataParallel(world))
        finally:
            deepspeed.comm.get_rank = original

    return parse


@pytest.mark.parametrize("cell", [c for c in VALID if "/zero" in c])
def test_deepspeed_json_passes_deepspeeds_batch_check(matrix, cell, deepspeed_parser):
    recipe = matrix[cell].recipe
    config = json.loads(matrix[cell].bundle.files["deepspeed.json"])
    hw = recipe.data["hardware"]
    world = hw["nodes"] * (hw.get("processes_per_node") or hw["gpus_per_node"])
    parsed = deepspeed_parser(config, world)
    assert (
        parsed.train_batch_size
        == config["train_micro_batch_size_per_gpu"] * config["gradient_accumulation_steps"] * world
    )
    assert parsed.zero_optimization_stage == recipe.data["backend"]["zero_stage"]
    with pytest.raises(AssertionError, match="Check batch related parameters"):
        deepspeed_parser(config, world + 1)  # the check is real: a wrong world size fails it


def test_pi07_zero2_dry_run_acceptance():
    r = run_cli("run", "pi07/zero2/8xA100", "--dry-run")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    files = bundle("pi07/zero2/8xA100").files
    assert yaml.safe_load(files["accelerate.yaml"])["distributed_type"] == "DEEPSPEED"
    assert yaml.safe_load(files["accelerate.yaml"])["num_processes"] == 8
    assert json.loads(files["deepspeed.json"])["train_batch_size"] == 160
    assert json.loads(files["opentau.json"])["dataset_mixture"]["n_obs_history"] == 6
    assert "num_processes: 8" in out and '"train_batch_size": 160' in out and '"n_obs_history": 6' in out
    assert (
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True opentau-train --accelerate-config=accelerate.yaml --config_path=opentau.json"
        in out
    )


def test_opentau_config_checks_hold():
    config = json.loads(bundle("pi07/zero2/8xA100", ["train.gradient_accumulation_steps=2"]).files["opentau.json"])
    assert config["batch_size"] == config["dataloader_batch_size"] * config["gradient_accumulation_steps"] == 40
    assert config["policy"]["n_obs_steps"] == config["dataset_mixture"]["n_obs_history"]
    assert config["policy"]["resize_imgs_with_padding"] == config["resolution"]


def test_act_fsdp1_and_fsdp2(tmp_path):
    one = load_accelerate(tmp_path, bundle("act/fsdp/2xH100").files["accelerate.yaml"], "one.yaml")
    assert one.distributed_type.value == "FSDP" and one.fsdp_config["fsdp_version"] == 1
    assert one.fsdp_config["fsdp_use_orig_params"] is True
    assert one.fsdp_config["fsdp_transformer_layer_cls_to_wrap"] == "ACTEncoderLayer,ACTDecoderLayer"
    two = load_accelerate(tmp_path, bundle("act/fsdp2/2xH100").files["accelerate.yaml"], "two.yaml")
    assert two.fsdp_config["fsdp_version"] == 2 and "fsdp_use_orig_params" not in two.fsdp_config
    pi07 = yaml.safe_load(bundle("pi07/fsdp2/8xA100", ["policy.dtype=float32"]).files["accelerate.yaml"])
    assert (
        pi07["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"]
        == "InterleavedDecoderLayer,SiglipEncoderLayer,SiglipVisionEmbeddings"
    )


def test_lerobot_flags():
    text = bundle("act/ddp/8xA100").files["launch.sh"]
    assert '"${ACCELERATE[@]}" --config_file accelerate.yaml -m lerobot.scripts.lerobot_train --policy.type=act' in text
    assert "--batch_size=8 " in text and "--policy.push_to_hub=false" in text and "--output_dir=output" in text
    pushed = bundle("act/ddp/8xA100", ["trainer.lerobot.push_to_hub=true", "trainer.lerobot.repo_id=org/act"]).files[
        "launch.sh"
    ]
    assert "--policy.push_to_hub=true --policy.repo_id=org/act" in pushed


def test_lerobot_rejects_deepspeed(tmp_path):
    out = tmp_path / "never-written"
    r = run_cli("resolve", "act/zero2/8xA100", "-o", str(out))
    assert r.returncode == 1 and "lerobot-no-deepspeed" in r.stderr and "LeRobot has no DeepSpeed path" in r.stderr
    assert not out.exists()


def test_command_trainer_fills_templates(tmp_path):
    files = bundle(
        "tiny/zero2/cpu",
        [
            "trainer.kind=command",
            "trainer.command.program=my-train",
            "trainer.command.args=['--bs={train.micro_batch_size}', '--out={output_dir}', '--world={world_size}', '--note=a b;c']",
        ],
    ).files
    assert (
        'exec "${ACCELERATE[@]}" --config_file accelerate.yaml --no_python my-train --bs=16 --out=output --world=2'
        " '--note=a b;c'" in files["launch.sh"]
    )


def test_deterministic_and_torch_free(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        r = run_cli("resolve", "pi07/zero2/8xA100", "train.steps=10", "-o", str(out))
        assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in a.iterdir())
    assert names == ["accelerate.yaml", "deepspeed.json", "launch.sh", "opentau.json", "recipe.lock.yaml"]
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert os.access(a / "launch.sh", os.X_OK)
    lock = yaml.safe_load((a / "recipe.lock.yaml").read_text())
    assert lock["overrides"] == ["train.steps=10"] and lock["resolved"]["train"]["steps"] == 10
    assert [i["file"] for i in lock["inputs"]][-1] == "pi07/zero2/8xA100.yaml"
    assert all(len(i["sha256"]) == 64 for i in lock["inputs"])
    code = (
        "import sys, runpy\nsys.argv=['recipe','resolve','pi07/zero2/8xA100','-o',sys.argv[1]]\n"
        "try:\n    runpy.run_module('registry', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch','accelerate','deepspeed')))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "c")],
        capture_output=True,
        text=True,
        cwd=run_cli.__globals__["ROOT"],
    )
    assert r.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("shebang", "cli", "started"),
    [
        ("#!{py}", "", "PY -m accelerate.commands.launch --config_file accelerate.yaml"),
        ("#!{py}", "1", "PY {bin}/accelerate launch --config_file accelerate.yaml"),  # the script, as asked
        ('#!/usr/bin/env bash\necho CLI "$@"', "", "CLI launch --config_file accelerate.yaml"),  # not a path: as is
        ("#!{py} -E", "", "PY -E {bin}/accelerate launch --config_file"),  # an interpreter with options: as is
        ('#!/bin/sh\necho SH "$@"', "", "SH launch --config_file accelerate.yaml"),  # pip's trampoline: as is
    ],
)
def test_launch_sh_starts_accelerates_launch_module(tmp_path, shebang, cli, started):
    """launch.sh runs `accelerate launch` as accelerate's launch module under the interpreter its
    console script names: the script imports every accelerate command first, 9 s of a 30 s launch
    on a GPU host (docs/failure-modes.md §45). Anything else starts the script itself."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    py = bin_dir / "python3.11"
    py.write_text('#!/usr/bin/env bash\necho "PY $*"\n')
    py.chmod(0o755)
    accelerate = bin_dir / "accelerate"
    text = shebang.format(py=py, bin=bin_dir)
    accelerate.write_text(text + ("\n" if "echo" in text else '\necho BROKEN "$@"\n'))
    accelerate.chmod(0o755)
    out = tmp_path / "run"
    assert run_cli("resolve", "tiny/zero2/cpu", "-o", str(out)).returncode == 0
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECIPE_ACCELERATE_CLI": cli}
    got = subprocess.run(["bash", str(out / "launch.sh")], capture_output=True, text=True, env=env)
    assert got.returncode == 0 and got.stdout.startswith(started.format(bin=bin_dir)), got.stdout + got.stderr


def test_env_values_are_quoted(tmp_path):
    out = tmp_path / "run"
    marker = tmp_path / "pwned"
    value = f"$(touch {marker}); `touch {marker}` ' \" \\ ;|&"
    r = run_cli("resolve", "tiny/zero2/cpu", f"env.TRICKY={json.dumps(value)}", "-o", str(out))
    assert r.returncode == 0, r.stderr
    script = (out / "launch.sh").read_text().replace('exec "${ACCELERATE[@]}"', 'printf %s "$TRICKY" #')
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # where accelerate is installed
    got = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env={**os.environ, "PATH": path})
    assert got.stdout == value and not marker.exists()


def test_multi_node_launch_and_slurm(tmp_path):
    from accelerate.commands.config.config_args import load_config_from_file

    out = tmp_path / "mn"
    r = run_cli(
        "resolve",
        "pi07/zero2/2x8xH100",
        "launch.launcher=slurm",
        "launch.slurm={partition: gpu, time: '24:00:00'}",
        "-o",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    sbatch = (out / "slurm.sbatch").read_text()
    assert (
        "#SBATCH --nodes=2" in sbatch and "#SBATCH --gpus-per-node=8" in sbatch and "#SBATCH --partition=gpu" in sbatch
    )
    assert "srun --nodes=2 --ntasks-per-node=1 " in sbatch and "bash ./launch.sh" in sbatch
    assert (
        json.loads((out / "deepspeed.json").read_text())["train_batch_size"] == 2 * 16
    )  # micro 2 (untuned) x 16 ranks
    script = (out / "launch.sh").read_text()
    assert '--accelerate-config=accelerate.node-"${MACHINE_RANK}".yaml' in script
    # run the node preamble as node 1 and load that node's yaml with accelerate's parser
    preamble = script.split("if ! command -v")[0]
    env = {**os.environ, "MACHINE_RANK": "1", "MAIN_PROCESS_IP": "10.1.2.3", "MAIN_PROCESS_PORT": "29600"}
    subprocess.run(["bash", "-c", preamble + "\n", str(out / "launch.sh")], check=True, env=env, cwd=out)
    # bash -c runs with $0 = launch.sh, so the preamble's cd lands in the run directory
    node = load_config_from_file(str(out / "accelerate.node-1.yaml"))
    assert (node.machine_rank, node.main_process_ip, node.main_process_port, node.num_machines, node.num_processes) == (
        1,
        "10.1.2.3",
        29600,
        2,
        16,
    )
    bad = subprocess.run(
        ["bash", "-c", preamble, str(out / "launch.sh")],
        env={**env, "MAIN_PROCESS_IP": "x;rm -rf /"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "MAIN_PROCESS_IP" in bad.stderr


def test_rendezvous_port_reaches_accelerate_on_one_node(tmp_path):
    """Two runs on one host (calibration shares the GPUs this way) need distinct ports."""
    files = resolve(compose("ref-100m/zero2/2xH100", ["launch.main_process_port=29611"])).files
    assert load_accelerate(tmp_path, files["accelerate.yaml"]).main_process_port == 29611
    files = resolve(compose("ref-100m/zero2/2xH100")).files
    assert load_accelerate(tmp_path, files["accelerate.yaml"]).main_process_port == 29500


def test_accelerate_config_placeholder_names_each_nodes_yaml(tmp_path):
    """On several nodes the yaml is written per node by launch.sh; the placeholder reached the
    program as the unexpanded text accelerate.node-"${MACHINE_RANK}".yaml (issue 24)."""
    out = tmp_path / "run"
    args = "trainer.command.args=['--cfg={accelerate_config}', '{accelerate_config}', '--n=$HOME {world_size}']"
    r = run_cli(
        "resolve", "tiny/ddp/2x1xH100", "trainer.kind=command", "trainer.command.program=my-train", args, "-o", str(out)
    )
    assert r.returncode == 0, r.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("accelerate", 'for a in "$@"; do echo "ARG $a"; done'), ("my-train", "")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")  # not a python #!: launch.sh runs it as is
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "MACHINE_RANK": "1", "HOME": "/nowhere"}
    got = subprocess.run(["bash", str(out / "launch.sh")], capture_output=True, text=True, env=env)
    assert got.returncode == 0, got.stderr
    argv = [line[4:] for line in got.stdout.splitlines()]
    assert argv[-3:] == ["--cfg=accelerate.node-1.yaml", "accelerate.node-1.yaml", "--n=$HOME 2"], argv
    assert (out / "accelerate.node-1.yaml").is_file()


def test_the_lock_from_libyaml_is_the_document_python_writes():
    import importlib

    lock = importlib.import_module("registry.resolve.lock")  # the module, not its lock() the package exports
    assert lock._DUMPER is yaml.CSafeDumper, "this environment's PyYAML has libyaml"
    for name in ("pi07/zero2/8xA100", "tiny/ddp/cpu", "act/fsdp/2xH100", "ref-1b/zero3-offload/8xA100"):
        data = compose(name).data
        content = {"resolved": data, "long": "word " * 60, "odd": "é\u2028\x85\t'\"", "list": [1.5, None, True]}
        text = lock.dump(content)
        # the same document; the two emitters fold a long quoted string at other places
        assert yaml.safe_load(text) == yaml.safe_load(yaml.safe_dump(content, sort_keys=False, width=100)) == content
        assert lock.dump(yaml.safe_load(text)) == text, name  # read back and dumped again: unchanged


def test_a_cpu_recipe_hides_the_hosts_gpus_from_its_ranks():
    """On a GPU host a CPU recipe's gloo barrier would land on GPU `local rank` (invalid past the
    host's count) and its ranks would hold GPU memory: launch.sh hides the GPUs (docs/failure-modes.md §25)."""
    hidden = "export CUDA_VISIBLE_DEVICES=''"
    assert hidden in resolve(compose("tiny/ddp/cpu")).files["launch.sh"]
    assert hidden in resolve(compose("tiny/zero2/cpu")).files["launch.sh"]
    assert "CUDA_VISIBLE_DEVICES" not in resolve(compose("tiny/ddp/2xH100")).files["launch.sh"]
    own = resolve(compose("tiny/ddp/cpu", ["env.CUDA_VISIBLE_DEVICES=0"])).files["launch.sh"]
    assert hidden not in own and "export CUDA_VISIBLE_DEVICES=0" in own


def test_the_trainers_environment_leads_its_path(tmp_path):
    """trainer.env names a virtualenv (its bin/python) or an interpreter; launch.sh puts that
    interpreter's folder first on PATH, so the trainer's own packages run."""
    from registry.resolve.launch import trainer_python

    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "python3.12").write_text("")
    for env, python in [
        (tmp_path / "venv", tmp_path / "venv" / "bin" / "python"),
        (tmp_path / "python3.12", tmp_path / "python3.12"),
        (tmp_path / "absent" / "python3", tmp_path / "absent" / "python3"),  # not built yet: still an interpreter
        (tmp_path / "absent-venv", tmp_path / "absent-venv" / "bin" / "python"),
    ]:
        recipe = compose("act/ddp/8xA100", [f"trainer.env={env}"])
        assert trainer_python(recipe.data) == str(python)
        assert f'export PATH={python.parent}:"$PATH"' in resolve(recipe).files["launch.sh"]
    assert trainer_python(compose("act/ddp/8xA100").data) is None
    assert "export PATH=" not in resolve(compose("act/ddp/8xA100")).files["launch.sh"]


def test_the_deepspeed_json_offloads_only_what_the_recipe_offloads(tmp_path):
    """An offload block says where DeepSpeed moves states: it is written only for what is offloaded
    (parameters under ZeRO-3 only), never as a device of none. The field table is built when the
    module is imported, so the command is run as users run it, in a process of its own."""
    assert run_cli("resolve", "pi07/zero2/8xA100", "-o", str(tmp_path)).returncode == 0
    zero = json.loads((tmp_path / "deepspeed.json").read_text())["zero_optimization"]
    assert not {k for k in zero if k.startswith("offload")}, zero
    params = ["backend.offload.param=cpu", "backend.offload.optimizer=none"]
    zero = json.loads(bundle("ref-1b/zero3-offload/8xA100", params).files["deepspeed.json"])["zero_optimization"]
    assert "offload_optimizer" not in zero and zero["offload_param"]["device"] == "cpu"
    zero = json.loads(bundle("ref-1b/zero3-offload/8xA100").files["deepspeed.json"])["zero_optimization"]
    assert zero["offload_optimizer"]["device"] == "cpu"
    # each block with the pinning the recipe asks for, written by the command (the table's own process)
    assert run_cli("resolve", "ref-1b/zero3-offload/8xA100", "-o", str(tmp_path / "offload")).returncode == 0
    zero = json.loads((tmp_path / "offload" / "deepspeed.json").read_text())["zero_optimization"]
    assert zero["offload_optimizer"] == zero["offload_param"] == {"device": "cpu", "pin_memory": True}


def test_the_lock_names_its_sources_with_keys_in_order():
    text = bundle("pi07/zero2/8xA100").files["recipe.lock.yaml"]
    top = [line.split(":")[0] for line in text.splitlines() if line[:1].isalpha()]
    assert top == ["lock_version", "tool", "recipe", "overrides", "sources", "inputs", "outputs", "resolved"]
    lock = yaml.safe_load(text)
    assert list(lock["sources"]) == ["bundled"]
    assert lock["tool"] == {"name": "recipe-registry", "version": __version__}
    assert lock["recipe"] == {"name": "pi07/zero2/8xA100", "version": 1, "tuned": True}
    untuned = yaml.safe_load(bundle("tiny/ddp/8xA100").files["recipe.lock.yaml"])["recipe"]
    assert untuned == {"name": "tiny/ddp/8xA100", "version": None, "tuned": False}


def test_a_trainer_file_that_clashes_with_a_generated_one_is_refused(monkeypatch):
    import registry.resolve as package
    from registry.errors import RecipeError

    real = package.invocation

    def clashing(doc, ctx):
        inv = real(doc, ctx)
        inv.files["deepspeed.json"] = "{}"
        return inv

    monkeypatch.setattr(package, "invocation", clashing)
    with pytest.raises(RecipeError) as raised:
        bundle("pi07/zero2/8xA100")
    assert str(raised.value) == "trainer file deepspeed.json clashes with a generated file"
    assert raised.value.exit_code == 1
