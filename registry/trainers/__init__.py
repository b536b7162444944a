"""Trainer adapters: a resolved recipe -> the trainer's own config files and its command line.

base.py holds the shared types; one module per trainer holds both directions of its mapping.
The table below is the only place that knows them; the schema's trainer.kind enum names the
same four. No code named by a recipe is ever imported.
"""

from importlib import import_module

from registry.trainers.base import Context, Invocation, Raw, flag_value

KINDS = ("builtin", "opentau", "lerobot", "command")


def adapter(kind: str):
    """One trainer's module, imported when a recipe names it: a built-in run, which `recipe run`
    starts in well under a second, never loads the LeRobot and OpenTau mapping tables."""
    if kind not in KINDS:
        raise KeyError(kind)
    return import_module(f"registry.trainers.{kind}")


def invocation(doc, ctx: Context) -> Invocation:
    return adapter(doc["trainer"]["kind"]).invocation(doc, ctx)


__all__ = ["KINDS", "Context", "Invocation", "Raw", "adapter", "flag_value", "invocation"]
