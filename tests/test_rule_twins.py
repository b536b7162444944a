"""Rules pinned at their edges: for each numeric bound, each factor of an arithmetic rule and each
branch of a `when`, a recipe that breaks the rule and a twin that differs from it in that one
value only. tests/test_invariants.py has one breaking case per rule; these are the cases a moved
bound, a dropped factor or a dropped branch would pass (benchmarks/schema_mutation.py,
docs/mutation.md)."""

import json

import pytest

from registry.compose import compose
from registry.validate import validate


def gpu(cc: float) -> str:
    return f"hardware.gpu={{name: X, memory_gib: 80, compute_capability: {cc}}}"


TWO_NODES = "pi07/zero2/2x8xH100"  # micro batch 2, no accumulation, 2 nodes x 8 GPUs: global batch 32
ON_2_GPUS = ["hardware.gpus_per_node=2", "hardware.processes_per_node=2"]

# (rule, recipe, overrides shared by both twins, the value that breaks it, the value that passes)
# fmt: off
TWINS = [
    # numeric bounds: the bound itself passes, the value just past it fails
    ("bf16-compute-capability", "act/ddp/8xA100", [], gpu(7.9), gpu(8.0)),
    ("fp8-compute-capability", "act/ddp/8xA100", ["backend.mixed_precision=fp8"], gpu(8.8), gpu(8.9)),
    ("fp16-deepspeed-compute-capability", "tiny/zero2/cpu", [*ON_2_GPUS, "backend.mixed_precision=fp16"], gpu(6.9), gpu(7.0)),
    ("gpu-count", "act/ddp/8xA100", ["hardware.processes_per_node=1"], "hardware.gpus_per_node=0", "hardware.gpus_per_node=1"),
    ("zero-loss-weight-sharded", "pi07/fsdp/8xA100", [], "train.loss_weights.CE=0", "train.loss_weights.CE=0.001"),
    ("action-steps-chunk", "act/ddp/8xA100", [], "policy.n_action_steps=101", "policy.n_action_steps=100"),
    # equality on either side: one more and one less both break it
    ("processes-per-gpu", "act/ddp/8xA100", [], "hardware.processes_per_node=9", "hardware.processes_per_node=8"),
    ("processes-per-gpu", "act/ddp/8xA100", [], "hardware.processes_per_node=7", "hardware.processes_per_node=8"),
    # every factor of a product: each breaking value leaves out one factor
    ("global-batch-size", TWO_NODES, [], "train.global_batch_size=16", "train.global_batch_size=32"),  # nodes
    ("global-batch-size", TWO_NODES, [], "train.global_batch_size=4", "train.global_batch_size=32"),  # per node
    ("global-batch-size", TWO_NODES, ["train.micro_batch_size=3"], "train.global_batch_size=24", "train.global_batch_size=48"),
    ("global-batch-size", TWO_NODES, ["train.gradient_accumulation_steps=3"], "train.global_batch_size=32", "train.global_batch_size=96"),
    ("global-batch-size", TWO_NODES, ["train.micro_batch_size=3"], "train.global_batch_size=16", "train.global_batch_size=48"),  # micro
    ("process-count", TWO_NODES, [], "launch.num_processes=8", "launch.num_processes=16"),  # nodes
    ("process-count", TWO_NODES, [], "launch.num_processes=2", "launch.num_processes=16"),  # per node
    ("batch-size-product", "tiny/ddp/cpu", ["train.gradient_accumulation_steps=2"], "train.batch_size=16", "train.batch_size=32"),
    ("batch-size-product", "tiny/ddp/cpu", ["train.micro_batch_size=3"], "train.batch_size=8", "train.batch_size=3"),
    ("obs-history", "act/ddp/8xA100", ["policy.n_obs_steps=1"], "dataset.n_obs_history=2", "dataset.n_obs_history=1"),
    # each branch of a `when`: the same breaking value, reached through one branch at a time
    ("bf16-compute-capability", "act/ddp/8xA100", ["backend.mixed_precision=bf16"], gpu(7.5), gpu(8.6)),
    ("bf16-compute-capability", "pi05/ddp/8xH200", ["backend.mixed_precision=fp16", "policy.dtype=bfloat16"], gpu(7.5), gpu(9.0)),
    ("fp16-deepspeed-compute-capability", "tiny/zero2/cpu", [gpu(6.0), *ON_2_GPUS], "backend.mixed_precision=fp16", "backend.mixed_precision=bf16"),
    ("fp16-deepspeed-compute-capability", "tiny/ddp/cpu", [gpu(6.0), *ON_2_GPUS, "backend.mixed_precision=fp16"], "backend=zero2", "backend=ddp"),
    ("sim-eval-sharded", "pi07/fsdp/8xA100", ["train.eval={env: libero, every: 1000}"], "backend=fsdp", "backend=ddp"),
    ("sim-eval-sharded", "pi07/fsdp/8xA100", ["train.eval.every=1000"], "train.eval.env=libero", "train.eval.env=null"),
    ("zero-loss-weight-sharded", "pi07/fsdp/8xA100", ["train.loss_weights.CE=0"], "backend=fsdp", "backend=ddp"),
    # a rule about a GPU does not apply without one
    ("fp8-compute-capability", "tiny/ddp/cpu", ["backend.mixed_precision=fp8"], gpu(8.8), "hardware.gpu=null"),
    ("fp16-deepspeed-compute-capability", "tiny/zero2/cpu", ["backend.mixed_precision=fp16"], gpu(6.9), "hardware.gpu=null"),
    # each value an enum of the rule allows, and each field of a branch
    ("sim-eval-sharded", "pi07/fsdp/8xA100", ["train.eval.env=libero"], "train.eval.every=1000", "train.eval.every=null"),
    ("gpu-count", "tiny/ddp/cpu", [], "hardware.gpus_per_node=2", "hardware.gpus_per_node=0"),
    ("gpu-count", "tiny/ddp/cpu", [], "hardware.gpus_per_node=2", "hardware.gpus_per_node=null"),
    ("gpu-count", "tiny/ddp/cpu", [], "hardware.processes_per_node=null", "hardware.processes_per_node=2"),
    ("fsdp1-orig-params", "ref-100m/fsdp/2xH100", [], "backend.use_orig_params=false", "backend.use_orig_params=true"),
    ("fsdp1-orig-params", "act/fsdp/2xH100", ["backend.version=null"], "backend.use_orig_params=false", "backend.use_orig_params=true"),
    ("fsdp1-reshard-strategy", "act/fsdp/2xH100", ["backend.version=null"], "backend.reshard_after_forward=true", "backend.reshard_after_forward=FULL_SHARD"),
    *[("fsdp1-reshard-strategy", "act/fsdp/2xH100", [], "backend.reshard_after_forward=true", f"backend.reshard_after_forward={s}")
      for s in ("SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")],
    # FSDP1's and FSDP2's rules: the version decides, and the backend must be FSDP at all
    ("fsdp1-reshard-strategy", "act/fsdp/2xH100", ["backend.reshard_after_forward=true"], "backend.version=1", "backend.version=2"),
    ("fsdp2-reshard-bool", "ref-100m/fsdp2/2xH100", ["backend.reshard_after_forward=FULL_SHARD"], "backend.version=2", "backend.version=1"),
    ("fsdp2-orig-params", "ref-100m/fsdp/2xH100", ["backend.use_orig_params=true"], "backend.version=2", "backend.version=1"),
    ("fsdp2-forward-prefetch", "ref-100m/fsdp2/2xH100", ["backend.forward_prefetch=true"], "backend.version=2", "backend.version=1"),
    ("fsdp2-local-state-dict", "ref-100m/fsdp2/2xH100", ["backend.state_dict_type=LOCAL_STATE_DICT"], "backend.version=2", "backend.version=1"),
    *[(rule, "ref-100m/fsdp2/2xH100", [field], "backend.kind=fsdp", "backend.kind=ddp") for rule, field in (
        ("fsdp2-reshard-bool", "backend.reshard_after_forward=FULL_SHARD"),
        ("fsdp2-orig-params", "backend.use_orig_params=true"),
        ("fsdp2-forward-prefetch", "backend.forward_prefetch=true"),
        ("fsdp2-local-state-dict", "backend.state_dict_type=LOCAL_STATE_DICT"),
    )],
    ("fsdp1-reshard-strategy", "act/fsdp/2xH100", ["backend.reshard_after_forward=true"], "backend.kind=fsdp", "backend.kind=ddp"),
    # a LeRobot recipe that leaves trainer.lerobot.api out (pi05's policy part has none): the accelerate API
    ("lerobot-no-accumulation", "pi05/ddp/8xH200", ["trainer.kind=lerobot"], "train.gradient_accumulation_steps=2", "train.gradient_accumulation_steps=1"),
    *[(rule, "act/ddp/8xA100", [field], "policy.type=act", f"policy.type={kind}")
      for rule, field, kinds in (
          ("lerobot-policy-compile", "policy.use_torch_compile=true", ("diffusion", "smolvla", "pi0", "pi05")),
          ("lerobot-policy-freeze", "policy.train_expert_only=true", ("smolvla", "pi0", "pi05")),
          ("lerobot-policy-image-size", "policy.resize_imgs_with_padding=[512, 512]", ("smolvla", "pi0", "pi05")),
          ("lerobot-policy-dtype", "policy.dtype=bfloat16", ("pi0", "pi05")),
          ("lerobot-policy-checkpointing", "policy.gradient_checkpointing=true", ("pi0", "pi05")),
      ) for kind in kinds],
    ("lerobot-pi-precision", "act/ddp/8xA100", ["policy.type=pi05", "backend.mixed_precision=no"], "policy.dtype=bfloat16", "policy.dtype=null"),
    ("lerobot-pi-precision", "act/ddp/8xA100", ["policy.type=pi05", "policy.dtype=bfloat16"], "backend.mixed_precision=fp16", "backend.mixed_precision=bf16"),
    ("lerobot-pi-precision", "act/ddp/8xA100", [], "policy.type=pi0", "policy.type=act"),
    ("lerobot-pi-precision", "act/ddp/8xA100", ["policy.type=pi05"], "backend.mixed_precision=fp16", "backend.mixed_precision=no"),
    *[("lerobot-pi-precision", "act/ddp/8xA100", ["policy.type=pi05", "backend.mixed_precision=no"], "policy.dtype=bfloat16", f"policy.dtype={dtype}")
      for dtype in ("auto", "float32", "null")],
    ("lerobot-policy-checkpointing", "act/ddp/8xA100", ["policy.gradient_checkpointing=true"], "policy.type=act", "policy.type=pi05"),
    ("fsdp-sharded-consolidated", "ref-100m/fsdp/2xH100", ["trainer.kind=command", "trainer.command.program=train.py"], "train.checkpoint.consolidated=true", "train.checkpoint.consolidated=false"),
    *[(rule, "tiny/zero2/cpu", [field], f"backend.zero_stage={stage}", "backend.zero_stage=3")
      for rule, field in (("zero3-init-stage", "backend.zero3_init_flag=true"), ("offload-param-stage", "backend.offload.param=cpu"))
      for stage in (0, 1, 2)],
    ("rank-divergent-drops", "pi07/fsdp/8xA100", ["dataset.drop_probs.subgoal=0.75"], "backend=fsdp", "backend=ddp"),
    ("slurm-one-task-per-node", TWO_NODES, ["launch.launcher=slurm"], "launch.slurm.ntasks_per_node=8", "launch.slurm.ntasks_per_node=1"),
    ("lerobot-no-fsdp2", "act/fsdp2/2xH100", ["launch.launcher=torchrun", "train.checkpoint.resumable=false"], "trainer.lerobot.api=accelerate", "trainer.lerobot.api=parallelism"),
    ("ddp-master-weights", "pi05/ddp/8xH200", ["train.master_weights=false"], "policy.dtype=float16", "policy.dtype=float32"),
    ("cpu-one-process", "act/ddp/cpu", ["hardware.processes_per_node=1"], "hardware.nodes=2", "hardware.nodes=1"),
    ("cpu-one-process", "act/ddp/cpu", ["hardware.processes_per_node=1"], "hardware.nodes=2", "hardware.nodes=null"),
    ("cpu-one-process", "pi07/ddp/cpu", [], "hardware.processes_per_node=2", "hardware.processes_per_node=1"),
    ("cpu-one-process", "tiny/ddp/cpu", ["trainer.kind=command", "trainer.command.program=./train.sh"], "hardware.processes_per_node=2", "hardware.processes_per_node=1"),
    ("lerobot-parallelism-launcher", "act/fsdp/2xH100", ["launch.launcher=accelerate", "train.checkpoint.resumable=false"], "trainer.lerobot.api=parallelism", "trainer.lerobot.api=accelerate"),
    ("trainer-env-on-cluster", "act/ddp/2xH100", ["trainer.env=/opt/lerobot", "launch.image=ghcr.io/team/train:1"], "launch.launcher=kubernetes", "launch.launcher=slurm"),
    ("cpu-ddp-launcher", "act/ddp/8xA100", ["launch.launcher=accelerate"], "hardware.gpu=null", gpu(8.0)),
    ("compile-sharded", "pi07/fsdp/8xA100", ["policy.use_torch_compile=true"], "backend=fsdp", "backend=ddp"),
    ("rank-divergent-drops", "pi07/fsdp/8xA100", ["dataset.drop_probs.subgoal=0.75"], "policy.rank_synchronised_branches=false", "policy.rank_synchronised_branches=true"),
    ("lerobot-act-temporal-ensemble", "act/ddp/8xA100", ["policy.options.temporal_ensemble_coeff=0.01"], "policy.type=act", "policy.type=diffusion"),
]
# fmt: on


