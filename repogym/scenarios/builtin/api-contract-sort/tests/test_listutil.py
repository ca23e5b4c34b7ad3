"""Hidden verifier tests for sorted_unique()."""

from listutil import chunked, sorted_unique


def test_input_list_is_not_modified():
    data = [4, 2, 3, 4, 2]
    assert sorted_unique(data) == [2, 3, 4]
    assert data == [4, 2, 3, 4, 2]
    words = ["d", "C", "c", "D"]
    sorted_unique(words, key=str.lower, reverse=True)
    assert words == ["d", "C", "c", "D"]


def test_reverse_keeps_first_occurrence_of_duplicates():
    assert sorted_unique(["d", "C", "c", "D"], key=str.lower, reverse=True) == ["d", "C"]
    rows = [("ann", 2), ("bob", 1), ("cy", 2), ("dee", 1), ("eve", 3)]
    assert sorted_unique(rows, key=lambda r: r[1], reverse=True) == [
        ("eve", 3),
        ("ann", 2),
        ("bob", 1),
    ]


def test_reverse_without_key_keeps_first_occurrence():
    # 2 == 2.0 and 1 == 1.0 == True: equal items are duplicates, the first one given is kept.
    result = sorted_unique([2, 1, 2.0, 1.0, True], reverse=True)
    assert [(type(x).__name__, x) for x in result] == [("int", 2), ("int", 1)]
    result = sorted_unique([1.0, 2, 1, 2.0])
    assert [(type(x).__name__, x) for x in result] == [("float", 1.0), ("int", 2)]


def test_accepts_any_iterable():
    assert sorted_unique((5, 4, 5)) == [4, 5]
    assert sorted_unique(x % 3 for x in range(10)) == [0, 1, 2]
    assert sorted_unique({"b": 1, "a": 2}) == ["a", "b"]


def test_sorted_and_deduplicated():
    assert sorted_unique([3, 1, 2, 3, 1]) == [1, 2, 3]
    assert sorted_unique([]) == []


def test_key_keeps_first_occurrence_ascending():
    assert sorted_unique(["b", "A", "a", "B"], key=str.lower) == ["A", "b"]
    rows = [("ann", 2), ("bob", 1), ("cy", 2), ("dee", 1)]
    assert sorted_unique(rows, key=lambda r: r[1]) == [("bob", 1), ("ann", 2)]


def test_items_need_not_be_hashable_with_a_key():
    rows = [{"id": 2, "v": "a"}, {"id": 1, "v": "b"}, {"id": 2, "v": "c"}]
    assert sorted_unique(rows, key=lambda r: r["id"]) == [{"id": 1, "v": "b"}, {"id": 2, "v": "a"}]


def test_reverse_without_duplicates():
    assert sorted_unique([1, 3, 2], reverse=True) == [3, 2, 1]
    assert sorted_unique(["pear", "fig", "apple"], key=len, reverse=True) == ["apple", "pear", "fig"]


def test_chunked():
    assert chunked([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
