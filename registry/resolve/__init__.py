"""Resolution: a valid recipe -> the files its launchers take as-is.

accelerate.yaml    accelerate's own config (not for LeRobot's parallelism API)
deepspeed.json     DeepSpeed backends
<trainer config>   train_config.json | opentau.json (LeRobot and command take flags)
launch.sh          the exact argv and environment
slurm.sbatch       when launch.launcher is slurm
sky.yaml           when launch.launcher is skypilot (a SkyPilot task)
kubernetes.yaml    when launch.launcher is kubernetes (a Kubeflow PyTorchJob)
recipe.lock.yaml   the resolved recipe, input and output hashes, tool version
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import yaml

from registry import view
from registry.doc import Recipe
from registry.errors import Exit, RecipeError
from registry.resolve import launch
from registry.resolve.accelerate import DEEPSPEED_JSON, accelerate_config
from registry.resolve.deepspeed import deepspeed_config
from registry.resolve.lock import LOCK, lock
from registry.trainers import invocation


@dataclass(frozen=True)
class Bundle:
    files: dict[str, str]  # name -> text, in the order they are shown
    command: str  # the launch line with its environment, as launch.sh runs it
    program: str
    install_hint: str
    same_python: bool = False
    package: str | None = None  # what the trainer's Python must hold (run/environment.py)
    proven: tuple[str, str] | None = None
    python: str | None = None
    resume_args: tuple[str, ...] | None = None  # for launch.sh, when recipe run --resume
    extra: str | None = None  # the package's extra the policy needs (trainers/base.py Invocation)
    needs: tuple[str, ...] = ()  # what else the trainer imports at start-up (trainers/base.py Invocation)


def resolve(recipe: Recipe) -> Bundle:
    """Files for a recipe that validated without errors."""
    doc = recipe.data
    ctx = launch.context(doc)
    inv = invocation(doc, ctx)
    files: dict[str, str] = {}
    if inv.uses_accelerate_config:
        files["accelerate.yaml"] = yaml.safe_dump(accelerate_config(doc), sort_keys=False)
    ds = deepspeed_config(doc)
    if ds is not None:
        files[DEEPSPEED_JSON] = json.dumps(ds, indent=2) + "\n"
    for name in inv.files:
        if name in files:
            raise RecipeError(f"trainer file {name} clashes with a generated file", Exit.INVALID)
    files.update(inv.files)
    files[launch.SCRIPT] = launch.script(doc, inv)
    engine = view.of(doc).launch
    if engine.launcher == "slurm":
        files[launch.SBATCH] = launch.sbatch(doc)
    if engine.launcher == "skypilot":  # the cluster engines' writers load for their recipes only
        from registry.resolve import skypilot

        files[skypilot.TASK] = skypilot.task(doc)
    if engine.launcher == "kubernetes":
        from registry.resolve import kubernetes

        files[kubernetes.MANIFEST] = kubernetes.manifest(doc, engine.image)
    files[LOCK] = lock(recipe, files)
    return Bundle(
        files,
        launch.command_line(doc, inv),
        inv.program,
        inv.install_hint,
        inv.same_python,
        inv.package,
        inv.proven,
        inv.python,
        inv.resume_args,
        inv.extra,
        inv.needs,
    )
