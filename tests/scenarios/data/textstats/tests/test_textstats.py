import pytest
from textstats import chunk, clamp, mean, pad_left, word_count


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_clamp_bounds_are_inclusive():
    assert clamp(0, 0, 10) == 0
    assert clamp(10, 0, 10) == 10


def test_clamp_outside():
    assert clamp(-1, 0, 10) == 0
    assert clamp(11, 0, 10) == 10


def test_mean():
    assert mean([1, 2, 3, 6]) == 3


def test_mean_empty_is_none():
    assert mean([]) is None


def test_chunk_even():
    assert chunk([1, 2, 3, 4]) == [[1, 2], [3, 4]]


def test_chunk_remainder():
    assert chunk([1, 2, 3], size=2) == [[1, 2], [3]]


def test_chunk_rejects_zero():
    with pytest.raises(ValueError):
        chunk([1], size=0)


def test_word_count():
    assert word_count("a bb  ccc") == 3


def test_word_count_none():
    assert word_count(None) == 0


def test_word_count_sep():
    assert word_count("a,b,c", sep=",") == 3


def test_pad_left():
    assert pad_left("ab", 4) == "  ab"
    assert pad_left("ab", 4, fill="0") == "00ab"


def test_pad_left_no_truncation():
    assert pad_left("abcdef", 3) == "abcdef"