def rules_of(target: str, overrides: list[str]) -> set[str]:
    recipe = compose(target, overrides)
    return {p.rule for p in validate(recipe.data, recipe.origins) if p.is_error or p.severity == "warning"}


@pytest.mark.parametrize(
    "rule, target, shared, breaking, passing", TWINS, ids=[f"{t[0]}-{i}" for i, t in enumerate(TWINS)]
)
def test_twin_differs_in_the_rule_alone(rule, target, shared, breaking, passing):
    assert rule in rules_of(target, [*shared, breaking]), f"{rule} did not fire on {breaking}"
    assert rule not in rules_of(target, [*shared, passing]), f"{rule} fired on {passing}"


@pytest.mark.parametrize("field", ["train.steps", "train.micro_batch_size", "hardware.processes_per_node"])
@pytest.mark.parametrize("value", ["true", "8.0"])
def test_an_integer_field_takes_neither_a_boolean_nor_a_float(field, value):
    """JSON Schema counts 8.0 as an integer and Python counts True as 1 (docs/failure-modes.md §34)."""
    recipe = compose("tiny/ddp/cpu", [f"{field}={value}"])
    found = [p for p in validate(recipe.data, recipe.origins) if p.path == field]
    assert [p.rule for p in found] == ["type"], [p.render() for p in found]
    assert "is not of type integer" in found[0].message


