"""Simulated rollout workers for the asynchronous learner's benchmarks and tests.

Each group's *duration* is simulated (a log-normal sleep); its episodes are one-turn action
strings with random 0/1 rewards whose behaviour logprobs are real: the worker scores the
tokens with its own, possibly stale, copy of the policy. No environment runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from repogym.agents.episode import Episode, Turn, collate
from repogym.agents.policy import Policy, load_policy

__all__ = ["SimulatedWorkerFactory"]


@dataclass
class _SimulatedWorker:
    policy: Policy
    factory: SimulatedWorkerFactory
    rng: np.random.Generator

    def run(self, ticket: int) -> tuple[list[Episode], dict[str, float]]:
        f = self.factory
        time.sleep(f.median_s * float(self.rng.lognormal(0.0, f.sigma)))
        episodes = []
        prompt = self.policy.encode(f.prompt)
        for _ in range(f.group_size):
            ids = self.policy.encode(f.actions[int(self.rng.integers(len(f.actions)))])
            ep = Episode(
                task="sim",
                prompt=f.prompt,
                reward=float(self.rng.integers(2)),
                terminated=True,
                graded=True,
            )
            ep.turns.append(Turn(prompt, ids, [0.0] * len(ids)))
            ep.final_ids = self.policy.encode(f.observation)
            episodes.append(ep)
        _score_behaviour(self.policy, episodes)
        reward = sum(e.reward for e in episodes) / len(episodes)
        return episodes, {"reward/mean": reward, "resolve_rate": reward}


@torch.no_grad()
def _score_behaviour(policy: Policy, episodes: list[Episode]) -> None:
    """Fill the episodes' logprobs with the policy's (the behaviour logprobs)."""
    batch = collate(episodes, policy.tokenizer.pad_token_id).to(policy.device)
    logp = policy.score(batch.input_ids, batch.attention_mask, batch.action_mask).logp.cpu()
    for b, ep in enumerate(episodes):
        pos = torch.nonzero(batch.action_mask[b].cpu()).squeeze(-1).tolist()
        ep.turns[0].logprobs = [float(logp[b, p]) for p in pos]


@dataclass
class SimulatedWorkerFactory:
    """Workers whose episode *durations* are simulated (benchmarks and tests).

    Each group sleeps a log-normal time (``median_s * exp(N(0, sigma))``), then returns
    ``group_size`` one-turn episodes with a random action string from ``actions`` and a random
    0/1 reward. The behaviour logprobs are real: the worker scores the tokens with its own
    (possibly stale) copy of the policy. No environment runs.

    Attributes:
        model: Folder of the model the workers load when no template policy is given.
        median_s: Median group duration in seconds.
        sigma: Log-normal shape (0 gives a constant duration).
        group_size: Episodes per group.
        actions: Candidate action texts.
        prompt: The prompt text.
        observation: The observation after the action.
        seed: Seeds the durations, actions and rewards (offset by the worker id).
    """

    model: str = ""
    median_s: float = 0.2
    sigma: float = 0.8
    group_size: int = 4
    actions: tuple[str, ...] = ("fix 1\n", "fix 2\n", "fix 3\n", "submit\n")
    prompt: str = "task sim\n"
    observation: str = "Wrote 10 characters to a.py.\n"
    seed: int = 0

    def __call__(self, worker_id: int, template: Policy | None = None) -> _SimulatedWorker:
        policy = template or load_policy(self.model, device="cpu").requires_grad_(False)
        policy.value_head = None
        return _SimulatedWorker(policy.eval(), self, np.random.default_rng(self.seed + worker_id))
