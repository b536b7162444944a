import pytest

from registry import names
from registry.errors import RecipeError


def test_parse():
    n = names.parse("team-a:pi07/zero2/8xA100@3")
    assert (n.source, n.segments, n.version) == ("team-a", ("pi07", "zero2", "8xA100"), 3)
    assert str(n) == "team-a:pi07/zero2/8xA100@3"
    assert names.parse("policy/pi07").segments == ("policy", "pi07")


@pytest.mark.parametrize(
    "bad",
    [
        "../x",
        "pi07/../../etc/passwd",
        "/etc/passwd",
        "pi07//8xA100",
        ".hidden",
        "a/./b",
        "pi07;rm -rf /",
        "pi07/$(id)/x",
        "a b",
        "pi07/zero2/8xA100@0",
        "pi07@x",
        "bad source:pi07",
        "",
        "pi07/`id`",
        "pi07@²",  # unicode digits are not versions: int() fails on some, reads others as numbers
        "pi07@١",
        "pi07@１",
        "pi07@ 1",
        "pi07@1\n",
    ],
)
def test_unsafe_or_malformed(bad):
    with pytest.raises(RecipeError):
        names.parse(bad)


def test_version_is_ascii_digits():
    assert names.parse("pi07/zero2/8xA100@12").version == 12
    assert names.parse("team-a:x@007").version == 7


@pytest.mark.parametrize(
    "name",
    [
        "team/" + "a" * 64,
        "team/" + "a" * 65,  # one past a segment: published, it made its source's index unreadable
        "a" * 64,
        "x/" * 300 + "y",
        "/".join(["a" * 60] * 17),  # past the whole name's length
        "team/.hidden",
        "team//x",
        "pi07/zero2/8xA100",
    ],
)
def test_the_schema_takes_a_recipe_name_exactly_where_the_name_parser_does(name):
    """recipe.name is validated by the schema and read back by names.parse (the index, `show`):
    a name one takes and the other refuses is published and then unreadable."""
    from registry.validate.schemas import checker

    schema_says = not list(checker({"$ref": "recipe.schema.json#/$defs/meta/properties/name"}).iter_errors(name))
    assert schema_says == names.is_name(name), name
