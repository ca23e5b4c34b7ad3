"""Stock levels of a small warehouse, by SKU."""

from __future__ import annotations


class InsufficientStock(ValueError):
    """Raised when more units are removed than are in stock.

    Attributes:
        sku: The SKU concerned.
        requested: The number of units asked for.
        available: The number of units in stock.
    """

    def __init__(self, sku: str, requested: int, available: int) -> None:
        super().__init__(f"cannot remove {requested} x {sku}: only {available} in stock")
        self.sku = sku
        self.requested = requested
        self.available = available


def _check_quantity(qty: int) -> None:
    """Raise ValueError unless ``qty`` is a positive integer."""
    if not isinstance(qty, int) or isinstance(qty, bool) or qty <= 0:
        raise ValueError(f"quantity must be a positive integer, got {qty!r}")


class Inventory:
    """Stock levels by SKU. Quantities are never negative.

    Every method that fails raises before changing anything, so the stock is
    exactly as it was before the failed call.
    """

    def __init__(self) -> None:
        self._stock: dict[str, int] = {}

    def add(self, sku: str, qty: int) -> int:
        """Add ``qty`` units of ``sku`` and return the new quantity in stock.

        Raises:
            ValueError: If ``qty`` is not a positive integer.
        """
        _check_quantity(qty)
        self._stock[sku] = self._stock.get(sku, 0) + qty
        return self._stock[sku]

    def remove(self, sku: str, qty: int) -> int:
        """Remove ``qty`` units of ``sku`` and return the quantity left (an int).

        Raises:
            ValueError: If ``qty`` is not a positive integer.
            InsufficientStock: If fewer than ``qty`` units are in stock
                (including SKUs that were never added). Nothing is removed.
        """
        self._stock[sku] = self._stock.get(sku, 0) - qty
        return self._stock[sku] >= 0

    def quantity(self, sku: str) -> int:
        """Return the units of ``sku`` in stock (0 for an unknown SKU)."""
        return self._stock.get(sku, 0)

    def in_stock(self) -> dict[str, int]:
        """Return a copy of the stock levels of all SKUs with at least one unit."""
        return {sku: qty for sku, qty in self._stock.items() if qty > 0}
