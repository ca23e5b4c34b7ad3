"""Which tasks a training step runs, and the seed of each episode's sampling stream.

- :func:`step_tasks`: with ``tasks_per_step`` unset every step runs every task (one group
  each); with ``tasks_per_step = N`` step ``s`` takes the next ``N`` tasks of an endless
  stream of seeded shuffles of the task list, so every task comes once per pass and a
  1000-task set costs ``N x G`` episodes a step, not ``1000 x G``. A pure function of
  (tasks, N, step, seed): a resumed run, every data-parallel rank and every asynchronous
  worker agree on it without talking.
- :class:`AdaptiveSampler` (``--set sampler=adaptive``): a per-task Beta posterior of the
  success rate, with a forgetting factor, draws the step's tasks in proportion to the
  probability that a group of ``G`` samples holds both a success and a failure
  (:func:`repogym.agents.losses.beta_mixed_prob`), mixed with a uniform share: groups that
  GRPO can learn from, instead of always-solved or never-solved tasks. Deterministic given
  its state, the step and the seed, so every data-parallel rank draws the same tasks.
- :func:`episode_seed`: one integer per (step seed, round, group, sample), so an
  episode's tokens do not depend on which batch or process samples it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from repogym.agents.losses import beta_mixed_prob

__all__ = ["AdaptiveSampler", "episode_seed", "step_tasks"]


def step_tasks(tasks: Sequence[str], per_step: int | None, step: int, seed: int) -> list[str]:
    """The tasks of training step ``step`` (1-based), one group each.

    Args:
        tasks: Every task of the run.
        per_step: Tasks per step (None or 0: all of them, in order).
        step: The training step.
        seed: The run's seed (orders the passes).

    Raises:
        ValueError: For no tasks, or ``per_step < 0``.
    """
    if not tasks:
        raise ValueError("no tasks. Fix: --task ID (repeatable) or --tasks DIR")
    if per_step is not None and per_step < 0:
        raise ValueError(f"tasks_per_step must be >= 0; got {per_step}")
    if not per_step:
        return list(tasks)
    n = len(tasks)
    out = []
    for pos in range((step - 1) * per_step, step * per_step):
        epoch, i = divmod(pos, n)
        order = np.random.default_rng([seed, epoch]).permutation(n)
        out.append(tasks[int(order[i])])
    return out


def episode_seed(seed: int, round_: int, group: int, sample: int) -> int:
    """A 63-bit seed for one episode's sampling stream (``seed``: the step's collection seed;
    ``round_``: the dynamic-sampling round; ``group``: the group's index in the step)."""
    key = f"{seed}:{round_}:{group}:{sample}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


