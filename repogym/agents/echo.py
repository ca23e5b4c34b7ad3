"""Echo: an auxiliary loss that makes the policy predict the environment's observations.

Action-only losses throw away the signal in what the environment says back: test output,
tracebacks, file contents. Echo adds next-token cross-entropy on the observation tokens
(``Batch.obs_mask``: tool outputs as the policy saw them; not the prompt scaffold, not the
agent's actions, and nothing from episodes with an infrastructure error), normalised by the
number of observation tokens in the optimiser batch, with weight ``echo_lambda``:

``loss = loss_GRPO + echo_lambda * (-sum_obs log pi(o_t | context) / #obs)``

It is reported as ``loss/echo``. With ``echo_lambda = 0`` the term is logged but not added,
so the update is GRPO's, bit for bit.

Run it: ``repogym train --algo echo --model tiny --steps 20 --out runs/echo
--set echo_lambda=0.1`` (any GRPO field works too, e.g. ``--set variant=dapo``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import torch

from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.policy import Batch, Policy, Scores
from repogym.agents.shaping import ShapingConfig, shaped_collect

__all__ = ["ECHO_NORM_KEY", "EchoConfig", "EchoTrainer", "echo_loss", "echo_term", "with_echo_norm"]

ECHO_NORM_KEY = "echo_num_tokens"
"""``Batch.extras`` key holding the optimiser batch's observation-token count (per row), so
that micro-batch losses sum to the batch's token mean."""


def echo_loss(
    logp: torch.Tensor, obs_mask: torch.Tensor, num_tokens: float | torch.Tensor | None = None
) -> torch.Tensor:
    """Mean negative log-likelihood of the observation tokens.

    Args:
        logp: ``[B, T]`` log-probabilities of each token given its prefix (aligned with the
            input: ``logp[b, t] = log pi(x_t | x_<t)``).
        obs_mask: ``[B, T]``, 1 on observation tokens.
        num_tokens: Normaliser (default: this mask's count), e.g. the whole batch's count when
            accumulating micro-batches.

    Returns:
        A scalar; 0 when there is no observation token.
    """
    mask = obs_mask.to(logp.dtype)
    count = mask.sum() if num_tokens is None else num_tokens
    count = torch.as_tensor(count, dtype=logp.dtype, device=logp.device).clamp(min=1.0)
    return -(logp * mask).sum() / count


def echo_term(policy: Policy, mb: Batch, scores: Scores) -> torch.Tensor:
    """The Echo loss as a trainer extra term (:data:`repogym.agents.common.ExtraTerm`).

    Uses ``mb.extras[ECHO_NORM_KEY]`` (set by :func:`with_echo_norm`) as the normaliser when
    present, so that the micro-batch terms add up to the batch loss.
    """
    norm = mb.extras.get(ECHO_NORM_KEY)
    count = norm[0] if norm is not None and len(norm) else None
    return echo_loss(scores.logp, mb.obs_mask, count)


def with_echo_norm(batch: Batch) -> Batch:
    """Store the batch's observation-token count in ``batch.extras`` (returns the batch)."""
    count = batch.obs_mask.sum().to(torch.float32)
    batch.extras[ECHO_NORM_KEY] = count.expand(len(batch)).clone()
    return batch


@dataclass
class EchoConfig(GRPOConfig):
    """GRPO (any variant) plus the Echo observation loss.

    Attributes:
        echo_lambda: Weight of the observation loss (0 reproduces GRPO exactly).
        shaping: Reward shaping (:class:`repogym.agents.shaping.ShapingConfig` or its dict);
            None optimises the environment's reward.
    """

    echo_lambda: float = 0.1
    shaping: ShapingConfig | dict | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.shaping = ShapingConfig.coerce(self.shaping)
        if self.echo_lambda < 0:
            raise ValueError(f"echo_lambda must be >= 0; got {self.echo_lambda}")


class EchoTrainer(GRPOTrainer):
    """:class:`repogym.agents.grpo.GRPOTrainer` with the Echo term; see the module docstring.

    Args:
        config: :class:`EchoConfig`.
        **kwargs: ``policy``, ``interface``, ``pool``, ``extra_terms``.
    """

    config: EchoConfig

    def __init__(self, config: EchoConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.extra_terms["echo"] = (config.echo_lambda, echo_term)

    def collect(self, step: int) -> tuple[Batch | None, dict[str, float]]:
        """GRPO's collection, with shaped rewards if ``config.shaping`` is set."""
        if self.config.shaping is None:
            return super().collect(step)
        return shaped_collect(self, step, self.config.shaping)

    def update(self, batch: Batch) -> dict[str, float]:
        """GRPO's update with the batch-level observation-token normaliser in place."""
        return super().update(with_echo_norm(batch))


def main(args: argparse.Namespace) -> int:
    """``repogym train --algo echo``."""
    from repogym.agents.train_cli import train_from_args

    return train_from_args("echo", EchoConfig, EchoTrainer, args)
