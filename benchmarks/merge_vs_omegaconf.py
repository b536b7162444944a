"""Why compose.merge is plain Python: per-recipe merge time of every bundled cell's layers,
with OmegaConf.merge and with compose.merge (which tests pin to OmegaConf's semantics).
Usage: python benchmarks/merge_vs_omegaconf.py (needs omegaconf: pip install -e '.[test]')"""

import itertools
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from omegaconf import OmegaConf

from registry.compose import Plan
from registry.doc import merge
from registry.sharing import sources


def timed(fn, layer_sets) -> float:
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for layers in layer_sets:
            fn(layers)
        runs.append((time.perf_counter() - start) / len(layer_sets))
    return statistics.median(runs) * 1000


def with_omegaconf(layers):
    return OmegaConf.to_container(OmegaConf.merge(*map(OmegaConf.create, layers)), resolve=False)


def with_plain(layers):
    out = {}
    for layer in layers:
        out = merge(out, layer)
    return out


def main() -> None:
    cells = itertools.product(*(sources.part_names(a) for a in ("policy", "backend", "hardware")))
    layer_sets = [[layer.data for layer in Plan.of("/".join(c)).layers if layer.data] for c in cells]
    omega, plain = timed(with_omegaconf, layer_sets), timed(with_plain, layer_sets)
    print(
        json.dumps(
            {
                "benchmark": "merge_vs_omegaconf",
                "cells": len(layer_sets),
                "omegaconf_ms_per_recipe": round(omega, 3),
                "plain_ms_per_recipe": round(plain, 3),
                "ratio": round(omega / plain, 1),
                "date": time.strftime("%Y-%m-%d"),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
