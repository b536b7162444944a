"""Parts, `extends`, the tuned overlay and command-line overrides -> one document.

Order: base, then for a cell `P/B/H` the parts policy/P, backend/B, hardware/H and the overlay
P/B/H if one exists; for a file its `extends` entries (depth first) and the file itself;
then overrides. Values merge as OmegaConf merges them (mappings merge, lists and scalars
replace).
Every key keeps the 'file:line:column' of the layer that set it last.
"""

from __future__ import annotations

import difflib
from functools import lru_cache, partial
from pathlib import Path, PurePosixPath

from registry import names
from registry.compose import catalog, hardware
from registry.compose.overrides import Overrides
from registry.compose.overrides import parse as parse_overrides
from registry.doc import BASE_LAYER, PART_LAYER, RECIPE_LAYER, USER_LAYER, Origins, Recipe, exists, leaves, merge
from registry.errors import RecipeError
from registry.load import Loaded, display_path, load_resolved
from registry.names import AXES, Name
from registry.sharing import sources, versions

COMMAND_LINE = "command line"
# Deeper than any real chain (part -> recipe -> overlay is 3), well short of Python's recursion limit.
MAX_EXTENDS_DEPTH = 64

# Sections that describe one file, not what it extends: a recipe that extends a tuned recipe
# is a new recipe, and the parent's measured results do not describe it.
OWN_SECTIONS = ("recipe", "results")


def compose(target: str, overrides: list[str] | None = None) -> Recipe:
    """Compose a recipe name or file; RecipeError on any problem."""
    plan = Plan.of(target, overrides)
    data, merged = _merge(plan.layers)
    files = tuple((layer.file, *kind) for layer, kind in zip(plan.layers, plan.kinds))
    origins = Origins(merged, partial(_ranks, files))  # ranked only when a problem spans layers
    meta = data.setdefault("recipe", {})
    if isinstance(meta, dict):  # anything else is the schema's to report
        meta.setdefault("name", plan.name)
    origins.setdefault(("recipe",), "composed")
    origins.setdefault(("recipe", "name"), "composed")
    catalog.expand_gpu(data, origins)
    # The settings a backend or GPU needs, where only the parts said otherwise; a rule declares
    # its fix (registry/validate/fixes.py), so the import runs against the pipeline's direction.
    from registry.validate import fixes

    fixed, key = fixes.apply(data, origins)
    data = {k: data[k] for k in sorted(data, key=_section_order)}
    return Recipe(plan.name, data, origins, plan.inputs, plan.overrides.text, plan.tuned, fixed, key)


SECTION_ORDER = ("recipe", "trainer", "policy", "dataset", "backend", "hardware", "train", "env", "launch", "results")


def _section_order(key: str):
    return (SECTION_ORDER.index(key), "") if key in SECTION_ORDER else (len(SECTION_ORDER), key)


def _own_name(path: Path) -> str | None:
    """The name a resolved recipe file gives itself (recipe.name), if any."""
    meta = load_resolved(path).data.get("recipe")
    return meta.get("name") if isinstance(meta, dict) else None


