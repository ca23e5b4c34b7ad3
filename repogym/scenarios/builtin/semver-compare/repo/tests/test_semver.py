"""Tests for semver.py."""

from semver import compare, is_newer


def test_equal():
    assert compare("1.2.3", "1.2.3") == 0


def test_patch_bump_is_newer():
    assert is_newer("1.2.4", "1.2.3")
