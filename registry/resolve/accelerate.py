"""The accelerate config yaml <-> the recipe, both ways: only keys accelerate knows, the process
counts from the hardware part, and DeepSpeed settings left to the DeepSpeed JSON
(docs/failure-modes.md §12, §15). The fsdp_config section's table is fsdp.py's; the DeepSpeed
JSON's is deepspeed.py's.

Import (`import_config`) reads a team's yaml as `accelerate launch` does, and the DeepSpeed JSON
its deepspeed_config_file names; the trainer's config is read by its adapter in trainers/.
"""

from __future__ import annotations

from pathlib import Path

from registry.doc import MISSING, lookup
from registry.errors import Exit, Problem, RecipeError
from registry.load import load_file, load_json
from registry.resolve import deepspeed, fsdp
from registry.topology import nodes, world_size
from registry.trainers.mapping import Computed, Const, Extra, Field, Notes, Reader, Section, Table, field, write

DEEPSPEED_JSON = "deepspeed.json"
# distributed_type -> backend.kind
BACKENDS = {"NO": "ddp", "MULTI_GPU": "ddp", "MULTI_CPU": "ddp", "DEEPSPEED": "deepspeed", "FSDP": "fsdp"}


def distributed_type(doc) -> str:
    kind = field(doc, "backend.kind")
    if kind == "deepspeed":
        return "DEEPSPEED"
    if kind == "fsdp":
        return "FSDP"
    if world_size(doc) == 1:
        return "NO"
    return "MULTI_CPU" if field(doc, "hardware.gpu") is None else "MULTI_GPU"


def _is(kind: str):
    return lambda doc: field(doc, "backend.kind") == kind


def _stage3(doc) -> bool:
    return field(doc, "backend.zero_stage") == 3


def _multi_node(doc) -> bool:
    return nodes(doc) > 1


def _nvme(path):
    return MISSING if path in (None, "none") else path


_NVME_NOTE = "nvme path moved from the yaml into the recipe (accelerate does not forward it: docs/failure-modes.md §15)"

# The yaml's deepspeed_config section. Resolve points it at the DeepSpeed JSON; accelerate's inline
# settings (emit=False) are read on import only, with the defaults `accelerate launch` gives them.
DEEPSPEED_SECTION = Table(
    Field("backend.zero_stage", "zero_stage", back=int, absent=2, emit=False),
    Field("backend.offload.optimizer", "offload_optimizer_device", emit=False),
    Field("backend.offload.param", "offload_param_device", emit=False),
    Field("backend.nvme_path", "offload_optimizer_nvme_path", back=_nvme, note=_NVME_NOTE, emit=False),
    Field("backend.nvme_path", "offload_param_nvme_path", back=_nvme, note=_NVME_NOTE, emit=False),
    Field(
        "backend.zero3_save_16bit_model",
        "zero3_save_16bit_model",
        back=fsdp.truth,
        absent=lambda recipe: False if _stage3(recipe) else MISSING,
        emit=False,
    ),
    Field("train.optimizer.grad_clip_norm", "gradient_clipping", back=float, emit=False),
    Field("train.gradient_accumulation_steps", "gradient_accumulation_steps", back=int, emit=False),
    # import reads the file it names through deepspeed.TABLE instead (import_config)
    Field(
        "backend.deepspeed_config_file",
        "deepspeed_config_file",
        unset=DEEPSPEED_JSON,
        back=lambda _: MISSING,
    ),
    Field(
        "backend.zero3_init_flag",
        "zero3_init_flag",
        to=bool,
        back=fsdp.truth,
        when=_stage3,
        absent=lambda recipe: True if _stage3(recipe) else MISSING,
    ),
    Const("deepspeed_multinode_launcher", "standard", when=_multi_node),
    auto=True,
)

