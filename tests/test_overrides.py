"""Command-line overrides as parsed: each part of what they hold and each way they are refused
(registry/compose/overrides.py)."""

import pytest

from registry.compose.overrides import parse
from registry.errors import Exit, Problem, RecipeError


def test_an_override_keeps_its_text_and_splits_at_the_first_equals_sign():
    given = ["train.run_name=a=b", "hardware=4xH100", "train.steps=8"]
    parsed = parse(given)
    assert parsed.text == given and parsed.text is not given  # as typed, for the lock
    assert parsed.sets == [(("train", "run_name"), "a=b"), (("train", "steps"), 8)]
    assert parsed.swaps == {"hardware": "4xH100"}


@pytest.mark.parametrize(
    "arg, rule, message, hint",
    [
        ("train.steps=[1,", "yaml", "while parsing a flow node did not find expected node content", None),
        ("train.steps=!!python/object x", "yaml-tag", "tag 'tag:yaml.org,2002:python/object' is not allowed", "recipes use plain YAML"),
        ("train.steps=.nan", "type", "'.nan' is not a finite number", "recipes hold finite numbers"),
    ],
)  # fmt: skip
def test_a_value_that_is_not_plain_yaml_is_one_problem_at_its_key(arg, rule, message, hint):
    with pytest.raises(RecipeError) as caught:
        parse(["train.micro_batch_size=2", arg])
    assert caught.value.exit_code == Exit.USAGE
    assert caught.value.problem == Problem("error", rule, "train.steps", message, "command line", hint)


@pytest.mark.parametrize(
    "arg, says",
    [
        ("nokey", "malformed override 'nokey' (hint: key.path=value"),
        ("bad key=1", "malformed override 'bad key=1'"),
        ("hardware=[1]", "override 'hardware=[1]': hardware= takes a hardware part name (hint: hardware=4xH100)"),
    ],
)
def test_a_malformed_override_is_one_usage_error(arg, says):
    with pytest.raises(RecipeError) as caught:
        parse([arg])
    assert caught.value.exit_code == Exit.USAGE and caught.value.problem is None
    assert says in str(caught.value)
