"""Rough edges a newcomer meets first: numbers options take, sbatch lines that change the GPUs
per node, what a dry run keeps quiet, the catalog's silence, GPU name suggestions and what
`recipe diff` calls a change."""

from __future__ import annotations

import argparse

import pytest

from registry import commands

# --- 1. numbers an option takes ---------------------------------------------------------------
REFUSED = [
    ("tune", "--budget", "nan"),
    ("tune", "--budget", "NaN"),
    ("tune", "--budget", "inf"),
    ("tune", "--budget", "-inf"),
    ("tune", "--budget", "-1"),
    ("tune", "--budget", "0"),
    ("tune", "--budget", "ten"),
    ("tune", "--global-batch", "0"),
    ("tune", "--global-batch", "8.5"),
    ("tune", "--steps", "0"),
    ("tune", "--warmup", "-1"),
    ("tune", "--tie-runs", "-1"),
    ("bench", "--steps", "0"),
    ("bench", "--warmup", "-1"),
    ("bench", "--repeats", "0"),
    ("bench", "--repeats", "nan"),
]
ACCEPTED = [
    ("tune", "--budget", "0.5", 0.5),
    ("tune", "--budget", "30", 30.0),
    ("tune", "--global-batch", "8", 8),
    ("tune", "--warmup", "0", 0),
    ("tune", "--tie-runs", "0", 0),
    ("bench", "--steps", "1", 1),
    ("bench", "--repeats", "3", 3),
]


def _parse(verb: str, option: str, value: str):
    target = "tiny/cpu" if verb == "tune" else "tiny/ddp/cpu"
    # OPTION=VALUE: argparse takes a separate '-inf' for an option of its own
    return commands._parser(verb).parse_args([verb, target, f"{option}={value}"])


@pytest.mark.parametrize(("verb", "option", "value"), REFUSED)
def test_a_number_no_option_means_is_refused_at_parsing_in_one_line(verb, option, value, capsys):
    with pytest.raises(SystemExit) as stopped:
        _parse(verb, option, value)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err, err
    assert err.startswith(f"recipe {verb}: error: argument {option}: {value!r}"), err
    assert "at least" in err or "more than" in err  # says what is allowed


@pytest.mark.parametrize(("verb", "option", "value", "parsed"), ACCEPTED)
def test_a_number_an_option_means_is_parsed(verb, option, value, parsed):
    got = getattr(_parse(verb, option, value), option[2:].replace("-", "_"))
    assert got == parsed and type(got) is type(parsed)


def test_every_number_option_of_tune_bench_and_estimate_refuses_nan():
    """No int or float option is left on a bare int() or float(): each refuses 'nan'."""
    for verb in ("tune", "bench", "estimate"):
        sub = commands._parser(verb)._subparsers._group_actions[0].choices[verb]
        for action in sub._actions:
            if action.type in (int, float):
                pytest.fail(f"recipe {verb} {action.option_strings}: a bare {action.type.__name__}")
            if action.type is not None and action.option_strings:
                with pytest.raises(argparse.ArgumentTypeError):
                    action.type("nan")
