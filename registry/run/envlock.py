"""The environment a run launched in: recorded in its recipe.lock.yaml by `recipe run`, compared
with this host by `recipe verify` and before `recipe run --resume` (docs/design.md §environment-lock).

A lock's recipe part resolves byte-identically on any host; the stack under it does not. Another
DeepSpeed, torch or driver runs the same files differently, so the run's lock also records, under
`environment`: the Python of the interpreter that runs the trainer's ranks and, as that
interpreter sees them, the versions of torch, accelerate, DeepSpeed, transformers and the
trainer's own package (LeRobot, OpenTau); the CUDA release torch was built for; the NVIDIA
driver, the model and number of the GPUs the run may use; the dataset's declared revision and a
hash of a local dataset's meta/info.json. Nothing is imported to learn it: package metadata and
torch's version.py (registry/run/probe.py), nvidia-smi (registry/run/machine.py).

`recipe resolve` records none: its files and lock are host-independent. Nor does a submission to
Slurm, SkyPilot or Kubernetes: the host that submits is not the one that trains.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
from pathlib import Path

from registry import untrusted, view
from registry.doc import MISSING
from registry.errors import Exit, RecipeError, printable
from registry.load import load_text
from registry.resolve.lock import LOCK, dump
from registry.run import environment, machine, probe

ENVIRONMENT = "environment"
EARLIER = "earlier_environments"  # what earlier launches of a resumed run had, oldest first
NOT_COMPARED = ("interpreter",)  # where the versions were asked: a path, which differs between hosts
ABSENT = "absent"  # a package the interpreter does not have
NOT_DECLARED = "not declared"
INFO = "meta/info.json"  # a LeRobot-format dataset's description: its codebase version, features, episodes
INFO_MAX_BYTES = 16 << 20
LOCK_MAX_BYTES = 16 << 20


# --- what this host has ------------------------------------------------------------------------
def collect(inv, doc, folder: Path, host: list[machine.GPU], env: dict[str, str], asked=None) -> dict:
    """The environment section for a launch of `inv` (a Bundle or an Invocation) from `folder`,
    on a host with these GPUs and the launch's environment variables (`asked`: the interpreter and
    its answer where the caller has them). Never raises: what cannot be learnt is recorded as
    `unknown (why)`."""
    python, found = asked or _asked(inv, env)
    drivers = sorted({g.driver for g in host if g.driver})
    return {
        "python": found["python"],
        "packages": {name: ABSENT if v is None else v for name, v in found["packages"].items()},
        "torch_cuda": found["torch_cuda"],
        "nvidia_driver": ", ".join(drivers) or None,
        "gpu_model": ", ".join(sorted({g.name for g in host})) or None,
        "gpu_count": len(host),
        "dataset": dataset(doc, folder),
        "interpreter": python,
    }


def _asked(inv, env: dict[str, str]) -> tuple[str | None, dict]:
    """The interpreter that runs the ranks, and what it says of itself: this one for the built-in
    trainer (asked in-process), trainer.env's or the one behind the trainer's program otherwise
    (asked in a subprocess; the pre-launch check asked it the same already, environment.ask)."""
    names = (*environment.RECORDED, inv.package) if inv.package else environment.RECORDED
    if inv.same_python:
        return sys.executable, probe.report(names)
    python = inv.python or environment.interpreter_of(inv.program, env)
    if python is None:
        import shutil

        found = shutil.which(inv.program, path=env.get("PATH"))
        why = "is not a Python script" if found else "is not on PATH"
        return None, _unknown(names, f"{inv.program} {why}: no interpreter to ask")
    try:
        return python, environment.ask(python, inv.package, getattr(inv, "extra", None))
    except RecipeError as e:
        return python, _unknown(names, str(e))


def _unknown(names, why: str) -> dict:
    value = f"unknown ({why})"
    return {"python": value, "packages": dict.fromkeys(names, value), "torch_cuda": value}


def dataset(doc, folder: Path) -> dict:
    """What the recipe declares of its data. The built-in trainer generates its own (the
    resolved recipe holds dataset.synthetic); other trainers get repo_id, revision and root,
    and a local root's meta/info.json is hashed (a few KiB) where it has one."""
    recipe = view.of(doc)
    if recipe.trainer.kind == "builtin":
        return {"source": "synthetic"}
    data = recipe.dataset
    out = {"repo_id": data.repo_id, "revision": data.revision or NOT_DECLARED, "root": data.root}
    if data.root:
        out["info_sha256"] = _info_hash(folder, data.root)
    return out


