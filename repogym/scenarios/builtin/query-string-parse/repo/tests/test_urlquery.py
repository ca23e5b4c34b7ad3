"""Tests for urlquery.py."""

from urlquery import first_value, parse_query


def test_simple_pairs():
    assert parse_query("a=1&b=2") == {"a": ["1"], "b": ["2"]}


def test_first_value_default():
    assert first_value("a=1", "b", "none") == "none"