TABLE = Table(
    Const("compute_environment", "LOCAL_MACHINE"),
    Const("debug", False),
    Computed(
        "distributed_type",
        distributed_type,
        reads=("backend.kind", "hardware"),
        what="backend.kind and the process count",
    ),
    Const("downcast_bf16", "no"),
    Const("machine_rank", 0, why="each node's rank comes from launch.sh (MACHINE_RANK)"),
    Const("main_training_function", "main"),
    Field("hardware.nodes", "num_machines", to=int, back=int),
    Computed("num_processes", world_size, reads=("hardware",), what="hardware.nodes x the processes per node"),
    Field("launch.rdzv_backend", "rdzv_backend"),
    Field("launch.same_network", "same_network", to=bool, back=fsdp.truth, absent=False),
    Computed("use_cpu", lambda doc: field(doc, "hardware.gpu") is None, reads=("hardware",), what="hardware.gpu"),
    # With deepspeed_config_file accelerate refuses mixed_precision, even 'no' (docs/failure-modes.md §12).
    Field("backend.mixed_precision", "mixed_precision", when=lambda doc: field(doc, "backend.kind") != "deepspeed"),
    Field("launch.main_process_ip", "main_process_ip", unset="127.0.0.1", when=_multi_node),
    # on one node a busy port makes accelerate pick a free one; several nodes must agree on it
    Field("launch.main_process_port", "main_process_port", to=int, back=int),
    Section("deepspeed_config", DEEPSPEED_SECTION, when=_is("deepspeed")),
    Section("fsdp_config", fsdp.TABLE, when=_is("fsdp")),
    Extra("backend.accelerate", mode="scalars"),
)


def accelerate_config(doc: dict) -> dict:
    return write(TABLE, doc)


# accelerate's DeepSpeedPlugin refuses these beside deepspeed_config_file (docs/failure-modes.md §12)
REFUSED_BESIDE_FILE = (
    "gradient_accumulation_steps",
    "gradient_clipping",
    "zero_stage",
    "offload_optimizer_device",
    "offload_param_device",
    "offload_optimizer_nvme_path",
    "offload_param_nvme_path",
    "zero3_save_16bit_model",
)


def _keep_refused(data: dict, origins: dict, recipe: dict, notes: Notes, from_file: frozenset = frozenset()) -> dict:
    """The keys accelerate refuses beside a deepspeed_config_file, kept as the team wrote them in
    backend.accelerate (where the ds-config-file-conflict rule reports them at their line) instead of
    being read as settings the JSON also makes; the rest of the yaml, to be read as usual. A
    --mixed_precision launch flag is not refused there (only the yaml's keys are): it is checked
    against the JSON's precision instead (`_flag_precision`)."""
    section = data.get("deepspeed_config")
    if data.get("distributed_type") != "DEEPSPEED" or not isinstance(section, dict):
        return data
    if not section.get("deepspeed_config_file"):
        return data
    kept: dict = {}
    refused = [k for k in REFUSED_BESIDE_FILE if k in section]
    if refused:
        kept["deepspeed_config"] = {k: section[k] for k in refused}
    if data.get("mixed_precision") is not None and "mixed_precision" in from_file:
        kept["mixed_precision"] = data["mixed_precision"]
    if not kept:
        return data
    recipe.setdefault("backend", {})["accelerate"] = kept
    for key in refused:
        notes.located[("backend", "accelerate", "deepspeed_config", key)] = origins.get(("deepspeed_config", key))
    if "mixed_precision" in kept:
        notes.located[("backend", "accelerate", "mixed_precision")] = origins.get(("mixed_precision",))
    rest = {k: v for k, v in data.items() if k != "mixed_precision" or "mixed_precision" not in kept}
    rest["deepspeed_config"] = {k: v for k, v in section.items() if k not in refused}
    return rest