# a field a `when` names, and a value of it outside each condition the rules put on it
GATES = {
    "backend.kind": lambda c: "fsdp" if c.get("const") == "ddp" else "ddp",
    "trainer.kind": lambda c: next(
        k for k in ("builtin", "opentau", "command") if k not in (c.get("enum") or [c.get("const")])
    ),
    "launch.launcher": lambda c: "torchrun" if "accelerate" in (c.get("enum") or [c.get("const")]) else "accelerate",
    "backend.version": lambda c: 2 if 1 in (c.get("enum") or [c.get("const")]) else 1,
}


def _gated() -> list[tuple[str, str, object]]:
    """(rule, field, value outside its `when`) for each gate field a rule's `when` names."""
    from test_invariants import RULES

    found = []
    for rule_id, rule in sorted(RULES.items()):
        when = rule.get("when")
        parts = [when, *when.get("allOf", [])] if isinstance(when, dict) else []
        for part in parts:
            for path, condition in part.get("x-where", {}).items():
                if path in GATES and isinstance(condition, dict) and ("const" in condition or "enum" in condition):
                    found.append((rule_id, path, GATES[path](condition)))
    return found


@pytest.mark.parametrize("rule_id, path, outside", _gated())
def test_a_rule_is_silent_outside_its_when(rule_id, path, outside):
    """The recipe that breaks the rule, with one field its `when` names set outside the
    condition: the recipe's other fields are accepted whatever that field says, so only the
    `when` keeps the rule to its own backends, trainers, launchers and versions."""
    from test_invariants import CASES

    target, breaking, _ = CASES[rule_id]
    assert rule_id in rules_of(target, breaking)
    assert rule_id not in rules_of(target, [*breaking, f"{path}={json.dumps(outside)}"])