class Plan:
    """The layers of a recipe, in merge order, and the files they came from."""

    @classmethod
    def of(cls, target: str, overrides: list[str] | None = None) -> Plan:
        plan = cls(parse_overrides(list(overrides or [])))
        version = None if names.looks_like_file(target) else versions.lookup(names.parse(target))
        if version is not None:
            # A published version is complete and frozen: no base, no parts, no swaps.
            if plan.swaps:
                raise RecipeError(f"{version.qualified} is a published version: axis swaps need the composable recipe")
            plan.add(version.file, own=True)
            plan.name = version.name
            return plan._finish()
        plan.add(sources.find(Name((sources.BASE,))), own=False, resolved=True)
        if names.looks_like_file(target):
            path = Path(target)
            if not path.is_file():
                # something there that is no file (a FIFO, a device, a folder) is said as what it is
                raise RecipeError(f"{target}: no such file" if not path.exists() else _not_a_file(path, target))
            resolved = path.resolve()
            plan.add(resolved, own=True, resolved=True)
            plan.name = str(_own_name(resolved) or path.stem)
        else:
            plan.name = plan.add_name(names.parse(target), where=None, own=True)
        return plan._finish()

    def _finish(self) -> Plan:
        if self.overrides.sets:
            # figures measured on the recipe as written do not describe an overridden one
            self.layers = [_strip(layer, own=True, drop=("results",)) for layer in self.layers]
        self.layers.append(_override_layer(self.overrides))
        self.kinds.append((None, True))  # what the user typed is theirs
        return self

    def __init__(self, ov: Overrides):
        self.overrides = ov
        self.swaps = ov.swaps
        self.name = ""
        self.layers: list[Loaded] = []
        # per layer: its file (None: generated, or the command line) and whether it is the target's own
        self.kinds: list[tuple[Path | None, bool]] = []
        self.inputs: list[Path] = []
        self.stack: list[Path] = []
        self.tuned = False
        for axis, part in self.swaps.items():
            if not hardware.exists(axis, part):
                raise RecipeError(_unknown_part(axis, part, f"{axis} part"))

    def add_name(self, name: Name, where: str | None, own: bool, swap: bool = True) -> str:
        """Add what a name denotes; returns its canonical name. Axis swaps apply to the cell's
        parts and the target file's own extends, not inside parts (zero3-offload extends zero3)."""
        try:
            version = versions.lookup(name)
        except RecipeError as e:
            if e.problem is not None:  # the version's own problem (hash-mismatch, index): said as itself
                raise e from None
            raise _at(where, str(e), "unknown-name") from None
        if version is not None:
            self.add(version.file, own=own)
            return version.name
        if swap and len(name.segments) == 2 and name.segments[0] in self.swaps:
            name = Name((name.segments[0], self.swaps[name.segments[0]]), name.source)
        if hardware.is_cell(name):
            cell = [self.swaps.get(axis, seg) for axis, seg in zip(AXES, name.segments)]
            for axis, seg in zip(AXES, cell):
                self.add_part(axis, seg)  # parts from any source
            overlay = sources.find(name)
            if overlay:
                self.add(overlay, own=own and not self.swaps, resolved=True)
                self.tuned = self.tuned or own
            return "/".join(cell)
        path = sources.find(name)
        if path is None and len(name.segments) == 2 and hardware.exists(*name.segments):
            self.add_generated(name.segments[1], own=own)
            return name.path
        if path is None:
            raise _at(where, _unknown_name(name), "unknown-name")
        self.add(path, own=own, resolved=True)
        return name.path  # `team:exp/foo` is the recipe exp/foo from team; the qualifier is not its name

    def add_part(self, axis: str, segment: str) -> None:
        path = sources.find(Name((axis, segment)))
        if path is None:  # only hardware parts are generated; hardware.exists said this one is
            self.add_generated(segment, own=False)
        else:
            self.add(path, own=False, resolved=True)

    def add_generated(self, segment: str, own: bool) -> None:
        """A hardware part generated from its name: the catalog is the file it comes from."""
        self.layers.append(_strip(hardware.part(segment), own))
        self.kinds.append((None, own))
        table = sources.find(Name(catalog.CATALOG))
        if table is not None and table.resolve() not in self.inputs:
            self.inputs.append(table.resolve())

    def add(self, path: Path, own: bool, resolved: bool = False) -> None:
        """Add a file and what it extends. `resolved`: a path sources.find gave, symlinks
        already followed (a process sees one state of its sources)."""
        if not resolved or path is None:
            path = path.resolve()
        if path in self.stack:
            chain = " -> ".join(_short(p) for p in self.stack[self.stack.index(path) :] + [path])
            raise RecipeError.at(_short(path), "extends-cycle", f"cyclic extends: {chain}")
        if path in self.inputs:
            return
        doc = _load(path)
        extends = doc.data.get("extends", [])
        if not isinstance(extends, list) or not all(isinstance(e, str) for e in extends):
            where = doc.origins.get(("extends",), doc.file)
            raise RecipeError.at(where, "type", "must be a list of names or relative .yaml paths", path="extends")
        if extends and len(self.stack) >= MAX_EXTENDS_DEPTH:
            chain = " -> ".join(_short(p) for p in self.stack[:3])
            raise RecipeError.at(
                doc.origins.get(("extends",), doc.file),
                "extends-depth",
                f"extends chain deeper than {MAX_EXTENDS_DEPTH} files ({chain} -> ...)",
                hint="extend a recipe that already holds what the chain adds",
            )
        self.stack.append(path)
        for i, entry in enumerate(extends):
            where = doc.origins[("extends", i)]
            if names.looks_like_file(entry):
                self.add(_relative(path, entry, where), own=False)
            else:
                try:
                    parsed = names.parse(entry)
                except RecipeError as e:
                    raise RecipeError.at(where, "unsafe-name", str(e)) from None
                self.add_name(parsed, where, own=False, swap=own)
        self.stack.pop()
        self.inputs.append(path)
        self.layers.append(_strip(doc, own))
        self.kinds.append((path, own))


