"""Recipe names: `[source:]segment/segment...[@version]`, checked before any file is touched."""

from __future__ import annotations

import re
from dataclasses import dataclass

from registry.errors import RecipeError

AXES = ("policy", "backend", "hardware")

# A segment starts with a letter or digit (so never `.` or `..`) and holds no path or shell
# metacharacters; this is what keeps a name inside its source directory.
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
MAX_LENGTH = 1024  # of a name's path; schemas/recipe.schema.json says the same of recipe.name
_SOURCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# ASCII digits only: str.isdigit() and \d also take '²' (int() fails) and '١' (int() reads 1).
_VERSION = re.compile(r"[0-9]{1,9}")
# The key of a command-line override, `train.optimizer.lr=3e-4`: a dotted recipe path.
OVERRIDE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*")


@dataclass(frozen=True)
class Name:
    segments: tuple[str, ...]
    source: str | None = None
    version: int | None = None

    @property
    def path(self) -> str:
        return "/".join(self.segments)

    def __str__(self) -> str:
        text = self.path
        if self.source:
            text = f"{self.source}:{text}"
        if self.version is not None:
            text = f"{text}@{self.version}"
        return text


def parse(text: str) -> Name:
    """Parse a name or raise RecipeError saying why it is not one."""
    source = version = None
    rest = text
    if ":" in rest:
        source, rest = rest.split(":", 1)
        if not _SOURCE.fullmatch(source):
            raise RecipeError(f"unsafe or malformed source in name {text!r}")
    if "@" in rest:
        rest, v = rest.rsplit("@", 1)
        if not _VERSION.fullmatch(v) or int(v) < 1:
            raise RecipeError(f"malformed version in {text!r} (hint: name@N with N >= 1)")
        version = int(v)
    segments = tuple(rest.split("/"))
    if not rest or len(rest) > MAX_LENGTH or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise RecipeError(
            f"unsafe or malformed recipe name {text!r} "
            "(hint: names look like pi07/zero2/8xA100; no '..', absolute paths or special characters)"
        )
    return Name(segments, source, version)


def is_source(text: str) -> bool:
    return _SOURCE.fullmatch(text) is not None


def is_name(text: str) -> bool:
    """Whether text parses as a name (parse() without the message)."""
    try:
        parse(text)
    except RecipeError:
        return False
    return True


def is_override(arg: str) -> bool:
    """A command-line argument is an override when it reads `dotted.key=value`."""
    return "=" in arg and OVERRIDE_KEY.fullmatch(arg.split("=", 1)[0]) is not None


def looks_like_file(text: str) -> bool:
    """A command-line argument is a file when it ends like one; everything else is a name."""
    return text.endswith((".yaml", ".yml"))
