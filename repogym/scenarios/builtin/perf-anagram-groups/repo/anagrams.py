"""Grouping of words that are anagrams of each other (used by our word-game server)."""

from __future__ import annotations

from collections.abc import Iterable


def _is_anagram(a: str, b: str) -> bool:
    """Return True if ``a`` and ``b`` use the same letters the same number of times, ignoring case."""
    return sorted(a.lower()) == sorted(b.lower())


def group_anagrams(words: Iterable[str]) -> list[list[str]]:
    """Group ``words`` into lists of mutual anagrams.

    Two words are anagrams when they contain the same letters the same number of
    times, ignoring case ("Listen", "silent"). Groups come in the order of their
    first word's appearance, words inside a group keep their input order, and
    duplicates are kept::

        group_anagrams(["eat", "tea", "tan", "ate", "nat", "bat"])
        == [["eat", "tea", "ate"], ["tan", "nat"], ["bat"]]
    """
    groups: list[list[str]] = []
    for word in words:
        for group in groups:
            if _is_anagram(word, group[0]):
                group.append(word)
                break
        else:
            groups.append([word])
    return groups


def largest_group(words: Iterable[str]) -> list[str]:
    """Return the largest anagram group of ``words`` (the earliest one on a tie; [] if none)."""
    return max(group_anagrams(words), key=len, default=[])
