"""`recipe resolve` and `recipe run`: validate, resolve into a directory, check the machine,
launch, stream the output, pass the exit code through, and stop every rank on Ctrl-C/SIGTERM."""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path

import yaml

from registry import view
from registry.compose import Recipe, compose
from registry.errors import Exit, RecipeError
from registry.files import write_atomic
from registry.resolve import Bundle, resolve
from registry.run import environment, machine
from registry.run.supervise import supervise
from registry.topology import nodes
from registry.train import RESUME
from registry.trainers import lerobot
from registry.validate import validate


def checked(target: str, overrides: list[str]) -> tuple[Recipe, Bundle]:
    """Compose, validate (problems go to stderr) and resolve; RecipeError if invalid."""
    recipe = compose(target, overrides)
    problems = validate(recipe.data, recipe.origins)
    for p in problems:
        print(p.render(), file=sys.stderr)
    errors = sum(p.is_error for p in problems)
    if errors:
        raise RecipeError(
            f"{recipe.name}: invalid ({errors} error{'s' if errors > 1 else ''}); nothing was resolved", 1
        )
    return recipe, resolve(recipe)


def write_bundle(bundle: Bundle, folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise RecipeError(f"{folder}: is a file, not a folder (hint: -o names the folder to write into)")
    try:
        for name, text in bundle.files.items():
            write_atomic(folder / name, text, 0o755 if name.endswith(".sh") else 0o644)
    except OSError as e:
        raise RecipeError(f"{folder}: cannot write the resolved files: {e.strerror or e}") from None


def fresh_run_dir(recipe: Recipe, output_dir: str | None, base: Path = Path("runs")) -> Path:
    """A new run folder, claimed with an exclusive mkdir so that two runs started in the same
    second never share one."""
    if output_dir:
        folder = Path(output_dir)
        if folder.exists() and not folder.is_dir():
            raise RecipeError(f"{folder}: is a file, not a folder (hint: pick a new --output-dir)")
        if folder.exists() and any(folder.iterdir()):
            raise RecipeError(f"{folder}: exists and is not empty (hint: pick a new --output-dir, or --resume later)")
        _mkdir(folder, exist_ok=True)
        return folder
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = _runs_of(recipe, base)
    _mkdir(base, exist_ok=True)
    for n in range(1, 10_000):
        folder = base / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise RecipeError(f"{base}: no free run folder for {stamp} (hint: --output-dir)")


def _mkdir(folder: Path, exist_ok: bool) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=exist_ok)
    except OSError as e:
        raise RecipeError(f"{folder}: cannot create the run folder: {e.strerror or e}") from None


def launch_env(bundle: Bundle) -> dict[str, str]:
    env = dict(os.environ)
    if bundle.same_python:
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    elif bundle.python:  # launch.sh does the same: the trainer's environment first
        env["PATH"] = os.pathsep.join([str(Path(bundle.python).parent), env.get("PATH", "")])
    return env


def find_program(program: str, env: dict[str, str]) -> bool:
    if "/" in program:
        return Path(program).is_file() and os.access(program, os.X_OK)
    return shutil.which(program, path=env.get("PATH")) is not None


def show(bundle: Bundle) -> None:
    for name, text in bundle.files.items():
        print(f"==> {name} <==")
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        print()
    print(f"==> command <==\n{bundle.command}")


