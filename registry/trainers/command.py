"""A team's own training script: `trainer.command.program` with argument templates filled from
the recipe ({train.micro_batch_size}, {output_dir}, {world_size}, ...), under accelerate launch.
The `command-placeholders` rule has checked every placeholder before this runs."""

from __future__ import annotations

import os
import shlex

from registry import view
from registry.doc import PLACEHOLDER, lookup
from registry.topology import world_size
from registry.trainers.base import Context, Invocation, Raw, flag_value

FUSED_ADAM = False  # not known: the estimate counts the foreach temporary, the larger figure

# The program is given the values its {placeholders} name, and reads the rest from the resolved
# recipe ({recipe_lock}); other trainers' options and the run folder are not its (resolve/fields.py).
READS = ("policy", "dataset", "train", "trainer.command", "trainer.env")


def launch_values(recipe, ctx: Context) -> dict:
    """What a placeholder may name besides recipe paths (validate.checks.COMMAND_PLACEHOLDERS)."""
    return {
        "output_dir": "output",
        "world_size": world_size(recipe),
        "accelerate_config": ctx.accelerate_config,
        "deepspeed_config": "deepspeed.json",
        "recipe_lock": "recipe.lock.yaml",
    }


def fill(template: str, doc, known: dict) -> str:
    """The argument; shell text (Raw) when a launch value is: on several nodes {accelerate_config}
    is launch.sh's per-node yaml, whose name the shell completes with the node's rank."""
    pieces, last = [], 0
    for match in PLACEHOLDER.finditer(template):
        key = match.group(1)
        pieces += [
            template[last : match.start()],
            known[key] if key in known else flag_value(view.plain(lookup(doc, key))),
        ]
        last = match.end()
    pieces.append(template[last:])
    if not any(isinstance(p, Raw) for p in pieces):
        return "".join(str(p) for p in pieces)
    return Raw("".join(p if isinstance(p, Raw) else shlex.quote(str(p)) for p in pieces if p != ""))


def invocation(doc, ctx: Context) -> Invocation:
    recipe = view.of(doc)
    program = recipe.trainer.command.program
    if "/" in program and not os.path.isabs(program):
        program = os.path.abspath(program)  # the launch runs inside the run directory
    known = launch_values(recipe, ctx)
    args = [fill(a, recipe, known) for a in recipe.trainer.command.args or ()]
    python = program.endswith(".py")
    launch = ctx.accelerate() + ([] if python else ["--no_python"])
    starter = ctx.python or "accelerate"
    return Invocation(
        launch + [program] + args,
        program if not python else starter,
        f"put {program} on PATH" if not python else "pip install accelerate",
        python=ctx.python,
    )
