"""``--model tiny``'s own settings and hooks (repogym.agents.toy.setup): taken out of ``--set``,
no trainer config's fields, and the menu plugged into distillation as its oracle."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from repogym.agents.config import TrainConfig
from repogym.agents.distill import DistillConfig, DistillTrainer, GoldPatchOracle
from repogym.agents.toy.menu import MenuFormat
from repogym.agents.toy.setup import TOY_DEFAULTS, TOY_TASKS, WARM_START_STEPS, ToyRun
from repogym.scenarios.registry import registered_tasks
from tests.agents._episodes import tiny_policy

TASK = "retry-zero"


def _args(model: str, *overrides: str) -> argparse.Namespace:
    return argparse.Namespace(model=model, overrides=list(overrides))


def test_the_toy_takes_its_settings_out_of_set() -> None:
    args = _args("tiny", "lr=0.1", "interface=chat", "warm_start_steps=5", "interface=menu")
    assert ToyRun.from_args(args) == ToyRun("menu", 5)
    assert args.overrides == ["lr=0.1"]
    assert ToyRun.from_args(_args("tiny")) == ToyRun("menu", WARM_START_STEPS)
    assert ToyRun.from_args(_args("tiny", "warm_start_steps=none")).warm_start_steps == 60
    assert ToyRun("chat").defaults() == {"tasks": TOY_TASKS, **TOY_DEFAULTS["chat"]}


def test_a_real_model_leaves_set_alone_and_refuses_toy_settings() -> None:
    args = _args("/models/qwen", "lr=0.1", "interface=chat")
    assert ToyRun.from_args(args) is None
    assert args.overrides == ["lr=0.1", "interface=chat"]  # config_from_args names the field
    with pytest.raises(SystemExit, match="warm_start_steps: a setting of the CPU toy only"):
        ToyRun.from_args(_args("/models/qwen", "warm_start_steps=3"))


@pytest.mark.parametrize(
    ("pair", "message"),
    [("interface=text", "expected menu or chat"), ("warm_start_steps=x", "a whole number")],
)
def test_bad_toy_settings_name_the_fix(pair: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        ToyRun.from_args(_args("tiny", pair))


def test_train_config_has_no_toy_field() -> None:
    assert "warm_start_steps" not in {f.name for f in dataclasses.fields(TrainConfig)}
    with pytest.raises(TypeError, match="warm_start_steps"):  # an old config.json's key
        TrainConfig(warm_start_steps=3)  # type: ignore[call-arg]


def test_the_menu_is_distillations_oracle_only_when_the_toy_plugs_it_in(qwen_dir) -> None:
    policy = tiny_policy(qwen_dir)
    fmt = MenuFormat((registered_tasks()[TASK],), policy.tokenizer)
    trainer = DistillTrainer(DistillConfig(device="cpu", tasks=(TASK,)), policy=policy, fmt=fmt)
    try:
        assert isinstance(trainer.oracle, GoldPatchOracle)
        assert trainer.hint(TASK).startswith("\n\nA correct fix")
        ToyRun("chat", 0).prepare(trainer)
        assert isinstance(trainer.oracle, GoldPatchOracle)
        ToyRun("menu", 0).prepare(trainer)  # no warm start: 0 steps
        assert trainer.oracle is fmt
        assert trainer.hint(TASK) == f"gold {fmt.gold_label(TASK)}\n"
        assert trainer.oracle.oracle_texts(TASK) == [f"{fmt.gold_label(TASK)}\n", "submit\n"]
    finally:
        trainer.close()
