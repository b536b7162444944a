"""LeRobot: `lerobot-train` flags under `accelerate launch --config_file` (v0.6, api: accelerate)
or torchrun with `--parallelism.*` / `--accelerator.*` (main, api: parallelism).

TABLE maps the recipe onto the flags both ways: `flags` resolves it, `import_flags` reads a
team's flags back (`recipe import --trainer lerobot`). Flags no row names stay verbatim in
trainer.lerobot.args, or in policy.options / dataset.options for --policy.* / --dataset.*.
"""

from __future__ import annotations

import shlex

from registry import view
from registry.errors import RecipeError
from registry.topology import world_size
from registry.trainers.base import Context, Invocation, Raw
from registry.trainers.mapping import Computed, Const, Extra, Field, Reader, Rest, Table, field, write_flags

HINT = "pip install 'lerobot[training]' (Python >= 3.12), in an environment of its own"


def _given(path: str):
    return lambda doc: bool(field(doc, path))


def _parallelism(doc) -> bool:
    return field(doc, "trainer.lerobot.api") == "parallelism"


def _fsdp(doc) -> bool:
    return field(doc, "backend.kind") == "fsdp"


def _bool(text: str):
    """A bool flag as draccus reads it; other text is left for validation to report."""
    spelt = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}
    return spelt.get(text.lower(), text)


def _classes(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


TABLE = Table(
    Field("policy.type", "policy.type", back=str),
    *(Field(f"policy.{k}", f"policy.{k}") for k in ("n_obs_steps", "chunk_size", "n_action_steps")),
    Field("policy.pretrained_path", "policy.pretrained_path", back=str),
    Extra("policy.options", "policy."),
    Field("dataset.repo_id", "dataset.repo_id", back=str, when=_given("dataset.repo_id")),
    Field("dataset.root", "dataset.root", back=str, when=_given("dataset.root")),
    Extra("dataset.options", "dataset."),
    Field("train.micro_batch_size", "batch_size"),  # per process
    Field("train.steps", "steps"),
    Field("train.seed", "seed"),
    Field("train.checkpoint.every", "save_freq", derive=lambda every, doc: every or field(doc, "train.steps")),
    Field("train.log_every", "log_freq"),
    Field("train.num_workers", "num_workers"),
    Const("output_dir", "output", why="each run writes under its own directory"),
    Field("trainer.lerobot.wandb", "wandb.enable", back=_bool),
    Field("trainer.lerobot.job_name", "job_name", back=str, when=_given("trainer.lerobot.job_name")),
    Field("trainer.lerobot.push_to_hub", "policy.push_to_hub", back=_bool),
    Field("trainer.lerobot.repo_id", "policy.repo_id", back=str, when=_given("trainer.lerobot.push_to_hub")),
    Rest("trainer.lerobot.args"),
    # api: parallelism: the data-parallel layout and precision go on the command line
    Computed(
        "parallelism.dp_shard",
        lambda doc: world_size(doc) if _fsdp(doc) else 1,
        reads=("backend.kind", "hardware"),
        what="backend.kind and the world size",
        when=_parallelism,
    ),
    Computed(
        "parallelism.dp_replicate",
        lambda doc: 1 if _fsdp(doc) else world_size(doc),
        reads=("backend.kind", "hardware"),
        what="backend.kind and the world size",
        when=_parallelism,
    ),
    Field("backend.mixed_precision", "accelerator.mixed_precision", back=str, when=_parallelism),
    Field("train.gradient_accumulation_steps", "accelerator.gradient_accumulation.steps", when=_parallelism),
    Field(
        "policy.block_classes",
        "accelerator.fsdp.wrap_modules",
        to=",".join,
        back=_classes,
        when=lambda doc: _parallelism(doc) and _fsdp(doc) and bool(field(doc, "policy.block_classes")),
    ),
    flags=True,
)


def flags(doc: dict) -> list[str]:
    return write_flags(TABLE, doc)


def invocation(doc: dict, ctx: Context) -> Invocation:
    """The rules lerobot-no-deepspeed and lerobot-no-accumulation have held before this runs."""
    recipe = view.of(doc)
    program = recipe.trainer.lerobot.program
    script = Raw(f'"$(command -v {program})"')
    if recipe.trainer.lerobot.api == "parallelism":
        return Invocation(ctx.torchrun() + [script] + flags(doc), program, HINT, uses_accelerate_config=False)
    return Invocation(ctx.accelerate() + [script] + flags(doc), program, HINT)


def parse(args: str) -> dict[str, str]:
    """lerobot-train's command line as {flag name: text}: --key=value or --key value."""
    found: dict[str, str] = {}
    tokens = shlex.split(args)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--") and "=" in token:
            key, text = token[2:].split("=", 1)
        elif token.startswith("--") and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            key, text = token[2:], tokens[i + 1]
            i += 1
        else:
            raise RecipeError(
                f"--trainer-args: cannot read {token!r} (hint: --key=value flags as lerobot-train takes them)"
            )
        found[key] = text
        i += 1
    return found


def import_flags(args: str, recipe: dict, notes: list[str]) -> str | None:
    """Read lerobot-train flags into `recipe`; the policy part to extend, if the registry has one."""
    from registry.names import Name
    from registry.sharing import sources

    given = parse(args)
    api = "parallelism" if any(k.startswith("parallelism.") for k in given) else "accelerate"
    recipe["trainer"] = {"kind": "lerobot", "lerobot": {"api": api}}
    reader = Reader(recipe, notes)
    reader.read(TABLE, given, "lerobot-train flags")
    reader.finish()
    policy = recipe.setdefault("policy", {})
    if "n_obs_steps" in policy:
        recipe.setdefault("dataset", {})["n_obs_history"] = policy["n_obs_steps"]
    part = policy.get("type")
    return part if part and sources.find(Name(("policy", part))) else None
