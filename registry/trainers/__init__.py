"""Trainer adapters: a resolved recipe -> the trainer's own config files and its command line.

base.py holds the shared types; one module per trainer holds both directions of its mapping.
The table below is the only place that knows them; the schema's trainer.kind enum names the
same four. No code named by a recipe is ever imported.
"""

from registry.trainers import builtin, command, lerobot, opentau
from registry.trainers.base import Context, Invocation, Raw, flag_value

ADAPTERS = {"builtin": builtin, "opentau": opentau, "lerobot": lerobot, "command": command}


def invocation(doc, ctx: Context) -> Invocation:
    return ADAPTERS[doc["trainer"]["kind"]].invocation(doc, ctx)


__all__ = ["ADAPTERS", "Context", "Invocation", "Raw", "flag_value", "invocation"]
