"""A team's own training script: `trainer.command.program` with argument templates filled from
the recipe ({train.micro_batch_size}, {output_dir}, {world_size}, ...), under accelerate launch.
The `command-placeholders` rule has checked every placeholder before this runs."""

from __future__ import annotations

import os

from registry import view
from registry.doc import PLACEHOLDER, lookup
from registry.topology import world_size
from registry.trainers.base import Context, Invocation, flag_value


def launch_values(recipe, ctx: Context) -> dict:
    """What a placeholder may name besides recipe paths (validate.checks.COMMAND_PLACEHOLDERS)."""
    return {
        "output_dir": "output",
        "world_size": world_size(recipe),
        "accelerate_config": ctx.accelerate_config,
        "deepspeed_config": "deepspeed.json",
    }


def fill(template: str, doc, known: dict) -> str:
    def value(match):
        key = match.group(1)
        return str(known[key]) if key in known else flag_value(view.plain(lookup(doc, key)))

    return PLACEHOLDER.sub(value, template)


def invocation(doc, ctx: Context) -> Invocation:
    recipe = view.of(doc)
    program = recipe.trainer.command.program
    if "/" in program and not os.path.isabs(program):
        program = os.path.abspath(program)  # the launch runs inside the run directory
    known = launch_values(recipe, ctx)
    args = [fill(a, recipe, known) for a in recipe.trainer.command.args or ()]
    python = program.endswith(".py")
    launch = ctx.accelerate() + ([] if python else ["--no_python"])
    return Invocation(
        launch + [program] + args,
        program if not python else "accelerate",
        f"put {program} on PATH" if not python else "pip install accelerate",
    )
