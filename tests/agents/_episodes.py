"""Synthetic exact-token episodes and a shared tiny policy for the trainer tests (no env)."""

from __future__ import annotations

from pathlib import Path

import torch

from repogym.agents.chat import ChatFormat
from repogym.agents.episode import Episode, Turn
from repogym.agents.policy import Policy, load_policy

ACTIONS = ["fix 1\n", "fix 2\n", "submit\n"]


def tiny_policy(path: Path, value_head: bool = False, seed: int = 0) -> Policy:
    """The saved tiny model on the CPU."""
    torch.manual_seed(seed)
    return load_policy(path, value_head=value_head, device="cpu")


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
    graded: bool | None = None,
) -> Episode:
    """An episode whose completions are ``actions`` (prompt ``task <task>``, observations
    ``obs`` after each action, behaviour logprobs 0)."""
    ep = Episode(
        task=task,
        prompt=f"task {task}\n",
        reward=reward,
        group=group,
        terminated=terminated,
        truncated=truncated,
        infra_error=infra_error,
        graded=terminated if graded is None else graded,
    )
    prompt = ChatFormat(policy.tokenizer).start(ep.prompt).pending  # as the rollouts render it
    for text in actions:
        ids = policy.encode(text)
        ep.turns.append(
            Turn(
                prompt,
                ids,
                [0.0] * len(ids),
                [0] * len(prompt) if not ep.turns else [1] * len(prompt),
            )
        )
        prompt = policy.encode(obs)
    ep.final_ids, ep.final_obs_mask = prompt, [1] * len(prompt)
    return ep


def group_batch_episodes(policy: Policy) -> list[Episode]:
    """Two groups of four with mixed rewards (one with an infra error)."""
    eps = []
    for g, rewards in enumerate([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]]):
        for i, r in enumerate(rewards):
            eps.append(episode(policy, [ACTIONS[i % 2], "submit\n"], r, task=f"t{g}", group=g))
    eps[-1].infra_error = "sandbox died"
    return eps


def collate_eps(policy: Policy, episodes: list[Episode]):
    """Collate with the policy's pad id."""
    from repogym.agents.episode import collate

    return collate(episodes, policy.tokenizer.pad_token_id)
