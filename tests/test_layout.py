"""The package's shape: the stages in order, imports one way, defaults in one place."""

import ast
import json
from pathlib import Path

import yaml

from registry.files import RECIPES_DIR, SCHEMA_DIR

PACKAGE = Path(__file__).resolve().parent.parent / "registry"
STAGES = ["load", "compose", "validate", "estimate", "resolve", "trainers", "run", "commands"]


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(path: Path, name: str) -> set[str]:
    """registry modules a module imports, at any depth (lazy imports included)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}")
                found.add(base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("registry")}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: {m for m in imports(path, name) if m in mods and m != name} for name, path in mods.items()}


def test_top_level_reads_as_the_pipeline():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__" and not p.name.startswith("."))
    assert len(entries) <= 19, entries  # the leaves (errors, files, untrusted, doc, ...) and one per stage
    names = {Path(e).stem for e in entries}
    assert set(STAGES) <= names, set(STAGES) - names


def test_no_import_cycles():
    edges = graph()
    # a package's __init__ re-exporting its own modules is not a cycle between stages
    edges = {m: {d for d in deps if not (d.startswith(m + ".") or m.startswith(d + "."))} for m, deps in edges.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(dep) :] + [dep]))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_the_cycle_check_can_fail(monkeypatch):
    fake = {"registry.a": {"registry.b"}, "registry.b": {"registry.a"}}
    monkeypatch.setattr(__import__(__name__), "graph", lambda: fake)
    try:
        test_no_import_cycles()
    except AssertionError as e:
        assert "registry.a -> registry.b -> registry.a" in str(e)
    else:
        raise AssertionError("a cycle went unnoticed")


def declared_keys() -> set[str]:
    """Every key that base.yaml sets or a schema declares as a property."""
    keys: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    keys.update(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in SCHEMA_DIR.glob("*.schema.json"):
        if not path.name.endswith(".upstream.schema.json"):  # the libraries' own keys, generated
            walk(json.loads(path.read_text()))

    def base(node):
        if isinstance(node, dict):
            keys.update(node)
            for value in node.values():
                base(value)

    base(yaml.safe_load((RECIPES_DIR / "base.yaml").read_text()))
    # `extends` is read from each file before composition and never reaches a composed recipe
    return keys - {"extends"}


def literal_default_reads(source: str, keys: set[str]) -> list[tuple[int, str]]:
    """`.get("key", <literal>)` calls whose key a recipe declares: a default in code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in keys
            and _literal(node.args[1])
        ):
            found.append((node.lineno, ast.unparse(node)))
    return found


def _literal(node) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.List, ast.Tuple, ast.Dict)):
        return all(_literal(n) for n in (node.elts if not isinstance(node, ast.Dict) else node.values))
    return False


def test_no_literal_defaults_for_recipe_keys():
    keys = declared_keys()
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "checkers":  # scripts the trainers' interpreters run: their keys, not ours
            continue
        for line, call in literal_default_reads(path.read_text(), keys):
            offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {call}")
    assert not offenders, "defaults belong in recipes/base.yaml or the schemas:\n" + "\n".join(offenders)


def test_the_default_scan_can_fail():
    assert literal_default_reads('x = doc["train"].get("seed", 0)', {"seed"}) == [(1, "doc['train'].get('seed', 0)")]
    assert literal_default_reads('x = doc["train"].get("seed")', {"seed"}) == []


def test_design_layout_names_every_entry():
    design = (PACKAGE.parent / "docs" / "design.md").read_text()
    start = design.index("## Layout")
    layout = design[start : design.index("\n## ", start + 1)]
    entries = [p.name for p in PACKAGE.iterdir() if p.name != "__pycache__" and not p.name.startswith(".")]
    missing = [e for e in entries if (e + "/" if (PACKAGE / e).is_dir() else e) not in layout]
    assert not missing, missing
