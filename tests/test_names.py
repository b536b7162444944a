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
