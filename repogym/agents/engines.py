"""Rollout engines: where completions come from, as token ids with behaviour logprobs.

- :class:`HFEngine`: in-process batched sampling with the policy being trained (left padding,
  KV cache). Between the turns of a rollout it keeps the cache: a request whose prompt
  extends what a cached row holds feeds only the new tokens; the samples of one prompt share
  one prefill.
- :class:`repogym.agents.server_engine.ServerEngine`: an OpenAI-compatible completions
  server (vLLM, SGLang), in its own module.
- :class:`ScriptedEngine`: replays scripted texts (warm-start data, oracle episodes, tests).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from repogym.agents.chat import Stops
from repogym.agents.policy import Policy

__all__ = ["Engine", "Generation", "HFEngine", "Request", "ScriptedEngine", "processed_logprobs"]


@dataclass
class Request:
    """One completion to generate.

    Attributes:
        key: Identifies the episode across turns (the HF engine reuses its KV cache).
        prompt_ids: The whole context.
        max_new_tokens: Token budget of this completion.
        seed: Seeds the episode's own sampling stream (the same tokens whatever the batch or
            the process it runs in); None draws from torch's global generator.
    """

    key: Hashable
    prompt_ids: list[int]
    max_new_tokens: int
    seed: int | None = None


@dataclass
class Generation:
    """One completion: tokens as sampled, their behaviour logprobs, why it ended."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str = "stop"


class Engine(Protocol):
    """What a rollout needs from an engine."""

    def generate(self, requests: Sequence[Request], *, greedy: bool = False) -> list[Generation]:
        """One completion per request, in order."""
        ...

    def sync_weights(self, policy: Policy, step: int) -> None:
        """Make the engine sample from ``policy``'s current weights."""
        ...

    def release(self) -> None:
        """Free per-rollout state (caches) before the update."""
        ...


