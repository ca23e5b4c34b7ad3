"""Reward shaping options and a monitor of what each reward component contributes.

Shaping is off by default: the trainers optimise the environment's reward (binary unless
``rollout.reward_mode`` says otherwise). :class:`ShapingConfig` turns on a weighted sum of
named components per episode; the project's docs/reward-shaping.md describes each one's risk.

- ``env``: the environment's reward. With ``rollout.reward_mode="partial"`` it is partial
  credit, the weighted fraction of hidden tests passing (the grader computes it).
- ``resolved``: 1 when every hidden test passed (the outcome we actually want).
- ``overlong``: DAPO's soft overlong punishment on the episode's action tokens
  (:func:`overlong_penalty`), in ``[-1, 0]``.
- ``hack``: -1 when the grader flagged the diff (``hack_flags``: touched hidden tests,
  conftest.py, pytest config, ...).

:func:`shape_episodes` rewrites ``Episode.reward`` to the weighted sum, keeps the environment's
reward in ``info["env_reward"]`` and the weighted parts in ``info["reward_components"]``, and
returns the monitor's metrics: ``reward/component/<name>`` (mean weighted contribution per
episode) and ``reward/component/<name>/share`` (its share of the summed absolute
contributions), plus ``reward/proxy_gap`` (mean shaped reward minus the resolve rate). A proxy
taking over shows as its share rising while ``resolve_rate`` does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from repogym.agents.episode import Episode

__all__ = [
    "COMPONENTS",
    "ShapingConfig",
    "component_counts",
    "component_metrics",
    "default_max_len",
    "episode_components",
    "overlong_penalty",
    "shape_episodes",
]

COMPONENTS = ("env", "resolved", "overlong", "hack")
"""The component names, in the order they are reported."""


def overlong_penalty(length: int, max_len: int, cache: int) -> float:
    """DAPO's soft overlong punishment (Yu et al. 2025, eq. 13).

    ``0`` for ``length <= max_len - cache``; ``((max_len - cache) - length) / cache`` (linear
    from 0 down to -1) for ``max_len - cache < length <= max_len``; ``-1`` beyond ``max_len``.

    Args:
        length: Generated tokens.
        max_len: ``L_max``.
        cache: ``L_cache``, the width of the soft band (> 0, <= ``max_len``).

    Raises:
        ValueError: If ``cache`` is not in ``(0, max_len]``.
    """
    if not 0 < cache <= max_len:
        raise ValueError(f"overlong cache must be in (0, max_len={max_len}]; got {cache}")
    start = max_len - cache
    if length <= start:
        return 0.0
    if length <= max_len:
        return (start - length) / cache
    return -1.0


@dataclass
class ShapingConfig:
    """Weights of the reward components (the default is the environment's reward alone).

    Attributes:
        env: Weight of the environment's reward (partial credit with ``reward_mode="partial"``).
        resolved: Weight of the binary "every hidden test passed".
        overlong: Weight of the overlong penalty (DAPO uses 1).
        hack: Weight of the hack-flag penalty.
        max_action_tokens: ``L_max`` of the overlong penalty, in action tokens per episode
            (None: ``rollout.max_new_tokens * rollout.max_steps``).
        overlong_cache: ``L_cache``: the soft band below ``L_max``.
    """

    env: float = 1.0
    resolved: float = 0.0
    overlong: float = 0.0
    hack: float = 0.0
    max_action_tokens: int | None = None
    overlong_cache: int = 8

    @classmethod
    def coerce(cls, value: ShapingConfig | Mapping[str, Any] | None) -> ShapingConfig | None:
        """A config from a dict (``--set shaping={...}`` JSON), a config, or None."""
        if value is None or isinstance(value, ShapingConfig):
            return value
        unknown = set(value) - set(asdict(cls()))
        if unknown:
            raise ValueError(
                f"unknown shaping keys {sorted(unknown)}. Fix: use {sorted(asdict(cls()))}"
            )
        return cls(**value)

    def weights(self) -> dict[str, float]:
        """Component name -> weight."""
        return {name: float(getattr(self, name)) for name in COMPONENTS}


def episode_components(episode: Episode, max_len: int, cache: int) -> dict[str, float]:
    """The unweighted components of one episode (see the module docstring).

    ``env`` is the episode's environment reward (``info["env_reward"]`` once shaped).
    """
    env = float(episode.info.get("env_reward", episode.reward))
    tokens = sum(len(t.completion_ids) for t in episode.turns)
    return {
        "env": env,
        "resolved": 1.0 if episode.resolved else 0.0,
        "overlong": overlong_penalty(tokens, max_len, min(cache, max_len)),
        "hack": -1.0 if episode.info.get("hack_flags") else 0.0,
    }


def shape_episodes(
    episodes: Sequence[Episode], config: ShapingConfig, default_max_len: int
) -> dict[str, float]:
    """Replace each valid episode's reward by the weighted sum of its components.

    Idempotent: the environment's reward is kept in ``info["env_reward"]`` and reused.
    Episodes with an infrastructure error keep reward 0 and are left out of the metrics.

    Args:
        episodes: Episodes to shape in place.
        config: Component weights.
        default_max_len: ``L_max`` when ``config.max_action_tokens`` is None.

    Returns:
        The monitor's metrics (:func:`component_metrics`).
    """
    weights = config.weights()
    max_len = config.max_action_tokens or default_max_len
    for ep in episodes:
        if not ep.valid:
            continue
        ep.info.setdefault("env_reward", float(ep.reward))
        raw = episode_components(ep, max_len, config.overlong_cache)
        parts = {name: weights[name] * raw[name] for name in COMPONENTS if weights[name]}
        ep.info["reward_components"] = parts
        ep.reward = sum(parts.values())
    return component_metrics(episodes)


def component_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Per-component contributions and shares over the valid shaped episodes.

    Returns:
        ``reward/component/<name>`` (mean weighted contribution), ``.../share`` (mean absolute
        contribution / sum over components of the same; 0 when everything is 0),
        ``reward/env_mean`` and ``reward/proxy_gap`` (mean reward minus the resolve rate).
    """
    shaped = _shaped(episodes)
    if not shaped:
        return {}
    n = len(shaped)
    names = sorted({k for e in shaped for k in e.info["reward_components"]}, key=COMPONENTS.index)
    mean = {k: sum(e.info["reward_components"].get(k, 0.0) for e in shaped) / n for k in names}
    absolute = {
        k: sum(abs(e.info["reward_components"].get(k, 0.0)) for e in shaped) / n for k in names
    }
    total = sum(absolute.values())
    out = {}
    for k in names:
        out[f"reward/component/{k}"] = mean[k]
        out[f"reward/component/{k}/share"] = absolute[k] / total if total else 0.0
    resolve = sum(e.resolved for e in shaped) / n
    out["reward/env_mean"] = sum(e.info["env_reward"] for e in shaped) / n
    out["reward/proxy_gap"] = sum(e.reward for e in shaped) / n - resolve
    return out


def component_counts(episodes: Sequence[Episode]) -> dict[str, float]:
    """How many episodes each of :func:`component_metrics` is a mean over (the weights of a
    data-parallel reduction)."""
    metrics = component_metrics(episodes)
    return dict.fromkeys(metrics, float(len(_shaped(episodes))))


def _shaped(episodes: Sequence[Episode]) -> list[Episode]:
    return [e for e in episodes if e.valid and "reward_components" in e.info]


def default_max_len(rollout: Any) -> int:
    """``L_max`` of the overlong penalty from rollout settings: tokens per action x steps."""
    return int(rollout.max_new_tokens * (rollout.max_steps or 1))