def _load(path: Path) -> Loaded:
    """A resolved file, loaded; while the sources are pinned (one command over many recipes),
    each file is read and stat'ed once for the command."""
    return sources.while_pinned(_PINNED_LOADS, path, lambda: load_resolved(path))


_PINNED_LOADS: dict = {}  # each file loaded under the pinned sources


def _ranks(layers: tuple[tuple[str, Path | None, bool], ...]) -> dict[str, tuple[int, int]]:
    """Each layer's file (as origins name it) -> its rank (registry.doc.Origins): the user's own
    layers by merge order, the others by what they are in their source."""
    known = tuple(sources.all_sources())
    ranks = {}
    for i, (file, path, own) in enumerate(layers):
        standing = USER_LAYER if own else _standing(path, known)
        ranks[file] = (standing, i if standing == USER_LAYER else 0)
    return ranks


@lru_cache(maxsize=512)
def _standing(path: Path | None, known: tuple) -> int:
    """What a layer that is not the target is: the user's (a file outside the bundled recipes and
    every git source: beside the target, or in a folder of theirs added as a source), else the
    base, a part (a generated hardware part has no file) or a tuned overlay or recipe. `path` is
    resolved (Plan.add); cached per set of sources, as it is asked at every validation that
    reports a problem over several layers."""
    if path is None:
        return PART_LAYER
    inside = [(s, path.relative_to(s.root.resolve())) for s in known if path.is_relative_to(s.root.resolve())]
    if not inside:
        return USER_LAYER
    source, rel = max(inside, key=lambda found: len(found[0].root.resolve().parts))  # the innermost, as root_of
    if source.kind not in ("bundled", "git"):
        return USER_LAYER
    parts = rel.with_suffix("").parts
    if parts == (sources.BASE,):
        return BASE_LAYER
    return PART_LAYER if len(parts) == 2 and parts[0] in AXES else RECIPE_LAYER


def _strip(doc: Loaded, own: bool, drop: tuple = ()) -> Loaded:
    """A layer without what composition does not merge from it; a part's is worked out once per
    loaded file (merge copies what it takes, so the layer is only read)."""
    if own or drop:
        return _stripped(doc, own, drop)
    kept = _STRIPPED.get(id(doc))
    if kept is None or kept[0] is not doc:
        if len(_STRIPPED) >= 4096:
            _STRIPPED.clear()
        kept = _STRIPPED[id(doc)] = (doc, _stripped(doc, own, drop))
    return kept[1]


_STRIPPED: dict[int, tuple[Loaded, Loaded]] = {}  # id(a loaded part) -> (it, kept alive; its layer)


def _stripped(doc: Loaded, own: bool, drop: tuple) -> Loaded:
    drop = drop + (("extends",) if own else ("extends",) + OWN_SECTIONS)
    data = {k: v for k, v in doc.data.items() if k not in drop}
    origins = {p: o for p, o in doc.origins.items() if p[0] not in drop}
    return Loaded(doc.file, data, origins)


