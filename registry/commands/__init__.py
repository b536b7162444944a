"""The `recipe` command line: one module per verb, each registering its own arguments.

A verb module has NAME, HELP (its one line in `recipe --help`), `register(subparsers)`, which
adds its sub-parser and sets `func`, and `run(args) -> int`. Everything a verb needs beyond
argument parsing is imported inside `run`: start-up, and list, show, validate, resolve and
schema, import neither torch, accelerate nor deepspeed.
"""

from __future__ import annotations

import argparse
import sys

from registry import __version__
from registry.commands import (
    bench,
    catalog,
    completion,
    cp,
    diff,
    estimate,
    history,
    import_,
    list_,
    publish,
    resolve,
    run,
    schema,
    search,
    show,
    source,
    tune,
    validate,
    verify,
)
from registry.errors import Exit, RecipeError
from registry.names import is_override

# In the order `recipe --help` shows them.
VERBS = (
    list_,
    search,
    show,
    validate,
    resolve,
    run,
    verify,
    estimate,
    bench,
    tune,
    source,
    publish,
    history,
    diff,
    cp,
    import_,
    schema,
    catalog,
    completion,
)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if args.verb is None and not extra:
        sys.stderr.write(_verb_list(parser))
        return Exit.USAGE
    # Overrides may follow options (`show NAME --origin k=v`); anything else is a usage error.
    rest = getattr(args, "overrides", getattr(args, "args", getattr(args, "targets", None)))
    if extra and (rest is None or not all(is_override(e) for e in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        rest.extend(extra)
    try:
        return args.func(args)
    except RecipeError as e:
        print(e.render(), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (`recipe list | head`)
        return Exit.OK


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that a description or epilog is filled line by line and an
    indented line (an example command) is printed as written, never wrapped."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            if line[:1].isspace():
                lines.append(indent + line)
            else:
                lines.append(super()._fill_text(line, width, indent) if line else "")
        return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    """The parser of `recipe` and of each verb (add_subparsers makes sub-parsers of this type)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="recipe",
        description="Tuned, versioned, validated recipes for distributed training of robot-learning policies.",
        epilog="A recipe is named by its cell, policy/backend/hardware (pi07/zero2/8xA100), or given as a file.",
    )
    p.add_argument("--version", action="version", version=f"recipe {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB")  # no verb: main prints the verb list
    for verb in VERBS:
        verb.register(sub)
    return p


def _verb_list(parser: argparse.ArgumentParser) -> str:
    """What `recipe` alone prints: the usage and each verb with its one line of help."""
    width = max(len(verb.NAME) for verb in VERBS)
    lines = [f"  {verb.NAME.ljust(width)}  {verb.HELP}" for verb in VERBS]
    return (
        parser.format_usage()
        + "\nverbs:\n"
        + "\n".join(lines)
        + f"\n\n{parser.prog} VERB --help: a verb's arguments and examples\n"
    )
