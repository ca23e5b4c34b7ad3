"""Hidden verifier tests for matrix.py."""

import pytest

from matrix import matmul, shape, transpose


def test_empty_matrix():
    assert shape([]) == (0, 0)
    assert transpose([]) == []


def test_ragged_matrix_with_short_row_raises_value_error():
    with pytest.raises(ValueError, match="row 1"):
        shape([[1, 2, 3], [4, 5]])
    with pytest.raises(ValueError):
        transpose([[1, 2, 3], [4, 5]])


def test_ragged_matrix_with_long_row_raises_value_error():
    with pytest.raises(ValueError, match="row 2"):
        transpose([[1, 2], [3, 4], [5, 6, 7]])
    with pytest.raises(ValueError):
        shape([[1], [2, 3]])
    # two offending rows: the message names the first of them
    with pytest.raises(ValueError, match="row 1"):
        shape([[1, 2], [3], [4, 5, 6], [7, 8]])


def test_ragged_matrix_with_empty_first_row_raises_value_error():
    with pytest.raises(ValueError, match="row 1"):
        shape([[], [1]])
    with pytest.raises(ValueError, match="row 2"):
        transpose([[], [], [1, 2]])


def test_matmul_rejects_ragged_operands():
    with pytest.raises(ValueError, match="row 1"):
        matmul([[1, 2], [3]], [[1], [1]])
    with pytest.raises(ValueError, match="row 1"):
        matmul([[1, 1]], [[1, 2], [3, 4, 5]])


def test_single_row_and_single_column():
    assert transpose([[1, 2, 3]]) == [[1], [2], [3]]
    assert transpose([[1], [2], [3]]) == [[1, 2, 3]]
    assert shape([[7]]) == (1, 1)
    assert transpose([[7]]) == [[7]]


def test_rectangular_transpose_and_round_trip():
    matrix = [[1, 2, 3], [4, 5, 6]]
    assert shape(matrix) == (2, 3)
    assert transpose(matrix) == [[1, 4], [2, 5], [3, 6]]
    assert transpose(transpose(matrix)) == matrix


def test_rows_without_columns():
    assert shape([[], []]) == (2, 0)
    assert transpose([[], []]) == []


def test_transpose_returns_new_lists_and_accepts_tuples():
    matrix = [[1, 2], [3, 4]]
    result = transpose(matrix)
    result[0][0] = 99
    assert matrix == [[1, 2], [3, 4]]
    assert transpose(((1, 2), (3, 4))) == [[1, 3], [2, 4]]


def test_matmul():
    assert matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]]) == [[19, 22], [43, 50]]
    assert matmul([[1, 2, 3]], [[1], [2], [3]]) == [[14]]
    with pytest.raises(ValueError):
        matmul([[1, 2]], [[1, 2]])
