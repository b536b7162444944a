"""`recipe import` and `recipe validate --accelerate-config`: a team's existing accelerate yaml
(its DeepSpeed JSON, and an OpenTau JSON or LeRobot flags) turned into a recipe: the adoption
path. Every field read lands where the recipe keeps it; what has no place in a recipe is
reported, not dropped silently, and the report travels in the recipe file as comments.

The field tables that read them are the ones resolve writes with: accelerate.py (with fsdp.py and
deepspeed.py) for the accelerate yaml and its DeepSpeed JSON, trainers/opentau.py and
trainers/lerobot.py for the trainer's config, in that order and into one recipe; `finish` then
checks what waited for a later file. Without a trainer the policy is unknown: the recipe says so
(`policy.type: unknown`, no sizes, so the memory estimate is skipped) rather than borrowing a
bundled part's facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from registry.compose import catalog
from registry.doc import MISSING, join, lookup, split
from registry.errors import RecipeError
from registry.load import load_json
from registry.resolve.accelerate import import_config as from_accelerate
from registry.resolve.accelerate import launch_flags
from registry.trainers import lerobot, lerobot_defaults
from registry.trainers.lerobot import import_flags as from_lerobot
from registry.trainers.mapping import Notes, Reader, finish
from registry.trainers.opentau import import_config as from_opentau

UNKNOWN = "unknown"  # policy.type of a policy the import cannot name
PROGRAM = "train.py"  # the command trainer's program when the team's script is not named
DEFAULT_GPU = "A100-80GB"  # the GPU assumed when --gpu is not given (and said in the notes)


@dataclass
class Setup:
    """What a team runs today, as the command line names it."""

    accelerate: Path | None = None  # None: a bare `accelerate launch`, with its defaults (bare_launch)
    deepspeed: Path | None = None
    trainer: str | None = None  # opentau | lerobot | None: the team's own script (command trainer)
    trainer_config: Path | None = None
    trainer_args: str | None = None
    gpu: str | None = None  # None: DEFAULT_GPU, with a note (its precision and memory decide verdicts)
    policy: str | None = None  # a bundled policy part to extend
    program: str | None = None  # the team's training script, for the command trainer
    launch_args: str = ""  # accelerate launch flags given beside --config_file (--num_processes 8)


@dataclass
class Imported:
    recipe: dict
    part: str | None  # the policy part the recipe extends
    notes: Notes
    origin: str  # the files it came from, for the recipe's summary


def read(setup: Setup) -> Imported:
    """Import a setup in memory; RecipeError (one line) for a file that cannot be read."""
    if setup.trainer == "opentau" and not setup.trainer_config:
        raise RecipeError("--trainer opentau needs --trainer-config C.json")
    if setup.trainer == "lerobot" and setup.trainer_args is None:
        raise RecipeError('--trainer lerobot needs --trainer-args "--policy.type=act ..."')
    _check_trainer_input(setup)
    named = setup.gpu or DEFAULT_GPU
    # an alias (H100) is written as its entry (H100-SXM), and so is a device name ('Tesla T4': nvidia-smi's)
    gpu = catalog.canonical(named) or catalog.device_entry(named)
    if gpu is None:
        raise RecipeError(f"--gpu: {catalog.unknown(named)}")
    if setup.accelerate is None:
        if setup.deepspeed:
            raise RecipeError("--deepspeed-config needs --accelerate-config (the yaml whose deepspeed_config names it)")
        recipe, notes = bare_launch(gpu, launch_flags(setup.launch_args))
    else:
        recipe, notes = from_accelerate(setup.accelerate, gpu, setup.deepspeed, launch_flags(setup.launch_args))
    if setup.gpu is None and lookup(recipe, "hardware.gpu") not in (MISSING, None):
        notes.append(
            f"hardware.gpu: no --gpu given, so {gpu} is assumed; the precision checks (bf16, fp8) and the memory"
            " estimate are judged for it (--gpu NAME for the cluster's GPU)"
        )
    origin = setup.accelerate.name if setup.accelerate else "accelerate launch's defaults"
    origin += f" and {setup.deepspeed.name}" if setup.deepspeed else ""
    part = None
    if setup.trainer == "opentau":
        part = from_opentau(setup.trainer_config, recipe, notes)
        origin += f" and {setup.trainer_config.name}"
    elif setup.trainer == "lerobot":
        part = from_lerobot(setup.trainer_args, recipe, notes)
        origin += " and lerobot-train flags"
    else:
        program = setup.program or PROGRAM
        recipe["trainer"] = {"kind": "command", "command": {"program": program}}
        if not setup.program:
            notes.append(f"trainer.command.program: the training script is not named; {PROGRAM} is written (--program)")
        _sharded_save(recipe, notes)
    if setup.policy:
        part = setup.policy
    elif part is None:
        recipe.setdefault("policy", {}).setdefault("type", UNKNOWN)
        notes.append(
            "policy: no trainer config names it; policy.type is unknown and the recipe has no sizes, so the"
            " memory estimate is skipped (--trainer, or --policy to extend a bundled part)"
        )
    if part:
        _unset_what_the_trainer_cannot_take(recipe, part, notes)
    if setup.trainer == "lerobot":
        lerobot_defaults.settle(recipe, part, lerobot.parse(setup.trainer_args), notes)
    finish(recipe, notes)
    return Imported(recipe, part, notes, origin)


def bare_launch(gpu: str, launch: dict) -> tuple[dict, Notes]:
    """No accelerate yaml: what `accelerate launch` does without one (and without a default_config.yaml
    in its cache folder): one process per GPU it sees, on one machine, mixed_precision no
    (docs/rules.md, "Checking the configs you already have"). The GPU count of the machine is not known here, so
    one process is assumed unless --launch-args names the count."""
    from registry.resolve.accelerate import TABLE

    data = {"compute_environment": "LOCAL_MACHINE", "num_machines": 1, "mixed_precision": "no", **launch}
    processes, machines = data.get("num_processes") or 1, max(1, data["num_machines"] or 1)
    data["num_processes"] = processes
    data["distributed_type"] = "MULTI_GPU" if processes > 1 else "NO"  # accelerate's --multi_gpu past one process
    recipe: dict = {
        "backend": {"kind": "ddp"},
        "hardware": {"gpu": gpu, "gpus_per_node": max(1, processes // machines), "nodes": machines},
    }
    notes = Notes()
    reader = Reader(recipe, notes)
    reader.read(TABLE, data, "accelerate launch")
    reader.finish()
    said = {
        "num_processes": "one process per GPU it sees (1 assumed here: --launch-args '--num_processes N')",
        "num_machines": "one machine",
        "mixed_precision": "mixed_precision no",
    }
    defaults = [text for key, text in said.items() if key not in launch] or ["none, --launch-args names them all"]
    notes.append(
        "accelerate: no --accelerate-config, so the defaults of `accelerate launch` without a config file: "
        + ", ".join(defaults)
        + " (a default_config.yaml in accelerate's cache folder is not read: name it with --accelerate-config)"
    )
    return recipe, notes


def _unset_what_the_trainer_cannot_take(recipe: dict, part: str, notes: Notes) -> None:
    """A bundled policy part written for one trainer may set fields another has no counterpart for
    (OpenTau's pi05 part, extended by LeRobot's pi05, sets attention_implementation). The team did
    not set them: they are reset to null (the trainer's own default) in the imported recipe, with a
    note, rather than refused as the team's (`TRAINER-not-applicable`, docs/failure-modes.md §31)."""
    from registry.load import load_cached
    from registry.names import parse
    from registry.sharing import sources
    from registry.validate.checks import changed
    from registry.validate.schemas import computed_rules

    kind = lookup(recipe, "trainer.kind")
    rule = next((r for r in computed_rules() if r.get("id") == f"{kind}-not-applicable"), None)
    found = sources.find(parse(f"policy/{part}"))
    if rule is None or found is None:
        return
    layer = load_cached(found).data
    for dotted in rule["fields"]:
        for path, value in changed(lookup(layer, dotted), split(dotted)):
            if lookup(recipe, join(path)) is not MISSING:
                continue  # the team's own value: validation judges it
            node = recipe
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = None
            notes.append(
                f"{join(path)}: the {part} part's {value!r} has no {kind} counterpart; null here (the trainer's own)"
            )


def _sharded_save(recipe: dict, notes: Notes) -> None:
    """A team's script saves its model through the FSDP state_dict_type: a sharded one writes per-rank
    shards, so the recipe says what the setup does rather than asking for more (fsdp-sharded-consolidated)."""
    kind = lookup(recipe, "backend.state_dict_type")
    if lookup(recipe, "backend.kind") == "fsdp" and kind not in (MISSING, None, "FULL_STATE_DICT"):
        recipe.setdefault("train", {}).setdefault("checkpoint", {})["consolidated"] = False
        notes.append(
            f"train.checkpoint.consolidated: false, as the script saves through fsdp_state_dict_type {kind}"
            " (per-rank shards, not one model file)"
        )


def _check_trainer_input(setup: Setup) -> None:
    """An OpenTau policy.type that is not a name, said at its line before the reader uses it."""
    if setup.trainer == "opentau":
        loaded = load_json(setup.trainer_config, "OpenTau TrainPipelineConfig JSON")
        kind = lookup(loaded.data, "policy.type")
        if kind is not MISSING and kind is not None and not isinstance(kind, str):
            raise RecipeError.at(
                loaded.origins.get(("policy", "type"), loaded.file),
                "import-value",
                f"{kind!r} is not a policy type name",
                path="policy.type",
            )


def render(imported: Imported, name: str, dest: Path) -> str:
    """The recipe file, its import notes first as comments, so they travel with it."""
    from registry.sharing import binding

    doc: dict = {"recipe": {"name": name, "summary": f"imported from {imported.origin}"}}
    if imported.part:
        doc["extends"] = [f"policy/{imported.part}"]
    for section in ("trainer", "policy", "dataset", "backend", "hardware", "train", "launch"):
        if imported.recipe.get(section):
            doc[section] = imported.recipe[section]
    head = [binding.modeline(dest), f"# imported by `recipe import` from {imported.origin}"]
    if imported.notes:
        head.append("# what the import could not carry over or had to decide (recipe import's notes):")
        head += [f"#   - {line}" for note in imported.notes for line in note.splitlines()]
    return "\n".join(head) + "\n" + yaml.safe_dump(doc, sort_keys=False, width=100)
