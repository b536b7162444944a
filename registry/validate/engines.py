"""The engine file a recipe would produce, read back: the node and GPU counts that slurm.sbatch,
sky.yaml or kubernetes.yaml ask the cluster for must be the hardware part's, which launch.sh and
the accelerate yaml start the ranks from (docs/failure-modes.md §44). They are generated from the
hardware part, so what can break them is a pass-through such as launch.slurm.extra; reading the
file back catches whatever did, as the engine would read it."""

from __future__ import annotations

import shlex

import yaml

from registry.topology import nodes, processes_per_node

# libyaml where it is built: the manifest is read back at every validate of a kubernetes recipe
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(text: str):
    return yaml.load(text, Loader=_LOADER) or {}  # a safe loader, C or Python


# sbatch's spellings of the counts (`man sbatch`)
NODE_OPTIONS = ("-N", "--nodes")
TOTAL_GPU_OPTIONS = ("-G", "--gpus")
# slurm.sbatch starts one task per node (rule slurm-one-task-per-node): a task's GPUs are the node's
TASK_GPU_OPTIONS = ("--gpus-per-task",)


def sbatch_options(text: str) -> list[tuple[str, str]]:
    """`#SBATCH` options as (option, value) in the order written, long and short forms as they
    are. sbatch stops reading directives at the first command line."""
    found: list[tuple[str, str]] = []
    for line in text.splitlines()[1:]:
        if not line.startswith("#"):
            break
        if not line.startswith("#SBATCH"):
            continue
        try:
            words = shlex.split(line[len("#SBATCH") :])
        except ValueError:
            continue
        i = 0
        while i < len(words):
            word = words[i]
            if word.startswith("--") and "=" in word:
                key, value = word.split("=", 1)
            elif word.startswith("-") and not word.startswith("--") and len(word) > 2:
                key, value = word[:2], word[2:]  # -N2
            elif i + 1 < len(words) and not words[i + 1].startswith("-"):
                key, value = word, words[i + 1]  # --nodes 3
                i += 1
            else:
                key, value = word, ""  # a flag: --exclusive
            found.append((key, value))
            i += 1
    return found


def _gres_gpus(value: str) -> str | None:
    """--gres=gpu:8 or gpu:h100:8 -> '8' (a gres list may name other resources too)."""
    for item in value.split(","):
        parts = item.split(":")
        if parts[0] == "gpu":
            return parts[-1] if len(parts) > 1 and parts[-1].isdigit() else "1"
    return None


def slurm_counts(text: str) -> dict[str, str]:
    """What the allocation gets: the last of each count's spellings wins, as it does for sbatch."""
    counts = {}
    for key, value in sbatch_options(text):
        if key in NODE_OPTIONS:
            counts["nodes"] = value
        elif key == "--gpus-per-node":
            counts["gpus_per_node"] = value.split(":")[-1]
        elif key == "--gres" and (gres := _gres_gpus(value)) is not None:
            counts["gpus_per_node"] = gres
        elif key in TOTAL_GPU_OPTIONS:
            counts["gpus"] = value.split(":")[-1]
        elif key in TASK_GPU_OPTIONS:
            counts["gpus_per_task"] = value.split(":")[-1]
    return counts


def sky_counts(text: str) -> dict[str, str]:
    task = _load(text)
    counts = {"nodes": str(task.get("num_nodes", 1))}
    accelerators = (task.get("resources") or {}).get("accelerators")
    if isinstance(accelerators, str):
        counts["gpus_per_node"] = accelerators.rpartition(":")[2] if ":" in accelerators else "1"
    return counts


def kubernetes_counts(text: str) -> dict[str, str]:
    job = _load(text)
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    counts = {"nodes": str(sum(int(s.get("replicas", 1)) for s in specs.values()))}
    for spec in specs.values():
        for container in ((spec.get("template") or {}).get("spec") or {}).get("containers") or ():
            limit = ((container.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
            if limit is not None:
                counts["gpus_per_node"] = str(limit)
    counts["processes_per_node"] = str((job.get("spec") or {}).get("nprocPerNode", ""))
    return counts


def engine_file(doc) -> tuple[str, str, dict[str, str]] | None:
    """(file name, the field a user sets that reaches it, its counts) for the recipe's engine."""
    from registry import view
    from registry.resolve import kubernetes, launch, skypilot

    engine = view.of(doc).launch.launcher
    if engine == "slurm":
        return launch.SBATCH, "launch.slurm", slurm_counts(launch.sbatch(doc))
    if engine == "skypilot":
        return skypilot.TASK, "launch.launcher", sky_counts(skypilot.task(doc))
    if engine == "kubernetes":
        image = view.of(doc).launch.image or "registry.invalid/placeholder:0"  # kubernetes-image reports a missing one
        return kubernetes.MANIFEST, "launch.launcher", kubernetes_counts(kubernetes.manifest(doc, image))
    return None


def disagreements(doc) -> list[tuple[str, str]]:
    """(the field to fix, what disagrees) for each count the engine file gets wrong."""
    from registry import view
    from registry.errors import RecipeError

    try:
        found = engine_file(doc)
    except RecipeError:
        return []  # the engine cannot take this recipe at all: its own rule or resolve says why
    if found is None:
        return []
    name, field, counts = found
    hardware = view.of(doc).hardware
    want = {
        "nodes": str(nodes(doc)),
        "gpus_per_node": str(hardware.gpus_per_node or 0),
        "gpus_per_task": str(hardware.gpus_per_node or 0),
        "gpus": str(nodes(doc) * (hardware.gpus_per_node or 0)),
        "processes_per_node": str(processes_per_node(doc)),
    }
    words = {
        "nodes": "nodes",
        "gpus_per_node": "GPUs per node",
        "gpus_per_task": "GPUs per task (one task per node)",
        "gpus": "GPUs in all",
        "processes_per_node": "processes per node",
    }
    out = []
    for key, value in counts.items():
        if key == "gpus_per_node" and value == "0" and want[key] == "0":
            continue
        if value != want[key]:
            out.append((field, f"{name} asks for {value} {words[key]} and the hardware part has {want[key]}"))
    return out
