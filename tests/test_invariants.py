"""Every invariant: a recipe that breaks only that rule fails with its id, and a bundled recipe
exercising the same fields passes. Every rule in schemas/ must appear here."""

import json
from pathlib import Path

import pytest
from conftest import bundled_matrix
from jsonschema import Draft202012Validator

from registry.compose import compose
from registry.files import SCHEMA_DIR
from registry.validate import validate

DATA = Path(__file__).parent / "data"
GPU_P100 = "hardware.gpu={name: P100, memory_gib: 16, compute_capability: 6.0}"
GPU_V100ISH = "hardware.gpu={name: V100, memory_gib: 16, compute_capability: 7.0}"
ON_2_GPUS = ["hardware.gpus_per_node=2", "hardware.processes_per_node=2", "backend.mixed_precision=fp16"]

# rule id -> (recipe, overrides that break only that rule, overrides on a recipe that passes)
# a team's own script under FSDP, saving a full state dict (fsdp-sharded-consolidated)
_COMMAND_FULL = ["trainer.kind=command", "trainer.command.program=train.py", "backend.state_dict_type=FULL_STATE_DICT"]

CASES = {
    "obs-history": ("pi07/zero2/8xA100", ["policy.n_obs_steps=8"], []),
    "image-resolution": ("pi07/zero2/8xA100", ["dataset.resolution=[224, 224]"], []),
    "zero3-torch-checkpointing": ("tiny/zero3/cpu", ["policy.gradient_checkpointing=true"], []),
    "fsdp-double-checkpointing": (
        "pi07/fsdp/8xA100",
        ["backend.activation_checkpointing=true", "policy.gradient_checkpointing=true"],
        ["backend.activation_checkpointing=true", "policy.gradient_checkpointing=false"],
    ),
    "fsdp-wrap-classes": ("act/fsdp/2xH100", ["policy.block_classes=[]"], []),
    "fsdp-fp32-model": ("pi07/fsdp/8xA100", ["policy.dtype=bfloat16"], ["policy.dtype=float32"]),
    "compile-sharded": ("pi07/fsdp/8xA100", ["policy.use_torch_compile=true"], []),
    "rank-divergent-drops": (
        "pi07/fsdp/8xA100",
        ["dataset.drop_probs.subgoal=0.75"],
        ["dataset.drop_probs.subgoal=1.0"],
    ),
    "fsdp1-orig-params": ("act/fsdp/2xH100", ["backend.use_orig_params=false"], []),
    "fsdp2-orig-params": ("ref-100m/fsdp2/2xH100", ["backend.use_orig_params=true"], []),
    "fsdp2-reshard-bool": (
        "ref-100m/fsdp2/2xH100",
        ["backend.reshard_after_forward=FULL_SHARD"],
        ["backend.reshard_after_forward=false"],
    ),
    "fsdp1-reshard-strategy": (
        "act/fsdp/2xH100",
        ["backend.reshard_after_forward=true"],
        ["backend.reshard_after_forward=FULL_SHARD"],
    ),
    "fsdp2-forward-prefetch": ("ref-100m/fsdp2/2xH100", ["backend.forward_prefetch=true"], []),
    "fsdp2-local-state-dict": ("ref-100m/fsdp2/2xH100", ["backend.state_dict_type=LOCAL_STATE_DICT"], []),
    "fsdp-sharding-v2": ("ref-100m/fsdp2/2xH100", ["backend.sharding=SHARD_GRAD_OP"], []),
    "zero3-save-16bit": ("tiny/zero3/cpu", ["backend.zero3_save_16bit_model=false"], []),
    "ds-config-file-conflict": (
        "tiny/zero2/cpu",
        ["backend.accelerate={mixed_precision: bf16}"],
        ["backend.deepspeed_config_file=ds.json", "backend.accelerate={same_network: true}"],
    ),
    "ds-json-batch-keys": (
        "tiny/zero2/cpu",
        ["backend.deepspeed_json={train_batch_size: auto}"],
        ["backend.deepspeed_json={wall_clock_breakdown: false}"],
    ),
    "offload-param-stage": ("tiny/zero2/cpu", ["backend.offload.param=cpu"], ["backend=zero3-offload"]),
    "zero3-init-stage": (
        "tiny/zero2/cpu",
        ["backend.zero3_init_flag=true"],
        ["backend=zero3", "backend.zero3_init_flag=true"],
    ),
    "nvme-path": (
        "tiny/zero3/cpu",
        ["backend.offload.optimizer=nvme"],
        ["backend.offload.optimizer=nvme", "backend.nvme_path=/local_nvme"],
    ),
    "master-weights-sharded": ("tiny/zero2/cpu", ["train.master_weights=true"], []),
    "ddp-master-weights": (
        "pi05/ddp/8xH200",
        ["policy.dtype=bfloat16", "train.master_weights=false"],
        ["policy.dtype=bfloat16"],
    ),
    "bf16-compute-capability": ("act/ddp/8xV100", ["backend.mixed_precision=bf16"], ["backend.mixed_precision=fp16"]),
    "fp8-compute-capability": (
        "act/ddp/8xA100",
        ["backend.mixed_precision=fp8"],
        ["hardware=8xH100", "backend.mixed_precision=fp8"],
    ),
    "fp16-deepspeed-compute-capability": ("tiny/zero2/cpu", [GPU_P100, *ON_2_GPUS], [GPU_V100ISH, *ON_2_GPUS]),
    "gpu-count": ("act/ddp/8xA100", ["hardware.gpus_per_node=0"], []),
    "processes-per-gpu": ("act/ddp/8xA100", ["hardware.processes_per_node=4"], ["hardware.processes_per_node=8"]),
    "fsdp-needs-gpu": ("tiny/ddp/cpu", ["backend=fsdp"], []),
    "cpu-half-precision": ("tiny/ddp/cpu", ["backend.mixed_precision=fp16"], ["backend.mixed_precision=bf16"]),
    "memory-fit": ("pi07/zero2/8xA100", ["train.micro_batch_size=40"], []),
    "batch-size-product": ("tiny/ddp/cpu", ["train.batch_size=10"], ["train.batch_size=16"]),
    "global-batch-size": ("pi07/zero2/8xA100", ["train.global_batch_size=100"], ["train.global_batch_size=160"]),
    "zero-loss-weight-sharded": ("pi07/fsdp/8xA100", ["train.loss_weights.CE=0"], []),
    "sim-eval-sharded": (
        "pi07/fsdp/8xA100",
        ["train.eval={env: libero, every: 1000}"],
        ["train.eval={env: libero, every: 0}"],
    ),
    "lerobot-no-deepspeed": ("act/ddp/8xA100", ["backend=zero2"], []),
    # the twin differs in the backend version alone: FSDP1 with FSDP2's other settings trains
    "lerobot-no-fsdp2": (
        "act/fsdp2/2xH100",
        [],
        [
            "backend.version=1",
            "backend.sharding=FULL_SHARD",
            "backend.reshard_after_forward=null",
            "backend.use_orig_params=true",
        ],
    ),
    "lerobot-policy-type": ("act/ddp/8xA100", ["policy.type=pi07_low_level"], []),
    "lerobot-push-to-hub": (
        "act/ddp/8xA100",
        ["trainer.lerobot.push_to_hub=true"],
        ["trainer.lerobot.push_to_hub=true", "trainer.lerobot.repo_id=org/act"],
    ),
    "lerobot-act-obs": ("act/ddp/8xA100", ["policy.n_obs_steps=2", "dataset.n_obs_history=2"], []),
    "lerobot-no-accumulation": (
        "act/ddp/8xA100",
        ["train.gradient_accumulation_steps=2"],
        ["trainer.lerobot.api=parallelism", "train.gradient_accumulation_steps=2"],
    ),
    "lerobot-policy-dtype": ("act/ddp/8xA100", ["policy.dtype=bfloat16"], ["policy.dtype=auto"]),
    "lerobot-policy-checkpointing": (
        "act/ddp/8xA100",
        ["policy.gradient_checkpointing=true"],
        # diffusion's horizon must halve through its U-Net (lerobot-diffusion-horizon), and hold the steps
        [
            "policy.type=diffusion",
            "policy.chunk_size=16",
            "policy.n_action_steps=8",
            "policy.gradient_checkpointing=true",
        ],
    ),
    "lerobot-policy-compile": (
        "act/ddp/8xA100",
        ["policy.use_torch_compile=true"],
        ["policy.type=smolvla", "policy.use_torch_compile=true"],
    ),
    "lerobot-policy-freeze": (
        "act/ddp/8xA100",
        ["policy.train_expert_only=true"],
        ["policy.type=smolvla", "policy.train_expert_only=true"],
    ),
    "lerobot-policy-image-size": (
        "act/ddp/8xA100",
        ["policy.resize_imgs_with_padding=[512, 512]"],
        ["policy.type=smolvla", "policy.resize_imgs_with_padding=[512, 512]"],
    ),
    "lerobot-pi-precision": ("act/ddp/8xA100", ["policy.type=pi05"], ["policy.type=pi05", "policy.dtype=bfloat16"]),
    "lerobot-scheduler-type": (
        "act/ddp/8xA100",
        ["train.scheduler.type=linear"],
        ["train.scheduler.type=cosine_decay_with_warmup"],
    ),
    "fsdp-ram-efficient-sync": (
        "act/fsdp/2xH100",
        ["backend.sync_module_states=false"],
        ["backend.sync_module_states=false", "backend.cpu_ram_efficient_loading=false"],
    ),
    "fsdp1-orig-params-compile": (
        "ref-100m/fsdp/2xH100",
        [*_COMMAND_FULL, "policy.use_torch_compile=true", "backend.use_orig_params=false"],
        [*_COMMAND_FULL, "policy.use_torch_compile=true", "backend.use_orig_params=true"],
    ),
    "fsdp-sharded-consolidated": (
        "ref-100m/fsdp/2xH100",
        ["trainer.kind=command", "trainer.command.program=train.py"],
        _COMMAND_FULL,
    ),
    "fsdp-hybrid-one-node": ("act/fsdp/2xH100", ["backend.sharding=HYBRID_SHARD"], ["backend.sharding=FULL_SHARD"]),
    "lerobot-act-temporal-ensemble": (
        "act/ddp/8xA100",
        ["policy.options.temporal_ensemble_coeff=0.01"],
        ["policy.options.temporal_ensemble_coeff=0.01", "policy.n_action_steps=1"],
    ),
    "lerobot-diffusion-horizon": ("diffusion/ddp/8xH100", ["policy.chunk_size=20"], ["policy.chunk_size=24"]),
    "action-steps-chunk": ("act/ddp/8xA100", ["policy.n_action_steps=101"], ["policy.n_action_steps=50"]),
    "constant-scheduler-not-applicable": (
        "act/ddp/8xA100",
        ["train.scheduler.decay_lr=0.0"],
        ["train.scheduler.type=cosine_decay_with_warmup", "train.scheduler.decay_lr=0.0"],
    ),
    "fsdp-wrap-class-exists": ("pi07/fsdp/8xA100", ["policy.block_classes=[GemmaDecoderLayer]"], []),
    "accelerate-derived-keys": (
        "pi07/zero2/8xA100",
        ["backend.accelerate={num_processes: 4}"],
        ["backend.accelerate={gpu_ids: all}"],
    ),
    "builtin-not-applicable": ("tiny/ddp/cpu", ["policy.pretrained_path=org/model"], []),
    "opentau-not-applicable": ("pi07/zero2/8xA100", ["dataset.synthetic.samples=64"], []),
    "lerobot-not-applicable": ("act/ddp/8xA100", ["train.loss_weights={MSE: 1, CE: 0.5}"], []),
    "command-not-applicable": (
        "tiny/ddp/cpu",
        [
            "hardware.processes_per_node=1",
            "trainer.kind=command",
            "trainer.command.program=./train.sh",
            "trainer.builtin.progress=false",
        ],
        ["hardware.processes_per_node=1", "trainer.kind=command", "trainer.command.program=./train.sh"],
    ),
    "sgd-not-applicable": (
        "tiny/ddp/cpu",
        ["train.optimizer.type=sgd", "train.optimizer.eps=1e-6"],
        ["train.optimizer.type=sgd"],
    ),
    "cpu-one-process": ("act/ddp/cpu", [], ["hardware.processes_per_node=1"]),
    "opentau-checkpoint-keep": ("pi07/zero2/8xA100", ["train.checkpoint.keep=3"], ["train.checkpoint.keep=1"]),
    "command-placeholders": (
        "tiny/ddp/cpu",
        [
            "hardware.processes_per_node=1",
            "trainer.kind=command",
            "trainer.command.program=./train.sh",
            "trainer.command.args=['--x={train.nope}']",
        ],
        [
            "hardware.processes_per_node=1",
            "trainer.kind=command",
            "trainer.command.program=./train.sh",
            "trainer.command.args=['--x={train.steps}', '--o={output_dir}', '--w={world_size}']",
        ],
    ),
    "lerobot-fsdp-resume": (
        "act/fsdp/2xH100",
        ["train.checkpoint.resumable=true"],
        ["train.checkpoint.resumable=false"],
    ),
    "opentau-policy-type": ("pi07/zero2/8xA100", ["policy.type=act"], []),
    "command-program": (
        "tiny/ddp/cpu",
        ["hardware.processes_per_node=1", "trainer.kind=command"],
        ["hardware.processes_per_node=1", "trainer.kind=command", "trainer.command.program=./train.sh"],
    ),
    "builtin-reference-policy": ("tiny/ddp/cpu", ["policy.type=act"], []),
    "builtin-chunk-size": (str(DATA / "reference_without_chunk.yaml"), [], ["policy.chunk_size=4"]),
    "process-count": ("act/ddp/8xA100", ["launch.num_processes=4"], ["launch.num_processes=8"]),
    "cpu-ddp-launcher": ("tiny/ddp/cpu", ["launch.launcher=accelerate"], ["launch.launcher=torchrun"]),
    "torchrun-deepspeed": ("tiny/zero2/cpu", ["launch.launcher=torchrun"], ["launch.launcher=accelerate"]),
    "kubernetes-image": (
        "pi07/zero2/2x8xH100",
        ["launch.launcher=kubernetes"],
        ["launch.launcher=kubernetes", "launch.image=ghcr.io/team/train:1"],
    ),
    "kubernetes-not-applicable": ("tiny/ddp/cpu", ["launch.image=ghcr.io/team/train:1"], []),
    "slurm-one-task-per-node": (
        "pi07/zero2/2x8xH100",
        ["launch.launcher=slurm", "launch.slurm.extra=['--exclusive', '--ntasks-per-node=8']"],
        ["launch.launcher=slurm", "launch.slurm.extra=['--exclusive']", "launch.slurm.ntasks_per_node=1"],
    ),
    "engine-counts": (
        "pi07/zero2/2x8xH100",
        ["launch.launcher=slurm", "launch.slurm.extra=['--exclusive', '--nodes=3']"],
        ["launch.launcher=slurm", "launch.slurm.extra=['--exclusive']"],
    ),
    "trainer-env-on-cluster": (
        "act/ddp/2xH100",
        ["launch.launcher=skypilot", "trainer.env=/opt/lerobot"],
        ["launch.launcher=slurm", "trainer.env=/opt/lerobot"],
    ),
    "opentau-launcher": ("pi07/fsdp/8xA100", ["launch.launcher=torchrun"], ["launch.launcher=accelerate"]),
    "lerobot-parallelism-launcher": (
        "act/fsdp/2xH100",
        ["trainer.lerobot.api=parallelism", "launch.launcher=accelerate", "train.checkpoint.resumable=false"],
        ["trainer.lerobot.api=parallelism", "launch.launcher=torchrun", "train.checkpoint.resumable=false"],
    ),
}


