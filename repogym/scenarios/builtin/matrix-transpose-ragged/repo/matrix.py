"""Plain-Python matrices: lists of rows, each row a list of numbers.

A matrix must be rectangular: every row has the same number of items. The
empty matrix ``[]`` has shape ``(0, 0)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def shape(matrix: Sequence[Sequence[object]]) -> tuple[int, int]:
    """Return ``(rows, columns)`` of ``matrix``.

    A matrix without rows has no columns either; rows without items still count as rows.

    Raises:
        ValueError: If the rows do not all have the same length (a ragged matrix);
            the message names the first offending row.
    """
    return len(matrix), len(matrix[0])


def transpose(matrix: Sequence[Sequence[T]]) -> list[list[T]]:
    """Return the transpose of ``matrix`` as a new list of lists.

    Column ``c`` of ``matrix`` becomes row ``c`` of the result, so a single row becomes a
    single column. A matrix without rows, or without columns (rows with no items),
    transposes to a matrix without rows.

    Raises:
        ValueError: If ``matrix`` is ragged (see :func:`shape`).
    """
    rows, cols = shape(matrix)
    return [[matrix[r][c] for r in range(rows)] for c in range(cols)]


def matmul(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> list[list[float]]:
    """Return the matrix product ``a @ b``.

    Raises:
        ValueError: If either matrix is ragged or the inner dimensions differ.
    """
    a_rows, a_cols = shape(a)
    b_rows, _ = shape(b)
    if a_cols != b_rows:
        raise ValueError(f"cannot multiply {a_rows}x{a_cols} by {b_rows}x? matrices")
    columns = transpose(b)
    return [[sum(x * y for x, y in zip(row, col)) for col in columns] for row in a]
