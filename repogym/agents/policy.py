"""An LM policy for the reference trainers: sampling with logprobs, scoring, episode batches.

- :class:`Policy` wraps any Hugging Face causal LM (a local path, or ``"tiny"`` from
  :mod:`repogym.agents.tiny`) and its tokenizer: :meth:`Policy.generate` samples with the
  per-token log-probabilities of the sampled tokens (the behaviour policy), and
  :meth:`Policy.score` returns the log-probabilities, entropies and (with a value head) the
  values of given sequences.
- :class:`Episode` is one multi-turn episode as the policy saw it; :func:`tokenize_episode`
  turns it into one token sequence with prompt, action and observation masks, and
  :func:`collate` pads tokenised episodes into a :class:`Batch`, the one input of every
  trainer (PPO, GRPO and its variants; later distillation and the Echo observation loss).

Alignment convention: every per-token tensor is ``[B, T]`` and aligned with ``input_ids``:
``logp[b, t] = log pi(input_ids[b, t] | input_ids[b, :t])`` (0 at ``t = 0``), so the action
mask selects the log-probabilities of the action tokens directly. ``values[b, t]`` is the value
of the state that ends with token ``t``.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

__all__ = [
    "Batch",
    "Episode",
    "Generation",
    "Policy",
    "Scores",
    "TokenizedEpisode",
    "Turn",
    "collate",
    "load_policy",
    "resolve_device",
    "tokenize_episode",
]


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"`` gives CUDA when available, else the CPU; any other string is used as is."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


# --------------------------------------------------------------------------------------------
# Sampling and scoring
# --------------------------------------------------------------------------------------------


@dataclass
class Generation:
    """One sampled continuation.

    Attributes:
        token_ids: The sampled tokens, the stop token included.
        logprobs: ``log pi(token)`` of each sampled token under the sampling distribution.
        text: The decoded tokens.
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str


@dataclass
class Scores:
    """Per-token outputs of :meth:`Policy.score`, each ``[B, T]`` aligned with the input."""

    logp: torch.Tensor
    entropy: torch.Tensor | None = None
    values: torch.Tensor | None = None