def run(
    target: str,
    overrides: list[str],
    *,
    dry_run: bool,
    output_dir: str | None,
    allow_mismatch: bool,
    resume: str | None = None,
) -> int:
    recipe, bundle = checked(target, overrides)
    if dry_run:
        show(bundle)
        return Exit.OK
    why = machine.mismatch(recipe.data, machine.gpus())
    if why and not allow_mismatch:
        raise RecipeError(
            f"{why} (hint: run on matching hardware, swap it with hardware=..., or pass --allow-hardware-mismatch)", 1
        )
    env = launch_env(bundle)
    trainer_env = view.of(recipe.data).trainer.env
    if not bundle.python and not find_program(bundle.program, env):
        raise RecipeError(f"{bundle.program} not found on PATH (hint: {bundle.install_hint})", Exit.NOT_FOUND)
    environment.report(environment.check(bundle, env, trainer_env))
    if bundle.python and not find_program(bundle.program, env):
        raise RecipeError(
            f"trainer.env {trainer_env}: no {bundle.program} (hint: {bundle.install_hint})", Exit.NOT_FOUND
        )
    command = ["bash", "launch.sh"]
    if resume is not None:
        folder = _resumable(recipe, bundle, resume)
        env[RESUME] = "checkpoints/last"  # the built-in trainer reads it; LeRobot takes its flags
        command += list(bundle.resume_args or ())
        print(f"recipe: resuming {recipe.name} in {folder}", file=sys.stderr)
    else:
        folder = fresh_run_dir(recipe, output_dir)
        write_bundle(bundle, folder)
        print(f"recipe: {recipe.name} in {folder}", file=sys.stderr)
    return supervise([(command, node_env) for node_env in _local_nodes(recipe.data, env)], folder)


# where each trainer leaves what a resume reads
_LAST_STATE = {"builtin": "checkpoints/last/trainer_state.json", "lerobot": lerobot.RESUME_CONFIG}


def _resumable(recipe: Recipe, bundle: Bundle, where: str) -> Path:
    kind = recipe.data["trainer"]["kind"]
    if kind not in _LAST_STATE:
        raise RecipeError(f"--resume drives the built-in and LeRobot trainers, not {kind}")
    if not view.of(recipe.data).train.checkpoint.resumable:
        raise RecipeError(
            f"{recipe.name}: train.checkpoint.resumable is false, so its checkpoints hold no optimizer state to"
            " resume from (hint: start a new run)"
        )
    folder = Path(where) if where else _latest_run(recipe)
    lock_file = folder / "recipe.lock.yaml"
    if not lock_file.is_file():
        raise RecipeError(f"{folder}: not a run directory (no recipe.lock.yaml)")
    try:
        resolved = yaml.safe_load(lock_file.read_text())["resolved"]
    except (OSError, yaml.YAMLError, TypeError, KeyError) as e:
        raise RecipeError(
            f"{lock_file}: not a recipe lock this run wrote ({type(e).__name__}); cannot resume"
        ) from None
    if not (folder / _LAST_STATE[kind]).is_file():
        raise RecipeError(f"{folder}: no checkpoint to resume from ({_LAST_STATE[kind]})")
    if resolved != recipe.data:
        raise RecipeError(
            f"{folder}: the recipe resolves differently from when this run started (hint: pass the same name and overrides)"
        )
    return folder


def _runs_of(recipe: Recipe, base: Path = Path("runs")) -> Path:
    """Where the runs of a recipe go: runs/pi07_zero2_8xA100/<timestamp>."""
    return base / recipe.name.replace("/", "_").replace(":", "_").replace("@", "_v")


def _run_order(folder: Path) -> tuple:
    """runs/NAME/<stamp>[-n]: by time stamp, then n as a number (-10 after -9)."""
    match = re.fullmatch(r"(\d{8}-\d{6})(?:-(\d+))?", folder.name)
    return (match.group(1), int(match.group(2) or 1)) if match else (folder.name, 0)


def _latest_run(recipe: Recipe) -> Path:
    base = _runs_of(recipe)
    found = [p for p in base.glob("*") if (p / "recipe.lock.yaml").is_file()] if base.is_dir() else []
    runs = sorted(found, key=_run_order)
    if not runs:
        raise RecipeError(f"no earlier run of {recipe.name} under {base} (hint: --resume DIR)")
    return runs[-1]


def _local_nodes(doc: dict, env: dict[str, str]) -> list[dict[str, str]]:
    """One launcher, or one per node when every node is this host (hardware.nodes > 1 with a
    loopback rendezvous): multi-node without a cluster."""
    count, ip = nodes(doc), view.of(doc).launch.main_process_ip
    if count == 1 or ip not in ("127.0.0.1", "localhost"):
        return [env]
    return [{**env, "MACHINE_RANK": str(rank)} for rank in range(count)]
