"""Tests for confmerge.layers."""

from confmerge import get, load_layers


def test_later_layer_wins():
    assert load_layers(['{"debug": false}', '{"debug": true}']) == {"debug": True}


def test_get():
    assert get({"db": {"host": "h"}}, "db.host") == "h"
