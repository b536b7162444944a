"""What this host has, read without importing torch: nvidia-smi, if there is one."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from registry import view
from registry.compose import catalog
from registry.errors import printable
from registry.topology import nodes

NVIDIA_SMI_MAX_BYTES = 1 << 20  # a line per GPU: a few KiB on the largest host

LOOPBACK = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class GPU:
    name: str
    memory_mib: int
    driver: str = ""  # the NVIDIA driver's version, as nvidia-smi gives it (recorded in the run's lock)


NVIDIA_SMI_WAIT_S = 20  # a first query on a host without persistence mode takes seconds


def gpus() -> list[GPU]:
    """The GPUs this process may use: nvidia-smi lists every GPU of the host, so those that
    CUDA_VISIBLE_DEVICES (indices or UUIDs) leaves out are dropped, as the ranks would not see them.
    Asked once per program and visibility: a stuck nvidia-smi costs its wait once, said once."""
    program = shutil.which("nvidia-smi")
    try:
        st = os.stat(program) if program else None
    except OSError:
        st = None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    key = (program, st and (st.st_ino, st.st_mtime_ns, st.st_size), visible)
    return list(_asked(key))


@lru_cache(maxsize=8)
def _asked(key: tuple) -> tuple[GPU, ...]:
    from registry import untrusted

    program, _, visible = key
    if program is None:
        return ()
    query = [program, "--query-gpu=index,uuid,name,memory.total,driver_version", "--format=csv,noheader,nounits"]
    try:  # an nvidia-smi on PATH is a program like any other: its output capped, in time (docs/failure-modes.md §68)
        code, raw = untrusted.run_output(query, limit=NVIDIA_SMI_MAX_BYTES, timeout=NVIDIA_SMI_WAIT_S)
    except untrusted.Rejected as e:
        print(f"note: {printable(str(e))}: this host is taken to have no GPU", file=sys.stderr)
        return ()
    if code != 0:
        return ()
    out = printable(raw.decode("utf-8", "replace"), keep="\n")
    listed = []  # (index, uuid, GPU or None where its line gives no usable name or size)
    for line in out.strip().splitlines():
        index, uuid, rest = (line.split(",", 2) + ["", ""])[:3]
        name, memory, driver = _last_two(rest)
        mib = _mib(memory)
        listed.append(
            (index.strip(), uuid.strip(), GPU(name.strip(), mib, driver.strip()) if name and mib is not None else None)
        )
    chosen = [gpu for _, _, gpu in listed] if visible is None else visible_ones(visible, listed)
    return tuple(g for g in chosen if g is not None)


def visible_ones(visible: str, listed: list[tuple]) -> list:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: in its order, each entry an index or a UUID (a unique
    prefix of one will do), and the list ends at the first entry that names no GPU (`0,1,-1,2` is
    two GPUs), or names one twice (docs/preflight.md)."""
    chosen, seen = [], set()
    for entry in (e.strip() for e in visible.split(",")):
        matches = [i for i, (index, uuid, _) in enumerate(listed) if entry == index]
        if not matches and entry.upper().startswith(("GPU-", "MIG-")):
            matches = [i for i, (_, uuid, _) in enumerate(listed) if uuid.startswith(entry)]
        if len(matches) != 1 or matches[0] in seen:
            break
        seen.add(matches[0])
        chosen.append(listed[matches[0]][2])
    return chosen