def _count(loaded, key: str) -> int:
    """A process or machine count as accelerate launch needs it: a whole number (1 when absent).
    A template (`${NUM_GPUS}`) or other text is one error at its line, not a traceback."""
    value = loaded.data.get(key)
    if value is None:
        return 1
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    # int() refuses more than 4300 digits: a traceback, not a count
    if not (text.isascii() and text.isdigit()) or len(text) > 4000:
        raise RecipeError.at(
            loaded.origins.get((key,), loaded.file),
            "import-value",
            f"{value!r} is not a whole number, and accelerate launch needs one",
            path=key,
            hint="fill in the template first (this is the value accelerate would be given)",
        )
    return max(1, int(value))


# `accelerate launch` flags that set yaml keys, as teams pass them beside --config_file
LAUNCH_FLAGS = {
    "num_processes": int,
    "num_machines": int,
    "machine_rank": int,
    "mixed_precision": str,
    "main_process_ip": str,
    "main_process_port": int,
    "rdzv_backend": str,
}


def launch_flags(text: str) -> dict:
    """`--num_processes 8 --num_machines=2 ...` as the yaml keys accelerate launch overrides with them."""
    import shlex

    try:
        words, found = shlex.split(text or ""), {}
    except ValueError as e:  # an unbalanced quote
        raise RecipeError(f"--launch-args: cannot split {text!r}: {e}") from None
    i = 0
    while i < len(words):
        word = words[i]
        key, _, value = word.lstrip("-").replace("-", "_").partition("=")
        if not word.startswith("--") or key not in LAUNCH_FLAGS:
            raise RecipeError(f"--launch-args: {word!r} is not one of --{', --'.join(LAUNCH_FLAGS)}")
        if not _:
            if i + 1 >= len(words):
                raise RecipeError(f"--launch-args: {word} needs a value")
            value, i = words[i + 1], i + 1
        try:
            found[key] = LAUNCH_FLAGS[key](value)
        except ValueError:
            raise RecipeError(f"--launch-args: {word} {value!r} is not a {LAUNCH_FLAGS[key].__name__}") from None
        i += 1
    return found


