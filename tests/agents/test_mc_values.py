"""Monte-Carlo values from any history (repogym.agents.mc): fork a real RepoEnv episode
(bwrap) at a turn boundary, roll out K continuations with a scripted policy whose success
probability from that state is known, and check the estimate against binomial bounds; a
recorded episode's turn values by replay and fork."""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import pytest

from repogym.agents.engines import Request, ScriptedEngine
from repogym.agents.episode import Episode
from repogym.agents.mc import MCConfig, mc_turn_values, mc_value
from repogym.agents.rollout import SUBMIT_ACTION, EnvPool, RolloutConfig, run_episodes
from repogym.agents.toy.menu import MenuFormat
from repogym.agents.toy.tiny import load_tiny
from repogym.scenarios.registry import registered_tasks

TASK = "retry-zero"
CONFIG = RolloutConfig(group_size=1, max_steps=4, max_new_tokens=8, max_context=512)


def scripted(fmt: MenuFormat, p: float) -> ScriptedEngine:
    """Picks the gold fix with probability ``p`` (else "no change"), then submits: from the
    first state its success probability is exactly ``p``."""
    gold, noop = fmt.gold_label(TASK), next(e.label for e in fmt.entries(TASK) if e.kind == "noop")

    def script(_: int, request: Request) -> str:
        lines = fmt.tokenizer.decode(request.prompt_ids).strip().splitlines()
        if len(lines) > 1:  # an action and its observation follow the prompt: submit
            return "submit\n"
        return f"{gold if random.Random(request.seed).random() < p else noop}\n"

    return ScriptedEngine(fmt.tokenizer, script)


@pytest.fixture(scope="module")
def fmt(qwen_dir: Path) -> MenuFormat:
    return MenuFormat((registered_tasks()[TASK],), load_tiny(qwen_dir)[1])


@pytest.fixture(scope="module")
def pool():
    with EnvPool(CONFIG) as envs:
        yield envs


def test_mc_value_from_the_first_state_is_within_binomial_bounds(fmt, pool) -> None:
    env, obs, info = pool.reset(TASK, 0, seed=0)
    dialogue = fmt.start(obs, info)
    episode = Episode(task=TASK, prompt=obs)
    k, p = 24, 0.3
    start = time.monotonic()
    est = mc_value(scripted(fmt, p), env, dialogue, episode, CONFIG, MCConfig(rollouts=k, seed=7))
    assert est.n == k and len(est.rewards) == k
    assert est.successes == sum(r == 1.0 for r in est.rewards)
    # P(|Bin(24, 0.3) - 7.2| > 3.5 sd) < 1e-3: the estimate is 0.3 give or take binomial noise.
    sd = (p * (1 - p) / k) ** 0.5
    assert abs(est.value - p) < 3.5 * sd
    assert est.low < est.value < est.high
    # The original episode is untouched by its forks' fixes: submitted now, nothing changed.
    _, reward, terminated, _, step_info = env.step(SUBMIT_ACTION)
    assert terminated and reward == 0.0 and not step_info["diff"].strip()
    print(
        f"MC from the first state: {est.successes}/{est.n} = {est.value:.3f} "
        f"[{est.low:.3f}, {est.high:.3f}] in {time.monotonic() - start:.1f}s"
    )


def test_turn_values_of_a_recorded_episode(fmt, pool) -> None:
    """An episode that picked the gold fix, then submitted: the state after the pick is worth
    exactly 1 (the scripted policy submits), the first state about p; replay matches."""
    rec = run_episodes(scripted(fmt, 1.0), fmt, pool, [TASK], CONFIG, seed=0)[0]
    assert rec.resolved and len(rec.turns) == 2
    values = mc_turn_values(
        scripted(fmt, 0.5), fmt, pool, rec, CONFIG, MCConfig(rollouts=8, seed=3)
    )
    assert values.replay_mismatches == 0 and values.final is None
    assert [v.n for v in values.turns] == [8, 8] and values.rollouts == 16
    assert values.turns[1].value == 1.0 and values.turns[1].successes == 8
    assert 0.0 < values.turns[0].value < 1.0  # 8 fair coins: all agree with p = 1/128
    noop = run_episodes(scripted(fmt, 0.0), fmt, pool, [TASK], CONFIG, seed=0)[0]
    after_noop = mc_turn_values(
        scripted(fmt, 0.5), fmt, pool, noop, CONFIG, MCConfig(rollouts=4, seed=3)
    )
    assert after_noop.turns[1].value == 0.0 and not noop.resolved


def test_cli_ppo_with_mc_advantages_token_critic_and_adaptive_sampler(tmp_path: Path) -> None:
    """``repogym train --algo ppo --set advantage=mc --set critic=token --set
    sampler=adaptive`` on the CPU toy (real episodes, forks and grading): finite losses and
    the metrics of each part written for every step."""
    from repogym.cli import main

    argv = [
        "train",
        "--algo",
        "ppo",
        "--model",
        "tiny",
        "--task",
        TASK,
        "--steps",
        "2",
        "--out",
        str(tmp_path),
        "--set",
        "advantage=mc",
        "--set",
        "mc_rollouts=2",
        "--set",
        "critic=token",
        "--set",
        "sampler=adaptive",
        "--set",
        "epochs=1",
        "--set",
        "rollout.group_size=2",
        "--set",
        "rollout.max_steps=1",
        "--set",
        "warm_start_steps=0",
    ]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        for key in ("loss/policy", "loss/value", "mc/value_mean", "sampler/max_prob"):
            assert math.isfinite(r[key]), key
        assert r["mc/rollouts"] == 2 * 2  # 2 episodes x 1 turn x 2 continuations
        assert r["mc/replay_mismatches"] == 0
        assert 0 < r["loss/value"] < 5  # a cross-entropy of p(yes) against MC values in [0, 1]
        assert r[f"zero_std/{TASK}"] in (0.0, 1.0)
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["critic"], config["advantage"], config["sampler"]) == ("token", "mc", "adaptive")
    assert (tmp_path / "checkpoint-2" / "trainer_state.pt").is_file()