def rules():
    found = {}
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        doc = json.loads(path.read_text())
        for rule in doc.get("$defs", {}).get("invariants", {}).get("x-invariants", []):
            found[rule["id"]] = rule
    return found


RULES = rules()


def problems(target, overrides):
    if not overrides and target in bundled_matrix():  # a bundled cell as it is: validated once per session
        return bundled_matrix()[target].report.problems
    recipe = compose(target, overrides)
    return validate(recipe.data, recipe.origins)


def test_every_rule_has_a_case():
    assert set(RULES) == set(CASES) | {"bench-accumulation"}


def test_rules_are_well_formed():
    meta = Draft202012Validator(json.loads((SCHEMA_DIR / "invariant.schema.json").read_text()))
    for rule in RULES.values():
        assert not list(meta.iter_errors(rule)), rule["id"]


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires_alone(rule_id):
    target, breaking, _ = CASES[rule_id]
    found = problems(target, breaking)
    severity = RULES[rule_id]["severity"]
    hits = [p for p in found if p.rule == rule_id]
    assert hits, f"{rule_id} did not fire: {[p.render() for p in found]}"
    assert all(p.severity == severity or rule_id == "memory-fit" for p in hits)
    others = {p.rule for p in found if p.is_error} - {rule_id}
    assert not others, [p.render() for p in found]
    line = hits[0].render()
    assert f"[{rule_id}]" in line and (hits[0].origin or "") in line
    assert RULES[rule_id]["source"]


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_same_fields_pass(rule_id):
    target, _, passing = CASES[rule_id]
    found = problems(target, passing)
    assert not [p for p in found if p.rule == rule_id or p.is_error], [p.render() for p in found]


