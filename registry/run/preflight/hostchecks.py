"""The recipe against the host it lands on (docs/preflight.md §host): the GPUs against the hardware
part, the driver against torch's CUDA, NCCL for a multi-GPU run, /dev/shm against the batches the
data-loader workers keep in flight, the disk against the checkpoints the run writes, and the
trainer's environment. Each check reads the typed recipe and HostFacts (registry/run/preflight/host.py)
and returns Findings."""

from __future__ import annotations

import re
from dataclasses import dataclass

from registry.run import environment, machine
from registry.run.preflight import rules
from registry.run.preflight.host import HostFacts
from registry.run.preflight.metadata import DatasetMeta
from registry.topology import processes_per_node, world_size
from registry.validate.checks import Finding
from registry.view import Section, raw

GIB = 1024**3
DEFAULT_PREFETCH = 2  # torch's DataLoader keeps prefetch_factor batches per worker
DEFAULT_SIDE = 224  # an image the recipe gives no size for
FLOAT32 = 4  # LeRobot and OpenTau hand images to the model as float32 tensors
NEAR = 0.9  # above this share of what is free, a warning


@dataclass(frozen=True)
class Run:
    """What the host checks need besides the recipe and the facts."""

    doc: dict
    bundle: object | None  # the resolved Bundle (program, package, extra, command); None where it did not resolve
    datasets: tuple[DatasetMeta, ...] = ()
    env_field: str | None = None  # trainer.env as the recipe gives it


def _size(n: float) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB / 10 else f"{n / 2**20:.0f} MiB"


def gpus(recipe: Section, facts: HostFacts, run: Run) -> list[Finding]:
    why = machine.mismatch(run.doc, list(facts.gpus))
    return [Finding("error", ("hardware",), why)] if why else []


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def driver(recipe: Section, facts: HostFacts, run: Run) -> list[Finding]:
    trainer = facts.trainer or {}
    torch = (trainer.get("packages") or {}).get("torch")
    if recipe.hardware.gpu is None or not torch or not facts.gpus:
        return []  # a CPU recipe; no torch (trainer-env says so); no GPU (gpus says so)
    cuda = trainer.get("torch_cuda")
    if cuda is None:
        return [
            Finding(
                "error",
                ("hardware", "gpu"),
                f"torch {torch} in the trainer's environment ({facts.python}) is a CPU build and the recipe runs on GPUs",
                "install torch's CUDA build there (pip install torch from the CUDA index)",
            )
        ]
    oldest = rules.oldest_driver(str(cuda))
    drivers = sorted({g.driver for g in facts.gpus if g.driver}, key=_release)
    if str(cuda).startswith("unknown") or not oldest or not drivers or _release(drivers[0]) >= _release(oldest):
        return []
    return [
        Finding(
            "error",
            ("hardware", "gpu"),
            f"the NVIDIA driver is {drivers[0]} and torch {torch} was built for CUDA {cuda}, which needs driver"
            f" {oldest} or newer: CUDA fails to initialise on every rank",
            f"install a torch built for an older CUDA in {facts.python}, or update the driver to {oldest} or newer",
        )
    ]


def nccl(recipe: Section, facts: HostFacts, run: Run) -> list[Finding]:
    trainer = facts.trainer or {}
    if recipe.hardware.gpu is None or world_size(recipe) < 2 or not trainer.get("torch_cuda"):
        return []
    if trainer.get("nccl") or str(trainer.get("torch_cuda")).startswith("unknown"):
        return []
    return [
        Finding(
            "warning",
            ("hardware",),
            f"{world_size(recipe)} GPU ranks and no NCCL beside torch in {facts.python} (no nvidia-nccl wheel,"
            " no libnccl in torch/lib): the process group cannot form unless torch links NCCL in itself",
        )
    ]


def sample_bytes(recipe: Section, datasets: tuple[DatasetMeta, ...]) -> float:
    """Bytes of one sample as the data loader hands it over: every camera's frames as float32
    over the observation history, and the state and action vectors."""
    from registry import estimate as memory

    p = recipe.policy
    frames = max(1, p.n_obs_steps or 1)
    meta = datasets[0] if datasets else None
    if meta and meta.cameras:
        pixels = sum(c.height * c.width for c in meta.cameras)
    else:
        side = memory.frame_shape(recipe) or recipe.dataset.resolution or (DEFAULT_SIDE, DEFAULT_SIDE)
        pixels = recipe.dataset.num_cams * side[0] * side[1]
    vectors = 0
    if meta:
        vectors = meta.vectors.get("observation.state", 0) * frames + meta.vectors.get("action", 0) * (
            p.chunk_size or 1
        )
    return (pixels * 3 * frames + vectors) * FLOAT32


