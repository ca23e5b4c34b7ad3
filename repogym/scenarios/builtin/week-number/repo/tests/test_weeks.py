"""Tests for weeks.py."""

from datetime import date

from weeks import iso_week, week_label


def test_mid_year():
    assert iso_week(date(2024, 6, 15)) == (2024, 24)


def test_label_padding():
    assert week_label(date(2024, 1, 3)) == "2024-W01"
