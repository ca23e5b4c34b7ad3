"""The yes/no token critic: a value from the policy's own LM head, no new parameters.

The lecture's "a yes/no token head can also estimate success probability": the value of a
state (the context up to a turn boundary) is the probability the policy gives to " yes"
against " no", normalised over the two tokens, right after a fixed question appended to
that context. It is trained with a binary cross-entropy on the episode's outcome (or on
Monte-Carlo values as soft targets; :func:`repogym.agents.losses.token_critic_loss`) and is
used by PPO's GAE like a value head (``repogym train --algo ppo --set critic=token``).

Cost: each state is its own forward pass (the context prefix plus the question), so an
episode of ``K`` turns costs ``K + 1`` prefixes; the question is never part of the
training sequence the policy sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from repogym.agents.batch import Batch
from repogym.agents.policy import Policy

__all__ = ["DEFAULT_QUESTION", "TokenCritic", "YesNoLogits"]

DEFAULT_QUESTION = "\nQuestion: will this attempt pass the hidden tests? Answer yes or no. Answer:"
"""The question appended to a state before reading the yes/no logits."""


@dataclass
class YesNoLogits:
    """The yes/no logits of each turn's state and of the final state.

    Attributes:
        yes: ``[B, K]`` logits of "yes" at the states before each completion (0 on padding).
        no: ``[B, K]`` logits of "no".
        final_yes: ``[B]`` the logit of "yes" after the last completion.
        final_no: ``[B]`` the logit of "no" there.
    """

    yes: torch.Tensor
    no: torch.Tensor
    final_yes: torch.Tensor
    final_no: torch.Tensor


class TokenCritic:
    """Reads ``p(yes) / (p(yes) + p(no))`` after a fixed question from the policy's LM head.

    Args:
        policy: The policy whose tokenizer encodes the question and the answers.
        question: Text appended to the state.
        yes: The "yes" answer (its first token is read).
        no: The "no" answer.

    Raises:
        ValueError: If the two answers start with the same token, or the question is empty.
    """

    def __init__(
        self, policy: Policy, question: str = DEFAULT_QUESTION, yes: str = " yes", no: str = " no"
    ) -> None:
        self.question_ids = policy.encode(question)
        yes_ids, no_ids = policy.encode(yes), policy.encode(no)
        if not self.question_ids or not yes_ids or not no_ids:
            raise ValueError("the token critic's question and answers must be non-empty text")
        if yes_ids[0] == no_ids[0]:
            raise ValueError(
                f"{yes!r} and {no!r} start with the same token; the token critic "
                "needs two different answer tokens. Fix: other answer strings"
            )
        self.yes_id, self.no_id = yes_ids[0], no_ids[0]

    def state_logits(self, policy: Policy, batch: Batch) -> YesNoLogits:
        """The yes/no logits at every turn's state and at the final state of ``batch``.

        Each state ``s`` (the tokens up to ``state_pos``, or up to ``final_pos``) is scored as
        ``s + question`` in one batched forward pass (with gradient when enabled).
        """
        ids, mask = batch.input_ids, batch.attention_mask
        rows: list[list[int]] = []
        where: list[tuple[int, int]] = []  # (episode, turn) with turn K for the final state
        k_max = batch.state_pos.shape[1]
        for b in range(len(batch)):
            for k in range(int(batch.n_turns[b])):
                rows.append(self._prompt(ids[b], int(batch.state_pos[b, k])))
                where.append((b, k))
            end = int(batch.final_pos[b]) if int(mask[b].sum()) else 0
            rows.append(self._prompt(ids[b], end))
            where.append((b, k_max))
        pair = self.logits(policy, rows)
        table = pair.new_zeros(len(batch), k_max + 1, 2)
        index = torch.tensor(where, device=pair.device)
        table = table.index_put((index[:, 0], index[:, 1]), pair)
        return YesNoLogits(
            table[:, :k_max, 0], table[:, :k_max, 1], table[:, k_max, 0], table[:, k_max, 1]
        )

    def _prompt(self, ids: torch.Tensor, end: int) -> list[int]:
        return ids[: end + 1].tolist() + self.question_ids

    def logits(self, policy: Policy, rows: list[list[int]]) -> torch.Tensor:
        """``[N, 2]`` (yes, no) logits after each token list (right-padded, one pass)."""
        width = max(len(r) for r in rows)
        pad = policy.tokenizer.pad_token_id
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=policy.device)
        att = torch.tensor(
            [[1] * len(r) + [0] * (width - len(r)) for r in rows], device=policy.device
        )
        hidden = policy.hidden_states(ids, att)
        last = torch.tensor([len(r) - 1 for r in rows], device=policy.device)
        h = hidden[torch.arange(len(rows), device=policy.device), last]
        weight, bias = policy.head()
        pick = torch.tensor([self.yes_id, self.no_id], device=policy.device)
        return F.linear(
            h.to(weight.dtype), weight[pick], None if bias is None else bias[pick]
        ).float()
