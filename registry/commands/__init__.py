"""The `recipe` command line: one module per verb, each registering its own arguments.

A verb module has NAME, HELP (its one line in `recipe --help`), `register(subparsers)`, which
adds its sub-parser and sets `func`, and `run(args) -> int`. Everything a verb needs beyond
argument parsing is imported inside `run`: start-up, and list, show, validate, resolve and
schema, import neither torch, accelerate nor deepspeed.
"""

from __future__ import annotations

import argparse
import re
import sys

from registry import __version__
from registry.errors import Exit, RecipeError, printable
from registry.names import is_override

# (verb, module) in the order `recipe --help` shows them. A verb's module is imported when the
# parser needs it: `recipe validate NAME` builds (and imports) the validate verb alone.
_VERB_MODULES = (
    ("list", "list_"),
    ("search", "search"),
    ("show", "show"),
    ("validate", "validate"),
    ("resolve", "resolve"),
    ("doctor", "doctor"),
    ("run", "run"),
    ("verify", "verify"),
    ("estimate", "estimate"),
    ("bench", "bench"),
    ("tune", "tune"),
    ("source", "source"),
    ("publish", "publish"),
    ("history", "history"),
    ("diff", "diff"),
    ("cp", "cp"),
    ("import", "import_"),
    ("schema", "schema"),
    ("catalog", "catalog"),
    ("completion", "completion"),
)


def _verbs(only: str | None = None) -> tuple:
    import importlib

    return tuple(
        importlib.import_module(f"registry.commands.{module}") for name, module in _VERB_MODULES if only in (None, name)
    )


def __getattr__(name: str):
    if name == "VERBS":  # every verb module, in help order
        return _verbs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    first = (sys.argv[1:] if argv is None else argv)[:1]
    # a known verb first: only its parser is built (help, usage and errors read the same)
    parser = _parser(first[0] if first and first[0] in dict(_VERB_MODULES) else None)
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
    except OSError as e:  # a place the file system refuses (a directory or a loop where a file goes)
        print(f"recipe: error: {_os_error(e)}", file=sys.stderr)
        return Exit.INVALID
    except RuntimeError as e:
        if not str(e).startswith("Symlink loop"):  # pathlib's resolve() says a loop so, before 3.13
            raise
        print(f"recipe: error: {printable(str(e), keep='')} (hint: remove the loop)", file=sys.stderr)
        return Exit.INVALID


def _os_error(e: OSError) -> str:
    where = " -> ".join(printable(str(f), keep="") for f in (e.filename, e.filename2) if f is not None)
    return f"{where}: {e.strerror or e}" if where else str(e.strerror or e)


# What number() refused: the parser says it in one line, without the usage (_Parser.error).
_REFUSED: set[str] = set()


def _refused(message: str) -> argparse.ArgumentTypeError:
    _REFUSED.add(message)
    return argparse.ArgumentTypeError(message)


_PLAIN = {  # numbers as a person types them: ASCII digits, no `_` separators
    int: re.compile(r"[-+]?[0-9]+"),
    float: re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:nan|inf|infinity)", re.I),
}


def number(kind: type, least: float, *, above: bool = False):
    """An argparse type for an int or float option: a finite number of at least `least` (more than
    it with `above`), refused at parsing with one line that says what is allowed. float() alone
    takes 'nan', 'inf' and '-1', which no count, size or budget means."""
    import math

    said = f"{'more than' if above else 'at least'} {least:g}"
    what = "a whole number" if kind is int else "a number"

    def parse(text: str):
        shown = repr(text if len(text) <= 24 else text[:20] + "...")  # 5,000 digits are not echoed
        try:
            if not _PLAIN[kind].fullmatch(text):  # int() takes 1_0, full-width digits, any space
                raise ValueError(text)
            value = kind(text)
        except ValueError:
            raise _refused(f"{shown} is not {what} (hint: {what} {said})") from None
        if isinstance(value, int) and not -(2**63) < value < 2**63:  # math.isfinite overflows past 1e308
            raise _refused(f"{shown}: out of range (hint: {what} {said}, below 2**63)")
        if not math.isfinite(value) or value < least or (above and value == least):
            raise _refused(f"{shown}: must be {what} {said}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its own messages
    return parse


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

    def error(self, message: str):
        # a value number() refused: its line says what is allowed, the usage would bury it
        if any(message.endswith(refused) for refused in _REFUSED):
            self.exit(Exit.USAGE, f"{self.prog}: error: {message}\n")
        super().error(message)


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every verb, or only the one named."""
    p = _Parser(
        prog="recipe",
        description="Tuned, versioned, validated recipes for distributed training of robot-learning policies.",
        epilog="A recipe is named by its cell, policy/backend/hardware (pi07/zero2/8xA100), or given as a file.\n\n"
        + exit_codes({Exit.OK: "success", Exit.INVALID: "invalid (each verb's --help says what it means there)"}),
    )
    p.add_argument("--version", action="version", version=f"recipe {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB")  # no verb: main prints the verb list
    for verb in _verbs(only):
        verb.register(sub)
        parser = sub.choices[verb.NAME]
        parser.epilog = "\n".join(filter(None, [parser.epilog, exit_codes(getattr(verb, "EXIT_CODES", {}))]))
    return p


# The codes every verb shares (registry.errors.Exit); each verb module's EXIT_CODES says what
# 0 and its own codes mean for it.
SHARED_EXIT_CODES = {
    Exit.USAGE: "a usage error, an unknown name or an unreadable input (one line on stderr)",
    Exit.INTERRUPTED: "interrupted (Ctrl-C)",
}


def exit_codes(own: dict) -> str:
    """The `exit codes:` block of a verb's --help."""
    codes = {**SHARED_EXIT_CODES, **own}
    numbered = sorted((k for k in codes if isinstance(k, int)), key=int)
    width = max(len(str(int(k))) for k in numbered)
    lines = [f"  {int(k):<{width}}  {codes[k]}" for k in numbered]
    lines += [f"  {k:<{width}}  {codes[k]}" for k in codes if not isinstance(k, int)]
    return "exit codes:\n" + "\n".join(lines) + "\n"


def _verb_list(parser: argparse.ArgumentParser) -> str:
    """What `recipe` alone prints: the usage and each verb with its one line of help."""
    verbs = _verbs()
    width = max(len(verb.NAME) for verb in verbs)
    lines = [f"  {verb.NAME.ljust(width)}  {verb.HELP}" for verb in verbs]
    return (
        parser.format_usage()
        + "\nverbs:\n"
        + "\n".join(lines)
        + f"\n\n{parser.prog} VERB --help: a verb's arguments and examples\n"
    )