def import_config(
    path: Path, gpu: str, deepspeed_json: Path | None = None, launch: dict | None = None
) -> tuple[dict, Notes]:
    """A recipe's backend, hardware, launch and train fields from a team's accelerate yaml (and the
    DeepSpeed JSON it names), with notes on what it could not place. The trainer's config is read
    into the same recipe and notes next; `mapping.finish` ends the import."""
    loaded = load_file(path)
    from_file = frozenset(loaded.data)
    data = {**loaded.data, **(launch or {})}  # the command line wins, as in accelerate launch
    origins = {**loaded.origins, **{(k,): "--launch-args" for k in launch or {}}}
    loaded = type(loaded)(loaded.file, data, origins)
    if data.get("distributed_type", "NO") != "NO" and data.get("num_processes") is None:
        raise RecipeError.at(
            loaded.file,
            "import-value",
            "no num_processes: accelerate launch refuses it ('You need to manually pass in `--num_processes`"
            " using this config yaml')",
            hint="give the launch's flags with --launch-args '--num_processes N --num_machines M'",
        )
    for key in ("deepspeed_config", "fsdp_config"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise RecipeError.at(
                loaded.origins.get((key,), loaded.file),
                "import-value",
                f"{data[key]!r} is not a mapping of settings, which accelerate expects",
                path=key,
            )
    kind = data.get("distributed_type") or "NO"
    if not isinstance(kind, str):
        raise RecipeError.at(
            loaded.origins.get(("distributed_type",), loaded.file),
            "import-value",
            f"{kind!r} is not a distributed_type name (known: {', '.join(BACKENDS)})",
            path="distributed_type",
        )
    if kind == "FSDP" and data.get("fsdp_config") is None:
        data = {**data, "fsdp_config": {}}  # accelerate's plugin defaults, as for a section that names nothing
    if kind not in BACKENDS:
        raise RecipeError(
            f"{path}: distributed_type {kind!r} has no recipe backend (known: {', '.join(BACKENDS)})", Exit.INVALID
        )
    # the hardware part from the process counts, which the table then checks (num_processes, use_cpu)
    processes, machines = _count(loaded, "num_processes"), _count(loaded, "num_machines")
    per_node = processes // max(1, machines)
    cpu = bool(data.get("use_cpu")) or kind == "MULTI_CPU"
    recipe: dict = {
        "backend": {"kind": BACKENDS[kind]},
        "hardware": (
            {"gpu": None, "gpus_per_node": 0, "processes_per_node": per_node, "nodes": machines}
            if cpu
            else {"gpu": gpu, "gpus_per_node": per_node, "nodes": machines}
        ),
    }
    notes = Notes()
    notes.conflicts += _launch_conflicts(data, loaded.origins, loaded.file, processes, machines, cpu)
    data = _keep_refused(data, loaded.origins, recipe, notes, from_file)
    reader = Reader(recipe, notes)
    reader.read(TABLE, data, path.name, loaded.origins)
    section = data.get("deepspeed_config") if isinstance(data.get("deepspeed_config"), dict) else {}
    if kind == "DEEPSPEED" and (deepspeed_json or section.get("deepspeed_config_file")):
        file = Path(deepspeed_json) if deepspeed_json else (path.parent / str(section["deepspeed_config_file"]))
        try:
            found = file.is_file()
        except OSError as e:  # a name too long for the file system, a loop of links
            raise RecipeError(f"{path}: deepspeed_config_file: cannot look it up: {e.strerror}", Exit.INVALID) from None
        if not found:
            raise RecipeError(
                f"{path}: deepspeed_config_file {section.get('deepspeed_config_file')!r}: no such file"
                f" next to the yaml (hint: pass it with --deepspeed-config D.json)",
                Exit.INVALID,
            )
        ds = load_json(file, "DeepSpeed config")
        notes.conflicts += deepspeed.refused(ds.data, ds.origins, ds.file)
        notes.conflicts += _flag_precision((launch or {}).get("mixed_precision"), ds.data, ds.origins, ds.file)
        reader.read(deepspeed.TABLE, ds.data, file.name, ds.origins)
    reader.finish()
    _consolidated(recipe, notes)
    return recipe, notes


def _flag_precision(flag, ds: dict, origins: dict, file: str) -> list[Problem]:
    """accelerate's DeepSpeedPlugin.set_mixed_precision: a --mixed_precision flag beside a JSON that
    enables the other 16-bit type is refused; a matching one, or one the JSON leaves open, is taken."""
    if flag in (None, "no") or not isinstance(ds, dict):
        return []
    other = "bf16" if flag == "fp16" else "fp16"
    section = ds.get(other)
    if not (isinstance(section, dict) and str(section.get("enabled", "False")).lower() == "true"):
        return []
    return [
        _conflict(
            f"--mixed_precision {flag} beside {file}, which enables {other}",
            origins.get((other, "enabled"), file),
            f"accelerate refuses it: '`--mixed_precision` arg cannot be set to `{flag}` when `{other}` is set in"
            " the DeepSpeed config file'; drop the flag or make them agree",
        )
    ]


def _conflict(text: str, where, hint: str) -> Problem:
    return Problem("error", "import-conflict", "", text, where, hint)


# the distributed types accelerate launch runs as --multi_gpu (accelerate/commands/launch.py)
MULTI_DEVICE = (
    "MULTI_GPU",
    "MULTI_NPU",
    "MULTI_MLU",
    "MULTI_SDAA",
    "MULTI_MUSA",
    "MULTI_XPU",
    "MULTI_HPU",
    "MULTI_NEURON",
)


def _launch_conflicts(data: dict, origins: dict, file, processes: int, machines: int, cpu: bool) -> list[Problem]:
    """What makes `accelerate launch` start another job than the yaml says, or none that can meet:
    a total process count that the machines cannot share evenly, a machine_rank outside the job, a
    multi-machine job without the main machine's address, more processes on a machine than its
    gpu_ids name, a DeepSpeed sequence-parallel size that does not divide the processes
    (docs/failure-modes.md §58)."""
    at = lambda key: origins.get((key,), str(file))  # noqa: E731
    found = []
    if processes % machines:
        found.append(
            _conflict(
                f"num_processes {processes} is not a multiple of num_machines {machines}",
                at("num_processes"),
                "num_processes is the total over all machines; accelerate launch starts num_processes //"
                f" num_machines = {processes // machines} per machine",
            )
        )
    rank = data.get("machine_rank", 0)
    if type(rank) is int and not 0 <= rank < machines:
        found.append(
            _conflict(
                f"machine_rank {rank} is outside 0..{machines - 1} (num_machines {machines})",
                at("machine_rank"),
                "torch.distributed waits for a rank that no machine has; number the machines from 0",
            )
        )
    ds = data.get("deepspeed_config") if isinstance(data.get("deepspeed_config"), dict) else {}
    # pdsh/openmpi/mvapich launchers reach the nodes through a hostfile: only the standard one
    # needs the main process's address in the yaml
    hostfile = ds.get("deepspeed_multinode_launcher", "standard") != "standard"
    if machines > 1 and not data.get("main_process_ip") and not hostfile:
        found.append(
            _conflict(
                f"num_machines {machines} and no main_process_ip",
                at("num_machines"),
                "every machine must reach the main one ('When using multiple machines, you need to specify"
                " the main process IP'); set main_process_ip (or --main_process_ip)",
            )
        )
    ids = data.get("gpu_ids")
    if not cpu and isinstance(ids, (str, int)) and str(ids).strip().lower() != "all":
        named = [i for i in str(ids).split(",") if i.strip()]
        # accelerate's _validate_launch_command counts the comma-separated ids of a MULTI_GPU yaml
        if data.get("distributed_type") in MULTI_DEVICE and machines <= 1 and len(str(ids).split(",")) < 2:
            found.append(
                _conflict(
                    f"distributed_type {data['distributed_type']} with one GPU id (gpu_ids {ids})",
                    at("gpu_ids"),
                    "accelerate launch refuses it ('Less than two GPU ids were configured and tried to run on"
                    " multiple GPUs'); for one GPU set distributed_type: 'NO', else name two or more GPUs"
                    " or gpu_ids: all",
                )
            )
        elif named and processes // machines > len(named):
            found.append(
                _conflict(
                    f"{processes // machines} processes per machine but gpu_ids names {len(named)} GPUs ({ids})",
                    at("gpu_ids"),
                    "accelerate launch makes only gpu_ids visible, so processes share GPUs or fail on an"
                    " invalid device ordinal; lower num_processes or name more GPUs",
                )
            )
    sp = deepspeed.sequence_parallel(
        {"backend": {"accelerate": {"parallelism_config": data.get("parallelism_config")}}}
    )
    if data.get("distributed_type") == "DEEPSPEED" and sp > 1 and processes % sp:
        found.append(
            _conflict(
                f"DeepSpeed sequence parallelism of {sp} does not divide num_processes {processes}",
                origins.get(("parallelism_config", "parallelism_config_sp_size"), at("parallelism_config")),
                "DeepSpeed builds sequence-parallel groups of sp_size ranks from the world; use a divisor",
            )
        )
    return found


def _consolidated(recipe: dict, notes: Notes) -> None:
    """Under ZeRO-3 a setup writes a consolidated model only if it gathers 16-bit weights on save;
    the recipe says what the setup does rather than asking for more (zero3-save-16bit)."""
    stage, gathers = lookup(recipe, "backend.zero_stage"), lookup(recipe, "backend.zero3_save_16bit_model") is True
    if lookup(recipe, "backend.kind") == "deepspeed" and stage == 3:
        recipe.setdefault("train", {}).setdefault("checkpoint", {})["consolidated"] = gathers
        if not gathers:
            notes.append(
                "train.checkpoint.consolidated: false, as the setup does not gather 16-bit weights on save"
                " under ZeRO-3 (its checkpoints are sharded: save_state)"
            )
