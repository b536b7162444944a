"""LeRobot's own defaults on `recipe import --trainer lerobot`: one rule for every flag whose
default lerobot-train v0.6.1 declares (TrainPipelineConfig, WandBConfig, PreTrainedConfig).

What the team ran is its flag, or LeRobot's default where it gave none. The imported recipe
carries that value as an override only where the recipe without it (base, the policy part,
schema defaults) would resolve to another flag; a flag at LeRobot's default that the recipe
gives anyway is not written. Every flag at LeRobot's default is listed in one note, dropped or
carried (docs/rules.md, "Checking the configs you already have").
"""

from __future__ import annotations

import copy

from registry.doc import MISSING, lookup, merge, split
from registry.trainers.base import flag_value
from registry.trainers.mapping import Field, _same, decode_flag

# lerobot-train v0.6.1's defaults (lerobot/configs/train.py, configs/default.py WandBConfig,
# configs/policies.py PreTrainedConfig.push_to_hub) for the flags a recipe field holds
DEFAULTS = {
    "batch_size": 8,
    "steps": 100_000,
    "seed": 1000,
    "save_freq": 20_000,
    "log_freq": 200,
    "num_workers": 4,
    "prefetch_factor": 4,
    "env_eval_freq": 20_000,
    "wandb.enable": False,
    "policy.push_to_hub": True,
}


def settle(recipe: dict, part: str | None, given: dict[str, str], notes: list[str]) -> None:
    """Drop or carry each flag at LeRobot's default in `recipe`, in TABLE order (save_freq after
    steps: the recipe derives one from the other), with one note."""
    from registry.trainers.lerobot import TABLE

    below = _below(part)
    dropped, carried = [], []
    for row in TABLE.rows:
        if not isinstance(row, Field) or row.foreign not in DEFAULTS or not row.emit:
            continue
        flag, default = row.foreign, flag_value(DEFAULTS[row.foreign])
        path = split(row.recipe)
        if flag in given:
            if _spelt(row, given[flag]) != default:
                continue  # the team's own value: an ordinary override
        elif lookup(recipe, path) is not MISSING:
            continue  # set by another file of the import
        alone = _resolved(below, _without(recipe, path), flag)
        if alone is None:
            continue  # resolve cannot write the recipe yet: validation says why, the import keeps what it read
        if alone == default:
            _drop(recipe, path)
            if flag in given:
                dropped.append(f"--{flag}={default}")
        else:
            _put(recipe, path, DEFAULTS[flag])  # these rows convert nothing: LeRobot's value is the recipe's
            how = "given" if flag in given else "not given"
            carried.append(f"--{flag}={default} ({how}; the recipe alone gives {alone})")
    said = []
    if dropped:
        said.append("not written, as the recipe gives the same: " + ", ".join(dropped))
    if carried:
        said.append("written, as the recipe alone would give another value: " + ", ".join(carried))
    if said:
        notes.append("lerobot-train flags at LeRobot's defaults: " + "; ".join(said))


def _spelt(row: Field, text: str) -> str:
    """A flag's text as resolve would spell the value it imports to (True and yes spell true)."""
    try:
        found = decode_flag(text) if row.back is _same else row.back(text)
    except (ValueError, TypeError):
        return text
    return flag_value(found)


def _below(part: str | None) -> dict:
    """What the imported recipe is composed over: base and the policy part it extends."""
    from registry.compose import compose
    from registry.load import load_resolved
    from registry.names import Name
    from registry.sharing import sources

    if part:
        return compose(f"policy/{part}").data
    return load_resolved(sources.find(Name((sources.BASE,)))).data


def _resolved(below: dict, recipe: dict, flag: str) -> str | None:
    """The value resolve writes for `flag` from the composed recipe; LeRobot's default where it writes none."""
    from registry.trainers.lerobot import flags

    doc = merge(copy.deepcopy(below), recipe)
    try:
        written = flags(doc)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None  # a recipe resolve cannot write yet: validation says why; the value is kept
    found = [w.split("=", 1)[1] for w in written if w.startswith(f"--{flag}=")]
    return found[-1] if found else flag_value(DEFAULTS[flag])


def _without(recipe: dict, path: tuple) -> dict:
    out = copy.deepcopy(recipe)
    _drop(out, path)
    return out


def _drop(doc: dict, path: tuple) -> None:
    """Remove a value and the mappings it leaves empty."""
    trail = []
    node = doc
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            return
        trail.append((node, key))
        node = node[key]
    node.pop(path[-1], None)
    for parent, key in reversed(trail):
        if parent[key]:
            break
        parent.pop(key)


def _put(doc: dict, path: tuple, item) -> None:
    node = doc
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = item
