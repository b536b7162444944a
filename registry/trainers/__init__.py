"""Trainer adapters: base.py holds the shared types and the table of adapters; one module per
trainer holds both directions of its mapping."""

from registry.trainers.base import Context, Invocation, Raw, flag_value, invocation

__all__ = ["Context", "Invocation", "Raw", "flag_value", "invocation"]