def _enum_members() -> list[tuple[str, str, object]]:
    """(rule, path, member) for rules that require one field to be one of an enum."""
    from test_invariants import RULES

    found = []
    for rule_id, rule in sorted(RULES.items()):
        require = rule.get("require")
        where = require.get("x-where", {}) if isinstance(require, dict) else {}
        if len(where) == 1:
            ((path, condition),) = where.items()
            found += [(rule_id, path, m) for m in (condition.get("enum", []) if isinstance(condition, dict) else [])]
    return found


@pytest.mark.parametrize("rule_id, path, member", _enum_members())
def test_each_value_a_rule_allows_passes_it(rule_id, path, member):
    """The recipe that breaks the rule, with the field set to each value the rule allows."""
    from test_invariants import CASES

    target, breaking, _ = CASES[rule_id]
    value = json.dumps(member)  # JSON is YAML: null, numbers and quoted strings as they are
    assert rule_id not in rules_of(target, [*breaking, f"{path}={value}"])


def _unset_applies() -> list[tuple[str, str]]:
    """(rule, path) where the rule's `when` takes the field unset (null among its enum)."""
    from test_invariants import RULES

    found = []
    for rule_id, rule in sorted(RULES.items()):
        when = rule.get("when")
        where = when.get("x-where", {}) if isinstance(when, dict) else {}
        if "compute" not in rule:  # computed rules run once the types hold: null is not a type they see
            found += [(rule_id, path) for path, c in where.items() if isinstance(c, dict) and None in c.get("enum", [])]
    return found


