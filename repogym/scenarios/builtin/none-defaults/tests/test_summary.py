"""Hidden verifier tests for summary.py."""

from summary import average, parse_tags, summarize


def test_average_of_none_is_the_default():
    assert average(None) == 0.0
    assert average(None, default=None) is None
    assert average(None, default=-1.0) == -1.0


def test_average_of_empty_input_is_the_default():
    assert average(()) == 0.0
    assert average(set()) == 0.0
    assert average((x for x in []), default=None) is None
    assert average(iter([]), default=7.5) == 7.5


def test_parse_tags_of_none_is_empty():
    assert parse_tags(None) == []


def test_summarize_with_missing_data():
    assert summarize(None, None) == {"mean": None, "tags": []}
    assert summarize([], "") == {"mean": None, "tags": []}


def test_average_of_numbers():
    assert average([1, 2, 3]) == 2.0
    assert average(x for x in (2, 4, 9)) == 5.0
    assert average([0, 0], default=None) == 0.0
    assert average([-2.5]) == -2.5


def test_parse_tags_cleans_input():
    assert parse_tags(" UX, bug ,, ux") == ["ux", "bug"]
    assert parse_tags("   ") == []
    assert parse_tags("") == []


def test_summarize_with_data():
    assert summarize([3, 5], "Fast, fast, Cheap") == {"mean": 4.0, "tags": ["fast", "cheap"]}
