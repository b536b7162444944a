"""The GPU catalog: `hardware.gpu: A100-80GB` becomes the catalog entry, with its origin.

An entry is found by its name or one of its `aliases` (`H100` is H100-SXM), and a host's card
by the name nvidia-smi or torch gives it (`NVIDIA H100 80GB HBM3`), through the entry's
`device_names` or its own name after a leading NVIDIA / Tesla / GeForce."""

from __future__ import annotations

import difflib
import re

from registry.errors import RecipeError
from registry.load import Loaded, load_resolved
from registry.names import Name
from registry.sharing import sources

CATALOG = ("catalog", "gpus")
# What an entry describes about the catalog, not about a run: dropped when an entry is expanded.
CATALOG_ONLY = ("aliases", "device_names")
_VENDOR_WORDS = re.compile(r"^(?:(?:NVIDIA|TESLA|GEFORCE)\s+)+")


def entries() -> Loaded:
    path = sources.find(Name(CATALOG))
    if path is None:
        raise RecipeError("no GPU catalog (catalog/gpus.yaml) in any source")
    return load_resolved(path)  # sources.find resolved it


def _index(table: Loaded) -> dict[str, str]:
    """Every name and alias -> the entry's name; an alias that two entries claim is an error."""
    found = {name: name for name in table.data}
    for name, entry in table.data.items():
        for i, alias in _listed(entry, "aliases"):
            if found.get(alias, name) != name:
                raise RecipeError.at(
                    table.origins.get((name, "aliases", i), table.file),
                    "catalog-alias",
                    f"alias {alias!r} of {name} is already {found[alias]!r}",
                    hint="an alias names one entry; remove it from one of them",
                )
            found[alias] = name
    return found


def _listed(entry, key: str) -> list[tuple[int, str]]:
    """(index, name) of an entry's list of names; anything malformed is the catalog schema's to report."""
    names = entry.get(key) if isinstance(entry, dict) else None
    return [(i, n) for i, n in enumerate(names) if isinstance(n, str)] if isinstance(names, list) else []


def canonical(gpu: str) -> str | None:
    """The catalog entry a GPU name or alias denotes, or None."""
    return _index(entries()).get(gpu)


def known() -> list[str]:
    """Every name a hardware name may use for a GPU: entries, then aliases."""
    index = _index(entries())
    return [n for n, e in index.items() if n == e] + sorted(n for n, e in index.items() if n != e)


_WORDS = re.compile(r"[A-Z]+|\d+")
_MEMORY = re.compile(r"(?<![A-Z\d])(\d+)\s*G(?:I?B)?(?![A-Z])")  # 80GB, 80G, 80 GiB; not the 100 of H100


def model(name: str) -> str:
    """A GPU name's model: its letters and digits up to the first number ('H100-80GB', 'h100' and
    'H100-SXM' are H100; 'rtx4090' and 'RTX-4090' RTX4090)."""
    words = _WORDS.findall(name.upper())
    number = next((i for i, w in enumerate(words) if w.isdigit()), len(words) - 1)
    return "".join(words[: number + 1])


def _memory(name: str) -> int | None:
    """The GB a name says after its model ('H100-80GB' 80, 'A100-80G' 80), or None."""
    found = _MEMORY.search(name.upper())
    return int(found.group(1)) if found else None


def suggestions(gpu: str, n: int = 4) -> list[str]:
    """Catalog names for a GPU name it lacks: the same name in other case, then the entries of the
    same model (nearest memory first), then entries with the memory the name says, then the
    closest spellings. A user who wrote H100-80GB means an H100, not another card of 80 GB."""
    table = entries()
    index = _index(table)
    want, memory = model(gpu), _memory(gpu)

    def gb(entry: str):
        value = table.data[entry].get("memory_gb") if isinstance(table.data.get(entry), dict) else None
        return value if isinstance(value, (int, float)) else None

    def distance(entry: str) -> float:
        return abs(gb(entry) - memory) if memory is not None and gb(entry) is not None else 0

    same_case = [n for n in index if n.upper() == gpu.upper()]
    same_model = sorted(
        (e for e in table.data if any(model(n) == want for n, e2 in index.items() if e2 == e)),
        key=distance,
    )
    same_memory = [e for e in table.data if memory is not None and gb(e) == memory]
    close = difflib.get_close_matches(gpu, known(), n=n)
    found: list[str] = []
    for name in [*same_case, *same_model, *same_memory, *close]:
        if name not in found:
            found.append(name)
    return found[:n]


def unknown(gpu: str, where: str | None = None) -> RecipeError:
    """The one error for a GPU name the catalog lacks, with the closest names."""
    names = known()
    close = suggestions(gpu)
    hint = f"did you mean {', '.join(close)}?" if close else "add it to catalog/gpus.yaml"
    message = f"{gpu!r} is not in the GPU catalog"
    if where is None:
        return RecipeError(f"{message} (hint: {hint}; known: {', '.join(names)})")
    return RecipeError.at(where, "unknown-gpu", message, path="hardware.gpu", hint=f"{hint}; known: {', '.join(names)}")


def _fold(text: str) -> str:
    return " ".join(text.replace("_", " ").split()).upper()


def device_entry(device_name: str) -> str | None:
    """The catalog entry of a card as nvidia-smi or torch.cuda.get_device_name() names it
    ('NVIDIA H100 80GB HBM3' -> 'H100-SXM', 'Tesla T4' -> 'T4'), or None when the catalog has
    no entry for it."""
    table = entries()
    folded = _fold(device_name)
    for name, entry in table.data.items():
        if any(_fold(d) == folded for _, d in _listed(entry, "device_names")):
            return name
    bare = _VENDOR_WORDS.sub("", folded).replace(" ", "-")
    by_fold = {n.upper(): e for n, e in _index(table).items()}
    return by_fold.get(bare)


def expand_gpu(data: dict, origins: dict) -> None:
    hardware = data.get("hardware")
    gpu = hardware.get("gpu") if isinstance(hardware, dict) else None
    if not isinstance(gpu, str):
        return  # absent, null (CPU) or written out in full: the schema judges it
    table = entries()
    name = canonical(gpu)
    if name is None:
        raise unknown(gpu, origins.get(("hardware", "gpu"), "hardware.gpu"))
    hardware["gpu"] = {"name": name, **{k: v for k, v in table.data[name].items() if k not in CATALOG_ONLY}}
    origins[("hardware", "gpu", "name")] = origins.get(("hardware", "gpu"), table.file)
    for path, origin in table.origins.items():
        if path[0] == name and len(path) > 1 and path[1] not in CATALOG_ONLY:
            origins[("hardware", "gpu") + path[1:]] = origin
