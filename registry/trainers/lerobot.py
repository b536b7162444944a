"""LeRobot: `lerobot-train` flags under `accelerate launch --config_file` (v0.6, api: accelerate)
or torchrun with `--parallelism.*` / `--accelerator.*` (main, api: parallelism)."""

from __future__ import annotations

from registry.errors import Exit, RecipeError
from registry.trainers.base import Context, Invocation, Raw, flag_value

PROGRAM = "lerobot-train"
HINT = "pip install 'lerobot[training]' (Python >= 3.12), in an environment of its own"
_POLICY_FLAGS = ("n_obs_steps", "chunk_size", "n_action_steps", "pretrained_path")


def flags(doc: dict) -> list[str]:
    policy, dataset, train = doc["policy"], doc["dataset"], doc["train"]
    options = doc["trainer"].get("lerobot", {})
    out = [f"--policy.type={policy['type']}"]
    out += [f"--policy.{k}={flag_value(policy[k])}" for k in _POLICY_FLAGS if policy.get(k) is not None]
    out += [f"--policy.{k}={flag_value(v)}" for k, v in policy.get("options", {}).items()]
    if dataset.get("repo_id"):
        out.append(f"--dataset.repo_id={dataset['repo_id']}")
    if dataset.get("root"):
        out.append(f"--dataset.root={dataset['root']}")
    out += [f"--dataset.{k}={flag_value(v)}" for k, v in dataset.get("options", {}).items()]
    every = int(train.get("checkpoint", {}).get("every", 0))
    out += [
        f"--batch_size={train['micro_batch_size']}",  # per process
        f"--steps={train['steps']}",
        f"--seed={train.get('seed', 1000)}",
        f"--save_freq={every or train['steps']}",
        f"--log_freq={train.get('log_every', 10)}",
        f"--num_workers={train.get('num_workers', 4)}",
        "--output_dir=output",
        f"--wandb.enable={flag_value(bool(options.get('wandb', False)))}",
    ]
    if options.get("job_name"):
        out.append(f"--job_name={options['job_name']}")
    push = bool(options.get("push_to_hub", False))
    out.append(f"--policy.push_to_hub={flag_value(push)}")
    if push:
        out.append(f"--policy.repo_id={options['repo_id']}")
    return out + list(options.get("args", []))


def invocation(doc: dict, ctx: Context) -> Invocation:
    backend, train = doc["backend"], doc["train"]
    if backend["kind"] == "deepspeed":
        raise RecipeError("LeRobot has no DeepSpeed path (hint: use backend=ddp, fsdp or fsdp2)", Exit.INVALID)
    options = doc["trainer"].get("lerobot", {})
    program = options.get("program", PROGRAM)
    script = Raw(f'"$(command -v {program})"')
    accumulation = int(train.get("gradient_accumulation_steps", 1))
    if options.get("api", "accelerate") == "parallelism":
        world = ctx.nodes * ctx.processes_per_node
        shard = (
            [f"--parallelism.dp_shard={world}", "--parallelism.dp_replicate=1"]
            if backend["kind"] == "fsdp"
            else ["--parallelism.dp_shard=1", f"--parallelism.dp_replicate={world}"]
        )
        extra = [
            f"--accelerator.mixed_precision={backend.get('mixed_precision', 'no')}",
            f"--accelerator.gradient_accumulation.steps={accumulation}",
        ]
        if backend["kind"] == "fsdp" and doc["policy"].get("block_classes"):
            extra.append(f"--accelerator.fsdp.wrap_modules={','.join(doc['policy']['block_classes'])}")
        return Invocation(
            ctx.torchrun() + [script] + flags(doc) + shard + extra, program, HINT, uses_accelerate_config=False
        )
    if accumulation != 1:
        raise RecipeError(
            "lerobot-train v0.6 has no gradient accumulation flag (hint: trainer.lerobot.api=parallelism)", 1
        )
    return Invocation(ctx.accelerate() + [script] + flags(doc), program, HINT)