def test_obs_history_names_the_other_field_and_where_it_was_set():
    (p,) = problems("pi07/zero2/8xA100", ["policy.n_obs_steps=8"])
    line = p.render()
    assert line.startswith("command line: error[obs-history] policy.n_obs_steps:")
    assert "dataset.n_obs_history set at recipes/pi07/zero2/8xA100.yaml:16:3" in line


def test_memory_fit_warns_near_the_edge():
    found = problems("pi07/zero2/8xA100", ["train.micro_batch_size=24"])
    assert [p.severity for p in found if p.rule == "memory-fit"] == ["warning"]


def test_bench_accumulation(tmp_path):
    f = tmp_path / "bench.yaml"
    f.write_text(
        "extends: [pi07/zero2/8xA100]\nresults:\n  - {samples_per_s: 30, gradient_accumulation_steps: 2, date: 2026-11}\n"
    )
    found = validate(*_doc(f))
    assert {p.rule for p in found} == {"bench-accumulation"}
    assert found[0].origin.endswith("bench.yaml:3:25")  # the key that broke it
    f.write_text(
        "extends: [pi07/zero2/8xA100]\nresults:\n  - {samples_per_s: 30, gradient_accumulation_steps: 2, loop_uses_accumulate: true, date: 2026-11}\n"
    )
    assert not validate(*_doc(f))


