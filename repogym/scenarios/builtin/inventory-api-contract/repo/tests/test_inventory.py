"""Tests for inventory.py."""

from inventory import Inventory


def test_add():
    inv = Inventory()
    assert inv.add("apple", 5) == 5
    assert inv.add("apple", 2) == 7
    assert inv.quantity("apple") == 7
