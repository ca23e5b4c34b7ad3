"""The one definition of a results row (``ResultRow``) and how rows are written and read."""

from __future__ import annotations

import json
import typing

import pytest

from repogym.envs.info import HackFlag
from repogym.harness.results import (
    ROW_KEYS,
    ResultRow,
    ResultsLog,
    episode_status,
    new_row,
    read_results,
)

#: The order rows were always written in (files of older runs read the same).
WRITTEN_ORDER = (
    "agent",
    "task",
    "split",
    "tags",
    "sample",
    "seed",
    "reward",
    "resolved",
    "steps",
    "wall_s",
    "tokens",
    "usage",
    "hack_flags",
    "infra_error",
    "agent_error",
    "endpoint_error",
    "truncated",
    "stop_reason",
    "trajectory",
)


def test_row_keys_are_the_typed_dict_in_the_written_order():
    assert ROW_KEYS == WRITTEN_ORDER == tuple(typing.get_type_hints(ResultRow))


def test_new_row_has_every_key_and_refuses_others():
    row = new_row(agent="a", task="t", sample=0)
    assert tuple(row) == ROW_KEYS
    assert (row["reward"], row["resolved"], row["steps"], row["tokens"], row["hack_flags"]) == (
        0.0,
        False,
        0,
        0,
        [],
    )
    assert row["infra_error"] is None and row["truncated"] is None
    with pytest.raises(KeyError, match="not result-row keys: \\['truncated_reason'\\]"):
        new_row(truncated_reason="max_steps")


def test_flags_round_trip_as_strings(tmp_path):
    row = new_row(
        agent="a", task="t", sample=0, hack_flags=[HackFlag.FORGED_RESULTS], truncated="max_steps"
    )
    with ResultsLog(tmp_path) as log:
        log.write(row)
    line = (tmp_path / "results.jsonl").read_text()
    assert '"hack_flags": ["forged_results"]' in line
    (back,) = read_results(tmp_path)
    assert back == json.loads(line) and back["hack_flags"] == [HackFlag.FORGED_RESULTS]
    assert episode_status(back) == episode_status(row) == "hacked"