@pytest.mark.parametrize("rule_id, path", _unset_applies())
def test_a_rule_for_a_field_left_unset_applies_when_it_is_null(rule_id, path):
    """The field's default is the trainer's own (FSDP1, LeRobot's accelerate API, ...): the rule
    that covers the default holds for a recipe that leaves the field null."""
    from test_invariants import CASES

    target, breaking, _ = CASES[rule_id]
    assert rule_id in rules_of(target, [*breaking, f"{path}=null"])


def _refused_keys() -> list[tuple[str, str, str]]:
    """(rule, object's dotted path, key) for each key a rule refuses in an object
    (`propertyNames: {not: {enum: [...]}}`, at the x-where path or under its `properties`)."""
    from test_invariants import RULES

    found = []

    def walk(rule_id, path, schema):
        if not isinstance(schema, dict):
            return
        names = schema.get("propertyNames", {}).get("not", {}).get("enum", [])
        found.extend((rule_id, path, key) for key in names)
        for name, sub in schema.get("properties", {}).items():
            walk(rule_id, f"{path}.{name}", sub)

    for rule_id, rule in sorted(RULES.items()):
        require = rule.get("require")
        for path, schema in (require.get("x-where", {}) if isinstance(require, dict) else {}).items():
            walk(rule_id, path, schema)
    return found


@pytest.mark.parametrize("rule_id, path, key", _refused_keys())
def test_each_key_a_rule_refuses_is_refused(rule_id, path, key):
    """Each key of the list, alone in the object, on the recipe that passes the rule."""
    from test_invariants import CASES

    target, _, passing = CASES[rule_id]
    assert rule_id in rules_of(target, [*passing, f"{path}={{{key}: 1}}"])
    assert rule_id not in rules_of(target, [*passing, f"{path}={{{key}_not_derived: 1}}"])


# A value for each field a not-applicable rule names: set, and unlike the trainer's own default.
NOT_DEFAULT = {
    "policy.pretrained_path": "org/model", "policy.n_action_steps": "3", "policy.history_interval": "2",
    "policy.resize_imgs_with_padding": "[224, 224]", "policy.attention_implementation": "eager",
    "policy.freeze_vision_encoder": "true", "policy.train_expert_only": "true", "policy.use_torch_compile": "true",
    "policy.dtype": "bfloat16", "policy.options": "{x: 1}", "policy.gradient_checkpointing": "true",
    "policy.arch": "{hidden: 64, depth: 2, expert_depth: 1, heads: 2, patch: 8, image_size: 32, state_dim: 8, action_dim: 7, mlp_ratio: 4}",
    "dataset.repo_id": "org/data", "dataset.root": "/data", "dataset.revision": "v1", "dataset.episodes": "[0, 1]",
    "dataset.options": "{x: 1}", "dataset.resolution": "[320, 240]", "dataset.action_freq": "10",
    "dataset.image_resample_strategy": "linear", "dataset.vector_resample_strategy": "linear",
    "dataset.val_split_ratio": "0.1", "dataset.drop_probs": "{subgoal: 1.0}", "dataset.synthetic": "{samples: 64, seed: 0}",
    "train.loss_weights": "{MSE: 2}", "train.eval": "{env: libero, every: 0}", "train.num_workers": "3",
    "train.prefetch_factor": "4", "train.output_dir": "out", "train.checkpoint.keep": "3",
    "train.checkpoint.consolidated": "false", "train.gradient_accumulation_steps": "2",
    "train.scheduler.decay_steps": "1000", "train.scheduler.peak_lr": "0.001", "train.scheduler.decay_lr": "0.0",
    "train.optimizer.betas": "[0.9, 0.99]", "train.optimizer.eps": "1e-6",
    "trainer.env": "/opt/env", "trainer.opentau": "{program: opentau-train-v2}", "trainer.lerobot": "{push_to_hub: true, repo_id: org/act}",
    "trainer.command": "{program: ./train.sh}", "trainer.builtin": "{progress: false}",
    "launch.image": "ghcr.io/team/train:1", "launch.kubernetes": "{shm_size: 1Gi}",
}  # fmt: skip
# the recipe each not-applicable rule applies to, where the bundled cell alone is not it
APPLIES_TO = {
    "command-not-applicable": [
        "hardware.processes_per_node=1",
        "trainer.kind=command",
        "trainer.command.program=./train.sh",
    ],
    "sgd-not-applicable": ["train.optimizer.type=sgd"],
    "trainer-env-on-cluster": ["launch.launcher=skypilot"],
}


