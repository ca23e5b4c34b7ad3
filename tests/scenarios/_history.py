"""rgdemo, a two-release package the release-history tests build sdists of: its module
before and after the fix, its tests and its changelog."""

OLD = '''\
"""A demo package."""


def clamp(value, low, high):
    """Limit value to [low, high]."""
    if value < low:
        return low
    return value


def describe(value):
    """Say what value is."""
    return f"value {value}"


def unused(value):
    return value + 1
'''
NEW = (
    OLD.replace(
        """    if value < low:
        return low
    return value
""",
        """    if value < low:
        return low
    if value > high:
        return high
    return value
""",
    )
    .replace('"""Say what value is."""', '"""Describe ``value`` (docs only)."""')
    .replace("return value + 1", "return value + 2")
)
TESTS = '''\
import pytest

from rgdemo import clamp, describe


def test_clamp_caps_at_high():
    """The upper bound holds."""
    assert clamp(15, 0, 10) == 10


@pytest.mark.parametrize("value", [3, 7])
def test_inside(value):
    assert clamp(value, 0, 10) == value


def test_describe():
    assert describe(2) == "value 2"
'''
CHANGES = """\
Changes
=======

1.1 (2026-01-02)
----------------

- Fix ``clamp`` ignoring its upper bound (#12).
- Speed up the docs build.

1.0 (2026-01-01)
----------------

- First release.
"""
