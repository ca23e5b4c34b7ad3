"""Rollout engines: where completions come from, as token ids with behaviour logprobs.

- :class:`HFEngine`: in-process batched sampling with the policy being trained (left padding,
  KV cache). Between the turns of a rollout it keeps the cache: a request whose prompt
  extends what a cached row holds feeds only the new tokens; the samples of one prompt share
  one prefill.
- :class:`ServerEngine`: an OpenAI-compatible completions server (vLLM, SGLang) given prompt
  token ids, returning token ids and logprobs; :meth:`ServerEngine.sync_weights` pushes the
  learner's weights after an update (saved to disk, then the server's update-weights call).
- :class:`ScriptedEngine`: replays scripted texts (warm-start data, oracle episodes, tests).
"""

from __future__ import annotations

import copy
import inspect
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from repogym.agents.chat import Stops
from repogym.agents.policy import Policy

__all__ = ["Engine", "Generation", "HFEngine", "Request", "ScriptedEngine", "ServerEngine"]


@dataclass
class Request:
    """One completion to generate.

    Attributes:
        key: Identifies the episode across turns (the HF engine reuses its KV cache).
        prompt_ids: The whole context.
        max_new_tokens: Token budget of this completion.
    """

    key: Hashable
    prompt_ids: list[int]
    max_new_tokens: int


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


class HFEngine:
    """Batched sampling with the policy itself (see the module docstring).

    Args:
        policy: The policy (its weights are the behaviour policy's).
        stops: When completions end.
        reuse_cache: Keep the KV cache between calls and feed only new tokens.
    """

    def __init__(self, policy: Policy, stops: Stops, *, reuse_cache: bool = True) -> None:
        self.policy = policy
        self.stops = stops
        self.reuse_cache = reuse_cache
        self._stop_ids = torch.tensor(sorted(stops.token_ids), dtype=torch.long)
        # transformers 5 renames ``past_key_values`` to ``cache``; use what the model takes.
        params = inspect.signature(policy.lm.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self.release()

    def release(self) -> None:
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
        self.release()
        logits = self._feed([list(p) for p in unique], None)
        index = torch.tensor([unique[tuple(r.prompt_ids)] for r in requests],
                             device=self.policy.device)  # fmt: skip
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
            ids[i, width - len(x):] = torch.tensor(x, dtype=torch.long)
            add[i, width - len(x):] = 1
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
        out = self.policy.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                                use_cache=True, logits_to_keep=1,
                                **{self._cache_kw: self._cache})  # fmt: skip
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
        while True:
            logprobs = torch.log_softmax(logits, dim=-1)
            tok = logprobs.argmax(-1) if greedy else torch.multinomial(logprobs.exp(), 1)[:, 0]
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

    def _ended(self, tokens: list[list[int]], active: list[int], tok: torch.Tensor,
               stop_ids: torch.Tensor, reasons: list[str]) -> torch.Tensor:  # fmt: skip
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


class ServerEngine:
    """Completions from an OpenAI-compatible server (vLLM, SGLang) by prompt token ids.

    Requests go to ``{url}/v1/completions`` with ``prompt`` as token ids, ``logprobs``,
    ``return_token_ids`` and ``return_tokens_as_token_ids``; the completion's ids come from
    ``choices[0].token_ids`` (or the ``token_id:N`` logprob tokens) and its behaviour logprobs
    from ``choices[0].logprobs.token_logprobs``. Stop strings go as ``stop`` (kept in the
    output); stop token ids as ``stop_token_ids``.

    Weight sync: the learner's weights are saved to ``sync_dir/step-N`` and
    ``POST {url}{update_path}`` is sent ``{"model_path": folder}`` (SGLang's
    ``/update_weights_from_disk``; point ``update_path`` at your server's equivalent).

    Args:
        url: The server's base URL (``http://host:port``).
        stops: Stop tokens and strings (a closing-fence rule cannot be sent to a server).
        model: The served model name (default: the server's first model).
        temperature: Sampling temperature (the learner scores at the same temperature).
        sync_dir: Folder for the weights pushed after each update.
        update_path: The server's update-weights endpoint.
        timeout_s: Per-request timeout.
        workers: Requests in flight at once.
    """

    def __init__(
        self, url: str, stops: Stops, *, model: str | None = None, temperature: float = 1.0,
        sync_dir: str | Path = "runs/weights", update_path: str = "/update_weights_from_disk",
        timeout_s: float = 600.0, workers: int = 16,
    ) -> None:  # fmt: skip
        self.url = url.rstrip("/")
        self.stops = stops
        self.temperature = temperature
        self.sync_dir = Path(sync_dir)
        self.update_path = update_path
        self.timeout_s = timeout_s
        self.workers = workers
        self.model = model or self._first_model()

    def _call(self, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.url + path, data=data,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read())
        except (urllib.error.URLError, OSError) as e:
            raise RuntimeError(f"rollout server {self.url}{path} failed: {e}. Fix: start the "
                               "server (vLLM or SGLang) or pass the right --rollout-server "
                               "URL") from e  # fmt: skip

    def _first_model(self) -> str:
        models = self._call("/v1/models").get("data") or [{}]
        return str(models[0].get("id", "default"))

    def generate(self, requests: Sequence[Request], *, greedy: bool = False) -> list[Generation]:
        with ThreadPoolExecutor(max(1, min(self.workers, len(requests) or 1))) as pool:
            return list(pool.map(lambda r: self._one(r, greedy), requests))

    def _one(self, request: Request, greedy: bool) -> Generation:
        payload = {
            "model": self.model, "prompt": request.prompt_ids,
            "max_tokens": request.max_new_tokens, "temperature": 0.0 if greedy else
            self.temperature, "logprobs": 1, "return_token_ids": True,
            "return_tokens_as_token_ids": True, "skip_special_tokens": False,
            "include_stop_str_in_output": True, "stop": list(self.stops.strings),
            "stop_token_ids": sorted(self.stops.token_ids),
        }  # fmt: skip
        choice = self._call("/v1/completions", payload)["choices"][0]
        lp = choice.get("logprobs") or {}
        ids = choice.get("token_ids")
        if ids is None:
            ids = [int(t.removeprefix("token_id:")) for t in lp.get("tokens", [])]
        logprobs = [float(x) for x in lp.get("token_logprobs", [])]
        if len(ids) != len(logprobs):
            raise RuntimeError(f"rollout server returned {len(ids)} token ids but "
                               f"{len(logprobs)} logprobs. Fix: use a server that supports "
                               "return_token_ids and logprobs")  # fmt: skip
        return Generation(list(ids), logprobs, choice.get("finish_reason") or "stop")

    def sync_weights(self, policy: Policy, step: int) -> None:
        """Save the learner's weights and ask the server to load them."""
        folder = self.sync_dir / f"step-{step}"
        lm = policy.lm
        merge = getattr(policy.model, "merge_and_unload", None)
        if merge is not None:  # LoRA: the server serves merged weights
            lm = copy.deepcopy(policy.model).merge_and_unload()
        lm.save_pretrained(folder)
        policy.tokenizer.save_pretrained(folder)
        self._call(self.update_path, {"model_path": str(folder.resolve())})

    def release(self) -> None:
        return None
