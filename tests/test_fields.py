"""Every value of every bundled cell, under every trainer, goes somewhere: the trainer, the
launch, the registry's own reading, or a not-applicable rule that errs when it is set
(registry/resolve/fields.py, docs/failure-modes.md §31)."""

import copy

import pytest

from registry.doc import join
from registry.resolve import fields

TRAINERS = ("builtin", "opentau", "lerobot", "command")


def under(kind: str, doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    doc["trainer"]["kind"] = kind
    if kind == "command":
        doc["trainer"].setdefault("command", {"program": "train.sh"})
    return doc


@pytest.mark.parametrize("kind", TRAINERS)
def test_every_value_of_every_cell_is_classified(matrix, kind):
    unclassified: dict[str, set[str]] = {}
    for name, cell in matrix.items():
        for path, (use, _) in fields.uses(under(kind, cell.recipe.data)).items():
            if use is None:
                unclassified.setdefault(join(path), set()).add(name)
    assert not unclassified, {p: sorted(cells)[:3] for p, cells in unclassified.items()}


TRACE = r"""
import json, sys, tempfile
from pathlib import Path
from registry import view
from registry.compose import compose
from registry.train import loop

read = set()
get_attr, get_item = view.Section.__getattr__, view.Section.__getitem__

def traced_attr(self, name):
    if not name.startswith("__"):
        read.add(".".join(str(k) for k in (*self._path, name)))
    return get_attr(self, name)

def traced_item(self, key):
    read.add(".".join(str(k) for k in (*self._path, key)))
    return get_item(self, key)

view.Section.__getattr__, view.Section.__getitem__ = traced_attr, traced_item
doc = compose("tiny/ddp/cpu", ["train.steps=2", "train.log_every=1", "trainer.builtin.progress=false"]).data
loop.train(doc, Path(tempfile.mkdtemp()))
print(json.dumps(sorted(read)))
"""


def test_the_builtin_trainer_reads_what_it_declares(tmp_path):
    """Trace every field the built-in loop reads in a real (one-process, CPU) run: it reads each
    field builtin.READS declares, and nothing outside READS, the launch's and the registry's."""
    import json
    import os
    import subprocess
    import sys

    from conftest import ROOT

    from registry.resolve import launch
    from registry.trainers import builtin

    script = tmp_path / "trace.py"
    script.write_text(TRACE)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        # this checkout's registry first; the rest kept (a mutation run's mutmut may live there)
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read = set(json.loads(done.stdout.splitlines()[-1]))
    leaves = {r for r in read if not any(o.startswith(r + ".") for o in read)}
    declared = builtin.READS + launch.READS + tuple(fields.REGISTRY)
    unread = [p for p in builtin.READS if not any(r == p or r.startswith(p + ".") for r in read)]
    undeclared = [r for r in leaves if not any(r == p or r.startswith(p + ".") for p in declared)]
    assert not unread, f"declared in builtin.READS but never read: {unread}"
    assert not undeclared, f"read by the built-in trainer but not declared: {undeclared}"


CANDIDATES = (True, False, 7, 3, 0.5, "x", "8Gi", [96, 96], ["x"], {"x": 1}, None)  # "8Gi": a quantity pattern
CELLS = {
    "builtin": "tiny/ddp/cpu",
    "opentau": "pi07/zero2/8xA100",
    "lerobot": "act/ddp/8xA100",
    "command": "tiny/ddp/cpu",
}


def enum_of(path: tuple) -> list:
    """The values the schema's enum allows at a path, if it has one."""
    from registry import view
    from registry.files import schema_documents

    docs = schema_documents()
    nodes = view._resolve_all(docs, "recipe.schema.json", docs["recipe.schema.json"])
    for key in path:
        nodes = [
            sub for file, node in nodes for sub in view._resolve_all(docs, file, node.get("properties", {}).get(key))
        ]
    return [v for _, node in nodes for v in node.get("enum", [])]


def declared_leaves(path: tuple) -> list[tuple]:
    """The fields the schema declares at or under a path (a section expands to its fields)."""
    from registry import view

    below = view._declared(path)
    if not below:
        return [path]
    return [leaf for name in below for leaf in declared_leaves((*path, name))]


@pytest.mark.parametrize("kind", TRAINERS)
def test_setting_a_not_applicable_field_is_an_error_naming_it(kind):
    """Each field a not-applicable rule names, set to a value of its type other than its default,
    fails validation with that rule at that field."""
    from registry.compose import compose
    from registry.doc import split
    from registry.validate import applicable_rules, checks, validate
    from registry.validate.problems import STRUCTURAL

    base = compose(
        CELLS[kind], ["trainer.kind=" + kind] + (["trainer.command.program=t.sh"] if kind == "command" else [])
    )
    rules = applicable_rules(base.data, "not-applicable")
    assert rules, f"no not-applicable rule applies to {kind}"
    missed = []
    for rule in rules:
        for dotted in rule["fields"]:
            for path in declared_leaves(split(dotted)):
                for value in (*enum_of(path), *CANDIDATES):
                    if value == checks.default(path):
                        continue
                    doc = copy.deepcopy(base.data)
                    node = doc
                    for key in path[:-1]:
                        node = node.setdefault(key, {})
                    node[path[-1]] = value
                    found = validate(doc, {})
                    if any(p.rule in STRUCTURAL for p in found):
                        continue  # not a value of this field's type
                    if not any(p.rule == rule["id"] and p.path.startswith(join(path)) for p in found):
                        missed.append(f"{join(path)}={value!r} ({rule['id']})")
                    break
                else:
                    missed.append(f"{join(path)}: no value of its type to try")
    assert not missed, missed


def test_the_paths_a_table_writes_from():
    """Each kind of row gives its recipe paths; a row whose `when` fails for this recipe, a spelling
    read on import only (emit=False) and an ignored key give none; a section's rows count when the
    section applies."""
    from registry.resolve.fields import table_paths
    from registry.trainers.mapping import Computed, Const, Field, Ignored, Section, Table

    fsdp = lambda doc: doc["backend"]["kind"] == "fsdp"  # noqa: E731
    table = Table(
        Field("train.steps", "steps"),
        Field("train.seed", "seed_alias", emit=False),
        Field("backend.sharding", "sharding", when=fsdp),
        Computed("world", lambda doc: 2, ("hardware.nodes", "hardware.processes_per_node"), "the world size"),
        Const("kind", "x"),
        Ignored("debug.*", "not a training setting"),
        Section("fsdp", Table(Field("backend.use_orig_params", "orig")), when=fsdp),
    )
    assert table_paths(table, {"backend": {"kind": "fsdp"}}) == {
        ("train", "steps"),
        ("backend", "sharding"),
        ("hardware", "nodes"),
        ("hardware", "processes_per_node"),
        ("backend", "use_orig_params"),
    }
    assert table_paths(table, {"backend": {"kind": "ddp"}}) == {
        ("train", "steps"),
        ("hardware", "nodes"),
        ("hardware", "processes_per_node"),
    }
