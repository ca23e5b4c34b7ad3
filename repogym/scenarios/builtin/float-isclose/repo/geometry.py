"""Plane geometry helpers on float coordinates.

Points are ``(x, y)`` tuples of floats. Because floats carry rounding error,
every equality test here goes through :func:`almost_equal`.
"""

from __future__ import annotations

import math

Point = tuple[float, float]

REL_TOL = 1e-9
"""Relative tolerance: values agreeing to about nine significant digits are equal."""

ABS_TOL = 1e-12
"""Absolute tolerance, used for values close to zero."""


def almost_equal(x: float, y: float) -> bool:
    """Return True if ``x`` and ``y`` differ only by floating-point rounding.

    They are equal when ``|x - y| <= max(REL_TOL * max(|x|, |y|), ABS_TOL)``,
    the same rule as ``math.isclose``, so large and small values are both
    handled.
    """
    return abs(x - y) < ABS_TOL


def same_point(p: Point, q: Point) -> bool:
    """Return True if ``p`` and ``q`` are the same point up to rounding."""
    return almost_equal(p[0], q[0]) and almost_equal(p[1], q[1])


def distance(p: Point, q: Point) -> float:
    """Return the Euclidean distance between ``p`` and ``q``."""
    return math.hypot(q[0] - p[0], q[1] - p[1])


def is_right_triangle(a: float, b: float, c: float) -> bool:
    """Return True if side lengths ``a``, ``b``, ``c`` (any order) form a right triangle."""
    a, b, c = sorted((a, b, c))
    return a * a + b * b == c * c


def is_collinear(p: Point, q: Point, r: Point) -> bool:
    """Return True if the three points lie on one straight line."""
    cross = (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])
    return cross == 0
