"""The engine file a recipe would produce, read back: the node and GPU counts that slurm.sbatch,
sky.yaml or kubernetes.yaml ask the cluster for must be the hardware part's, which launch.sh and
the accelerate yaml start the ranks from (docs/failure-modes.md §44). They are generated from the
hardware part, so what can break them is a pass-through such as launch.slurm.extra; reading the
file back catches whatever did, as the engine would read it."""

from __future__ import annotations

import functools
import shlex

import yaml

from registry.topology import nodes, processes_per_node

# libyaml where it is built: the manifest is read back at every validate of a kubernetes recipe
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(text: str):
    return yaml.load(text, Loader=_LOADER) or {}  # a safe loader, C or Python


def _sbatch_table() -> dict:
    import json

    from registry.files import SCHEMA_DIR

    return json.loads((SCHEMA_DIR / "sbatch.json").read_text(encoding="utf-8"))["options"]


@functools.cache
def _options() -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
    """({long name: (its canonical name, argument)}, {letter: (canonical name, argument)}) of
    schemas/sbatch.json, the table sbatch reads #SBATCH lines with."""
    longs, shorts = {}, {}
    for name, option in _sbatch_table().items():
        canonical = option.get("same_as", name)
        longs[name] = (canonical, option["argument"])
        if "short" in option:
            shorts[option["short"]] = (canonical, option["argument"])
    return longs, shorts


def long_option(word: str) -> tuple[str, str] | None:
    """(canonical name, argument) of `--NAME` as getopt_long matches it: the whole name, else the
    one option NAME is a prefix of (several names of one option count once); None when NAME is
    unknown or ambiguous, which sbatch refuses (docs/clusters.md)."""
    longs, _ = _options()
    name = word[2:].partition("=")[0]
    if name in longs:
        return longs[name]
    matches = {longs[known] for known in longs if name and known.startswith(name)}
    return matches.pop() if len(matches) == 1 else None


def _words(line: str) -> list[str] | None:
    """A directive line's words as sbatch splits them: quotes group, an unquoted # starts a comment."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    try:
        return list(lexer)
    except ValueError:
        return None  # an unmatched quote: sbatch refuses the file


def _directive_words(text: str) -> list[str]:
    """The words of every #SBATCH line, in order, up to the first command: sbatch reads them as one
    command line, past blank lines and comments."""
    words: list[str] = []
    for line in text.splitlines()[1:]:
        if line.startswith("#SBATCH"):
            words += _words(line[len("#SBATCH") :]) or []
        elif line.strip() and not line.lstrip().startswith("#"):
            break
    return words


def sbatch_options(text: str) -> list[tuple[str, str]]:
    """`#SBATCH` options as (--canonical-name, value) in the order written, read as sbatch's
    getopt_long reads them (schemas/sbatch.json): `--name=V`, `--name V` for an option that takes
    a value, any unambiguous prefix of a long name, `-N3`, `-N 3` and grouped letters. An unknown
    or ambiguous option is kept as written, with no value (sbatch would refuse the file)."""
    return _read_options(_directive_words(text))


def line_options(line: str) -> list[tuple[str, str]]:
    """sbatch_options of one directive's text, the words after `#SBATCH` (launch.slurm.extra)."""
    return _read_options(_words(line) or [])


def _read_options(words: list[str]) -> list[tuple[str, str]]:
    _, shorts = _options()
    found, i = [], 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--" or not word.startswith("-") or word == "-":
            break  # sbatch stops at the first word that is not an option
        if word.startswith("--"):
            option = long_option(word)
            if option is None:
                found.append((word.partition("=")[0], ""))
                continue
            (name, argument), (_, equals, value) = option, word.partition("=")
            if not equals and argument == "required" and i < len(words):
                value, i = words[i], i + 1  # a required value is the next word, whatever it is
            found.append((f"--{name}", value))
            continue
        letters = word[1:]
        while letters:
            letter, letters = letters[0], letters[1:]
            if letter not in shorts:
                found.append((f"-{letter}", ""))
                break
            name, argument = shorts[letter]
            if argument == "none":
                found.append((f"--{name}", ""))
                continue
            value, letters = letters, ""
            if not value and argument == "required" and i < len(words):
                value, i = words[i], i + 1
            found.append((f"--{name}", value))
    return found


def _gres_gpus(value: str) -> str | None:
    """--gres=gpu:8 or gpu:h100:8 -> '8' (a gres list may name other resources too)."""
    for item in value.split(","):
        parts = item.replace("=", ":").split(":")  # gres/gpu=4, as --tres-per-task writes it
        if parts[0] == "gpu":
            return parts[-1] if len(parts) > 1 and parts[-1].isdigit() else "1"
    return None


def slurm_counts(text: str) -> dict[str, str]:
    """What the allocation gets: the last of each count's spellings wins, as it does for sbatch."""
    counts = {}
    for key, value in sbatch_options(text):
        if key == "--nodes":  # MIN-MAX: a range of one count is that count
            low, dash, high = value.partition("-")
            counts["nodes"] = low if dash and low == high else value
        elif key == "--gpus-per-node":
            counts["gpus_per_node"] = value.split(":")[-1]
        elif key == "--gres" and (gres := _gres_gpus(value)) is not None:
            counts["gpus_per_node"] = gres
        elif key == "--gpus":
            counts["gpus"] = value.split(":")[-1]
        elif key == "--gpus-per-task":
            counts["gpus_per_task"] = value.split(":")[-1]
        elif key == "--tres-per-task" and (gres := _gres_gpus(value.replace("gres/", ""))) is not None:
            counts["gpus_per_task"] = gres  # --tres-per-task=gres/gpu:4 is --gpus-per-task=4
        elif key in ("--gpus-per-socket", "--sockets-per-node"):
            counts[key[2:].replace("-", "_")] = value.split(":")[-1]
    per_socket, sockets = counts.pop("gpus_per_socket", None), counts.pop("sockets_per_node", None)
    if per_socket is not None:  # GPUs per node = per socket x sockets, where the file says both
        both = per_socket.isdigit() and sockets is not None and sockets.isdigit()
        counts["gpus_per_node" if both else "gpus_per_socket"] = (
            str(int(per_socket) * int(sockets)) if both else per_socket
        )
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


def _count(value: str) -> str:
    """A count as Slurm reads it: `08` is 8."""
    return str(int(value)) if value.isascii() and value.isdigit() else value


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
        if key == "gpus_per_socket":  # without --sockets-per-node the count is the node's to decide
            out.append(
                (field, f"{name} asks for {value} GPUs per socket, a count per node this file does not fix"
                 f" (the hardware part has {want['gpus_per_node']} per node; use --gpus-per-node)")
            )  # fmt: skip
            continue
        if key == "gpus_per_node" and value == "0" and want[key] == "0":
            continue
        if _count(value) != want[key]:
            out.append((field, f"{name} asks for {value} {words[key]} and the hardware part has {want[key]}"))
    return out