def _mib(text: str) -> int | None:
    """A GPU's memory as nvidia-smi prints it ('81559', '[N/A]' on some), None where it is no size
    (a blank column is no size either: a GPU of 0 MiB would be refused every recipe)."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return int(value) if 0 <= value < 1 << 40 else None  # NaN, inf and 1e400 fail the comparison


def gpus_soon() -> Callable[[], list[GPU]]:
    """gpus(), asked now in a thread: the answer (tens of milliseconds of nvidia-smi) comes while
    the caller composes and resolves; calling the result waits for it."""
    box: list[list[GPU]] = []
    thread = threading.Thread(target=lambda: box.append(gpus()), daemon=True)
    thread.start()

    def result() -> list[GPU]:
        thread.join()
        return box[0] if box else []

    return result


def _last_two(rest: str) -> tuple[str, str, str]:
    """`name, memory, driver` (a name may hold commas); an nvidia-smi that gives no driver column
    (a stand-in) leaves it empty."""
    parts = rest.rsplit(",", 2)
    if len(parts) == 3 and (_number(parts[1]) or parts[1].strip() in ("", "[N/A]")):  # name, memory, driver
        return parts[0], parts[1], parts[2]
    name, _, memory = rest.rpartition(",")
    return name, memory, ""


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def nodes_here(doc) -> int:
    """How many of the recipe's nodes this host plays: every one when the rendezvous is loopback
    (multi-node without a cluster, one launcher per node), else one."""
    count = nodes(doc)
    return count if count > 1 and view.of(doc).launch.main_process_ip in LOOPBACK else 1


def mismatch(doc, host: list[GPU]) -> str | None:
    """Why this host cannot run the recipe's hardware part, or None."""
    hardware = view.of(doc).hardware
    gpu = hardware.gpu
    if gpu is None:
        return None  # CPU recipes run anywhere
    here = nodes_here(doc)
    need, name = hardware.gpus_per_node * here, gpu.name or "GPU"  # a GPU written out in full may be unnamed
    per = f" ({here} nodes on this host)" if here > 1 else " per node"
    if not host:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        why = "nvidia-smi found none" if visible is None else f"none visible through CUDA_VISIBLE_DEVICES={visible!r}"
        return f"the recipe needs {need} x {name}{per} and this host has no GPU ({why})"
    if len(host) < need:
        return f"the recipe needs {need} GPUs{per} and this host has {len(host)}"
    want = float(gpu.memory_gb or gpu.memory_gib) * 1e9 / 2**20
    small = [g for g in host[:need] if want and g.memory_mib < 0.85 * want]
    if small:
        return f"the recipe is for {name} and this host's GPUs have {small[0].memory_mib} MiB"
    for g in host[:need]:
        if not _same_model(gpu.name, g.name):
            entry = catalog.device_entry(g.name)
            return f"the recipe is for {name} and this host has {g.name}" + (f" ({entry})" if entry else "")
    return None


def _same_model(recipe_gpu: str | None, device_name: str) -> bool:
    """Whether a host card is the recipe's GPU: the catalog entry the card's name maps to, or,
    for a card the catalog lacks, the recipe GPU's family (H100 of H100-SXM) in the card's name."""
    if not recipe_gpu:
        return True  # a GPU written out in full without a name: only its memory can be compared
    entry = catalog.device_entry(device_name)
    if entry is not None:
        return entry == recipe_gpu
    family = recipe_gpu.split("-")[0].upper()
    return family in device_name.upper()


def hardware_name(host: list[GPU]) -> str | None:
    """This host's GPUs as a hardware name (`2xH200`), or None where it has none, the catalog
    lacks its card or its cards differ."""
    entries = {catalog.device_entry(g.name) for g in host}
    if not host or len(entries) != 1 or None in entries:
        return None
    return f"{len(host)}x{entries.pop()}"


def print_hardware_name() -> int:
    """Print this host's hardware name (benchmarks/tune_acceptance.sh); exit 2 where it has none."""
    host = gpus()
    name = hardware_name(host)
    if name is None:
        found = ", ".join(sorted({g.name for g in host}))
        why = "nvidia-smi found no GPU" if not host else f"{found}: not one catalog entry"
        hint = "" if not host else " (hint: add the card to catalog/gpus.yaml, with its device_names)"
        print(f"no hardware name for this host: {why}{hint}", file=sys.stderr)
        return 2
    print(name)
    return 0