def _not_applicable() -> list[tuple[str, str]]:
    from test_invariants import RULES

    return [
        (r, f) for r, rule in sorted(RULES.items()) if rule.get("compute") == "not-applicable" for f in rule["fields"]
    ]


@pytest.mark.parametrize("rule_id, field", _not_applicable())
def test_each_field_a_trainer_cannot_take_is_refused_at_its_path(rule_id, field):
    """Each field of a not-applicable rule, set alone on a recipe the rule applies to."""
    from test_invariants import CASES

    target = CASES[rule_id][0]
    recipe = compose(target, [*APPLIES_TO.get(rule_id, []), f"{field}={NOT_DEFAULT[field]}"])
    paths = {p.path for p in validate(recipe.data, recipe.origins) if p.rule == rule_id}
    assert field in paths or any(p.startswith(field + ".") for p in paths), paths


def _located() -> list[tuple[str, str]]:
    """(rule, the field its problem names): the rule's `at`, else the left side of its comparison."""
    from test_invariants import RULES

    found = []
    for rule_id, rule in sorted(RULES.items()):
        require = rule.get("require")
        left = require.get("x-compare", {}).get("left") if isinstance(require, dict) else None
        if rule.get("at") or isinstance(left, str):
            found.append((rule_id, rule.get("at") or left))
    return found


@pytest.mark.parametrize("rule_id, field", _located())
def test_a_rule_names_the_field_to_fix(rule_id, field):
    """The problem points at the field a user changes: the rule's `at`, or the compared field."""
    from test_invariants import CASES

    target, breaking, _ = CASES[rule_id]
    recipe = compose(target, breaking)
    assert {p.path for p in validate(recipe.data, recipe.origins) if p.rule == rule_id} == {field}


# x-compare, the keyword arithmetic rules are written in (a team's rules/*.json use it too)
DOC = {"a": {"n": 4, "s": "four", "none": None}}


@pytest.mark.parametrize(
    "spec, fails, path",
    [
        ({"left": "a.n", "op": "==", "right": 4}, False, None),
        ({"left": "a.n", "op": "<", "right": 4}, True, ("a", "n")),
        # the problem names the first field the comparison reads, on either side, inside a product
        ({"left": 5, "op": "==", "right": {"product": [2, {"path": "a.n"}]}}, True, ("a", "n")),
        ({"left": {"path": "a.n"}, "op": "==", "right": 5}, True, ("a", "n")),
        ({"left": 1, "op": "==", "right": 2}, True, ()),
        # a field unset takes its default; without one, or a factor that is not a number, there is nothing to compare
        ({"left": {"path": "a.none", "default": "a.n"}, "op": "==", "right": 4}, False, None),
        ({"left": {"path": "a.none", "default": "a.n"}, "op": "==", "right": 5}, True, ("a", "none")),
        ({"left": {"path": "a.missing"}, "op": "==", "right": 5}, False, None),
        ({"left": {"product": [{"path": "a.s"}, 2]}, "op": "==", "right": 5}, False, None),
        ({"left": {"product": [{"path": "a.missing"}, 2]}, "op": "==", "right": 5}, False, None),
    ],
)  # fmt: skip
def test_a_comparison_reads_paths_defaults_and_products(spec, fails, path):
    from registry.validate.keywords import x_compare

    errors = list(x_compare(None, spec, DOC, {}))
    assert bool(errors) == fails
    if fails:
        assert tuple(errors[0].path) == path
