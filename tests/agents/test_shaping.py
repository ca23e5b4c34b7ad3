"""Reward shaping: DAPO's overlong penalty in closed form, component sums, shares, the proxy
monitor, and partial credit from the real grader."""

from __future__ import annotations

import pytest

from repogym.agents.episode import Episode, Turn
from repogym.agents.shaping import (
    ShapingConfig,
    component_metrics,
    overlong_penalty,
    shape_episodes,
)


def test_overlong_penalty_closed_form() -> None:
    # L_max = 20, L_cache = 4: free up to 16, linear to -1 at 20, -1 beyond.
    assert [overlong_penalty(n, 20, 4) for n in (0, 16, 17, 18, 20, 21, 100)] == [
        0.0,
        0.0,
        -0.25,
        -0.5,
        -1.0,
        -1.0,
        -1.0,
    ]
    with pytest.raises(ValueError, match="cache"):
        overlong_penalty(5, 20, 0)


def _ep(reward: float, resolved: bool, tokens: int, hack: bool = False) -> Episode:
    ep = Episode(
        "t", "task t\n", [Turn([], [1] * tokens, [0.0] * tokens)], reward=reward, resolved=resolved
    )
    ep.info["hack_flags"] = ["conftest"] if hack else []
    return ep


def test_shaped_reward_is_the_weighted_sum_of_components() -> None:
    cfg = ShapingConfig(
        env=1.0, resolved=2.0, overlong=0.5, hack=1.0, max_action_tokens=20, overlong_cache=4
    )
    eps = [_ep(0.5, False, 18), _ep(1.0, True, 4), _ep(0.25, False, 30, hack=True)]
    broken = _ep(0.0, False, 3)
    broken.infra_error = "grader crashed"
    metrics = shape_episodes([*eps, broken], cfg, default_max_len=999)
    assert [e.reward for e in eps] == [0.5 - 0.25, 1.0 + 2.0, 0.25 - 0.5 - 1.0]
    assert eps[0].info["reward_components"] == {
        "env": 0.5,
        "resolved": 0.0,
        "overlong": -0.25,
        "hack": 0.0,
    }
    assert broken.reward == 0.0 and "reward_components" not in broken.info
    # Idempotent: shaping again starts from the environment's reward.
    shape_episodes(eps, cfg, default_max_len=999)
    assert [e.reward for e in eps] == [0.25, 3.0, -1.25]
    assert metrics["reward/component/env"] == pytest.approx(1.75 / 3)
    abs_means = {"env": 1.75 / 3, "resolved": 2 / 3, "overlong": 0.75 / 3, "hack": 1 / 3}
    total = sum(abs_means.values())
    for name, value in abs_means.items():
        assert metrics[f"reward/component/{name}/share"] == pytest.approx(value / total)
    assert metrics["reward/env_mean"] == pytest.approx(1.75 / 3)
    assert metrics["reward/proxy_gap"] == pytest.approx(2.0 / 3 - 1 / 3)


def test_monitor_shows_a_proxy_taking_over() -> None:
    """Partial credit climbs (most tests pass) while nothing resolves: the ``env`` share goes
    to 1 and the gap between the optimised reward and the resolve rate opens."""
    cfg = ShapingConfig(env=1.0, resolved=1.0)
    early = [_ep(0.2, True, 3), _ep(0.0, False, 3)]
    early[0].info["env_reward"] = 1.0  # resolved: every test passed
    late = [_ep(0.9, False, 3), _ep(0.8, False, 3)]
    m_early = shape_episodes(early, cfg, 100)
    m_late = shape_episodes(late, cfg, 100)
    assert m_early["reward/component/env/share"] == pytest.approx(0.5)
    assert m_late["reward/component/env/share"] == pytest.approx(1.0)
    assert m_late["reward/component/resolved/share"] == 0.0
    assert m_late["reward/proxy_gap"] == pytest.approx(0.85)
    assert m_early["reward/proxy_gap"] == pytest.approx(1.0 - 0.5)


def test_default_config_is_the_environment_reward_and_rejects_unknown_keys() -> None:
    eps = [_ep(0.7, False, 3)]
    metrics = shape_episodes(eps, ShapingConfig(), 100)
    assert eps[0].reward == 0.7 and set(eps[0].info["reward_components"]) == {"env"}
    assert metrics["reward/component/env/share"] == 1.0
    assert ShapingConfig.coerce({"overlong": 1.0}).overlong == 1.0
    with pytest.raises(ValueError, match="unknown shaping keys"):
        ShapingConfig.coerce({"length": 1.0})
    assert component_metrics([_ep(1.0, True, 1)]) == {}  # nothing shaped: nothing reported


def test_partial_credit_comes_from_the_real_grader(make_env, retry_task) -> None:
    """``reward_mode="partial"``: the gold fix earns 1, no change earns the fraction of tests
    that already pass (the pass_to_pass ones), strictly between 0 and 1."""
    from tests.conftest import apply_patch_actions, call

    rewards = {}
    for name, actions in (
        ("noop", []),
        ("gold", apply_patch_actions(retry_task.solution_patch.read_text())),
    ):
        env = make_env(reward_mode="partial")
        env.reset(seed=0)
        for action in actions:
            env.step(action)
        _, rewards[name], terminated, _, info = env.step(call("submit"))
        assert terminated and not info.get("infra_error")
    assert rewards["gold"] == 1.0
    assert 0.0 < rewards["noop"] < 1.0