def _info_hash(folder: Path, root: str) -> str:
    path = Path(os.path.expanduser(root))
    info = (path if path.is_absolute() else folder / path) / INFO  # the trainer runs in the run folder
    if not os.path.lexists(info):
        return f"not found (no {INFO} under dataset.root)"
    try:  # a FIFO or a device there is not opened for ever (docs/failure-modes.md §68)
        data = untrusted.read_bytes(info, INFO_MAX_BYTES)
    except untrusted.Rejected as e:
        return f"unknown ({e})"
    return hashlib.sha256(data).hexdigest()


# --- into the lock -----------------------------------------------------------------------------
def section(current: dict, earlier: list | tuple = ()) -> str:
    body: dict = {ENVIRONMENT: current}
    if earlier:
        body[EARLIER] = list(earlier)
    return dump(body)


def recorded(bundle, current: dict, earlier: list | tuple = ()):
    """The bundle with its lock (resolve's, host-independent) followed by the environment."""
    files = {**bundle.files, LOCK: bundle.files[LOCK] + section(current, earlier)}
    return dataclasses.replace(bundle, files=files)


def relocked(content: dict, current: dict, earlier: list | tuple = ()) -> str:
    """A run's lock as read, its environment replaced (a resume that changed nothing else)."""
    rest = {k: v for k, v in content.items() if k not in (ENVIRONMENT, EARLIER)}
    return dump(rest) + section(current, earlier)


# --- compared ----------------------------------------------------------------------------------
def differences(before: dict, now: dict) -> list[tuple[str, object, object]]:
    """(field, recorded, current) for each leaf that differs, in the recorded order; a field only
    one side has is MISSING on the other. NOT_COMPARED is left out."""
    a, b = _leaves(before, ENVIRONMENT), _leaves(now, ENVIRONMENT)
    fields = list(a) + [f for f in b if f not in a]
    skipped = tuple(f"{ENVIRONMENT}.{name}" for name in NOT_COMPARED)
    out = []
    for f in fields:
        old, new = a.get(f, MISSING), b.get(f, MISSING)
        if f not in skipped and not (old == new and type(old) is type(new)):
            out.append((f, old, new))
    return out


def _leaves(value, prefix: str) -> dict:
    if isinstance(value, dict) and value:
        out = {}
        for key, sub in value.items():
            out.update(_leaves(sub, f"{prefix}.{key}"))
        return out
    return {prefix: value}


def shown(value) -> str:
    if value is MISSING:
        return "not recorded"
    return "none" if value is None else printable(str(value), keep="")


def difference_line(field: str, old, new) -> str:
    return f"{field}: recorded {shown(old)}, this host {shown(new)}"


def on_resume(content: dict, current: dict, lock: Path, require_same: bool) -> tuple[list, bool]:
    """Before a resume: each difference from the environment the run's lock records, on stderr
    (a warning; with require_same, a refusal). Returns the earlier environments for the lock it
    rewrites, and whether it must be rewritten (the environment changed, or none was recorded)."""
    before, earlier = content.get(ENVIRONMENT), content.get(EARLIER) or []
    earlier = earlier if isinstance(earlier, list) else []
    if not isinstance(before, dict):
        if require_same:
            raise RecipeError(
                f"{lock}: records no environment to compare this host with; not resumed"
                " (hint: drop --require-same-env: the resume records this host's)",
                Exit.INVALID,
            )
        print(f"recipe: note: {lock} records no environment; recording this host's", file=sys.stderr)
        return earlier, True
    found = differences(before, current)
    if not found:
        return earlier, False
    label = "recipe: " if require_same else "recipe: warning: "
    for field, old, new in found:
        print(label + difference_line(field, old, new), file=sys.stderr)
    count = f"{len(found)} field{'s' if len(found) > 1 else ''}"
    if require_same:
        raise RecipeError(
            f"{lock}: this host's environment differs from the run's in {count}; not resumed"
            " (hint: match the versions above, or drop --require-same-env to resume anyway)",
            Exit.INVALID,
        )
    print(
        f"recipe: warning: resuming in an environment that differs from the run's in {count}; the lock"
        f" keeps the earlier one under {EARLIER} (hint: --require-same-env refuses such a resume)",
        file=sys.stderr,
    )
    return [*earlier, before], True


