"""`recipe catalog`: a static site of every recipe that opens offline (file://, no server, nothing
fetched): index.html, searchable and sortable, and one page per recipe under r/SOURCE/NAME.html
with its resolved values and their origins, the memory estimate as an SVG chart, its measured
results across versions, the diff from the version before, and the `recipe run` command.

collect.py gathers (compose, validate, estimate); pages.py and svg.py turn that into strings;
`build` writes them."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from registry.errors import RecipeError
from registry.files import write_atomic
from registry.sharing.site.collect import Catalog, Entry, gather
from registry.sharing.site.pages import INDEX, index_page, recipe_page

# The pages an earlier build wrote (or was writing), so that a rebuild replaces and removes
# those, and never a file in the folder that the catalog did not write.
MANIFEST = ".recipe-catalog"
WRITERS = 8


def build(out: Path, progress=None) -> Catalog:
    """The site written into `out`; `progress(line)` hears how far it is (collect.gather)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RecipeError(f"{out}: is a file, not a folder (-o takes the folder to write the site into)")
    catalog = gather(progress)
    pages = {INDEX: index_page(catalog)}
    for entry in catalog.entries:
        pages[entry.page] = recipe_page(entry)
    previous = _own_pages(out)
    taken = sorted(rel for rel in pages if rel not in previous and os.path.lexists(out / rel))
    if taken:
        more = f" (and {len(taken) - 1} more)" if len(taken) > 1 else ""
        raise RecipeError(
            f"{out / taken[0]}: exists and was not written by recipe catalog; not overwritten{more} "
            "(hint: -o a new or empty folder)"
        )
    if progress:
        progress(f"writing {len(pages)} pages into {out}")
    try:
        # claimed before they are written: a build that stops half-way leaves pages a rebuild owns
        write_atomic(out / MANIFEST, "".join(f"{rel}\n" for rel in sorted(previous | set(pages))))
        # each write_atomic waits on its fsync; threads overlap the waits (a third of the build)
        with ThreadPoolExecutor(WRITERS) as pool:
            for _ in pool.map(lambda item: write_atomic(out / item[0], item[1]), pages.items()):
                pass
        _remove_stale(out, set(pages))
        write_atomic(out / MANIFEST, "".join(f"{rel}\n" for rel in sorted(pages)))
    except OSError as e:
        raise RecipeError(f"{out}: cannot write the site: {e.strerror or e}") from None
    return catalog


def _own_pages(out: Path) -> set[str]:
    try:
        return set((out / MANIFEST).read_text(encoding="utf-8").splitlines())
    except (OSError, UnicodeDecodeError):
        return set()  # no earlier build here (or an unreadable manifest: nothing is taken as its own)


def _remove_stale(out: Path, written: set[str]) -> None:
    manifest = out / MANIFEST
    if not manifest.is_file():
        return
    for rel in manifest.read_text(encoding="utf-8").splitlines():
        # only the site's own pages: a manifest edited to name ../anything removes nothing
        if rel.endswith(".html") and rel not in written and ".." not in rel.split("/") and not rel.startswith("/"):
            (out / rel).unlink(missing_ok=True)


__all__ = ["MANIFEST", "Catalog", "Entry", "build"]