class Policy(nn.Module):
    """A causal LM with its tokenizer, an optional scalar value head, and a temperature.

    Args:
        model: The causal LM.
        tokenizer: Its tokenizer (needs a pad token; the eos token ends generation).
        value_head: Add a ``Linear(hidden, 1)`` value head on the last hidden state (PPO).
        temperature: Logits are divided by it when sampling and when scoring, so the
            behaviour log-probabilities and the trained ones are of the same distribution.
        stop: Generation also ends after a token whose text contains one of these strings.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: Any,
        *,
        value_head: bool = False,
        temperature: float = 1.0,
        stop: Sequence[str] = (),
    ) -> None:
        super().__init__()
        if tokenizer.pad_token_id is None:
            raise ValueError(
                "the tokenizer has no pad token; set one (e.g. tokenizer.pad_token = "
                "tokenizer.eos_token) before building a Policy"
            )
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0; got {temperature}")
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        hidden = model.config.get_text_config().hidden_size
        self.value_head = nn.Linear(hidden, 1) if value_head else None
        if self.value_head is not None:
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)
        self._stop_ids = self._token_ids_containing(stop)
        # transformers 5.x renamed ``past_key_values`` to ``cache``; accept both.
        params = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        keep = [k for k in ("logits_to_keep", "num_logits_to_keep") if k in params]
        self._keep_kwarg = keep[0] if keep else None

    @property
    def device(self) -> torch.device:
        """The device of the model's parameters."""
        return next(self.model.parameters()).device

    @property
    def max_len(self) -> int:
        """The longest sequence the model takes (``max_position_embeddings``)."""
        return int(getattr(self.model.config.get_text_config(), "max_position_embeddings", 2048))

    def _token_ids_containing(self, stop: Sequence[str]) -> torch.Tensor:
        """Ids of every vocabulary token whose decoded text contains a stop string."""
        ids = {self.tokenizer.eos_token_id} if self.tokenizer.eos_token_id is not None else set()
        if stop:
            for i in range(len(self.tokenizer)):
                text = self.tokenizer.decode([i])
                if any(s in text for s in stop):
                    ids.add(i)
        return torch.tensor(sorted(ids), dtype=torch.long)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens added."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    @torch.no_grad()
    def generate(
        self, contexts: Sequence[Sequence[int]], *, max_new_tokens: int = 32, greedy: bool = False
    ) -> list[Generation]:
        """Sample a continuation of each context, with per-token behaviour logprobs.

        A continuation ends at the eos token, at a token holding a stop string, or after
        ``max_new_tokens``. The batch runs with left padding and a KV cache.

        Args:
            contexts: Token ids of each context (no padding).
            max_new_tokens: Upper bound on the sampled tokens.
            greedy: Take the most likely token instead of sampling (evaluation).

        Returns:
            One :class:`Generation` per context.
        """
        ids, mask = _left_pad(contexts, self.tokenizer.pad_token_id, self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        stop_ids = self._stop_ids.to(self.device)
        done = torch.zeros(len(contexts), dtype=torch.bool, device=self.device)
        tokens: list[torch.Tensor] = []
        logps: list[torch.Tensor] = []
        past = None
        step_ids = ids
        for _ in range(max_new_tokens):
            out = self.model(
                input_ids=step_ids,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                **{self._cache_kwarg: past},
            )
            past = getattr(out, self._cache_kwarg)
            logprobs = torch.log_softmax(out.logits[:, -1].float() / self.temperature, dim=-1)
            if greedy:
                token = logprobs.argmax(dim=-1)
            else:
                token = torch.multinomial(logprobs.exp(), 1).squeeze(-1)
            token = torch.where(done, self.tokenizer.pad_token_id, token)
            tokens.append(token)
            logps.append(logprobs.gather(-1, token[:, None]).squeeze(-1))
            done |= torch.isin(token, stop_ids)
            if bool(done.all()):
                break
            step_ids = token[:, None]
            mask = torch.cat([mask, torch.ones_like(step_ids)], dim=-1)
            positions = positions[:, -1:] + 1
        return self._to_generations(torch.stack(tokens, 1), torch.stack(logps, 1))

    def _to_generations(self, tokens: torch.Tensor, logps: torch.Tensor) -> list[Generation]:
        """Cut each row after its first stop token and decode it."""
        stop = set(self._stop_ids.tolist())
        result = []
        for row, lp in zip(tokens.tolist(), logps.tolist(), strict=True):
            n = next((i + 1 for i, t in enumerate(row) if t in stop), len(row))
            result.append(Generation(row[:n], lp[:n], self.tokenizer.decode(row[:n])))
        return result

    def score(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        *,
        with_entropy: bool = False,
        with_values: bool = False,
        keep_from: int = 1,
        entropy_grad: bool = True,
    ) -> Scores:
        """Log-probabilities (and entropies, values) of right-padded sequences.

        Args:
            input_ids: ``[B, T]`` token ids (right padding).
            attention_mask: ``[B, T]``, 1 on real tokens.
            with_entropy: Also return the entropy of the next-token distribution.
            with_values: Also return the value head's output (needs ``value_head=True``).
            keep_from: First position whose logprob is needed (e.g. the first action token);
                logits of earlier positions are not computed (their outputs are 0).
            entropy_grad: Keep the entropy's graph (for an entropy bonus); False computes
                it as a detached metric, which saves a backward pass over the vocabulary.

        Returns:
            :class:`Scores` with ``[B, T]`` tensors aligned with ``input_ids``.

        Raises:
            ValueError: If values are asked for without a value head.
        """
        if with_values and self.value_head is None:
            raise ValueError("with_values=True needs a value head: build Policy(value_head=True)")
        first = min(max(keep_from, 1), input_ids.shape[1])
        extra = {}
        if self._keep_kwarg is not None:
            extra[self._keep_kwarg] = input_ids.shape[1] - first + 1
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_hidden_states=with_values,
            **extra,
        )
        logits = out.logits[:, -(input_ids.shape[1] - first + 1) : -1].float() / self.temperature
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, input_ids[:, first:, None]).squeeze(-1)
        scores = Scores(logp=_pad_left(logp, first))
        if with_entropy:
            with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
                scores.entropy = _pad_left(-(logp_all.exp() * logp_all).sum(-1), first)
        if with_values:
            hidden = out.hidden_states[-1]
            scores.values = self.value_head(hidden.to(self.value_head.weight.dtype)).squeeze(-1)
        return scores

    def frozen_copy(self) -> Policy:
        """A deep copy with gradients off (a reference policy for the KL term)."""
        ref = copy.deepcopy(self)
        ref.requires_grad_(False)
        return ref.eval()


