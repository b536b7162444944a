"""A team's own training script: `trainer.command.program` with argument templates filled from
the recipe ({train.micro_batch_size}, {output_dir}, {world_size}, ...), under accelerate launch."""

from __future__ import annotations

import os
import re

from registry.doc import MISSING, lookup
from registry.errors import Exit, RecipeError
from registry.topology import world_size
from registry.trainers.base import Context, Invocation, flag_value

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][\w.]*)\}")


def fill(template: str, doc: dict, known: dict) -> str:
    def value(match):
        key = match.group(1)
        if key in known:
            return str(known[key])
        found = lookup(doc, key)
        if found is MISSING:
            raise RecipeError(f"trainer.command.args: {{{key}}} names nothing in the recipe", Exit.INVALID)
        return flag_value(found)

    return _PLACEHOLDER.sub(value, template)


def invocation(doc: dict, ctx: Context) -> Invocation:
    spec = doc["trainer"]["command"]
    program = spec["program"]
    if "/" in program and not os.path.isabs(program):
        program = os.path.abspath(program)  # the launch runs inside the run directory
    known = {
        "output_dir": "output",
        "world_size": world_size(doc),
        "accelerate_config": ctx.accelerate_config,
        "deepspeed_config": "deepspeed.json",
    }
    args = [fill(a, doc, known) for a in spec.get("args", [])]
    python = program.endswith(".py")
    launch = ctx.accelerate() + ([] if python else ["--no_python"])
    return Invocation(
        launch + [program] + args,
        program if not python else "accelerate",
        f"put {program} on PATH" if not python else "pip install accelerate",
    )
