"""The schemas generated from the libraries' own definitions (registry/validate/upstream.py,
docs/rules.md "Schemas from the libraries"): committed as the installed libraries say them, and
agreeing with DeepSpeed's config models both ways: no value a model takes is refused, and what the
schemas refuse the model refuses too."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import warnings

import pytest
from conftest import ROOT

from registry.validate import schemas, upstream

# values of every JSON type, lax spellings pydantic takes (text numbers, 0/1 booleans, integral
# floats) and out-of-range ones
VALUES = [True, False, 0, 1, 2, 3, 4, -1, 1.5, 5e8, 2.0, "2", "1.5", "true", "yes", "off", "auto", None, [], {}, "x"]
VALUES += ["cpu", "none", "nvme", "bf16", "fp16", " 7 ", "1e3"]


def test_the_committed_schemas_are_what_the_installed_libraries_say():
    """A moved pin changes what its library takes: regenerate (python -m registry.validate.upstream)."""
    done = subprocess.run(
        [sys.executable, "-m", "registry.validate.upstream", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


@pytest.fixture(scope="module")
def models():
    logging.disable(logging.WARNING)
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = {key: upstream._model(path) for key, path in upstream.DEEPSPEED_BLOCKS.items()}
    yield found
    logging.disable(logging.NOTSET)


def _takes(model, value: dict) -> bool:
    try:
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(**value)
    except Exception:  # pydantic's ValidationError, or a model validator's own error
        return False
    return True


@pytest.mark.parametrize("block", sorted(upstream.DEEPSPEED_BLOCKS))
def test_a_deepspeed_block_is_refused_only_where_deepspeed_refuses_it(models, block):
    doc = json.loads(upstream.DEEPSPEED_FILE.read_text())
    check = schemas.checker({"$ref": f"deepspeed.upstream.schema.json#/$defs/{block}"})
    false_alarms, refused, caught = [], 0, 0
    for name in [*doc["$defs"][block]["properties"], "no_such_key"]:
        for value in VALUES:
            if name == "no_such_key" and value == "auto":
                continue  # DeepSpeed drops an "auto" unread, unknown key or not: refused here on purpose
            entry = {name: value}
            theirs, ours = _takes(models[block], entry), not list(check.iter_errors(entry))
            if theirs and not ours:
                false_alarms.append(entry)
            refused += not theirs
            caught += not theirs and not ours
    assert not false_alarms, false_alarms
    # what stays open: types the schema cannot say (torch dtypes), inputs a "before" validator
    # rewrites, and cross-field model validators
    assert caught >= 0.7 * refused, (caught, refused)  # 2,738 of 2,842 over all blocks (96%); fp16 74%
