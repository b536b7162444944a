"""Cell patterns for matrices: `tiny/*/cpu`, `ref-1b/{zero2,fsdp}/2xH100` (fnmatch per axis,
one level of braces; a generated hardware name such as `2xH200` is matched as written)."""

from __future__ import annotations

import itertools
import re
from fnmatch import fnmatchcase

from registry.compose import hardware
from registry.errors import RecipeError
from registry.names import AXES
from registry.sharing import sources

_SEGMENT = re.compile(r"[A-Za-z0-9._+*?\[\]{},-]+")
_BRACES = re.compile(r"\{([^{}]*)\}")


def is_pattern(text: str) -> bool:
    return any(c in text for c in "*?[{")


def alternatives(segment: str) -> list[str]:
    match = _BRACES.search(segment)
    if not match:
        return [segment]
    head, tail = segment[: match.start()], segment[match.end() :]
    return [a for choice in match.group(1).split(",") for a in alternatives(head + choice + tail)]


def expand(pattern: str) -> list[str]:
    segments = pattern.split("/")
    if len(segments) != 3 or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise RecipeError(
            f"malformed pattern {pattern!r} (hint: policy/backend/hardware, e.g. 'tiny/*/cpu' or 'ref-1b/{{zero2,fsdp}}/2xH100')"
        )
    chosen = []
    for axis, segment in zip(AXES, segments):
        options = alternatives(segment)
        matched = [p for p in sources.part_names(axis) if any(fnmatchcase(p, o) for o in options)]
        # a generated hardware name is taken as written (a glob matches part files only)
        matched += [o for o in options if axis == hardware.AXIS and not is_pattern(o) and hardware.generable(o)]
        if not matched:
            raise RecipeError(f"no {axis} part matches {segment!r}; known: {', '.join(sources.part_names(axis))}")
        chosen.append(matched)
    return ["/".join(cell) for cell in itertools.product(*chosen)]
