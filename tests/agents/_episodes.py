"""Synthetic episodes and a shared tiny policy for the trainer tests (no environment)."""

from __future__ import annotations

import torch

from repogym.agents.policy import Episode, Policy, Turn, load_policy

ACTIONS = ["fix 1\n", "fix 2\n", "submit\n"]


def tiny_policy(value_head: bool = False, seed: int = 0) -> Policy:
    """The tiny model on the CPU, stopping at newlines."""
    torch.manual_seed(seed)
    return load_policy(
        "tiny", value_head=value_head, device="cpu", stop=["\n"], tiny_corpus=ACTIONS, seed=seed
    )


def episode(
    policy: Policy,
    actions: list[str],
    reward: float,
    *,
    task: str = "t",
    group: int = 0,
    obs: str = "Wrote 10 characters to a.py.\n",
    infra_error: str | None = None,
    terminated: bool = True,
    truncated: bool = False,
) -> Episode:
    """An episode whose action tokens are ``actions`` (behaviour logprobs from the policy)."""
    ep = Episode(
        task=task,
        prompt=f"task {task}\n",
        reward=reward,
        group=group,
        terminated=terminated,
        truncated=truncated,
        infra_error=infra_error,
    )
    for text in actions:
        ids = policy.encode(text)
        ep.turns.append(Turn(ids, [0.0] * len(ids), obs))
    return ep


def group_batch_episodes(policy: Policy) -> list[Episode]:
    """Two groups of four with mixed rewards (one with an infra error)."""
    eps = []
    for g, rewards in enumerate([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]]):
        for i, r in enumerate(rewards):
            eps.append(episode(policy, [ACTIONS[i % 2], "submit\n"], r, task=f"t{g}", group=g))
    eps[-1].infra_error = "sandbox died"
    return eps
