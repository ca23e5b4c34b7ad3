"""Hidden verifier tests for inventory.py: the documented contract of Inventory."""

import pytest

from inventory import InsufficientStock, Inventory


def _stocked():
    inv = Inventory()
    inv.add("apple", 5)
    inv.add("pear", 2)
    return inv


def test_remove_returns_remaining_quantity_as_int():
    inv = _stocked()
    left = inv.remove("apple", 2)
    assert left == 3 and type(left) is int
    left = inv.remove("apple", 2)
    assert left == 1 and type(left) is int
    assert inv.remove("apple", 1) == 0


def test_removing_too_much_raises_and_changes_nothing():
    inv = _stocked()
    with pytest.raises(InsufficientStock) as excinfo:
        inv.remove("apple", 6)
    assert (excinfo.value.sku, excinfo.value.requested, excinfo.value.available) == ("apple", 6, 5)
    assert inv.quantity("apple") == 5
    assert inv.in_stock() == {"apple": 5, "pear": 2}


def test_removing_unknown_sku_raises():
    inv = _stocked()
    with pytest.raises(InsufficientStock):
        inv.remove("kiwi", 1)
    assert inv.quantity("kiwi") == 0
    assert "kiwi" not in inv.in_stock()


def test_remove_rejects_non_positive_quantities():
    inv = _stocked()
    for bad in (0, -3, 1.5, True):
        with pytest.raises(ValueError):
            inv.remove("apple", bad)
    assert inv.quantity("apple") == 5


def test_insufficient_stock_is_a_value_error():
    inv = _stocked()
    with pytest.raises(ValueError):
        inv.remove("pear", 3)
    assert inv.quantity("pear") == 2


def test_add_returns_new_quantity():
    inv = Inventory()
    assert inv.add("apple", 5) == 5
    assert inv.add("apple", 2) == 7
    assert inv.quantity("apple") == 7


def test_add_rejects_non_positive_quantities():
    inv = Inventory()
    for bad in (0, -1, 2.0, False):
        with pytest.raises(ValueError):
            inv.add("apple", bad)
    assert inv.quantity("apple") == 0


def test_unknown_sku_has_zero_quantity():
    assert Inventory().quantity("anything") == 0
    assert Inventory().in_stock() == {}


def test_in_stock_is_a_copy():
    inv = _stocked()
    snapshot = inv.in_stock()
    snapshot["apple"] = 99
    assert inv.quantity("apple") == 5
