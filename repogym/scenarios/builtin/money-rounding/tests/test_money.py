"""Hidden verifier tests for money.py."""

from decimal import Decimal

import pytest
from money import apply_tax, round_amount, total


def test_half_cent_rounds_up():
    assert round_amount("2.675") == "2.68"
    assert round_amount("0.125") == "0.13"
    assert round_amount("1.005") == "1.01"
    assert round_amount("0.285") == "0.29"


def test_negative_half_cent_rounds_away_from_zero():
    assert round_amount("-2.675") == "-2.68"
    assert round_amount("-0.125") == "-0.13"


def test_total_rounds_the_exact_sum():
    assert total(["0.015", "0.015", "0.015"]) == "0.05"
    assert total(["1.115", "0.000"]) == "1.12"


def test_tax_rounds_half_up():
    assert apply_tax("10.00", "8.25") == "10.83"
    assert apply_tax("1.00", "0.5") == "1.01"


def test_rounding_uses_the_exact_amount():
    # More digits than a float holds: the amount as written is what gets rounded.
    assert round_amount("12345678901234.565") == "12345678901234.57"
    assert round_amount("0.12499999999999999999") == "0.12"
    assert total(["9007199254740993.00", "0.01"]) == "9007199254740993.01"


def test_tax_is_rounded_once_on_the_exact_result():
    # 1.004 * 1.5 = 1.506 -> 1.51; rounding the tax (0.502 -> 0.50) first would give 1.50.
    assert apply_tax("1.004", "50") == "1.51"
    assert apply_tax("0.333", "50") == "0.50"


def test_plain_rounding():
    assert round_amount("3.14159") == "3.14"
    assert round_amount("2") == "2.00"
    assert round_amount(7) == "7.00"
    assert round_amount("19.999") == "20.00"
    assert round_amount(Decimal("1.234")) == "1.23"
    assert round_amount("-4.5") == "-4.50"


def test_simple_totals():
    assert total(["0.10", "0.20"]) == "0.30"
    assert total(["19.99", "5.01"]) == "25.00"
    assert total([]) == "0.00"
    assert total(["0.1"] * 10) == "1.00"


def test_simple_tax():
    assert apply_tax("100.00", "20") == "120.00"
    assert apply_tax("2.50", "7") == "2.68"
    assert apply_tax("5.00", 0) == "5.00"


def test_invalid_amount_is_rejected():
    with pytest.raises(ValueError):
        round_amount("12,50")
    with pytest.raises(ValueError):
        total(["1.00", "abc"])


def test_nan_and_infinity_are_rejected():
    for text in ("nan", "NaN", "inf", "-Infinity"):
        with pytest.raises(ValueError):
            round_amount(text)
    with pytest.raises(ValueError):
        total(["1.00", "inf"])
    with pytest.raises(ValueError):
        apply_tax("nan", "5")
