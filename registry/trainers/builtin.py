"""The project's own accelerate training entrypoint (`python -m registry.train`)."""

from __future__ import annotations

import json

from registry.trainers.base import Context, Invocation

CONFIG = "train_config.json"


def invocation(doc: dict, ctx: Context) -> Invocation:
    files = {CONFIG: json.dumps(doc, indent=2, sort_keys=False) + "\n"}
    entry = ["-m", "registry.train", CONFIG]
    if ctx.launcher == "torchrun":
        return Invocation(
            ctx.torchrun() + entry,
            "torchrun",
            "pip install torch",
            files,
            uses_accelerate_config=False,
            same_python=True,
        )
    return Invocation(ctx.accelerate() + entry, "accelerate", "pip install accelerate", files, same_python=True)
