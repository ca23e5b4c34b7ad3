"""Echo: an auxiliary loss that makes the policy predict the environment's observations.

Action-only losses throw away the signal in what the environment says back: test output,
tracebacks, file contents. Echo is an *extra term* passed to any trainer
(:class:`repogym.agents.trainer.ExtraTerm`): next-token cross-entropy on the observation
tokens (``Batch.obs_mask``: tool outputs as the policy saw them; not the chat scaffold, not
the actions, nothing from episodes with an infrastructure error), normalised by the number of
observation tokens in the optimiser batch, with weight ``echo_lambda``:

``loss = loss_GRPO + echo_lambda * (-sum_obs log pi(o_t | context) / #obs)``

reported as ``loss/echo``. With ``echo_lambda = 0`` the term is logged but not added, so the
update is GRPO's bit for bit.

Run it: ``repogym train --algo echo --model PATH --steps 20 --out runs/echo
--set echo_lambda=0.1`` (any GRPO field works too, e.g. ``--set variant=dapo``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repogym.agents.config import ExtraTerm
from repogym.agents.grpo import GRPOConfig, GRPOTrainer
from repogym.agents.losses import echo_loss

__all__ = ["EchoConfig", "echo_term", "echo_trainer"]


def echo_term(weight: float) -> ExtraTerm:
    """The Echo loss as an extra term of weight ``weight``."""
    return ExtraTerm(
        weight,
        lambda scores, mb, norm: echo_loss(scores.logp, mb.obs_mask, norm.num_obs_tokens),
        positions="obs",
    )


@dataclass
class EchoConfig(GRPOConfig):
    """GRPO (any variant) plus the Echo observation loss.

    Attributes:
        echo_lambda: Weight of the observation loss (0 reproduces GRPO exactly).
    """

    echo_lambda: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.echo_lambda < 0:
            raise ValueError(f"echo_lambda must be >= 0; got {self.echo_lambda}")


def echo_trainer(config: EchoConfig, **kwargs: Any) -> GRPOTrainer:
    """A GRPO trainer with the Echo term added to its extra terms."""
    terms = {**kwargs.pop("extra_terms", {}), "echo": echo_term(config.echo_lambda)}
    return GRPOTrainer(config, extra_terms=terms, **kwargs)
