"""Hidden verifier tests for confmerge.layers."""

import json

import pytest

from confmerge import ConfigError, get, load_files, load_layers

DEFAULTS = {"db": {"host": "localhost", "port": 5432, "pool": {"size": 5, "timeout": 30}}, "debug": False}


def test_layers_merge_nested_sections():
    layers = [json.dumps(DEFAULTS), '{"db": {"host": "db.internal"}}', '{"db": {"pool": {"size": 50}}}']
    config = load_layers(layers)
    assert config == {
        "db": {"host": "db.internal", "port": 5432, "pool": {"size": 50, "timeout": 30}},
        "debug": False,
    }


def test_load_files_merges_in_order(tmp_path):
    (tmp_path / "defaults.json").write_text(json.dumps(DEFAULTS))
    (tmp_path / "production.json").write_text('{"db": {"port": 6432}, "debug": false}')
    (tmp_path / "local.json").write_text('{"debug": true, "db": {"pool": {"timeout": 5}}}')
    config = load_files([tmp_path / name for name in ("defaults.json", "production.json", "local.json")])
    assert get(config, "db.host") == "localhost"
    assert get(config, "db.port") == 6432
    assert get(config, "db.pool.size") == 5
    assert get(config, "db.pool.timeout") == 5
    assert config["debug"] is True


def test_later_layer_wins_for_scalars():
    assert load_layers(['{"debug": false, "name": "a"}', '{"debug": true}']) == {"debug": True, "name": "a"}


def test_non_object_layer_is_rejected():
    with pytest.raises(ConfigError):
        load_layers(['{"a": 1}', "[1, 2]"])


def test_missing_files_are_skipped_when_allowed(tmp_path):
    (tmp_path / "defaults.json").write_text('{"a": 1}')
    config = load_files([tmp_path / "defaults.json", tmp_path / "local.json"], missing_ok=True)
    assert config == {"a": 1}
    with pytest.raises(FileNotFoundError):
        load_files([tmp_path / "local.json"])


def test_get_with_dotted_keys():
    config = {"db": {"pool": {"size": 5}}, "debug": False}
    assert get(config, "db.pool.size") == 5
    assert get(config, "debug") is False
    assert get(config, "db.missing", "x") == "x"
    assert get(config, "debug.deeper") is None