def _doc(path):
    recipe = compose(str(path))
    return recipe.data, recipe.origins


def test_all_problems_at_once():
    found = problems(
        "act/ddp/8xA100",
        ["backend=zero2", "policy.type=pi07_low_level", "launch.num_processes=3", "train.steps=0", "train.stepz=1"],
    )
    assert {"lerobot-no-deepspeed", "lerobot-policy-type", "process-count", "range", "unknown-key"} <= {
        p.rule for p in found
    }
    unknown = next(p for p in found if p.rule == "unknown-key")
    assert (
        unknown.path == "train.stepz" and unknown.hint == "did you mean 'steps'?" and unknown.origin == "command line"
    )


def test_structural_problems_name_file_and_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(
        "extends: [tiny/ddp/cpu]\ntrain:\n  micro_batch_size: many\nbackend:\n  kind: zero2\n  zero_stag: 2\nenv:\n  OK: 1\n  bad-name: x\n"
    )
    lines = [p.render() for p in validate(*_doc(f))]
    assert any(
        line.startswith(f"{_shown(f)}:3:3: error[type] train.micro_batch_size: 'many' is not of type integer")
        for line in lines
    ), lines
    assert any(
        "error[enum] backend.kind: 'zero2' is not one of 'ddp', 'deepspeed', 'fsdp'" in line for line in lines
    ), lines
    assert any(
        ":6:3: error[unknown-key] backend.zero_stag: unknown key (hint: did you mean 'zero_stage'?)" in line
        for line in lines
    ), lines
    assert any("error[key-name] env" in line for line in lines), lines


