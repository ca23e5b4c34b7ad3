"""Hidden verifier tests for batching.py."""

import pytest

from batching import chunked, page_count, paginate


def test_partial_last_chunk_is_kept():
    assert chunked([1, 2, 3, 4, 5, 6, 7], 3) == [[1, 2, 3], [4, 5, 6], [7]]
    assert chunked("abcdefg", 3) == [["a", "b", "c"], ["d", "e", "f"], ["g"]]


def test_size_larger_than_input():
    assert chunked([1, 2], 5) == [[1, 2]]
    assert chunked(range(1), 1) == [[0]]


def test_every_element_appears_once_in_order():
    assert chunked(range(5), 2) == [[0, 1], [2, 3], [4]]
    for n in range(0, 13):
        for size in range(1, 6):
            chunks = chunked(range(n), size)
            assert [x for chunk in chunks for x in chunk] == list(range(n))
            assert all(len(chunk) == size for chunk in chunks[:-1])
            assert all(1 <= len(chunk) <= size for chunk in chunks)


def test_page_count_rounds_up():
    assert page_count(5, 2) == 3
    assert page_count(1, 10) == 1
    assert page_count(11, 5) == 3


def test_page_count_matches_the_chunks():
    assert [page_count(t, p) for t, p in ((0, 3), (6, 3), (28, 7), (10, 5))] == [0, 2, 4, 2]
    for total in range(0, 30):
        for per_page in range(1, 8):
            assert page_count(total, per_page) == len(chunked(range(total), per_page)), (total, per_page)


def test_last_partial_page_is_returned():
    assert paginate(list(range(5)), 2, 3) == [4]
    with pytest.raises(IndexError):
        paginate(list(range(5)), 2, 4)


def test_exact_multiple_has_no_empty_chunk():
    assert chunked([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]
    assert chunked(range(6), 3) == [[0, 1, 2], [3, 4, 5]]


def test_empty_input_gives_no_chunks():
    assert chunked([], 3) == []
    assert page_count(0, 3) == 0


def test_invalid_sizes_raise():
    with pytest.raises(ValueError):
        chunked([1, 2], 0)
    with pytest.raises(ValueError):
        page_count(3, 0)


def test_negative_sizes_raise():
    with pytest.raises(ValueError):
        chunked([1, 2], -1)
    with pytest.raises(ValueError):
        chunked([], -3)
    with pytest.raises(ValueError):
        page_count(3, -1)


def test_pages_outside_the_range_raise():
    for page in (0, -1, 3):
        with pytest.raises(IndexError):
            paginate(list(range(6)), 3, page)
    with pytest.raises(IndexError):
        paginate([], 3, 1)


def test_accepts_one_shot_iterators():
    assert chunked(iter([1, 2, 3, 4]), 2) == [[1, 2], [3, 4]]


def test_full_pages():
    assert paginate(list(range(6)), 3, 1) == [0, 1, 2]
    assert paginate(list(range(6)), 3, 2) == [3, 4, 5]
    assert page_count(10, 5) == 2


def test_page_count_is_exact_for_large_totals():
    assert page_count(10**18 + 1, 1) == 10**18 + 1
    assert page_count(2**60, 2) == 2**59
