"""How a recipe is started: the launcher, `launch.sh` (the exact argv and environment, every
value shell-quoted), and `slurm.sbatch` for multi-node runs under Slurm."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from registry import __version__, view
from registry.errors import Exit, RecipeError
from registry.topology import nodes, processes_per_node
from registry.trainers.base import Context, Invocation, Raw

SCRIPT = "launch.sh"
SBATCH = "slurm.sbatch"
NODE_CONFIG = Raw('accelerate.node-"${MACHINE_RANK}".yaml')
# what the launch reads besides the accelerate yaml's and DeepSpeed JSON's tables (resolve/fields.py)
READS = ("hardware", "launch", "env", "trainer.env")


# launch.main_process_ip's schema pattern: the value goes inside "${MAIN_PROCESS_IP:-...}", where
# shell quoting cannot reach, so anything else is refused rather than written
HOST = re.compile(r"[A-Za-z0-9.:_-]+")


def one_line(text: str, what: str) -> str:
    """A value written into a comment or an #SBATCH line, where quoting ends at a line break: one
    line, or refused (the schemas allow no line break there; this holds for any caller)."""
    if any(c in text for c in "\n\r\0"):
        raise RecipeError(f"{what}: {text!r} has a line break, which would end the script's comment", Exit.INVALID)
    return text


def _host(ip) -> str:
    if not isinstance(ip, str) or not HOST.fullmatch(ip):
        raise RecipeError(f"launch.main_process_ip: {ip!r} is not a host name or address", Exit.INVALID)
    return ip


def _port(port) -> int:
    if not isinstance(port, int) or isinstance(port, bool):
        raise RecipeError(f"launch.main_process_port: {port!r} is not a port number", Exit.INVALID)
    return port


def launcher(doc: dict) -> str:
    """accelerate or torchrun. `auto` follows docs/failure-modes.md §25: DDP on a CPU-only host needs torchrun
    (accelerate would start unconnected single-process runs); LeRobot's parallelism API refuses
    accelerate yamls; everything else goes through accelerate launch."""
    recipe = view.of(doc)
    chosen = recipe.launch.launcher
    if chosen in ("accelerate", "torchrun"):
        return chosen
    trainer = recipe.trainer
    if trainer.kind == "lerobot" and trainer.lerobot.api == "parallelism":
        return "torchrun"
    if trainer.kind == "builtin" and recipe.hardware.gpu is None and recipe.backend.kind == "ddp":
        return "torchrun"
    return "accelerate"


def told_env(doc: dict) -> dict[str, str]:
    """Settings third-party code would otherwise guess at, announcing the guess on every run
    (docs/failure-modes.md §25): torch's elastic launcher (torchrun, and accelerate launch through
    it) sets OMP_NUM_THREADS=1 for several processes per node and says so in a banner; DeepSpeed,
    imported by accelerate even under DDP, warns "Setting accelerator to CPU" on a host without a
    GPU. The values are the ones they would pick."""
    recipe = view.of(doc)
    told = {}
    if processes_per_node(doc) > 1:
        told["OMP_NUM_THREADS"] = "1"
    if recipe.hardware.gpu is None:
        told["DS_ACCELERATOR"] = "cpu"
    return told


def trainer_python(doc) -> str | None:
    """The interpreter of trainer.env, absolute: a virtualenv's bin/python, or the interpreter it
    names. A relative path is taken from where resolve runs (the run folder is elsewhere)."""
    env = view.of(doc).trainer.env
    if not env:
        return None
    path = Path(os.path.abspath(os.path.expanduser(env)))
    interpreter = path.is_file() or (not path.exists() and path.name.startswith("python"))
    return str(path if interpreter else path / "bin" / "python")


def context(doc) -> Context:
    count = nodes(doc)
    config = NODE_CONFIG if count > 1 else "accelerate.yaml"
    return Context(launcher(doc), config, count, processes_per_node(doc), trainer_python(doc))


def render(argv: list) -> str:
    return " ".join(a if isinstance(a, Raw) else shlex.quote(str(a)) for a in argv)


def command_line(doc: dict, inv: Invocation) -> str:
    env = [f"{k}={shlex.quote(str(v))}" for k, v in view.of(doc).env.items()]
    return " ".join(env + [render(inv.argv)])


# `accelerate launch` through accelerate's launch module, with the interpreter its console script
# names: the console script first imports every accelerate command (transformers among them), 9 s
# of a 30 s launch on a GPU host (docs/failure-modes.md §45). RECIPE_ACCELERATE_CLI=1 keeps the script.
FAST_ACCELERATE = [
    "# accelerate launch, minus its console script's imports of every other command (docs/failure-modes.md §45)",
    "ACCELERATE=(accelerate launch)",
    'read -r shebang < "$(command -v accelerate)" || true',
    'interpreter="${shebang#\\#!}"',
    # a python named on the #! line itself; pip writes a /bin/sh trampoline for long or spaced paths
    'case "${interpreter##*/}" in python*)',
    '  if [ -z "${RECIPE_ACCELERATE_CLI:-}" ] && [ "$interpreter" != "$shebang" ] && [ -x "$interpreter" ]; then',
    '    ACCELERATE=("$interpreter" -m accelerate.commands.launch)',
    "  fi;;",
    "esac",
]


def script(doc: dict, inv: Invocation) -> str:
    recipe = view.of(doc)
    name, launch = recipe.recipe.name, recipe.launch
    lines = [
        "#!/usr/bin/env bash",
        f"# {one_line(name, 'recipe.name')}: generated by recipe {__version__}. Resolve again rather than edit.",
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
    ]
    for key, value in recipe.env.items():
        lines.append(f"export {key}={shlex.quote(str(value))}")
    told = {k: v for k, v in told_env(doc).items() if k not in recipe.env}
    if told:
        lines.append(
            "# what the launch knows, so that no library guesses it and prints a banner (the caller's own wins)"
        )
        lines += [f'export {key}="${{{key}:-{value}}}"' for key, value in told.items()]
    if recipe.hardware.gpu is None and "CUDA_VISIBLE_DEVICES" not in recipe.env:
        # a CPU recipe on a GPU host: torch's gloo barrier would pick each rank's GPU by its local
        # rank (invalid ordinal past the host's count), and ranks would hold GPU memory (docs/failure-modes.md §25)
        lines.append("export CUDA_VISIBLE_DEVICES=''  # a CPU recipe: its ranks use no GPU of this host")
    python = trainer_python(recipe)
    if python:
        lines.append(f'export PATH={shlex.quote(os.path.dirname(python))}:"$PATH"  # the trainer\'s environment')
    count = nodes(recipe)
    if count > 1:
        ip = _host(launch.get("main_process_ip") or "127.0.0.1")
        lines += [
            "# one launcher per node: MACHINE_RANK, MAIN_PROCESS_IP and MAIN_PROCESS_PORT come from the environment",
            'MACHINE_RANK="${MACHINE_RANK:-${SLURM_NODEID:-0}}"',
            f'MAIN_PROCESS_IP="${{MAIN_PROCESS_IP:-{ip}}}"',
            f'MAIN_PROCESS_PORT="${{MAIN_PROCESS_PORT:-{_port(launch.main_process_port)}}}"',
            'case "$MACHINE_RANK" in ""|*[!0-9]*) echo "launch.sh: MACHINE_RANK must be a number" >&2; exit 2;; esac',
            f'[ "$MACHINE_RANK" -lt {count} ] || {{ echo "launch.sh: MACHINE_RANK must be below {count} (nodes)" >&2; exit 2; }}',
            'case "$MAIN_PROCESS_IP" in ""|*[!A-Za-z0-9.:-]*) echo "launch.sh: MAIN_PROCESS_IP must be a host name or address" >&2; exit 2;; esac',
            'case "$MAIN_PROCESS_PORT" in ""|*[!0-9]*) echo "launch.sh: MAIN_PROCESS_PORT must be a number" >&2; exit 2;; esac',
        ]
        if inv.uses_accelerate_config:
            lines += [
                "# this node's accelerate config: the shared one with its rank and rendezvous",
                "{ grep -v -E '^(machine_rank|main_process_ip|main_process_port):' accelerate.yaml",
                '  printf "machine_rank: %s\\nmain_process_ip: %s\\nmain_process_port: %s\\n" "$MACHINE_RANK" "$MAIN_PROCESS_IP" "$MAIN_PROCESS_PORT"',
                '} > accelerate.node-"${MACHINE_RANK}".yaml',
            ]
    program = shlex.quote(inv.program)
    lines += [
        f"if ! command -v {program} >/dev/null 2>&1; then",
        f"  echo {shlex.quote(f'launch.sh: {inv.program} not found on PATH (hint: {inv.install_hint})')} >&2",
        "  exit 127",
        "fi",
        "# arguments given to launch.sh go to the trainer (recipe run --resume passes LeRobot's)",
        "exec " + render(inv.argv) + ' "$@"',
    ]
    if list(inv.argv[:2]) == ["accelerate", "launch"]:
        lines[-2:-2] = FAST_ACCELERATE  # before the comment on the exec line
        lines[-1] = 'exec "${ACCELERATE[@]}" ' + render(inv.argv[2:]) + ' "$@"'
    return "\n".join(lines) + "\n"


# launch.slurm keys -> #SBATCH options, in the order they are written
DIRECTIVES = (
    ("cpus_per_task", "cpus-per-task"),
    ("mem", "mem"),
    ("time", "time"),
    ("partition", "partition"),
    ("account", "account"),
    ("qos", "qos"),
    ("constraint", "constraint"),
)


def sbatch(doc) -> str:
    """One srun task per node: accelerate or torchrun in launch.sh starts that node's workers, so a
    second task on a node would start them all again (docs/failure-modes.md §42)."""
    recipe = view.of(doc)
    hardware, slurm = recipe.hardware, recipe.launch.slurm
    name = recipe.recipe.name.replace("/", "-")
    count = nodes(recipe)
    lines = [
        "#!/usr/bin/env bash",
        f"#SBATCH --job-name={shlex.quote(one_line(name, 'recipe.name'))}",
        f"#SBATCH --nodes={count}",
        "#SBATCH --ntasks-per-node=1",
    ]
    if hardware.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={hardware.gpus_per_node}")
    for key, option in DIRECTIVES:
        if slurm.get(key) is not None:
            lines.append(f"#SBATCH --{option}={shlex.quote(one_line(str(slurm[key]), f'launch.slurm.{key}'))}")
    lines += [f"#SBATCH {one_line(str(line), 'launch.slurm.extra')}" for line in slurm.extra or ()]
    # srun no longer takes --cpus-per-task from the job (Slurm 22.05), so it is given again
    cpus = f" --cpus-per-task={shlex.quote(str(slurm.cpus_per_task))}" if slurm.get("cpus_per_task") else ""
    lines += [
        "set -euo pipefail",
        "# sbatch runs a spooled copy of this file: the run folder is the submitted file's (Slurm's",
        "# Command=), else this file's own or the folder sbatch was called from; the one with launch.sh",
        'submitted="$(scontrol show job "${SLURM_JOB_ID:-}" 2>/dev/null | sed -n \'s/^ *Command=//p\' | head -n 1)" || true',
        'run_dir=""',
        'for dir in "${submitted:+$(dirname "$submitted")}" "$(dirname "$0")" "${SLURM_SUBMIT_DIR:-}"; do',
        '  if [ -n "$dir" ] && [ -f "$dir/launch.sh" ]; then run_dir="$dir"; break; fi',
        "done",
        f'[ -n "$run_dir" ] || {{ echo {shlex.quote(f"{SBATCH}: no {SCRIPT} beside the submitted file or in the submit folder")} >&2; exit 2; }}',
        'cd "$run_dir"',
        "# the rendezvous is the allocation's first node, on the recipe's port; each node's rank is its",
        "# SLURM_NODEID: a MACHINE_RANK or MAIN_PROCESS_IP exported at submission would reach every node",
        "unset MACHINE_RANK",
        'MAIN_PROCESS_IP="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)" || true',
        f'[ -n "$MAIN_PROCESS_IP" ] || {{ echo {shlex.quote(f"{SBATCH}: no host in SLURM_JOB_NODELIST (submit it with sbatch)")} >&2; exit 2; }}',
        "export MAIN_PROCESS_IP",
        f"export MAIN_PROCESS_PORT={_port(recipe.launch.main_process_port)}",
        f"srun --nodes={count} --ntasks-per-node=1{cpus} --kill-on-bad-exit=1 bash ./{SCRIPT}",
    ]
    return "\n".join(lines) + "\n"
