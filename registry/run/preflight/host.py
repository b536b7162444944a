"""What this host has for a run, gathered by one function (`gather`) so that the checks
(registry/run/preflight/hostchecks.py) can be tested with facts written out by hand.

GPUs come from nvidia-smi (registry/run/machine.py); only `recipe doctor` falls back to torch
where nvidia-smi finds none. The trainer's interpreter is asked about itself without importing
anything (registry/run/probe.py): its packages, the policy's extra, torch's CUDA and NCCL.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from registry import view
from registry.errors import RecipeError
from registry.run import environment, machine, probe

SHM = "/dev/shm"


@dataclass(frozen=True)
class HostFacts:
    gpus: tuple[machine.GPU, ...] = ()
    gpu_source: str = "nvidia-smi"  # where the GPUs were read: nvidia-smi, torch, or none
    python: str | None = None  # the interpreter that runs the trainer's ranks
    trainer: dict | None = None  # what it says of itself (probe.report); None where it could not be asked
    trainer_error: str | None = None  # why not
    shm_free: int | None = None  # bytes free in /dev/shm; None where there is none
    disk_path: str | None = None  # the existing folder the run's output lands under
    disk_free: int | None = None
    build_locks: str | None = None  # environment.stale_build_locks' warning, under DeepSpeed
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict:
        out = asdict(self)
        out["gpus"] = [asdict(g) for g in self.gpus]
        out["notes"] = list(self.notes)
        return out


def free_bytes(path: str | Path) -> int | None:
    """Bytes an unprivileged writer may still use on the file system holding `path`."""
    try:
        stat = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    return stat.f_bavail * stat.f_frsize


def existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists: where a folder not made yet will be."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def gather(
    doc: dict,
    inv,
    output: Path,
    env: dict[str, str],
    use_torch: bool = False,
    *,
    gpus: list | None = None,
) -> HostFacts:
    """This host's facts for a run of `doc` by the trainer invocation `inv` (None: the recipe did
    not resolve, no trainer to ask) writing under `output`. `use_torch`: ask torch for the GPUs
    where nvidia-smi finds none (recipe doctor). `gpus`: what nvidia-smi said already (the
    trainer's interpreter is asked once a process too: environment.ask)."""
    recipe, notes = view.of(doc), []
    gpus, source = (machine.gpus() if gpus is None else gpus), "nvidia-smi"
    if not gpus and use_torch and recipe.hardware.gpu is not None:
        gpus, why = torch_gpus()
        source = "torch" if gpus else "none"
        if why:
            notes.append(why)
    elif not gpus:
        source = "none"
    python, trainer, error = _trainer(inv, env) if inv is not None else (None, None, None)
    disk = existing(output)
    locks = environment.stale_build_locks(env) if recipe.backend.kind == "deepspeed" else None
    return HostFacts(
        tuple(gpus),
        source,
        python,
        trainer,
        error,
        free_bytes(SHM) if os.path.isdir(SHM) else None,
        str(disk),
        free_bytes(disk),
        locks,
        tuple(notes),
    )


def _trainer(inv, env: dict[str, str]) -> tuple[str | None, dict | None, str | None]:
    """The trainer's interpreter and its answer: this one for the built-in trainer (asked in
    process), trainer.env's or the one behind the trainer's program otherwise."""
    package, extra = inv.package, getattr(inv, "extra", None)
    needs = getattr(inv, "needs", ())
    names = [
        *environment.RECORDED,
        *([package, *needs] if package else []),
        *([f"{package}[{extra}]"] if extra else []),
    ]
    if inv.same_python:
        return sys.executable, probe.report(names), None
    python = inv.python or environment.interpreter_of(inv.program, env)
    if python is None:
        return None, None, f"{inv.program} is not on PATH or not a Python script: no interpreter to ask"
    if inv.python and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return python, None, None  # environment.findings: no Python there
    try:
        return python, environment.ask(python, package, extra, needs), None
    except RecipeError as e:
        return python, None, str(e)


def torch_gpus() -> tuple[list[machine.GPU], str | None]:
    """The GPUs torch sees, for a host without nvidia-smi; the driver stays unknown."""
    try:
        import torch
    except ImportError:
        return [], "nvidia-smi found no GPU and torch is not importable here"
    try:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        found = []
        for i in range(count):
            props = torch.cuda.get_device_properties(i)
            found.append(machine.GPU(props.name, props.total_memory >> 20))
    except Exception as e:  # a broken CUDA set-up is a fact to report, not a crash
        return [], f"torch cannot list the GPUs: {type(e).__name__}: {e}"
    return found, (
        "nvidia-smi found no GPU; the GPUs are torch's" if found else "neither nvidia-smi nor torch sees a GPU"
    )
