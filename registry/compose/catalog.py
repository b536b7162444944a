"""The GPU catalog: `hardware.gpu: A100-80GB` becomes the catalog entry, with its origin."""

from __future__ import annotations

import difflib

from registry.errors import RecipeError
from registry.load import load_cached
from registry.names import Name
from registry.sharing import sources

CATALOG = ("catalog", "gpus")


def entries():
    path = sources.find(Name(CATALOG))
    if path is None:
        raise RecipeError("no GPU catalog (catalog/gpus.yaml) in any source")
    return load_cached(path)


def expand_gpu(data: dict, origins: dict) -> None:
    hardware = data.get("hardware")
    gpu = hardware.get("gpu") if isinstance(hardware, dict) else None
    if not isinstance(gpu, str):
        return  # absent, null (CPU) or written out in full: the schema judges it
    table = entries()
    if gpu not in table.data:
        where = origins.get(("hardware", "gpu"), "hardware.gpu")
        close = difflib.get_close_matches(gpu, list(table.data), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else "add it to catalog/gpus.yaml"
        raise RecipeError.at(
            where,
            "unknown-gpu",
            f"{gpu!r} is not in the GPU catalog",
            path="hardware.gpu",
            hint=f"{hint}; known: {', '.join(table.data)}",
        )
    hardware["gpu"] = {"name": gpu, **table.data[gpu]}
    origins[("hardware", "gpu", "name")] = origins.get(("hardware", "gpu"), table.file)
    for path, origin in table.origins.items():
        if path[0] == gpu and len(path) > 1:
            origins[("hardware", "gpu") + path[1:]] = origin
