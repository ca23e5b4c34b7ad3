"""In-training evaluation: one round of episodes on held-out tasks, as ``eval/*`` metrics.

``repogym train ... --eval-every K --eval-split test`` runs, every ``K`` steps (and after the
last), ``eval_samples`` episodes per evaluation task with the current weights -- greedy by
default -- in the same episode format and environments as training, and logs
``eval/reward_mean``, ``eval/resolve_rate``, ``eval/episodes`` and ``eval/infra_error_frac``
with that step's metrics. The episodes go to ``OUT/eval/step-<step>-*.jsonl``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from repogym.agents.engines import Engine
from repogym.agents.episode import Episode
from repogym.agents.rollout import EnvPool, EpisodeFormat, RolloutConfig, collect

__all__ = ["evaluate"]


def evaluate(
    engine: Engine,
    fmt: EpisodeFormat,
    pool: EnvPool,
    tasks: Sequence[str],
    config: RolloutConfig,
    *,
    samples: int = 1,
    greedy: bool = True,
    seed: int = 0,
    max_context: int | None = None,
    group_ids: Sequence[int] | None = None,
) -> tuple[dict[str, float], list[Episode]]:
    """Run ``samples`` episodes per task; returns the ``eval/*`` metrics and the episodes.

    Args:
        engine: Where completions come from (the policy's current weights).
        fmt: The episode format.
        pool: Environments (the trainer's own: the same sandbox and step budget).
        tasks: The evaluation tasks.
        config: The rollout settings (group size, dynamic sampling and greediness replaced).
        samples: Episodes per task.
        greedy: Take the most likely tokens.
        seed: Seeds the environments and sampled episodes.
        max_context: The model's context length.
        group_ids: The tasks' indices among every evaluation task (data parallelism).
    """
    rollout = dataclasses.replace(
        config, group_size=samples, dynamic_sampling=False, greedy=greedy, overlong_mask=False
    )
    result = collect(
        engine,
        fmt,
        pool,
        list(tasks),
        rollout,
        seed=seed,
        max_context=max_context,
        group_ids=group_ids,
    )
    engine.release()
    m = result.metrics()
    metrics = {
        "eval/reward_mean": m["reward/mean"],
        "eval/resolve_rate": m["resolve_rate"],
        "eval/episodes": float(len(result.all_episodes)),
        "eval/infra_error_frac": m["infra_error_frac"],
    }
    return metrics, result.all_episodes
