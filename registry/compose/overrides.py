"""Command-line overrides: `key.path=value` (YAML-typed) and axis swaps `hardware=4xH100`."""

from __future__ import annotations

from dataclasses import dataclass, field

from registry.errors import Exit, RecipeError
from registry.load import parse_value
from registry.names import AXES, OVERRIDE_KEY


@dataclass
class Overrides:
    swaps: dict[str, str] = field(default_factory=dict)  # axis -> part name
    sets: list[tuple[tuple[str, ...], object]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)  # as typed, for the lock


def parse(args: list[str]) -> Overrides:
    out = Overrides(text=list(args))
    for arg in args:
        key, sep, raw = arg.partition("=")
        if not sep or not OVERRIDE_KEY.fullmatch(key):
            raise RecipeError(f"malformed override {arg!r} (hint: key.path=value, e.g. train.micro_batch_size=16)")
        try:
            value = parse_value(raw)
        except RecipeError as e:
            if e.problem is None:
                raise RecipeError(f"override {arg!r}: {e}") from None
            problem = e.problem
            raise RecipeError.at(
                "command line", problem.rule, problem.message, path=key, hint=problem.hint, exit_code=Exit.USAGE
            ) from None
        if key in AXES:
            if not isinstance(value, str):
                raise RecipeError(f"override {arg!r}: {key}= takes a {key} part name (hint: hardware=4xH100)")
            out.swaps[key] = value
        else:
            out.sets.append((tuple(key.split(".")), value))
    return out
