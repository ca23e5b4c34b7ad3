"""Tests for anagrams.py."""

from anagrams import group_anagrams


def test_example():
    assert group_anagrams(["eat", "tea", "tan", "ate", "nat", "bat"]) == [["eat", "tea", "ate"], ["tan", "nat"], ["bat"]]
