"""Hidden verifier tests for confkit."""

import copy

import pytest
from confkit import ConfigError, coerce, load, merge

DEFAULTS = {
    "name": "shop",
    "debug": False,
    "workers": 4,
    "ratio": 0.5,
    "db": {"host": "localhost", "port": 5432, "ssl": True, "pool": {"size": 5, "timeout": 1.5}},
}


def test_nested_override_keeps_sibling_settings():
    config = load(DEFAULTS, env={"APP_DB__PORT": "5433"})
    assert config["db"] == {
        "host": "localhost",
        "port": 5433,
        "ssl": True,
        "pool": {"size": 5, "timeout": 1.5},
    }
    deep = load(DEFAULTS, env={"APP_DB__POOL__SIZE": "20", "APP_WORKERS": "8"})
    assert deep["db"]["pool"] == {"size": 20, "timeout": 1.5}
    assert deep["db"]["host"] == "localhost"
    assert deep["workers"] == 8


def test_boolean_words_are_parsed():
    for word in ("true", "TRUE", "yes", "on", "1"):
        assert load(DEFAULTS, env={"APP_DEBUG": word})["debug"] is True
    for word in ("false", "False", "no", "off", "0"):
        assert load(DEFAULTS, env={"APP_DB__SSL": word})["db"]["ssl"] is False


def test_invalid_boolean_is_rejected():
    with pytest.raises(ConfigError, match="APP_DEBUG"):
        load(DEFAULTS, env={"APP_DEBUG": "maybe"})


def test_numbers_and_strings_are_converted():
    config = load(DEFAULTS, env={"APP_WORKERS": "16", "APP_RATIO": "0.25", "APP_NAME": "store"})
    assert config["workers"] == 16 and type(config["workers"]) is int
    assert config["ratio"] == 0.25 and type(config["ratio"]) is float
    assert config["name"] == "store"


def test_invalid_number_is_rejected():
    with pytest.raises(ConfigError, match="APP_WORKERS"):
        load(DEFAULTS, env={"APP_WORKERS": "many"})


def test_unknown_setting_and_sections_are_rejected():
    with pytest.raises(ConfigError):
        load(DEFAULTS, env={"APP_COLOR": "red"})
    with pytest.raises(ConfigError):
        load(DEFAULTS, env={"APP_DB": "postgres://"})


def test_other_variables_are_ignored():
    assert load(DEFAULTS, env={"HOME": "/root", "PATH": "/bin"}) == DEFAULTS


def test_defaults_are_not_modified():
    before = copy.deepcopy(DEFAULTS)
    first = load(DEFAULTS, env={"APP_DB__HOST": "db1", "APP_DB__POOL__SIZE": "9"})
    second = load(DEFAULTS, env={})
    assert DEFAULTS == before
    assert second == before
    assert first["db"]["host"] == "db1"


def test_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("CONFKITTEST_WORKERS", "7")
    monkeypatch.setenv("CONFKITTEST_DB__HOST", "db2")
    config = load(DEFAULTS, prefix="CONFKITTEST_")
    assert config["workers"] == 7
    assert config["db"]["host"] == "db2"


def test_merge_adds_sections_and_replaces_other_values():
    base = {"name": "shop", "db": {"host": "localhost", "port": 5432}}
    override = {"cache": {"ttl": 30}, "db": None, "name": {"first": "a"}}
    before = copy.deepcopy(base), copy.deepcopy(override)
    assert merge(base, override) == {"name": {"first": "a"}, "db": None, "cache": {"ttl": 30}}
    assert (base, override) == before


def test_conversion_errors_name_the_variable():
    with pytest.raises(ConfigError) as default_name:
        coerce("many", 4)
    assert str(default_name.value).startswith("value: ")
    with pytest.raises(ConfigError) as given_name:
        coerce("maybe", False, "APP_DEBUG")
    assert str(given_name.value).startswith("APP_DEBUG: ")
