"""How many processes a recipe starts, and on how many nodes: what launchers, resolvers and the
memory model all count by."""

from __future__ import annotations

from collections.abc import Mapping

from registry import view


def processes_per_node(recipe: Mapping) -> int:
    """One process per GPU unless the hardware part says otherwise (a CPU host says how many)."""
    hw = view.of(recipe).hardware
    return hw.processes_per_node or hw.gpus_per_node or 1


def nodes(recipe: Mapping) -> int:
    return view.of(recipe).hardware.nodes


def world_size(recipe: Mapping) -> int:
    return processes_per_node(recipe) * nodes(recipe)
