from reprs.core import Point, scratch_name, shift


def test_shift_moves_right():
    """Shifting by 3 moves a point three steps to the right."""
    p = shift(Point(1, 2), 3)
    assert (p.x, p.y) == (4, 2), p


def test_scratch_name(tmp_path):
    """The scratch file lands inside the given folder."""
    assert scratch_name(str(tmp_path), "a") == str(tmp_path / "a.txt")


def test_point_keeps_coordinates():
    p = Point(5, 6)
    assert (p.x, p.y) == (5, 6)