def processed_logprobs(logits: torch.Tensor, top_p: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """Log-probabilities of the distribution sampled from: ``logits`` (already divided by the
    temperature) restricted to the ``top_k`` most likely tokens and to the smallest set whose
    probability reaches ``top_p``, renormalised (``-inf`` outside). What vLLM returns with
    ``--logprobs-mode processed_logprobs``.

    Args:
        logits: ``[B, V]``.
        top_p: Nucleus mass (1: off).
        top_k: Most likely tokens kept (0 or less: off).
    """
    if top_k > 0 and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        before = probs.cumsum(-1) - probs  # mass of the more likely tokens
        drop = before >= top_p  # keeps the first token whatever top_p is
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return torch.log_softmax(logits, dim=-1)


class HFEngine:
    """Batched sampling with the policy itself (see the module docstring).

    Args:
        policy: The policy (its weights are the behaviour policy's).
        stops: When completions end.
        reuse_cache: Keep the KV cache between calls and feed only new tokens.
        top_p: Nucleus sampling mass (1: off).
        top_k: Sample among the ``top_k`` most likely tokens (0: off).

    The behaviour logprobs are those of the distribution sampled from (temperature, then
    top-k and top-p, renormalised: :func:`processed_logprobs`). A request with a ``seed``
    samples from its own generator, kept across the episode's turns.
    """

    def __init__(
        self,
        policy: Policy,
        stops: Stops,
        *,
        reuse_cache: bool = True,
        top_p: float = 1.0,
        top_k: int = 0,
    ) -> None:
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1]; got {top_p}")
        self.policy = policy
        self.stops = stops
        self.reuse_cache = reuse_cache
        self.top_p, self.top_k = top_p, top_k
        self._generators: dict[tuple[Hashable, int], torch.Generator] = {}
        self._stop_ids = torch.tensor(sorted(stops.token_ids), dtype=torch.long)
        # transformers 5 renames ``past_key_values`` to ``cache``; use what the model takes.
        params = inspect.signature(policy.lm.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self.release()

    def release(self) -> None:
        """Drop the KV cache and the episodes' sampling streams."""
        self._generators = {}
        self._reset_cache()

    def _reset_cache(self) -> None:
        self._cache: Any = None
        self._keys: list[Hashable] = []
        self._tokens: list[list[int]] = []  # per cached row: its tokens (fed or pending)
        self._fed: list[int] = []  # per cached row: how many of them are in the cache
        self._mask: torch.Tensor | None = None

    def sync_weights(self, policy: Policy, step: int) -> None:
        """The engine samples from the policy object itself: only the cache is stale."""
        self.release()

    @torch.no_grad()
    def generate(self, requests: Sequence[Request], *, greedy: bool = False) -> list[Generation]:
        """Sample one completion per request (see :class:`Engine`)."""
        if not requests:
            return []
        if any(not r.prompt_ids for r in requests):
            raise ValueError("generate() needs non-empty prompts")
        was_training = self.policy.training
        self.policy.eval()
        try:
            with self.policy.autocast():
                logits = self._prefill(requests)
                return self._sample(requests, logits, greedy)
        finally:
            self.policy.train(was_training)

    # -- prefill -----------------------------------------------------------------------------
    def _reusable(self, requests: Sequence[Request]) -> list[int] | None:
        """Cached row of each request when every prompt extends its row, else None."""
        if not self.reuse_cache or self._cache is None:
            return None
        where = {k: i for i, k in enumerate(self._keys)}
        rows = [where.get(r.key) for r in requests]
        if any(i is None for i in rows):
            return None
        for r, i in zip(requests, rows, strict=True):
            known = self._tokens[i]
            if len(r.prompt_ids) <= len(known) or r.prompt_ids[: len(known)] != known:
                return None
        return rows  # type: ignore[return-value]

    def _prefill(self, requests: Sequence[Request]) -> torch.Tensor:
        """Fill the cache for the requests; returns the next-token logits ``[B, V]``."""
        rows = self._reusable(requests)
        if rows is None:
            return self._fresh(requests)
        index = torch.tensor(rows, device=self.policy.device)
        self._cache.batch_select_indices(index)
        mask = self._mask[index]
        self._fed = [self._fed[i] for i in rows]
        new = [r.prompt_ids[f:] for r, f in zip(requests, self._fed, strict=True)]
        self._keys = [r.key for r in requests]
        self._tokens = [list(r.prompt_ids) for r in requests]
        return self._feed(new, mask)

    def _fresh(self, requests: Sequence[Request]) -> torch.Tensor:
        """Prefill each distinct prompt once, then give every request its row."""
        unique: dict[tuple[int, ...], int] = {}
        for r in requests:
            unique.setdefault(tuple(r.prompt_ids), len(unique))
        self._reset_cache()
        logits = self._feed([list(p) for p in unique], None)
        index = torch.tensor(
            [unique[tuple(r.prompt_ids)] for r in requests], device=self.policy.device
        )
        self._cache.batch_select_indices(index)
        self._mask = self._mask[index]
        self._fed = [self._fed[int(i)] for i in index]
        self._keys = [r.key for r in requests]
        self._tokens = [list(r.prompt_ids) for r in requests]
        return logits[index]

    def _feed(self, new: list[list[int]], mask: torch.Tensor | None) -> torch.Tensor:
        """Feed left-padded ``new`` tokens after the cached ones; returns the last logits."""
        device = self.policy.device
        width = max(len(x) for x in new)
        ids = torch.full((len(new), width), self.policy.tokenizer.pad_token_id, dtype=torch.long)
        add = torch.zeros((len(new), width), dtype=torch.long)
        for i, x in enumerate(new):
            ids[i, width - len(x) :] = torch.tensor(x, dtype=torch.long)
            add[i, width - len(x) :] = 1
        ids, add = ids.to(device), add.to(device)
        before = mask.sum(-1, keepdim=True) if mask is not None else 0
        positions = (before + add.cumsum(-1) - 1).clamp(min=0)
        full = add if mask is None else torch.cat([mask, add], dim=-1)
        logits = self._forward(ids, full, positions)
        self._mask = full
        fed = self._fed or [0] * len(new)
        self._fed = [f + len(x) for f, x in zip(fed, new, strict=True)]
        return logits

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor):
        out = self.policy.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kw: self._cache},
        )
        self._cache = getattr(out, self._cache_kw)
        return out.logits[:, -1].float() / self.policy.temperature

    # -- sampling ----------------------------------------------------------------------------
    def _sample(self, requests: Sequence[Request], logits: torch.Tensor, greedy: bool):
        device = self.policy.device
        n = len(requests)
        budget = torch.tensor([max(r.max_new_tokens, 1) for r in requests], device=device)
        done = torch.zeros(n, dtype=torch.bool, device=device)
        stop_ids = self._stop_ids.to(device)
        tokens: list[list[int]] = [[] for _ in range(n)]
        logps: list[list[float]] = [[] for _ in range(n)]
        reasons = ["length"] * n
        gens = [self._generator(r) for r in requests]
        while True:
            logprobs = processed_logprobs(logits, self.top_p, self.top_k)
            tok = logprobs.argmax(-1) if greedy else self._draw(logprobs, gens)
            lp = logprobs.gather(-1, tok[:, None])[:, 0]
            active = (~done).nonzero().flatten().tolist()
            for i, t, p in zip(active, tok[active].tolist(), lp[active].tolist(), strict=True):
                tokens[i].append(t)
                logps[i].append(p)
            ended = self._ended(tokens, active, tok, stop_ids, reasons)
            feed = ~done  # rows that sampled this step: their token goes into the cache
            done = done | ended | (torch.tensor([len(x) for x in tokens], device=device) >= budget)
            if bool(done.all()):
                break
            step = torch.where(feed, tok, self.policy.tokenizer.pad_token_id)[:, None]
            mask = torch.cat([self._mask, feed.long()[:, None]], dim=-1)
            positions = self._mask.sum(-1, keepdim=True)
            logits = self._forward(step, mask, positions)
            self._mask = mask
            for i in active:
                self._fed[i] += 1
        for i in range(n):
            self._tokens[i] += tokens[i]
        return [Generation(t, p, r) for t, p, r in zip(tokens, logps, reasons, strict=True)]

    def _generator(self, request: Request) -> torch.Generator | None:
        """The episode's sampling stream (None: the global generator)."""
        if request.seed is None:
            return None
        key = (request.key, request.seed)
        if key not in self._generators:
            g = torch.Generator(device=self.policy.device)
            self._generators[key] = g.manual_seed(request.seed)
        return self._generators[key]

    @staticmethod
    def _draw(logprobs: torch.Tensor, gens: list[torch.Generator | None]) -> torch.Tensor:
        """One token per row, each row from its own generator when it has one."""
        probs = logprobs.exp()
        if all(g is None for g in gens):
            return torch.multinomial(probs, 1)[:, 0]
        return torch.cat([torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(gens)])

    def _ended(
        self,
        tokens: list[list[int]],
        active: list[int],
        tok: torch.Tensor,
        stop_ids: torch.Tensor,
        reasons: list[str],
    ) -> torch.Tensor:
        ended = torch.isin(tok, stop_ids) if stop_ids.numel() else torch.zeros_like(tok).bool()
        if self.stops.needs_text and active:
            texts = self.policy.tokenizer.batch_decode([tokens[i] for i in active])
            for i, text in zip(active, texts, strict=True):
                if self.stops.hit(text):
                    ended[i] = True
        for i in active:
            if bool(ended[i]):
                reasons[i] = "stop"
        return ended


@dataclass
class ScriptedEngine:
    """Replays scripted texts: ``script(i, request) -> text`` for the ``i``-th request of a
    call, encoded with ``tokenizer``, logprob 0 per token (warm-start data and tests)."""

    tokenizer: Any
    script: Callable[[int, Request], str]

    def generate(self, requests: Sequence[Request], *, greedy: bool = False) -> list[Generation]:
        out = []
        for i, r in enumerate(requests):
            ids = list(self.tokenizer(self.script(i, r), add_special_tokens=False)["input_ids"])
            out.append(Generation(ids, [0.0] * len(ids)))
        return out

    def sync_weights(self, policy: Policy, step: int) -> None:
        return None

    def release(self) -> None:
        return None
