"""`recipe run NAME --rehearse`: the recipe's real trainer for a few steps, with nothing fetched.

Weights are random and the data synthetic, in the layout the recipe declares; the launch is the
recipe's own (its accelerate yaml, DeepSpeed JSON or FSDP settings, trainer config and launch.sh).
What it proves and what it does not: docs/rehearsal.md.

    runs/rehearsals/NAME/STAMP/
      synthetic/   what the trainer trains on (made by the trainer's adapter here)
      run/         the run folder, as `recipe run` makes it (launch.log, the resolved files)
      ranks/       what every rank measured (rank_probe/sitecustomize.py)
      rehearsal.json  the report: steps, losses, peak memory beside the estimate, samples/s
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from registry import view
from registry.compose import compose
from registry.errors import Exit, RecipeError
from registry.run.rehearse import builtin, opentau, report

PROBE = Path(__file__).with_name("rank_probe")
ADAPTERS = {"opentau": opentau, "builtin": builtin}
DEFAULT_STEPS = 10


def schedule(doc: dict, steps: int) -> list[str]:
    """train.steps, and the schedule's shape kept over the rehearsal's length: a warm-up of 1,000 of
    30,000 steps is one step of 20, not 20 steps at a fiftieth of the learning rate."""
    r = view.of(doc)
    if r.train.scheduler.type == "constant":
        return [f"train.steps={steps}"]
    total = int(r.train.scheduler.decay_steps or r.train.steps)
    warmup = int(r.train.scheduler.warmup_steps or 0)
    keys = [f"train.steps={steps}", f"train.scheduler.decay_steps={steps}"]
    if warmup:
        keys.append(f"train.scheduler.warmup_steps={max(1, min(steps - 1, round(steps * warmup / max(total, 1))))}")
    return keys


def rehearse(
    target: str,
    overrides: list[str],
    *,
    steps: int | None,
    output_dir: str | None,
    allow_mismatch: bool,
    waive: list[str] | None,
) -> int:
    from registry.run import checked, claim, run
    from registry.run import resume as resume_
    from registry.run.environment import interpreter_of

    steps = steps or DEFAULT_STEPS
    recipe = compose(target, overrides)
    kind = view.of(recipe.data).trainer.kind
    adapter = ADAPTERS.get(kind)
    if adapter is None:
        known = ", ".join(sorted(ADAPTERS))
        raise RecipeError(f"{recipe.name}: rehearsal drives the {known} trainers, not {kind}", Exit.INVALID)
    shared = [*overrides, *schedule(recipe.data, steps)]
    # the recipe is checked before anything is made: an invalid one fails in a second, not after the data
    first, bundle = checked(target, shared)
    folder = Path(output_dir) if output_dir else claim(resume_.runs_of(first, Path("runs") / "rehearsals"))
    folder.mkdir(parents=True, exist_ok=True)
    folder = folder.resolve()  # the trainer runs in run/: a relative --output-dir would point elsewhere there
    if any(p.name in ("run", "rehearsal.json") for p in folder.iterdir()):
        raise RecipeError(f"{folder}: holds a rehearsal already (hint: pick a new --output-dir)")
    env = dict(os.environ)
    python = bundle.python or (sys.executable if bundle.same_python else interpreter_of(bundle.program, env))
    if python is None:
        raise RecipeError(f"{bundle.program} not found on PATH (hint: {bundle.install_hint})", Exit.NOT_FOUND)
    samples = report.samples_per_step(first.data) * steps
    print(f"recipe: rehearsing {first.name} for {steps} steps in {folder}", file=sys.stderr)
    print(f"recipe: rehearsal: making the synthetic data ({adapter.note()})", file=sys.stderr)
    made = adapter.make(first.data, folder / "synthetic", python, samples, folder / "synthetic.log")
    keys = [f"{k}={json.dumps(v)}" for k, v in adapter.overrides(first.data, made, steps).items()]
    ranks = folder / "ranks"
    ranks.mkdir(exist_ok=True)
    path = os.pathsep.join(p for p in (str(PROBE), env.get("PYTHONPATH", "")) if p)
    launch_env = {
        **adapter.env(made),
        "PYTHONPATH": path,
        "RECIPE_REHEARSAL_DIR": str(ranks.resolve()),
        "RECIPE_REHEARSAL_INIT": "1",  # no weight matrix left at exactly zero (rank_probe/sitecustomize.py)
    }
    code = run(
        target,
        [*shared, *keys],
        dry_run=False,
        output_dir=str(folder / "run"),
        allow_mismatch=allow_mismatch,
        waive=waive,
        extra_env=launch_env,
        summary=False,
    )
    final = compose(target, [*shared, *keys])
    return report.finish(final, folder, code, steps, adapter)
