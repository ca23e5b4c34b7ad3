"""The pure maths of the reference trainers: advantages, policy losses, KL, corrections.

Layer 0 of :mod:`repogym.agents`: stateless torch functions on tensors, importing nothing
else from repogym, with closed-form tests in ``tests/agents/test_losses.py`` that also compare
against verl's ``core_algos`` and TRL's ``GRPOTrainer`` loss. Shapes: ``B`` sequences
(batch), ``T`` time steps or tokens. Import the names from here; by family they live in:

- :mod:`~repogym.agents.losses.aggregation`: :func:`aggregate` (verl's four ways of reducing
  a ``[B, T]`` loss matrix to a scalar, with global normalisers so gradient accumulation over
  micro-batches equals one large batch), :func:`value_loss` (PPO's clipped critic loss),
  :func:`echo_loss` (next-token loss on observation tokens), :func:`check_choice`;
- :mod:`~repogym.agents.losses.advantages`: :func:`gae`, :func:`group_advantages` (GRPO,
  Dr. GRPO, RLOO baselines) and :func:`opd_advantages` (on-policy distillation);
- :mod:`~repogym.agents.losses.surrogate`: :func:`policy_loss`, the clipped surrogates (PPO
  with DAPO clip-higher and dual clip, GSPO's sequence ratio, CISPO's clipped stop-gradient
  weight) and their metrics;
- :mod:`~repogym.agents.losses.divergence`: :func:`kl` (Schulman's k1/k2/k3 estimators and
  verl's ``low_var_kl``), :func:`kl_loss` and :func:`kl_reward_penalty`, with what each one's
  *gradient* is (see :func:`kl_loss`), :func:`full_kl` (distillation) and
  :func:`entropy_from_logits`;
- :mod:`~repogym.agents.losses.critic`: the yes/no token critic (:func:`yes_no_value`,
  :func:`token_critic_loss`), :func:`wilson_interval` (a success fraction's uncertainty) and
  :func:`beta_mixed_prob` (the chance a group holds both outcomes);
- :mod:`~repogym.agents.losses.offpolicy`: the asynchronous learner's corrections,
  :func:`token_is_weights`, :func:`sequence_ratio`, :func:`behaviour_weights`,
  :func:`async_policy_loss`, :func:`weight_metrics`; one meaning per :data:`Correction` name.
"""

from __future__ import annotations

from repogym.agents.losses.advantages import GroupMode, gae, group_advantages, opd_advantages
from repogym.agents.losses.aggregation import (
    LOG_RATIO_CLAMP,
    AggMode,
    aggregate,
    check_choice,
    echo_loss,
    value_loss,
)
from repogym.agents.losses.critic import (
    beta_mixed_prob,
    token_critic_loss,
    wilson_interval,
    yes_no_value,
)
from repogym.agents.losses.divergence import (
    KLKind,
    entropy_from_logits,
    full_kl,
    kl,
    kl_loss,
    kl_reward_penalty,
)
from repogym.agents.losses.offpolicy import (
    Correction,
    async_policy_loss,
    behaviour_weights,
    sequence_ratio,
    token_is_weights,
    weight_metrics,
)
from repogym.agents.losses.surrogate import PolicyLossKind, policy_loss

__all__ = [
    "LOG_RATIO_CLAMP",
    "AggMode",
    "Correction",
    "GroupMode",
    "KLKind",
    "PolicyLossKind",
    "aggregate",
    "async_policy_loss",
    "behaviour_weights",
    "beta_mixed_prob",
    "check_choice",
    "echo_loss",
    "entropy_from_logits",
    "full_kl",
    "gae",
    "group_advantages",
    "kl",
    "kl_loss",
    "kl_reward_penalty",
    "opd_advantages",
    "policy_loss",
    "sequence_ratio",
    "token_critic_loss",
    "token_is_weights",
    "value_loss",
    "weight_metrics",
    "wilson_interval",
    "yes_no_value",
]
