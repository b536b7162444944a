"""Where each field of a composed recipe goes under its trainer (docs/failure-modes.md §31).

Every value of a recipe is one of:
  not applicable  a not-applicable rule in schemas/ names it for this trainer: set away from its
                  default, `recipe validate` errs, so it is never dropped without a word
  trainer         the trainer's adapter takes it: a row of its table (opentau.json, lerobot-train
                  flags) or a field the built-in trainer reads
  launcher        the launch takes it: the accelerate yaml, the DeepSpeed JSON or launch.sh
  registry        the registry itself reads it: names and results, the memory estimate, the
                  rules that cross-check it against what the trainer takes

`uses(doc)` classifies every value; a test walks every bundled cell under every trainer and fails
on a value none of these claims. The tables are the ones resolve writes with, so the answer
cannot drift from what is emitted.
"""

from __future__ import annotations

from registry.doc import leaves, lookup, split
from registry.resolve import accelerate, deepspeed, launch
from registry.trainers import adapter as trainer_adapter
from registry.trainers.mapping import Computed, Ignored, Section, Table
from registry.validate import applicable_rules, checks

# What the registry reads itself, whatever the trainer.
REGISTRY = {
    "recipe": "the recipe's name, version and description",
    "results": "measurements recorded by recipe bench",
    "policy.memory": "the policy's sizes, for the memory estimate",
    "backend.memory": "the backend's overheads, for the memory estimate",
    "policy.type": "the rules check that the trainer has this policy",
    "policy.dtype": "how the trainer holds the weights, for the memory estimate and the FSDP rules",
    "policy.rank_synchronised_branches": "tells the rank-divergence rule that the policy syncs its branches",
    "dataset.num_cams": "frames per sample, for the memory estimate",
    "dataset.action_freq": "checked against the dataset's fps before launch (docs/preflight.md §dataset-fps)",
    "dataset.n_obs_history": "checked against policy.n_obs_steps (obs-history)",
    "train.batch_size": "checked against the batch product (batch-size-product)",
    "train.global_batch_size": "checked against the batch product (global-batch-size)",
    "train.master_weights": "checked against the backend (master-weights rules)",
    "train.checkpoint.resumable": "recipe run --resume checks it",
    "train.checkpoint.consolidated": "checked against the backend's save path (zero3-save-16bit)",
    "trainer.kind": "picks the trainer's adapter",
    "policy.block_classes": "the policy's FSDP wrap units, written when the backend is FSDP",
    "policy.fsdp2_extra_block_classes": "more FSDP2 wrap units, written when the backend is FSDP2",
    "policy.module_classes": "the policy's module classes, which the FSDP wrap classes are checked against",
}


def table_paths(table: Table, doc) -> set[tuple]:
    """The recipe paths a table's rows write from, for this recipe (rows whose `when` fails, and
    spellings read on import only, write nothing)."""
    found: set[tuple] = set()
    for row in table.rows:
        if isinstance(row, Ignored) or not getattr(row, "emit", True):
            continue
        if getattr(row, "when", None) is not None and not row.when(doc):
            continue
        if isinstance(row, Section):
            found |= table_paths(row.table, doc)
        elif isinstance(row, Computed):
            found |= {split(p) for p in row.reads}
        elif hasattr(row, "recipe"):
            found.add(split(row.recipe))
    return found


def _trainer_paths(doc) -> set[tuple]:
    adapter = trainer_adapter(doc["trainer"]["kind"])
    found = {split(p) for p in adapter.READS}
    table = getattr(adapter, "TABLE", None)
    return found | (table_paths(table, doc) if table is not None else set())


def _launcher_paths(doc) -> set[tuple]:
    inv = trainer_adapter(doc["trainer"]["kind"]).invocation(doc, launch.context(doc))
    found = {split(p) for p in launch.READS}
    if inv.uses_accelerate_config:
        found |= table_paths(accelerate.TABLE, doc)
    if deepspeed.deepspeed_config(doc) is not None:
        found |= table_paths(deepspeed.TABLE, doc)
    return found


def _under(path: tuple, prefixes) -> bool:
    return any(path[: len(p)] == p for p in prefixes)


def uses(doc) -> dict[tuple, tuple[str, str]]:
    """Each value's path -> (class, by what): class is one of "not applicable", "trainer",
    "launcher", "registry", or None where nothing claims it (a value that would be dropped)."""
    not_applicable = {
        split(path): (rule["id"], why)
        for rule in applicable_rules(doc, "not-applicable")
        for path, why in rule["fields"].items()
    }
    trainer, launcher = _trainer_paths(doc), _launcher_paths(doc)
    registry = {split(p): why for p, why in REGISTRY.items()}
    kind = doc["trainer"]["kind"]
    out: dict[tuple, tuple[str, str]] = {}
    for path in leaves(doc):
        if isinstance(lookup(doc, path), dict) or any(isinstance(k, int) for k in path):
            continue  # mappings are walked; a list is one value
        claimed = [p for p in not_applicable if path[: len(p)] == p]
        if claimed:
            rule, why = not_applicable[claimed[0]]
            out[path] = ("not applicable", f"{rule}: {why}")
        elif _under(path, trainer):
            out[path] = ("trainer", kind)
        elif _under(path, launcher):
            out[path] = ("launcher", "accelerate yaml, DeepSpeed JSON or launch.sh")
        elif path[0] == "backend" and lookup(doc, path) == checks.default(path):
            # the backend schema's defaults are accelerate's and DeepSpeed's own: no key needed
            out[path] = ("launcher", "at the launcher's own default")
        elif _under(path, registry):
            out[path] = ("registry", next(why for p, why in registry.items() if path[: len(p)] == p))
        else:
            out[path] = (None, "")
    return out