def shm(recipe: Section, facts: HostFacts, run: Run) -> list[Finding]:
    """Each data-loader worker passes its batches to the rank through shared memory, keeping
    prefetch_factor of them in flight; every rank on this host has its own workers."""
    workers = recipe.train.num_workers or 0
    if recipe.trainer.kind == "builtin" or workers == 0 or facts.shm_free is None:
        return []
    ranks = processes_per_node(recipe) * machine.nodes_here(run.doc)
    prefetch = recipe.train.prefetch_factor or DEFAULT_PREFETCH
    batch = recipe.train.micro_batch_size * sample_bytes(recipe, run.datasets)
    need = ranks * workers * prefetch * batch
    said = (
        f"{ranks} rank(s) x {workers} workers x {prefetch} batches in flight x {_size(batch)} a batch need about"
        f" {_size(need)} of /dev/shm, which has {_size(facts.shm_free)} free"
    )
    return _room(need, facts.shm_free, ("train", "num_workers"), said, "workers die with a bus error mid-epoch")


def _room(need: float, free: float, path: tuple, said: str, consequence: str) -> list[Finding]:
    """Nothing while `need` stays under NEAR of `free`; a warning close to it; an error beyond."""
    if need <= NEAR * free:
        return []
    if need > free:
        return [Finding("error", path, f"{said}: {consequence}")]
    return [Finding("warning", path, said)]


def checkpoint_bytes(recipe: Section) -> float | None:
    """One checkpoint: the weights in the policy's dtype, plus, when resumable, the fp32 weights and
    the optimizer's state (Adam: two fp32 moments a trainable parameter; SGD: one)."""
    mem = recipe.policy.memory
    if mem.params is None:
        return None
    params = float(mem.params)
    trainable = float(mem.params if mem.trainable_params is None else mem.trainable_params)
    out = params * (2 if recipe.policy.dtype == "bfloat16" else 4)
    if recipe.train.checkpoint.resumable:
        moments = 1 if recipe.train.optimizer.type == "sgd" else 2
        out += params * 4 + trainable * 4 * moments
    return out


def checkpoints_kept(recipe: Section) -> int:
    """How many checkpoints the run leaves: one every train.checkpoint.every steps and one at the
    end, of which the built-in trainer keeps train.checkpoint.keep and OpenTau the last alone
    when keep is 1; LeRobot keeps them all. None where the trainer's own config turns saving off
    (an OpenTau save_checkpoint false in trainer.opentau.config, which a rehearsal sets)."""
    extra = raw(recipe.trainer.opentau.config) if recipe.trainer.kind == "opentau" else None
    if isinstance(extra, dict) and extra.get("save_checkpoint") is False:
        return 0
    steps, every = recipe.train.steps, recipe.train.checkpoint.every or 0
    saves = (steps // every + (1 if steps % every else 0)) if every else 1
    keep = recipe.train.checkpoint.keep
    if keep and recipe.trainer.kind == "builtin":
        return min(keep, saves)
    if keep == 1 and recipe.trainer.kind == "opentau":
        return 1
    return saves


def disk(recipe: Section, facts: HostFacts, run: Run) -> list[Finding]:
    one = checkpoint_bytes(recipe)
    if one is None or facts.disk_free is None:
        return []
    count = checkpoints_kept(recipe)
    if not count:
        return []
    need = one * count
    said = (
        f"{count} checkpoint(s) of about {_size(one)} need {_size(need)} under {facts.disk_path}, which has"
        f" {_size(facts.disk_free)} free"
    )
    return _room(
        need, facts.disk_free, ("train", "checkpoint"), said, "the run dies at the first save that does not fit"
    )


def trainer_env(recipe: Section, facts: HostFacts, run: Run) -> list[Finding]:
    bundle = run.bundle
    if bundle is None or not getattr(bundle, "package", None):
        return []
    if facts.trainer_error:
        return [Finding("error", ("trainer", "env"), facts.trainer_error, bundle.install_hint)]
    if facts.python is None:
        return []
    said = environment.findings(bundle, facts.python, facts.trainer, run.env_field)
    return [Finding(severity, ("trainer", "env"), message, hint) for severity, message, hint in said]


def build_locks(recipe: Section, facts: HostFacts, run: Run) -> list[Finding]:
    if not facts.build_locks:
        return []
    return [Finding("warning", ("backend",), facts.build_locks.removeprefix("recipe: warning: "))]


CHECKS = {
    "gpus": gpus,
    "driver": driver,
    "nccl": nccl,
    "shm": shm,
    "disk": disk,
    "trainer-env": trainer_env,
    "build-locks": build_locks,
}
