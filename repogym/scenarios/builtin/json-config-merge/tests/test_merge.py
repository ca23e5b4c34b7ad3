"""Hidden verifier tests for confmerge.merge."""

import copy

from confmerge import deep_merge


def test_nested_sections_merge():
    base = {"db": {"host": "localhost", "port": 5432}, "debug": False}
    assert deep_merge(base, {"db": {"port": 6543}}) == {"db": {"host": "localhost", "port": 6543}, "debug": False}


def test_merge_three_levels_deep():
    base = {"db": {"pool": {"size": 5, "timeout": 30}, "host": "h"}}
    override = {"db": {"pool": {"size": 20}}}
    assert deep_merge(base, override) == {"db": {"pool": {"size": 20, "timeout": 30}, "host": "h"}}


def test_inputs_are_not_modified():
    base = {"db": {"host": "h", "pool": {"size": 5}}, "tags": ["a"]}
    override = {"db": {"pool": {"size": 9}}, "tags": ["b"]}
    base_before, override_before = copy.deepcopy(base), copy.deepcopy(override)
    deep_merge(base, override)
    assert base == base_before
    assert override == override_before


def test_lists_and_scalars_are_replaced():
    assert deep_merge({"tags": ["a", "b"], "n": 1}, {"tags": ["c"], "n": 2}) == {"tags": ["c"], "n": 2}


def test_dict_and_scalar_replace_each_other():
    assert deep_merge({"cache": {"ttl": 5}}, {"cache": None}) == {"cache": None}
    assert deep_merge({"cache": False}, {"cache": {"ttl": 5}}) == {"cache": {"ttl": 5}}


def test_dict_replaces_any_scalar_or_list():
    assert deep_merge({"cache": 300}, {"cache": {"ttl": 5}}) == {"cache": {"ttl": 5}}
    assert deep_merge({"cache": "redis"}, {"cache": {"ttl": 5}}) == {"cache": {"ttl": 5}}
    assert deep_merge({"hosts": ["a", "b"]}, {"hosts": {"primary": "a"}}) == {"hosts": {"primary": "a"}}


def test_new_keys_are_added():
    assert deep_merge({"a": 1}, {"b": {"c": 2}}) == {"a": 1, "b": {"c": 2}}
    assert deep_merge({}, {}) == {}