def _shown(path):
    from registry.load import display_path

    return display_path(path)


@pytest.mark.parametrize("backend, valid", [("ddp", False), ("fsdp", False), ("zero2", True)])
def test_the_deepspeed_config_placeholder_needs_a_deepspeed_backend(backend, valid):
    """resolve writes deepspeed.json only under DeepSpeed; elsewhere the program got a path to nothing."""
    sets = [
        f"backend={backend}",
        "hardware.processes_per_node=1",
        "trainer.kind=command",
        "trainer.command.program=./train.sh",
        "trainer.command.args=['--ds={deepspeed_config}']",
    ]
    found = [p for p in problems("tiny/ddp/1xH100", sets) if p.rule == "command-placeholders"]
    assert (not found) is valid, [p.render() for p in found]
    if not valid:
        assert "deepspeed_config placeholder" in found[0].message and found[0].path == "trainer.command.args.0"


def test_the_hybrid_one_node_rule_covers_both_hybrid_strategies():
    for strategy, valid in (("HYBRID_SHARD_ZERO2", False), ("SHARD_GRAD_OP", True)):
        recipe = compose("act/fsdp/2xH100", [f"backend.sharding={strategy}"])
        rules = {p.rule for p in validate(recipe.data, recipe.origins) if p.is_error}
        assert ("fsdp-hybrid-one-node" not in rules) == valid, strategy
    recipe = compose("act/fsdp/2x8xH100", ["backend.sharding=HYBRID_SHARD_ZERO2"])
    assert not [p for p in validate(recipe.data, recipe.origins) if p.is_error]


def test_the_computed_rules_that_apply_to_a_recipe_are_those_whose_when_holds():
    """registry.validate.applicable_rules: the rules of one computed check whose `when` holds, in
    schema order (what resolve's not-applicable report and fields read)."""
    from registry.validate import applicable_rules

    expected = {
        "pi07/zero2/8xA100": ["kubernetes-not-applicable", "opentau-not-applicable"],
        "tiny/ddp/cpu": ["kubernetes-not-applicable", "builtin-not-applicable"],
        "act/ddp/2xH100": [
            "kubernetes-not-applicable",
            "constant-scheduler-not-applicable",
            "lerobot-not-applicable",
            "lerobot-no-accumulation",
            "lerobot-policy-dtype",
            "lerobot-policy-checkpointing",
            "lerobot-policy-compile",
            "lerobot-policy-freeze",
            "lerobot-policy-image-size",
        ],
    }
    for cell, ids in expected.items():
        data = compose(cell).data
        assert [rule["id"] for rule in applicable_rules(data, "not-applicable")] == ids, cell
        assert [rule["id"] for rule in applicable_rules(data, "memory-fit")] == ["memory-fit"], cell
        assert applicable_rules(data, "wrap-classes-exist") == [], cell  # FSDP only