# --- recipe verify -----------------------------------------------------------------------------
def read(where: str) -> tuple[Path, dict]:
    """The lock a run folder holds, or a lock file, with its environment; one-line RecipeError
    (exit 2) for what is not one."""
    path, content = read_lock(where)
    if ENVIRONMENT not in content:
        raise RecipeError(
            f"{path}: records no environment (recipe resolve and cluster submissions write none; recipe run does)"
        )
    if not isinstance(content[ENVIRONMENT], dict):
        raise RecipeError(f"{path}: its environment is not a mapping; not a lock recipe run wrote")
    return path, content


def read_lock(where: str | Path) -> tuple[Path, dict]:
    """The lock a run folder holds, or a lock file, environment or not; one-line RecipeError (exit
    2) for what is not one."""
    path = Path(where)
    if path.is_dir():
        path = path / LOCK
    if not os.path.lexists(path):
        raise RecipeError(f"{path}: no such file (hint: give a run folder or its {LOCK})")
    try:  # a lock may come from another machine: a FIFO, a device or a huge file is refused unread
        text = untrusted.read_text(path, LOCK_MAX_BYTES)
    except untrusted.Rejected as e:
        raise RecipeError(f"{e}; not a recipe lock (hint: give a run folder or its {LOCK})") from None
    try:
        content = load_text(text, str(path)).data
    except RecipeError as e:
        raise RecipeError(str(e), Exit.USAGE, e.problem) from None
    if "lock_version" not in content or not isinstance(content.get("resolved"), dict):
        raise RecipeError(f"{path}: not a recipe lock (no lock_version or resolved recipe)")
    return path, content


def current_for(content: dict, lock: Path, trainer_env: str | None = None) -> tuple[dict, str | None]:
    """This host's environment for the run the lock records: the interpreter a `recipe run` of its
    resolved recipe here would start the trainer with, asked the same questions; and a note where
    the lock named an interpreter that was not asked. The lock may come from another machine, so
    nothing it names is run (docs/failure-modes.md §70): its resolved recipe is validated first, its
    trainer.env is replaced by `trainer_env` (this host's, given by the user) or dropped (the
    trainer's launcher on this host's PATH), and a program it names by path is not asked."""
    from registry.resolve import launch
    from registry.run import launch_env
    from registry.trainers import invocation
    from registry.validate import validate

    doc = content["resolved"]
    invalid = [p for p in validate(doc, {}) if p.is_error]
    if invalid:
        raise RecipeError(f"{lock}: its resolved recipe is not a valid recipe: {invalid[0].render()}")
    named = (doc.get("trainer") or {}).get("env")
    doc = {**doc, "trainer": {**doc["trainer"], "env": trainer_env}}
    note = None
    if named and not trainer_env:
        note = (
            f"the lock's trainer.env {printable(str(named), keep='')} was not asked (a lock may come from another"
            " machine): this host's launcher on PATH was (hint: --trainer-env ENV asks an environment of this host)"
        )
    try:
        inv = invocation(doc, launch.context(doc))
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise RecipeError(f"{lock}: its resolved recipe cannot be read ({type(e).__name__}: {e})") from None
    asked = None
    if not inv.same_python and not inv.python and "/" in inv.program:
        names = (*environment.RECORDED, inv.package) if inv.package else environment.RECORDED
        why = (
            f"not asked: {printable(inv.program, keep='')} is a path the lock names, not a program on this host's PATH"
        )
        asked = (None, _unknown(names, why))
    return collect(inv, doc, lock.parent, machine.gpus(), launch_env(inv), asked), note
