"""Problems, the one exception the CLI turns into a message, and the exit codes.

A Problem is structured end to end (rule id, severity, path, origin, message, hint); it is
rendered as one line only where it is printed. Nothing downstream parses message text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum


class Exit(IntEnum):
    """The CLI's exit codes."""

    OK = 0
    INVALID = 1  # the recipe (or a file it names) is invalid
    USAGE = 2  # a usage error, an unknown name, an unreadable input
    NOT_FOUND = 127  # the trainer's program is not on PATH (as the shell says)
    INTERRUPTED = 130  # Ctrl-C


@dataclass(frozen=True)
class Problem:
    severity: str  # "error" | "warning"
    rule: str
    path: str
    message: str
    origin: str | None = None  # file:line:column, or "command line"
    hint: str | None = None
    related: tuple[tuple[str, str | None], ...] = field(default=())  # (path, where it was set)
    source: str | None = None  # the failure mode it guards against (docs/failure-modes.md)

    def render(self) -> str:
        where = f"{self.origin}: " if self.origin else ""
        at = f" {self.path}:" if self.path else ""
        text = f"{where}{self.severity}[{self.rule}]{at} {self.message}"
        for path, origin in self.related:
            text += f"; {path} set at {origin}" if origin else f"; {path} is not set"
        if self.hint:
            text += f" (hint: {self.hint})"
        return printable(text, keep="")

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


class RecipeError(Exception):
    """A problem with the user's input: printed as one line, never a traceback.

    Either a plain message (a usage error, an unknown name: exit 2 unless told) or a Problem in
    a file or value (exit 1), made with `RecipeError.at`.
    """

    def __init__(self, message: str, exit_code: int = Exit.USAGE, problem: Problem | None = None):
        super().__init__(message)
        self.exit_code = int(exit_code)
        self.problem = problem

    @classmethod
    def at(
        cls,
        origin: str | None,
        rule: str,
        message: str,
        *,
        path: str = "",
        hint: str | None = None,
        exit_code: int = Exit.INVALID,
    ) -> RecipeError:
        problem = Problem("error", rule, path, message, origin, hint)
        return cls(problem.render(), exit_code, problem)

    def render(self, prefix: str = "recipe") -> str:
        """The line the CLI prints: the problem as is, or the message after `prefix: error:`."""
        return self.problem.render() if self.problem else printable(f"{prefix}: error: {self}", keep="\n")


# --- what a terminal shows -----------------------------------------------------------------------
# Messages echo what the user gave (names, values), and `--dry-run` prints files: control characters
# are shown escaped, never acted on by the terminal (docs/failure-modes.md §36).
# Characters a terminal acts on instead of showing: C0 controls but tab and newline, DEL, C1
# controls, line/paragraph separators and the bidirectional overrides that reorder what is shown.
# A value holding one can hide a line (`\r`, `\x1b[2K`) from whoever reviews a recipe.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_SHOWN = re.compile(CONTROL.pattern + "|[\n\t]")
_ESCAPES = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}


def printable(text: str, keep: str = "\n\t") -> str:
    """`text` with every terminal control character (and any of tab and newline not in `keep`)
    written as a visible escape, for printing what a file or value holds."""

    def escape(match: re.Match) -> str:
        c = match.group()
        if c in keep:
            return c
        return _ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")

    return _SHOWN.sub(escape, text)