def _left_pad(
    contexts: Sequence[Sequence[int]], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token lists into ``(ids, mask)`` tensors."""
    if not contexts or any(len(c) == 0 for c in contexts):
        raise ValueError("generate() needs at least one non-empty context")
    width = max(len(c) for c in contexts)
    ids = torch.full((len(contexts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(contexts), width), dtype=torch.long)
    for i, c in enumerate(contexts):
        ids[i, width - len(c) :] = torch.tensor(list(c), dtype=torch.long)
        mask[i, width - len(c) :] = 1
    return ids.to(device), mask.to(device)


def _pad_left(x: torch.Tensor, n: int) -> torch.Tensor:
    """Prepend ``n`` zero columns so that ``x[:, t]`` refers to token ``t``."""
    return torch.cat([x.new_zeros(x.shape[0], n), x], dim=1)


def load_policy(
    model: str | Path,
    *,
    value_head: bool = False,
    device: str = "auto",
    dtype: torch.dtype | None = None,
    temperature: float = 1.0,
    stop: Sequence[str] = (),
    tiny_corpus: Sequence[str] = (),
    seed: int = 0,
    gradient_checkpointing: bool = False,
) -> Policy:
    """Load a policy from a local model folder, or build the tiny model with ``"tiny"``.

    Args:
        model: ``"tiny"`` or a folder with a Hugging Face causal LM and tokenizer (offline).
        value_head: Add a value head (PPO).
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ...
        dtype: Weights' dtype (default float32; mixed precision is done by autocast).
        temperature: See :class:`Policy`.
        stop: See :class:`Policy`.
        tiny_corpus: Strings the tiny tokenizer should encode compactly (action strings).
        seed: Seed of the tiny model's initialisation.
        gradient_checkpointing: Trade compute for memory on large models.

    Returns:
        The policy on ``device``, in train mode.

    Raises:
        FileNotFoundError: If ``model`` is neither ``"tiny"`` nor an existing folder.
    """
    if str(model) == "tiny":
        from repogym.agents.tiny import build_tiny

        lm, tok = build_tiny(seed=seed, extra_corpus=list(tiny_corpus), padding_side="left")
    else:
        path = Path(model)
        if not path.is_dir():
            raise FileNotFoundError(
                f"model {str(model)!r} is not 'tiny' and not a folder; pass --model tiny or the "
                "path of a saved Hugging Face model (the hub is not used)"
            )
        lm = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
    if dtype is not None:
        lm = lm.to(dtype)
    if gradient_checkpointing:
        lm.gradient_checkpointing_enable()
        lm.config.use_cache = False
    policy = Policy(lm, tok, value_head=value_head, temperature=temperature, stop=stop)
    return policy.to(resolve_device(device)).train()


# --------------------------------------------------------------------------------------------
# Episodes and batches
# --------------------------------------------------------------------------------------------


@dataclass
class Turn:
    """One agent turn: the sampled action tokens and the observation that followed.

    Attributes:
        action_ids: Token ids the policy sampled (the policy loss is on these).
        action_logprobs: Their behaviour log-probabilities (same length).
        observation: The observation text as shown to the policy ("" if none followed).
    """

    action_ids: list[int]
    action_logprobs: list[float]
    observation: str = ""


@dataclass
class Episode:
    """One episode as the policy saw it, with its outcome.

    Attributes:
        task: Task id.
        prompt: The first context text (from the reset observation).
        turns: The agent's turns.
        reward: The episode's return (the last step's reward in RepoEnv).
        terminated: Ended by ``submit``.
        truncated: Cut by the step budget (TimeLimit): PPO bootstraps with ``V(s_T)``.
        infra_error: Set when the sandbox or grader failed: the episode is masked out.
        resolved: Every hidden test passed.
        group: Index of the group of samples of one task (GRPO's baseline).
        info: Anything else (last-step info, hack flags, the diff).
    """

    task: str
    prompt: str
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    infra_error: str | None = None
    resolved: bool = False
    group: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        """False for an infrastructure failure: such an episode stays out of every loss."""
        return not self.infra_error


@dataclass
class TokenizedEpisode:
    """One episode as one token sequence (lists of equal length ``T``).

    Attributes:
        input_ids: ``prompt + action_1 + obs_1 + action_2 + obs_2 + ...``.
        prompt_mask: 1 on prompt tokens.
        action_mask: 1 on action tokens (policy loss).
        obs_mask: 1 on observation tokens (the Echo loss predicts them).
        old_logp: Behaviour log-probabilities on action tokens, 0 elsewhere.
        turn_index: The turn number on action tokens, -1 elsewhere.
        state_pos: Per turn, the position of the last token before its action: the state
            ``s_k`` whose value the critic predicts.
        final_pos: The last token's position: the state after the last action (``s_T``).
    """

    input_ids: list[int]
    prompt_mask: list[int]
    action_mask: list[int]
    obs_mask: list[int]
    old_logp: list[float]
    turn_index: list[int]
    state_pos: list[int]
    final_pos: int


def context_ids(policy_or_tokenizer: Any, prompt: str, turns: Sequence[Turn]) -> list[int]:
    """The token ids the policy conditions on after ``turns`` (used by the rollouts).

    It is the same sequence :func:`tokenize_episode` builds, so the behaviour logprobs of
    the sampled actions line up with the training sequence token for token.
    """
    tok = getattr(policy_or_tokenizer, "tokenizer", policy_or_tokenizer)
    return tokenize_episode(tok, Episode(task="", prompt=prompt, turns=list(turns))).input_ids


def tokenize_episode(tokenizer: Any, episode: Episode) -> TokenizedEpisode:
    """Tokenise an episode into one sequence with prompt/action/observation masks.

    Action tokens are the sampled ids themselves (never re-tokenised text), so they keep
    their behaviour logprobs; the prompt and observations are tokenised as text.

    Args:
        tokenizer: The policy's tokenizer.
        episode: The episode.

    Returns:
        The :class:`TokenizedEpisode`.
    """

    def enc(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    ids = enc(episode.prompt)
    n = len(ids)
    out = TokenizedEpisode(ids, [1] * n, [0] * n, [0] * n, [0.0] * n, [-1] * n, [], 0)
    for k, turn in enumerate(episode.turns):
        if len(turn.action_ids) != len(turn.action_logprobs):
            raise ValueError(
                f"turn {k} of episode {episode.task!r} has {len(turn.action_ids)} action tokens "
                f"but {len(turn.action_logprobs)} logprobs; they must match one to one"
            )
        out.state_pos.append(len(out.input_ids) - 1)
        _extend(out, turn.action_ids, action=1, logp=turn.action_logprobs, turn=k)
        _extend(out, enc(turn.observation), action=0, logp=None, turn=-1)
    out.final_pos = len(out.input_ids) - 1
    return out


def _extend(
    out: TokenizedEpisode, ids: list[int], *, action: int, logp: list[float] | None, turn: int
) -> None:
    """Append action (``action=1``) or observation tokens to ``out``."""
    n = len(ids)
    out.input_ids += ids
    out.prompt_mask += [0] * n
    out.action_mask += [action] * n
    out.obs_mask += [1 - action] * n
    out.old_logp += list(logp) if logp is not None else [0.0] * n
    out.turn_index += [turn] * n


@dataclass
class Batch:
    """Tokenised episodes padded on the right: the input of every trainer.

    Per-token tensors are ``[B, T]``; per-episode ones ``[B]``; per-turn ones ``[B, K]``
    (padded with -1 / 0). ``extras`` carries anything a trainer adds (advantages, returns,
    reference logprobs, teacher logprobs, ...), indexed like the batch.

    Attributes:
        input_ids: Token ids.
        attention_mask: 1 on real tokens.
        prompt_mask: 1 on prompt tokens.
        action_mask: 1 on action tokens of valid episodes (infra errors are masked out).
        obs_mask: 1 on observation tokens of valid episodes.
        old_logp: Behaviour log-probabilities of the action tokens.
        turn_index: Turn number of each action token, -1 elsewhere.
        rewards: Episode returns.
        token_rewards: The return on the last action token of each episode (PPO's placement).
        valid: False for episodes with an infrastructure error.
        groups: Group index of each episode.
        terminated: Ended by submit.
        truncated: Cut by the step budget.
        state_pos: ``[B, K]`` positions of the states ``s_k`` before each action, -1 pad.
        n_turns: Turns per episode.
        final_pos: Position of the last token (the state after the last action).
        extras: Trainer-specific tensors with a leading batch dimension.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_mask: torch.Tensor
    action_mask: torch.Tensor
    obs_mask: torch.Tensor
    old_logp: torch.Tensor
    turn_index: torch.Tensor
    rewards: torch.Tensor
    token_rewards: torch.Tensor
    valid: torch.Tensor
    groups: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    state_pos: torch.Tensor
    n_turns: torch.Tensor
    final_pos: torch.Tensor
    extras: dict[str, torch.Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_action_tokens(self) -> int:
        """Action tokens that enter the loss."""
        return int(self.action_mask.sum())

    def to(self, device: torch.device | str) -> Batch:
        """A copy with every tensor on ``device``."""
        return self._map(lambda t: t.to(device))

    def select(self, index: torch.Tensor | slice) -> Batch:
        """The episodes at ``index`` (a slice or an index tensor)."""
        return self._map(lambda t: t[index])

    def split(self, size: int) -> list[Batch]:
        """Consecutive micro-batches of at most ``size`` episodes."""
        return [self.select(slice(i, i + size)) for i in range(0, len(self), size)]

    def _map(self, fn: Any) -> Batch:
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extras"}
        mapped = {k: fn(v) for k, v in values.items()}
        return Batch(**mapped, extras={k: fn(v) for k, v in self.extras.items()})


def collate(tokenizer: Any, episodes: Sequence[Episode]) -> Batch:
    """Tokenise and right-pad episodes into a :class:`Batch`.

    Args:
        tokenizer: The policy's tokenizer (its pad id pads ``input_ids``).
        episodes: At least one episode.

    Returns:
        The batch (on the CPU).
    """
    if not episodes:
        raise ValueError("collate() needs at least one episode")
    toks = [tokenize_episode(tokenizer, e) for e in episodes]
    width = max(len(t.input_ids) for t in toks)
    k_max = max(1, max(len(t.state_pos) for t in toks))
    valid = torch.tensor([e.valid for e in episodes])

    def pad(name: str, value: float, dtype: torch.dtype) -> torch.Tensor:
        rows = [getattr(t, name) + [value] * (width - len(t.input_ids)) for t in toks]
        return torch.tensor(rows, dtype=dtype)

    action_mask = pad("action_mask", 0, torch.long) * valid[:, None]
    rewards = torch.tensor([float(e.reward) for e in episodes])
    token_rewards = torch.zeros((len(toks), width))
    for i, t in enumerate(toks):
        last = max((j for j, m in enumerate(t.action_mask) if m), default=None)
        if last is not None:
            token_rewards[i, last] = rewards[i]
    return Batch(
        input_ids=pad("input_ids", tokenizer.pad_token_id, torch.long),
        attention_mask=torch.tensor(
            [[1] * len(t.input_ids) + [0] * (width - len(t.input_ids)) for t in toks]
        ),
        prompt_mask=pad("prompt_mask", 0, torch.long),
        action_mask=action_mask,
        obs_mask=pad("obs_mask", 0, torch.long) * valid[:, None],
        old_logp=pad("old_logp", 0.0, torch.float32),
        turn_index=pad("turn_index", -1, torch.long),
        rewards=rewards,
        token_rewards=token_rewards * valid[:, None],
        valid=valid,
        groups=torch.tensor([e.group for e in episodes]),
        terminated=torch.tensor([e.terminated for e in episodes]),
        truncated=torch.tensor([e.truncated for e in episodes]),
        state_pos=torch.tensor([t.state_pos + [-1] * (k_max - len(t.state_pos)) for t in toks]),
        n_turns=torch.tensor([len(t.state_pos) for t in toks]),
        final_pos=torch.tensor([t.final_pos for t in toks]),
    )