class AdaptiveSampler:
    """Draws tasks whose groups are likely to hold both outcomes (see the module docstring).

    Each task ``t`` has a posterior ``Beta(a_t, b_t)`` of its success rate. After each step,
    every task's counts decay toward the prior, ``a <- a0 + forget * (a - a0)`` (likewise
    ``b``), and the step's outcomes are added (a reward ``r``, clamped to ``[0, 1]``, adds
    ``r`` to ``a`` and ``1 - r`` to ``b``), so a task's estimate follows a policy that
    improves, and a task not drawn for a while drifts back to the prior and is tried again.
    A task is drawn with probability ``(1 - explore) * m_t / sum(m) + explore / n`` where
    ``m_t = P(a group of G holds a success and a failure)`` under its posterior; the step's
    tasks are drawn with replacement.

    Args:
        tasks: Every task of the run.
        group_size: Samples per group (G).
        forget: The forgetting factor in ``[0, 1]`` (1: never forget).
        explore: The uniform share of the draw in ``[0, 1]``.
        prior: ``(a0, b0)``.

    Raises:
        ValueError: For no tasks or a setting out of range.
    """

    def __init__(
        self,
        tasks: Sequence[str],
        group_size: int,
        *,
        forget: float = 0.95,
        explore: float = 0.05,
        prior: tuple[float, float] = (1.0, 1.0),
    ) -> None:
        if not tasks:
            raise ValueError("no tasks. Fix: --task ID (repeatable) or --tasks DIR")
        if not 0.0 <= forget <= 1.0 or not 0.0 <= explore <= 1.0:
            raise ValueError(
                f"sampler_forget and sampler_explore must lie in [0, 1]; got {forget} and {explore}"
            )
        if min(prior) <= 0:
            raise ValueError(f"the Beta prior must be positive; got {prior}")
        self.tasks = list(dict.fromkeys(tasks))
        self.group_size = group_size
        self.forget, self.explore, self.prior = forget, explore, prior
        self.alpha = {t: prior[0] for t in self.tasks}
        self.beta = {t: prior[1] for t in self.tasks}

    def mean(self, task: str) -> float:
        """The posterior mean success rate of ``task``."""
        return self.alpha[task] / (self.alpha[task] + self.beta[task])

    def signal(self, task: str) -> float:
        """``P(a group of G holds both outcomes)`` under ``task``'s posterior."""
        return beta_mixed_prob(self.alpha[task], self.beta[task], self.group_size)

    def probabilities(self) -> np.ndarray:
        """Each task's probability of being drawn (in :attr:`tasks` order)."""
        n = len(self.tasks)
        mixed = np.array([self.signal(t) for t in self.tasks])
        share = mixed / mixed.sum() if mixed.sum() > 0 else np.full(n, 1.0 / n)
        return (1.0 - self.explore) * share + self.explore / n

    def draw(self, count: int, step: int, seed: int) -> list[str]:
        """``count`` tasks for training step ``step`` (with replacement)."""
        rng = np.random.default_rng([seed, step, 0xADA])
        picks = rng.choice(len(self.tasks), size=count, replace=True, p=self.probabilities())
        return [self.tasks[int(i)] for i in picks]

    def update(self, outcomes: Mapping[str, Sequence[float]]) -> None:
        """Forget a little everywhere, then add each task's rewards of the step."""
        a0, b0 = self.prior
        for t in self.tasks:
            self.alpha[t] = a0 + self.forget * (self.alpha[t] - a0)
            self.beta[t] = b0 + self.forget * (self.beta[t] - b0)
        for t, rewards in outcomes.items():
            if t not in self.alpha:
                continue
            wins = sum(min(max(float(r), 0.0), 1.0) for r in rewards)
            self.alpha[t] += wins
            self.beta[t] += len(rewards) - wins

    def state(self) -> dict[str, Any]:
        """The posterior counts (for checkpoints)."""
        return {"alpha": dict(self.alpha), "beta": dict(self.beta)}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state` (tasks not in it keep the prior)."""
        for t in self.tasks:
            self.alpha[t] = float(state["alpha"].get(t, self.prior[0]))
            self.beta[t] = float(state["beta"].get(t, self.prior[1]))


def simulate_zero_std(
    success: Mapping[str, float],
    *,
    sampler: str,
    steps: int,
    per_step: int,
    group_size: int,
    seed: int = 0,
    forget: float = 0.95,
    explore: float = 0.05,
) -> dict[str, Any]:
    """The share of zero-variance groups when outcomes are scripted coin flips.

    Each task's episodes succeed with probability ``success[task]``; each step draws
    ``per_step`` tasks (``uniform``: :func:`step_tasks`; ``adaptive``:
    :class:`AdaptiveSampler`, updated with the step's outcomes) and ``group_size`` outcomes
    per group. A measurement of the samplers without a model or an environment.

    Returns:
        ``frac_zero_std_groups`` over every group, ``per_step`` (each step's share) and
        ``draws`` (how often each task was drawn).
    """
    if sampler not in ("uniform", "adaptive"):
        raise ValueError(f"sampler must be uniform or adaptive; got {sampler!r}")
    tasks = list(success)
    rng = np.random.default_rng([seed, 0x51])
    adaptive = AdaptiveSampler(tasks, group_size, forget=forget, explore=explore)
    draws = dict.fromkeys(tasks, 0)
    shares = []
    for step in range(1, steps + 1):
        if sampler == "adaptive":
            picked = adaptive.draw(per_step, step, seed)
        else:
            picked = step_tasks(tasks, per_step, step, seed)
        outcomes: dict[str, list[float]] = {}
        zero = 0
        for t in picked:
            draws[t] += 1
            group = (rng.random(group_size) < success[t]).astype(float).tolist()
            zero += len(set(group)) <= 1
            outcomes.setdefault(t, []).extend(group)
        adaptive.update(outcomes)
        shares.append(zero / per_step)
    return {"frac_zero_std_groups": float(np.mean(shares)), "per_step": shares, "draws": draws}
