"""Hardware names that need no part file: `NxGPU` is one node of N GPUs and `MxNxGPU` M nodes
of N, GPU a catalog name or alias (`2xH200`, `4xL4`, `2x8xB200`, `3xH100` = 3 x H100-SXM).

A part file of the same name always wins: parts stay for what a name cannot say (interconnect,
CPU memory for offload, a cluster's launch defaults). A generated part holds exactly what such
a file would write, `hardware.gpu`, `gpus_per_node` and `nodes`; everything else comes from
base.yaml and the schemas' defaults, as under a hand-written part. Listings, completion and the
matrix stay those of the part files."""

from __future__ import annotations

import re
from dataclasses import dataclass

from registry.compose import catalog
from registry.errors import RecipeError
from registry.load import Loaded
from registry.names import AXES, Name
from registry.sharing import sources

AXIS = "hardware"
# Counts, then the GPU: 2xH200, 2x8xB200. A count is digits; which digits is judged below, so
# that `0xH100` and `02xH100` are said to be wrong rather than unknown.
_PATTERN = re.compile(r"(?:([0-9]+)x)?([0-9]+)x([A-Za-z].*)")
FORM = "NxGPU (one node of N) or MxNxGPU (M nodes of N), GPU from catalog/gpus.yaml"


@dataclass(frozen=True)
class Spec:
    name: str  # as written
    gpu: str  # the catalog entry
    gpus_per_node: int
    nodes: int


def looks_generated(segment: str) -> bool:
    return _PATTERN.fullmatch(segment) is not None


def spec(segment: str) -> Spec:
    """What a generated hardware name says, or RecipeError saying why it says nothing."""
    m = _PATTERN.fullmatch(segment)
    if not m:
        raise RecipeError(f"hardware {segment!r} is neither a part nor a generated name ({FORM})")
    nodes, per_node, gpu = m.group(1), m.group(2), m.group(3)
    for count, what in ((nodes, "nodes"), (per_node, "GPUs per node")):
        if count is not None and count.startswith("0"):
            raise RecipeError(
                f"hardware {segment!r}: {what} {count!r} must be a whole number from 1, written "
                f"without leading zeros ({FORM})"
            )
    entry = catalog.canonical(gpu)
    if entry is None:
        error = catalog.unknown(gpu)
        raise RecipeError(f"hardware {segment!r}: {error}") from None
    return Spec(segment, entry, int(per_node), int(nodes or 1))


def is_part(segment: str) -> bool:
    return sources.find(Name((AXIS, segment))) is not None


def generable(segment: str) -> bool:
    """A name with no part file that generates a part."""
    if is_part(segment) or not looks_generated(segment):
        return False
    try:
        spec(segment)
    except RecipeError:
        return False
    return True


def exists(axis: str, segment: str) -> bool:
    """Whether a part of the axis exists under that name, as a file or generated."""
    if sources.find(Name((axis, segment))):
        return True
    return axis == AXIS and generable(segment)


def is_cell(name: Name) -> bool:
    """sources.is_cell, with generated hardware names too."""
    if len(name.segments) != 3:
        return False
    return all(exists(axis, seg) for axis, seg in zip(AXES, name.segments))


def part(segment: str) -> Loaded:
    """The part a generated name stands for: what a hand-written part of that name would hold.
    Its GPU's origin is the catalog entry; its counts' origin is the name."""
    s = spec(segment)
    table = catalog.entries()
    said = f"hardware name {segment}"
    where = table.origins.get((s.gpu,), table.file)
    shape = (
        f"{s.gpus_per_node}x {s.gpu}, one node" if s.nodes == 1 else f"{s.nodes} nodes of {s.gpus_per_node}x {s.gpu}"
    )
    data = {
        "recipe": {"summary": f"{shape} (generated from the GPU catalog)"},
        AXIS: {"gpu": s.gpu, "gpus_per_node": s.gpus_per_node, "nodes": s.nodes},
    }
    origins = {
        ("recipe",): said,
        ("recipe", "summary"): said,
        (AXIS,): said,
        (AXIS, "gpu"): where,
        (AXIS, "gpus_per_node"): said,
        (AXIS, "nodes"): said,
    }
    return Loaded(said, data, origins)


def problem(segment: str) -> str | None:
    """Why a hardware name that looks generated is not one (None: it does not look generated)."""
    if is_part(segment) or not looks_generated(segment):
        return None
    try:
        spec(segment)
    except RecipeError as e:
        return str(e)
    return None
