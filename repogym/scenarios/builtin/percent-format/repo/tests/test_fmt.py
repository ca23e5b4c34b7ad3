"""Tests for fmt.py."""

from fmt import format_percent, format_progress


def test_percent():
    assert format_percent(0.256) == "25.6%"


def test_progress_half():
    assert format_progress(5, 10) == "50.0%"
