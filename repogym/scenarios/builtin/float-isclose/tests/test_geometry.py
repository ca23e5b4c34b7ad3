"""Hidden verifier tests for geometry.py."""

import math

from geometry import almost_equal, distance, is_collinear, is_right_triangle, same_point


def test_almost_equal_is_relative_for_large_values():
    assert almost_equal(0.1 * 3 * 1e12, 0.3e12)
    assert almost_equal(1e20, 1e20 + 1e5)
    assert same_point((0.1 * 3 * 1e12, 1.0), (3e11, 1.0))


def test_right_triangle_with_irrational_sides():
    assert is_right_triangle(1, 1, math.sqrt(2))
    assert is_right_triangle(1, math.sqrt(3), 2)
    assert is_right_triangle(math.sqrt(2), 1, 1)


def test_right_triangle_from_distances():
    a, b, c = (0.0, 0.0), (0.1, 0.0), (0.0, 0.7)
    assert is_right_triangle(distance(a, b), distance(b, c), distance(a, c))


def test_collinear_with_decimal_coordinates():
    assert is_collinear((0, 0), (0.1, 0.3), (0.3, 0.9))
    assert is_collinear((0, 0), (0.2, 0.6), (0.3, 0.9))
    assert is_collinear((1e6 + 0.1, 1e6 + 0.2), (1e6 + 0.3, 1e6 + 0.6), (1e6 + 0.7, 1e6 + 1.4))


def test_almost_equal_includes_the_tolerance_boundary():
    # |x - y| <= max(REL_TOL * max(|x|, |y|), ABS_TOL): a difference of exactly ABS_TOL is equal.
    assert almost_equal(0.0, 1e-12)
    assert almost_equal(-1e-12, 0.0)
    assert not almost_equal(0.0, 1.5e-12)


def test_right_triangles_at_large_scale():
    assert is_right_triangle(1e6, 1e6, 1e6 * math.sqrt(2))
    assert is_right_triangle(1e5 * math.sqrt(3), 1e5, 2e5)
    assert not is_right_triangle(1e6, 1e6, 1.4142e6)


def test_almost_equal_near_zero_uses_the_absolute_tolerance():
    assert almost_equal(1e-13, 0.0)
    assert almost_equal(0.0, -5e-13)
    assert same_point((1e-13, 0.0), (0.0, 2e-13))


def test_small_triangles_are_not_rounded_into_right_ones():
    assert not is_right_triangle(1e-5, 1e-5, 1e-5)
    assert not is_right_triangle(2e-5, 3e-5, 4e-5)


def test_same_point_needs_both_coordinates_equal():
    assert not same_point((0.0, 0.0), (0.0, 1.0))
    assert not same_point((1.0, 5.0), (0.0, 5.0))
    assert same_point((2.5, -1.0), (2.5, -1.0))


def test_vertical_lines():
    assert is_collinear((2, 0), (2, 1), (2, 5))
    assert not is_collinear((0, 0), (0, 1), (1, 5))
    assert not is_collinear((0, 0), (1, 5), (0, 1))


def test_almost_equal_rejects_different_values():
    assert not almost_equal(1.0, 1.001)
    assert not almost_equal(1e-7, 2e-7)
    assert not almost_equal(0.0, 1e-9)
    assert not almost_equal(1e12, 1e12 + 1e4)


def test_almost_equal_small_rounding():
    assert almost_equal(0.1 + 0.2, 0.3)
    assert almost_equal(0.0, 0.0)
    assert same_point((0.1 + 0.2, 0.0), (0.3, 0.0))


def test_exact_right_triangles_and_non_right():
    assert is_right_triangle(3, 4, 5)
    assert is_right_triangle(13, 5, 12)
    assert not is_right_triangle(2, 3, 4)
    assert not is_right_triangle(1, 1, 1.4142)


def test_non_collinear_points():
    assert not is_collinear((0, 0), (1, 0), (0, 1))
    assert not is_collinear((0, 0), (1, 1), (2, 2.000001))
    assert is_collinear((0, 0), (1, 1), (2, 2))


def test_distance_values():
    assert distance((0, 0), (3, 4)) == 5
    assert distance((1, 1), (1, 1)) == 0
