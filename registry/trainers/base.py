"""Trainer adapters: a resolved recipe -> the trainer's own config files and its command line.

Each adapter is a module with one function, `invocation(doc, ctx) -> Invocation`; the table
below is the only place that knows them. No code named by a recipe is ever imported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


class Raw(str):
    """Shell text written by an adapter (never from recipe values): left unquoted in launch.sh."""


@dataclass(frozen=True)
class Context:
    """What an adapter needs to know about the launch."""

    launcher: str  # accelerate | torchrun
    accelerate_config: str | Raw  # the yaml to pass (per node when several)
    nodes: int
    processes_per_node: int
    # the trainer's own interpreter (trainer.env): its accelerate/torchrun start the ranks, so they
    # run in that environment; None: the launchers found on PATH (docs/failure-modes.md §27)
    python: str | None = None

    def _start(self, command: str, module: str) -> list:
        return [self.python, "-m", module] if self.python else [command]

    def torchrun(self) -> list:
        start = self._start("torchrun", "torch.distributed.run")
        if self.nodes == 1:
            return [*start, "--standalone", f"--nproc-per-node={self.processes_per_node}"]
        return [
            *start,
            f"--nproc-per-node={self.processes_per_node}",
            f"--nnodes={self.nodes}",
            "--node-rank",
            Raw('"${MACHINE_RANK}"'),
            "--master-addr",
            Raw('"${MAIN_PROCESS_IP}"'),
            "--master-port",
            Raw('"${MAIN_PROCESS_PORT}"'),
            "--rdzv-backend=static",
        ]

    def accelerate(self) -> list:
        start = self._start("accelerate", "accelerate.commands.launch")
        return [*start, *([] if self.python else ["launch"]), "--config_file", self.accelerate_config]


@dataclass(frozen=True)
class Invocation:
    argv: list  # str | Raw
    program: str  # must be on PATH (or a path)
    install_hint: str
    files: dict[str, str] = field(default_factory=dict)  # the trainer's own config files
    uses_accelerate_config: bool = True
    # runs in the interpreter that runs `recipe` (its bin/ first on PATH); other trainers keep
    # their own environments (OpenTau and LeRobot cannot share one, docs/failure-modes.md §27)
    same_python: bool = False
    # the trainer's package: `recipe run` checks, before launch, that the Python running the
    # trainer has it, and warns outside the versions the adapter was proven against
    package: str | None = None
    proven: tuple[str, str] | None = None  # (lowest proven, first version not proven)
    python: str | None = None  # that Python; None: the one behind `program`
    # the package's extra the policy needs (`diffusion`: lerobot[diffusion] brings diffusers); the
    # check asks what the installed package declares for it, so one it does not declare asks nothing
    extra: str | None = None
    # what `recipe run --resume` adds to the trainer's command line (None: no resume through it)
    resume_args: tuple[str, ...] | None = None
    # distributions the trainer imports at start-up that its package does not bring with it (OpenTau's
    # is installed without its dependencies): the check before launch and recipe doctor ask for them
    needs: tuple[str, ...] = ()


def flag_value(value) -> str:
    """How trainers' draccus/argparse flags spell a value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
