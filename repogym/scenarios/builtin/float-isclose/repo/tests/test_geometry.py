"""Tests for geometry.py."""

from geometry import distance, is_collinear, is_right_triangle


def test_three_four_five():
    assert is_right_triangle(3, 4, 5)


def test_distance():
    assert distance((0, 0), (3, 4)) == 5


def test_axis_points_collinear():
    assert is_collinear((0, 0), (1, 0), (5, 0))
