"""Tests for slugify() on plain ASCII titles."""

from slugify import slugify


def test_lowercases_and_joins_words():
    assert slugify("Hello World") == "hello-world"
    assert slugify("Release 2.0 Notes") == "release-2-0-notes"


def test_punctuation_runs_become_one_separator():
    assert slugify("Rock & Roll -- Live!!") == "rock-roll-live"


def test_strips_leading_and_trailing_separators():
    assert slugify("  --Hello--  ") == "hello"
    assert slugify("!!!") == ""


def test_custom_separator():
    assert slugify("Hello, World", sep="_") == "hello_world"


def test_max_length_cuts_at_word_boundary():
    assert slugify("the quick brown fox", max_length=12) == "the-quick"
    assert slugify("abcdefghij", max_length=4) == "abcd"