def _relative(parent: Path, entry: str, where: str) -> Path:
    rel = PurePosixPath(entry)
    if rel.is_absolute() or ".." in rel.parts:
        raise RecipeError.at(
            where,
            "unsafe-name",
            f"extends entry {entry!r} leaves the recipe's folder",
            hint="use a relative path below it, or a recipe name",
        )
    path = parent.parent.joinpath(*rel.parts)
    if not path.is_file():
        raise RecipeError.at(where, "unknown-name", f"extends entry {entry!r}: no such file")
    # Checked after resolving symlinks: a link (or a linked folder) inside the source may point
    # anywhere, and `recipe show` would print what it points at. A file outside every source
    # (one given on the command line) is confined to its own folder.
    root = sources.root_of(parent)
    within = root.path if root else parent.parent.resolve()
    if not path.resolve().is_relative_to(within):
        outside = f"source {root.name!r}" if root else f"the recipe's folder {display_path(within)}"
        raise RecipeError.at(
            where,
            "unsafe-name",
            f"extends entry {entry!r} resolves outside {outside} (a symlink?)",
            hint="extend a file inside it, or a recipe name",
        )
    return path


def _override_layer(ov: Overrides) -> Loaded:
    data: dict = {}
    origins: dict[tuple, str] = {}
    for path, value in ov.sets:
        node = data
        for i, key in enumerate(path[:-1]):
            origins[path[: i + 1]] = COMMAND_LINE
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[path[-1]] = value
        origins[path] = COMMAND_LINE
        for sub in leaves(value, path):
            origins[sub] = COMMAND_LINE
    return Loaded(COMMAND_LINE, data, origins)


def _merge(layers: list[Loaded]) -> tuple[dict, dict]:
    data: dict = {}
    for layer in layers:
        data = merge(data, layer.data)
    # The last layer that mentions a key set it (mappings merge, everything else replaces), so
    # later origins win; keys a later layer replaced wholesale are dropped.
    origins: dict[tuple, str] = {}
    for layer in layers:
        origins.update(layer.origins)
    return data, {p: o for p, o in origins.items() if exists(data, p)}


def _short(path: Path) -> str:
    return display_path(path)


def _at(where: str | None, message: str, rule: str) -> RecipeError:
    """A name that a file names is a problem in that file; one typed on the command line is a
    usage error."""
    return RecipeError.at(where, rule, message) if where else RecipeError(message)


def _unknown(what: str, value: str, known: list[str]) -> str:
    close = difflib.get_close_matches(value, known, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"unknown {what} {value!r}{hint}; known: {', '.join(known)}"


def _unknown_name(name: Name) -> str:
    segs = name.segments
    if len(segs) == 3 and any(hardware.exists(a, s) for a, s in zip(AXES, segs)):
        for axis, seg in zip(AXES, segs):
            if not hardware.exists(axis, seg):
                return _unknown_part(axis, seg, f"{axis} in {name}:")
    if len(segs) == 2 and segs[0] in AXES:
        return _unknown_part(segs[0], segs[1], f"{segs[0]} part")
    return _unknown("recipe", name.path, known_names()) + _update_hint()


def _update_hint() -> str:
    """What a teammate published since the last `recipe source update` is not in the clones yet."""
    teams = [s.name for s in sources.all_sources() if s.kind == "git"]
    if not teams:
        return ""
    return (
        f" (hint: recipes published to {', '.join(teams)} since the last update are not here yet: recipe source update)"
    )


def _unknown_part(axis: str, seg: str, what: str) -> str:
    """An unknown part; a hardware name that reads NxGPU says what is wrong with it instead."""
    if axis == hardware.AXIS:
        why = hardware.problem(seg)
        if why:
            return why
        return _unknown(what, seg, sources.part_names(axis)) + f" (or {hardware.FORM})"
    return _unknown(what, seg, sources.part_names(axis))


def known_names() -> list[str]:
    """Every source's names, published ones included: a typo of a teammate's name is matched too."""
    from registry.sharing import versions

    out: list[str] = []
    for source in sources.all_sources():
        try:
            out += list(versions.index(source))
        except RecipeError:
            pass  # a malformed index is reported where it is read, not in a suggestion
        out += ["/".join(c) for c in source.overlays()] + source.free_standing()
        out += [f"{axis}/{p}" for axis in AXES for p in source.parts(axis)]
    return sorted(set(out))


def _not_a_file(path: Path, shown: str) -> str:
    from registry import untrusted

    try:
        untrusted.head(path, 0)
    except untrusted.Rejected as e:
        return f"{shown}: {str(e).removeprefix(f'{path}: ')}"
    return f"{shown}: not a regular file"
