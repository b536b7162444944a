"""How many processes a recipe starts, and on how many nodes: what launchers, resolvers and the
memory model all count by."""

from __future__ import annotations


def world_size(doc: dict) -> int:
    hw = doc.get("hardware", {})
    per_node = hw.get("processes_per_node") or hw.get("gpus_per_node") or 1
    return int(per_node) * int(hw.get("nodes", 1))
