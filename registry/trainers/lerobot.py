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
from registry.trainers.base import Context, Invocation
from registry.trainers.mapping import Computed, Const, Extra, Field, Reader, Rest, Table, field, stated, write_flags

PACKAGE = "lerobot"
FUSED_ADAM = False  # its AdamWConfig builds torch.optim.AdamW with torch's default, foreach
PROVEN = ("0.6.1", "0.7")  # proven against 0.6.1 (benchmarks/results/trainers_gpu.md)
HINT = (
    "python3.12 -m venv ENV && ENV/bin/pip install 'lerobot==0.6.1', then set trainer.env=ENV"
    "; LeRobot needs Python >= 3.12, so it needs an environment of its own"
)
# policy.type -> LeRobot's extra for it where the two names differ; any other type is asked as its
# own extra (`diffusion`, `smolvla`), and a type LeRobot declares no extra for (act) needs none
EXTRA_OF = {"pi0": "pi", "pi05": "pi", "pi0_fast": "pi"}
# the config LeRobot saved with its last checkpoint; resuming reads it back (--config_path)
LAST = "output/checkpoints/last"
RESUME_CONFIG = f"{LAST}/pretrained_model/train_config.json"
# read by the invocation besides TABLE (resolve/fields.py)
READS = ("trainer.lerobot.module", "trainer.lerobot.api", "trainer.env")


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


# Which LeRobot v0.6.1 policy configs have each option (policies/*/configuration_*.py); for the
# others the lerobot-policy-* rules make setting it an error instead of a dropped flag.
HAS = {
    "dtype": ("pi0", "pi05"),
    "gradient_checkpointing": ("diffusion", "pi0", "pi05"),
    "compile_model": ("diffusion", "smolvla", "pi0", "pi05"),
    "freeze": ("smolvla", "pi0", "pi05"),
}
# the scheduler types a recipe names -> LeRobot's
SCHEDULERS = {"constant": "constant_with_warmup", "cosine_decay_with_warmup": "cosine_decay_with_warmup"}
_PRESET = (
    "the recipe sets the optimizer and scheduler itself (train.optimizer, train.scheduler); the bundled"
    " policy parts hold LeRobot's preset values"
)


def _policy(*types: str):
    return lambda doc: field(doc, "policy.type") in types


def _not_policy(*types: str):
    return lambda doc: field(doc, "policy.type") not in types


def _cosine(doc) -> bool:
    return field(doc, "train.scheduler.type") == "cosine_decay_with_warmup"


def _adam(doc) -> bool:
    return field(doc, "train.optimizer.type") != "sgd"  # SGD has no betas or eps


def _scheduler(name: str):
    return {v: k for k, v in SCHEDULERS.items()}.get(name, name)


TABLE = Table(
    Field("policy.type", "policy.type", back=str),
    Field("policy.n_obs_steps", "policy.n_obs_steps"),
    # diffusion calls its action chunk the horizon
    Field("policy.chunk_size", "policy.chunk_size", when=_not_policy("diffusion"), exclusive=True),
    Field("policy.chunk_size", "policy.horizon", when=_policy("diffusion"), exclusive=True),
    Field("policy.n_action_steps", "policy.n_action_steps"),
    Field("policy.pretrained_path", "policy.pretrained_path", back=str),
    # pi0 and pi05 build their Accelerator's precision from dtype (lerobot-pi-precision)
    Field(
        "policy.dtype",
        "policy.dtype",
        when=lambda doc: _policy(*HAS["dtype"])(doc) and field(doc, "policy.dtype") != "auto",
        back=str,
        exclusive=True,
    ),
    Field(
        "policy.gradient_checkpointing",
        "policy.gradient_checkpointing",
        when=_policy(*HAS["gradient_checkpointing"]),
        exclusive=True,
    ),
    Field("policy.use_torch_compile", "policy.compile_model", when=_policy(*HAS["compile_model"]), exclusive=True),
    Field("policy.freeze_vision_encoder", "policy.freeze_vision_encoder", when=_policy(*HAS["freeze"]), exclusive=True),
    Field("policy.train_expert_only", "policy.train_expert_only", when=_policy(*HAS["freeze"]), exclusive=True),
    Field(
        "policy.resize_imgs_with_padding", "policy.resize_imgs_with_padding", when=_policy("smolvla"), exclusive=True
    ),
    Field("policy.resize_imgs_with_padding", "policy.image_resolution", when=_policy("pi0", "pi05"), exclusive=True),
    Extra("policy.options", "policy."),
    Field("dataset.repo_id", "dataset.repo_id", back=str, when=_given("dataset.repo_id")),
    Field("dataset.root", "dataset.root", back=str, when=_given("dataset.root")),
    Field("dataset.revision", "dataset.revision", back=str, when=_given("dataset.revision")),
    Field("dataset.episodes", "dataset.episodes", when=_given("dataset.episodes")),
    Extra("dataset.options", "dataset."),
    Field("train.micro_batch_size", "batch_size"),  # per process
    Field("train.steps", "steps"),
    Field("train.seed", "seed"),
    Const("save_checkpoint", True),
    Field("train.checkpoint.every", "save_freq", derive=lambda every, doc: every or field(doc, "train.steps")),
    Field("train.log_every", "log_freq"),
    Field("train.num_workers", "num_workers"),
    Field("train.prefetch_factor", "prefetch_factor", when=_given("train.prefetch_factor")),
    # LeRobot ignores every --optimizer.* flag while its policy preset is on (docs/failure-modes.md §31)
    Const("use_policy_training_preset", False, why=_PRESET),
    Field("train.optimizer.type", "optimizer.type", back=str),
    Field("train.optimizer.lr", "optimizer.lr"),
    Field("train.optimizer.weight_decay", "optimizer.weight_decay"),
    Field("train.optimizer.betas", "optimizer.betas", when=_adam),
    Field("train.optimizer.eps", "optimizer.eps", when=_adam),
    # LeRobot clips whenever grad_clip_norm > 0: 0 is how it spells "no clipping"
    Field("train.optimizer.grad_clip_norm", "optimizer.grad_clip_norm", unset=0, null=False),
    Field("train.scheduler.type", "scheduler.type", to=lambda kind: SCHEDULERS.get(kind, kind), back=_scheduler),
    Field("train.scheduler.warmup_steps", "scheduler.num_warmup_steps"),
    Field(
        "train.scheduler.decay_steps",
        "scheduler.num_decay_steps",
        derive=lambda steps, doc: steps or field(doc, "train.steps"),
        when=_cosine,
    ),
    # LeRobot scales from optimizer.lr and uses decay_lr / peak_lr as the floor, as the built-in loop does
    Field(
        "train.scheduler.peak_lr",
        "scheduler.peak_lr",
        derive=lambda lr, doc: lr or field(doc, "train.optimizer.lr"),
        when=_cosine,
    ),
    Field("train.scheduler.decay_lr", "scheduler.decay_lr", when=_cosine),
    Field("train.eval.every", "env_eval_freq", when=stated("train.eval.every")),
    Field("train.eval.env", "env.type", back=str, when=_given("train.eval.env")),
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
    """`python -m` the training module under the trainer environment's accelerate (or torchrun),
    so every rank runs in the Python that has LeRobot. The rules lerobot-no-deepspeed and
    lerobot-no-accumulation have held before this runs."""
    recipe = view.of(doc)
    entry = ["-m", recipe.trainer.lerobot.module]
    parallelism = recipe.trainer.lerobot.api == "parallelism"
    start = ctx.torchrun() if parallelism else ctx.accelerate()
    return Invocation(
        start + entry + flags(doc),
        ctx.python or start[0],
        HINT,
        uses_accelerate_config=not parallelism,
        package=PACKAGE,
        proven=PROVEN,
        python=ctx.python,
        resume_args=("--resume=true", f"--config_path={RESUME_CONFIG}"),
        extra=EXTRA_OF.get(recipe.policy.type, recipe.policy.type),
    )


# LeRobot 0.6.1's policy types (lerobot-policy-type), longest first so pi0_fast wins over pi0
POLICY_TYPES = ("pi0_fast", "smolvla", "diffusion", "groot", "tdmpc", "vqbet", "pi05", "xvla", "act", "pi0", "sac")


def _policy_path(given: dict[str, str], notes: list[str]) -> None:
    """--policy.path=lerobot/smolvla_base is lerobot-train's other way to name a policy: it loads
    that checkpoint's config and weights. The recipe names the policy by type, so the type is read
    from the checkpoint's name, and the path becomes policy.pretrained_path."""
    path = given.get("policy.path")
    if path is None:
        return
    name = path.rstrip("/").rsplit("/", 1)[-1].lower()
    kind = next((t for t in POLICY_TYPES if name.startswith(t)), None)
    if "policy.type" in given or kind is None:
        notes.append(
            f"lerobot-train flags --policy.path={path}: the policy type is not read from a checkpoint's"
            " config.json; name it with --policy.type"
        )
        if "policy.type" in given:
            given.pop("policy.path")
            given.setdefault("policy.pretrained_path", path)
        return
    given.pop("policy.path")
    given["policy.type"] = kind
    given.setdefault("policy.pretrained_path", path)
    notes.append(
        f"lerobot-train flags --policy.path={path}: policy.type {kind} is read from the checkpoint's name and"
        f" policy.pretrained_path is {path}; the policy part stands in for the checkpoint's config.json"
    )


def parse(args: str) -> dict[str, str]:
    """lerobot-train's command line as {flag name: text}: --key=value or --key value."""
    found: dict[str, str] = {}
    try:
        tokens = shlex.split(args)
    except ValueError as e:  # an unbalanced quote
        raise RecipeError(f"--trainer-args: cannot split {args!r}: {e}") from None
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
    _policy_path(given, notes)
    if _bool(given.get("use_policy_training_preset", "true")) is True:
        # LeRobot trained with the policy's preset and ignored these; the recipe takes the policy
        # part's optimizer and scheduler, which hold the preset's values
        for key in [k for k in given if k.split(".")[0] in ("optimizer", "scheduler")]:
            notes.append(
                f"lerobot-train flags --{key}={given.pop(key)}: ignored by LeRobot under its policy preset; not imported"
            )
        given.pop("use_policy_training_preset", None)
        notes.append("lerobot-train flags: the policy preset chose the optimizer; the recipe takes the policy part's")
    api = "parallelism" if any(k.startswith("parallelism.") for k in given) else "accelerate"
    recipe["trainer"] = {"kind": "lerobot", "lerobot": {"api": api}}
    if api == "accelerate" and "gradient_accumulation_steps" in given:
        # lerobot-train v0.6.1 has no such flag (its argparse refuses it); the recipe says what was asked
        # so that lerobot-no-accumulation names it
        text = given.pop("gradient_accumulation_steps")
        recipe.setdefault("train", {})["gradient_accumulation_steps"] = int(text) if text.isdigit() else text
        notes.append(f"lerobot-train flags --gradient_accumulation_steps={text}: lerobot-train v0.6.1 has no such flag")
    reader = Reader(recipe, notes)
    reader.read(TABLE, given, "lerobot-train flags")
    reader.finish()
    policy = recipe.setdefault("policy", {})
    if "n_obs_steps" in policy:
        recipe.setdefault("dataset", {})["n_obs_history"] = policy["n_obs_steps"]
    part = policy.get("type")
    return part if part and sources.find(Name(("policy", part))) else None
