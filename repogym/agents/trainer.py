"""The loop every trainer shares: collect, update, log, save, resume.

:class:`TrainConfig` holds the settings every algorithm shares (model and precision, optimiser
and learning-rate schedule, KL to a reference, chat rendering, rollout engine, checkpoints);
each algorithm's file (``grpo.py``, ``ppo.py``, ``distill.py``) extends it with its own
``@dataclass`` and implements :meth:`Trainer.update`. What they share lives here:

- building: the policy (:func:`repogym.agents.policy.load_policy`), the episode format
  (:class:`repogym.agents.chat.ChatFormat` unless one is passed in, e.g. the CPU toy's menu),
  the engine (in-process HF, or ``rollout_server`` for vLLM/SGLang) and the environments;
- one training step: :meth:`Trainer.collect` (episodes, reward shaping, ``OUT/rollouts``),
  the algorithm's update, the LR schedule, the engine's weight sync;
- loss plumbing: the scored positions, the entropy and KL terms, extra terms passed in (the
  Echo observation loss), gradient accumulation over micro-batches with global normalisers;
- checkpoints ``OUT/checkpoint-N`` (``save_pretrained`` + ``trainer_state.pt`` with the
  optimiser, scheduler, step and RNG states) and :meth:`Trainer.train` ``resume=True``, which
  continues bit-identically on a CPU.
"""

from __future__ import annotations

import abc
import json
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from repogym.agents.chat import SYSTEM_PROMPT, ChatFormat
from repogym.agents.engines import Engine, HFEngine, ServerEngine
from repogym.agents.episode import Batch, Episode, collate, write_rollouts
from repogym.agents.losses import (
    Correction,
    KLKind,
    aggregate,
    async_policy_loss,
    check_choice,
    kl,
    kl_loss,
    policy_loss,
)
from repogym.agents.metrics import MetricsLogger, mean_metrics, sum_losses
from repogym.agents.policy import DType, Policy, Reference, Scores, load_policy
from repogym.agents.rollout import EnvPool, EpisodeFormat, RolloutConfig, collect
from repogym.agents.shaping import ShapingConfig, default_max_len, shape_episodes

__all__ = ["AsyncCorrection", "ExtraTerm", "Progress", "TrainConfig", "Trainer", "chat_format",
           "latest_checkpoint"]

Progress = Callable[[str, Mapping[str, Any]], None]
"""``progress(event, fields)``: ``collect`` (step, episodes), ``episode`` (done, total),
``update`` (step), ``step`` (step, metrics)."""


@dataclass
class ExtraTerm:
    """An extra loss term added to a trainer's loss (e.g. the Echo observation loss).

    Attributes:
        weight: Its weight (0: reported as ``loss/<name>`` but not added).
        fn: ``(scores, micro_batch, norm) -> scalar``; ``norm`` holds the optimiser batch's
            counts (``global_num_tokens``, ``global_num_obs_tokens``, ...).
        positions: ``obs`` when it needs log-probabilities of observation tokens too.
    """

    weight: float
    fn: Callable[[Scores, Batch, Mapping[str, Any]], torch.Tensor]
    positions: Literal["action", "obs"] = "action"


@dataclass
class AsyncCorrection:
    """The off-policy correction the asynchronous wrapper asks a trainer's loss to apply
    (:func:`repogym.agents.losses.async_policy_loss`)."""

    name: Correction
    cap: float | None


@dataclass
class TrainConfig:
    """Settings every trainer shares.

    Attributes:
        model: A local Hugging Face model folder (the CLI builds the CPU toy's for ``tiny``).
        steps: Training steps (one rollout round and its update each).
        out: Output folder: ``metrics.jsonl``, ``config.json``, ``rollouts/``, checkpoints.
        tasks: Task ids to train on (one group per task per step).
        seed: Seeds torch, Python and the environments.
        lr: AdamW learning rate (peak of the schedule).
        lr_schedule: ``constant``, ``linear`` (to 0) or ``cosine`` (to 0) after warm-up.
        warmup_steps: Linear warm-up from 0, in training steps.
        weight_decay: AdamW weight decay.
        max_grad_norm: Gradient clipping.
        micro_batch: Episodes per forward/backward (gradients accumulate to one step).
        device: ``auto``, ``cpu`` or ``cuda``.
        dtype: Compute dtype (``auto``: bf16 autocast on CUDA, fp32 on the CPU).
        param_dtype: Master weights' dtype (float32 whatever the checkpoint's).
        gradient_checkpointing: Recompute activations in the backward pass.
        lora: ``peft.LoraConfig`` fields to train LoRA adapters (None: every weight).
        chunk_size: Positions scored at once (memory ~ chunk_size x vocabulary).
        temperature: Sampling (and scoring) temperature.
        beta: Weight of the KL to the initial policy (0: no reference model is built).
        kl_mode: ``loss`` (differentiate ``kl_kind``) or ``reward`` (k1 in the reward).
        kl_kind: ``k2`` (gradient of KL(pi||ref)), ``k3``/``low_var_kl`` (gradient of
            KL(ref||pi)); see :func:`repogym.agents.losses.kl_loss`.
        ent_coef: Entropy bonus weight.
        system_prompt: The chat's system message (None: the default).
        max_obs_chars: Observations are clipped to this many characters in the chat.
        observation_role: ``auto``, ``tool`` or ``user``: the role of observation messages.
        rollout_server: URL of an OpenAI-compatible server (vLLM, SGLang) to sample from;
            None samples in-process.
        update_path: The server's update-weights endpoint (weights are synced after updates).
        reuse_cache: In-process engine: keep the KV cache across turns.
        shaping: Reward shaping (:class:`repogym.agents.shaping.ShapingConfig` or its dict).
        warm_start_steps: Supervised steps before RL (the CPU toy's menu only; None: the
            toy's default).
        save_every: Save a checkpoint every this many steps (and always at the end).
        save_rollouts: Write ``OUT/rollouts/step-*.jsonl``.
        rollout: Group size, step budget, token budgets, sandbox, dynamic sampling, ...
    """

    model: str = ""
    steps: int = 20
    out: str = "runs/train"
    tasks: tuple[str, ...] = ()
    seed: int = 0
    lr: float = 1e-6
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    micro_batch: int = 8
    device: str = "auto"
    dtype: DType = "auto"
    param_dtype: Literal["float32", "bfloat16"] = "float32"
    gradient_checkpointing: bool = False
    lora: dict | None = None
    chunk_size: int = 1024
    temperature: float = 1.0
    beta: float = 0.0
    kl_mode: Literal["loss", "reward"] = "loss"
    kl_kind: KLKind = "k2"
    ent_coef: float = 0.0
    system_prompt: str | None = None
    max_obs_chars: int = 8000
    observation_role: Literal["auto", "tool", "user"] = "auto"
    rollout_server: str | None = None
    update_path: str = "/update_weights_from_disk"
    reuse_cache: bool = True
    shaping: ShapingConfig | dict | None = None
    warm_start_steps: int | None = None
    save_every: int = 0
    save_rollouts: bool = True
    rollout: RolloutConfig = field(default_factory=RolloutConfig)

    def __post_init__(self) -> None:
        if isinstance(self.rollout, dict):
            self.rollout = RolloutConfig(**self.rollout)
        self.tasks = tuple(self.tasks)
        self.shaping = ShapingConfig.coerce(self.shaping)
        check_choice("kl_mode", self.kl_mode, Literal["loss", "reward"])
        check_choice("lr_schedule", self.lr_schedule,
                     Literal["constant", "linear", "cosine"])  # fmt: skip
        if self.beta and self.kl_mode == "loss":
            kl_loss(torch.zeros(1), torch.zeros(1), self.kl_kind)  # k1 as a loss: refused
        if self.kl_mode == "reward" and self.kl_kind != "k1":
            self.kl_kind = "k1"


def _lr_factor(config: TrainConfig) -> Callable[[int], float]:
    """The schedule's multiplier of ``lr`` after ``n`` completed steps."""

    def factor(n: int) -> float:
        if config.warmup_steps and n < config.warmup_steps:
            return (n + 1) / config.warmup_steps
        if config.lr_schedule == "constant":
            return 1.0
        span = max(config.steps - config.warmup_steps, 1)
        done = min(max(n - config.warmup_steps, 0) / span, 1.0)
        return 1.0 - done if config.lr_schedule == "linear" else 0.5 * (1 + math.cos(math.pi * done))

    return factor


def chat_format(config: TrainConfig, tokenizer: Any) -> ChatFormat:
    """The chat format of ``config``'s chat options for ``tokenizer``."""
    return ChatFormat(tokenizer, system_prompt=config.system_prompt or SYSTEM_PROMPT,
                      max_obs_chars=config.max_obs_chars,
                      observation_role=config.observation_role)  # fmt: skip


def latest_checkpoint(out: str | Path) -> Path | None:
    """The ``checkpoint-N`` folder of ``out`` with the largest ``N`` (None if none)."""
    found = [(int(p.name.split("-")[1]), p) for p in Path(out).glob("checkpoint-*")
             if p.name.split("-")[1].isdigit() and (p / "trainer_state.pt").is_file()]  # fmt: skip
    return max(found)[1] if found else None


class Trainer(abc.ABC):
    """Shared loop and plumbing (see the module docstring); subclasses implement ``update``.

    Args:
        config: The trainer's config.
        policy: A policy to train (default: loaded from ``config.model``).
        fmt: The episode format (default: the chat format of the policy's tokenizer).
        fmt_factory: Builds the episode format from the policy's tokenizer (instead of ``fmt``).
        engine: Where completions come from (default: from ``config``).
        pool: Environments (default: made from ``config.rollout``).
        extra_terms: Extra loss terms by name, reported as ``loss/<name>``.
        progress: Progress callback (see :data:`Progress`).
    """

    value_head = False
    correction: AsyncCorrection | None = None

    def __init__(
        self, config: TrainConfig, *, policy: Policy | None = None,
        fmt: EpisodeFormat | None = None,
        fmt_factory: Callable[[Any], EpisodeFormat] | None = None, engine: Engine | None = None,
        pool: EnvPool | None = None, extra_terms: Mapping[str, ExtraTerm] | None = None,
        progress: Progress | None = None,
    ) -> None:  # fmt: skip
        self.config = config
        self.progress = progress
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        self.policy = policy or self._load_policy()
        tok = self.policy.tokenizer
        self.fmt = fmt or (fmt_factory or (lambda t: chat_format(config, t)))(tok)
        self.engine = engine or self._engine()
        self.pool = pool or EnvPool(config.rollout)
        self.extra_terms = dict(extra_terms or {})
        self.device = self.policy.device
        self.ref: Reference | None = self.policy.reference() if config.beta else None
        self.optimizer = torch.optim.AdamW(self.parameters(), lr=config.lr,
                                           weight_decay=config.weight_decay)  # fmt: skip
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _lr_factor(config))
        self.step = 0

    # -- building ----------------------------------------------------------------------------
    def _load_policy(self) -> Policy:
        c = self.config
        if not c.model:
            raise ValueError("no model. Fix: --model PATH (a saved Hugging Face model) or "
                             "--model tiny (the CPU toy)")  # fmt: skip
        return load_policy(
            c.model, value_head=self.value_head, device=c.device, dtype=c.dtype,
            param_dtype=c.param_dtype, temperature=c.temperature,
            gradient_checkpointing=c.gradient_checkpointing, lora=c.lora,
            chunk_size=c.chunk_size,
        )  # fmt: skip

    def _engine(self) -> Engine:
        c = self.config
        if c.rollout_server:
            return ServerEngine(c.rollout_server, self.fmt.stops, temperature=c.temperature,
                                sync_dir=Path(c.out) / "weights", update_path=c.update_path)  # fmt: skip
        return HFEngine(self.policy, self.fmt.stops, reuse_cache=c.reuse_cache)

    def parameters(self) -> list[torch.nn.Parameter]:
        """The parameters the optimiser trains."""
        return [p for p in self.policy.parameters() if p.requires_grad]

    def report(self, event: str, **fields: Any) -> None:
        """Send a progress event (see :data:`Progress`)."""
        if self.progress is not None:
            self.progress(event, fields)

    # -- one step ----------------------------------------------------------------------------
    @abc.abstractmethod
    def update(self, batch: Batch) -> dict[str, float]:
        """Optimise on one batch; returns metrics."""

    def collect(self, step: int) -> tuple[Batch | None, dict[str, float]]:
        """Sample one group per task (shaped, saved); returns the batch (None if empty)."""
        cfg = self.config
        total = len(cfg.tasks) * cfg.rollout.group_size
        self.report("collect", step=step, episodes=total)
        done = [0]

        def on_episode(_: Episode) -> None:
            done[0] += 1
            self.report("episode", done=done[0], total=total)

        rollout = collect(self.engine, self.fmt, self.pool, list(cfg.tasks), cfg.rollout,
                          seed=cfg.seed + 1000 * step, max_context=self.policy.max_len,
                          on_episode=on_episode)  # fmt: skip
        self.engine.release()
        metrics = rollout.metrics()
        if cfg.shaping is not None:
            metrics.update(shape_episodes(rollout.episodes, cfg.shaping,
                                          default_max_len(cfg.rollout)))  # fmt: skip
        if cfg.save_rollouts:
            write_rollouts(Path(cfg.out) / "rollouts", step, rollout.all_episodes,
                           self.fmt_decode)  # fmt: skip
        self.episodes = rollout.episodes
        if not rollout.episodes:
            return None, metrics
        return collate(rollout.episodes, self.policy.tokenizer.pad_token_id), metrics

    def fmt_decode(self, ids: list[int]) -> str:
        """Text of token ids (special tokens kept), for rollout files."""
        return self.policy.tokenizer.decode(ids, skip_special_tokens=False)

    def train_step(self, step: int) -> dict[str, float]:
        """One rollout round, its update, the LR schedule and the engine's weight sync."""
        start = time.monotonic()
        batch, metrics = self.collect(step)
        self.report("update", step=step)
        if batch is not None and batch.num_action_tokens:
            metrics.update(self.update(batch))
            self.engine.sync_weights(self.policy, step)
        metrics["lr"] = self.optimizer.param_groups[0]["lr"]
        self.scheduler.step()
        metrics["time/step_s"] = time.monotonic() - start
        return metrics

    def train(self, steps: int | None = None, *, resume: bool | str | Path = False,
              log: bool = True) -> list[dict[str, float]]:  # fmt: skip
        """Run to step ``steps`` (default ``config.steps``); log, save, optionally resume.

        Args:
            steps: The last step.
            resume: True (the latest ``OUT/checkpoint-N``) or a checkpoint folder: continue
                after its step with its weights, optimiser, schedule and RNG states.
            log: Write ``OUT/metrics.jsonl``, ``OUT/config.json`` and checkpoints.

        Returns:
            The metrics of the steps run.
        """
        cfg = self.config
        steps = cfg.steps if steps is None else steps
        if resume:
            path = latest_checkpoint(cfg.out) if resume is True else Path(resume)
            if path is None:
                raise FileNotFoundError(f"--resume: no checkpoint in {cfg.out}. Fix: train "
                                        "without --resume first, or pass --out of that run")  # fmt: skip
            self.load_checkpoint(path)
        logger = MetricsLogger(cfg.out, self.step if resume else None) if log else None
        if log:
            Path(cfg.out, "config.json").write_text(json.dumps(asdict(cfg), indent=2,
                                                               default=str) + "\n")  # fmt: skip
        history = []
        try:
            for step in range(self.step + 1, steps + 1):
                metrics = self.train_step(step)
                self.step = step
                history.append(metrics)
                if logger is not None:
                    logger.log(step, metrics)
                self.report("step", step=step, steps=steps, metrics=metrics)
                if log and (step == steps or (cfg.save_every and step % cfg.save_every == 0)):
                    self.save_checkpoint()
        finally:
            if logger is not None:
                logger.close()
        return history

    # -- loss plumbing -----------------------------------------------------------------------
    def positions(self, mb: Batch) -> torch.Tensor:
        """The positions to score: completion tokens, and observations if a term needs them."""
        need = mb.action_mask.bool()
        if any(t.positions == "obs" for t in self.extra_terms.values()):
            need = need | mb.obs_mask.bool()
        return need

    def score(self, mb: Batch, *, with_values: bool = False) -> Scores:
        """The policy's scores of a micro-batch (entropy included)."""
        return self.policy.score(mb.input_ids, mb.attention_mask, self.positions(mb),
                                 with_entropy=True, with_values=with_values,
                                 entropy_grad=bool(self.config.ent_coef))  # fmt: skip

    @torch.no_grad()
    def score_batch(self, batch: Batch, *, with_values: bool = False) -> Scores:
        """Scores of a whole batch without gradient, micro-batch by micro-batch."""
        parts = [self.policy.score(mb.input_ids, mb.attention_mask, self.positions(mb),
                                   with_values=with_values)
                 for mb in batch.split(self.config.micro_batch)]  # fmt: skip
        values = torch.cat([p.values for p in parts]) if with_values else None
        return Scores(logp=torch.cat([p.logp for p in parts]), values=values)

    @torch.no_grad()
    def ref_logp(self, batch: Batch) -> torch.Tensor | None:
        """The reference's log-probabilities of the completion tokens (None without one)."""
        if self.ref is None:
            return None
        return torch.cat([self.ref.logp(mb.input_ids, mb.attention_mask, mb.action_mask)
                          for mb in batch.split(self.config.micro_batch)])  # fmt: skip

    def norm(self, batch: Batch) -> dict[str, Any]:
        """The optimiser batch's global counts, for every term's aggregation."""
        return {**batch.norm(), "global_num_obs_tokens": batch.obs_mask.sum()}

    def common_terms(self, scores: Scores, mb: Batch, norm: Mapping[str, Any],
                     agg: str) -> dict[str, tuple[float, torch.Tensor]]:  # fmt: skip
        """The entropy bonus, the KL loss and the extra terms of one micro-batch."""
        counts = {k: norm[k] for k in ("global_num_tokens", "global_num_seqs", "norm_len")
                  if k in norm}  # fmt: skip
        entropy = aggregate(scores.entropy, mb.action_mask, agg, **counts)
        terms = {"entropy": (self.config.ent_coef, -entropy)}
        kl_value = scores.logp.new_zeros(())
        as_loss = self.config.kl_mode == "loss"
        if "ref_logp" in mb.extras:  # in reward mode the k1 value is reported, not added
            ref = mb.extras["ref_logp"]
            per_token = (kl_loss(scores.logp, ref, self.config.kl_kind) if as_loss
                         else kl(scores.logp.detach(), ref, "k1"))  # fmt: skip
            kl_value = aggregate(per_token, mb.action_mask, agg, **counts)
        terms["kl"] = (self.config.beta if as_loss else 0.0, kl_value)
        for name, term in self.extra_terms.items():
            terms[name] = (term.weight, term.fn(scores, mb, norm))
        return terms

    def policy_term(self, logp: torch.Tensor, mb: Batch, adv: torch.Tensor,
                    norm: Mapping[str, Any], **loss: Any) -> tuple[torch.Tensor, dict[str, float]]:  # fmt: skip
        """The clipped policy loss to ``extras["old_logp"]``, or, under the asynchronous
        wrapper, :func:`repogym.agents.losses.async_policy_loss` with its correction (the
        behaviour logprobs from the engine, ``extras["old_logp"]`` as the proximal policy)."""
        counts = {k: norm[k] for k in ("global_num_tokens", "global_num_seqs", "norm_len")
                  if k in norm}  # fmt: skip
        c = self.correction
        if c is None:
            return policy_loss(logp, mb.extras["old_logp"], adv, mb.action_mask, **loss,
                               **counts)  # fmt: skip
        loss.pop("dual_clip", None)
        return async_policy_loss(logp, mb.old_logp, adv, mb.action_mask, correction=c.name,
                                 cap=c.cap, prox_logp=mb.extras["old_logp"], **loss, **counts)  # fmt: skip

    def backward(self, terms: dict[str, tuple[float, torch.Tensor]], mb: Batch,
                 scores: Scores, metrics: dict[str, float]) -> dict[str, float]:  # fmt: skip
        """Backpropagate ``sum(weight * term)``; returns metrics with ``loss/*``, ``entropy``."""
        total: torch.Tensor | None = None
        for name, (weight, value) in terms.items():
            metrics[f"loss/{name}"] = float(value.detach())
            if weight:
                total = weight * value if total is None else total + weight * value
        if total is not None and total.requires_grad:
            total.backward()
        masked = mb.action_mask.bool()
        metrics["entropy"] = float(scores.entropy.detach()[masked].mean()) if masked.any() else 0.0
        return metrics

    def optimise(self, batch: Batch, micro_step: Callable[[Batch], dict[str, float]], *,
                 epochs: int, params: Sequence[torch.nn.Parameter] | None = None,
                 optimizer: torch.optim.Optimizer | None = None) -> dict[str, float]:  # fmt: skip
        """``epochs`` optimiser steps over ``batch`` (gradients accumulated over micro-batches).

        Returns:
            The metrics averaged over epochs (``loss/*`` summed over micro-batches),
            ``grad_norm`` and ``throughput/tokens_per_s`` (tokens scored per second).
        """
        start = time.monotonic()
        params = list(params if params is not None else self.parameters())
        optimizer = optimizer or self.optimizer
        rows = []
        for _ in range(epochs):
            micro = [micro_step(mb) for mb in batch.split(self.config.micro_batch)]
            rows.append({**sum_losses(micro), "grad_norm": _clip_and_step(
                params, optimizer, self.config.max_grad_norm)})  # fmt: skip
        metrics = mean_metrics(rows)
        tokens = int(batch.attention_mask.sum()) * epochs
        metrics["throughput/tokens_per_s"] = tokens / max(time.monotonic() - start, 1e-9)
        return metrics

    def sft(self, episodes: Sequence[Episode], steps: int, lr: float) -> float:
        """Supervised steps (cross-entropy on completion tokens) on ``episodes``; last loss."""
        batch = collate(episodes, self.policy.tokenizer.pad_token_id).to(self.device)
        optimizer = torch.optim.AdamW(self.parameters(), lr=lr, weight_decay=0.0)
        total = max(batch.num_action_tokens, 1)
        loss = 0.0
        for _ in range(steps):
            loss = 0.0
            for mb in batch.split(self.config.micro_batch):
                logp = self.policy.score(mb.input_ids, mb.attention_mask, mb.action_mask).logp
                part = -(logp * mb.action_mask).sum() / total
                part.backward()
                loss += float(part.detach())
            _clip_and_step(self.parameters(), optimizer, self.config.max_grad_norm)
        return loss

    # -- checkpoints -------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What a checkpoint holds besides the model folder (subclasses add theirs)."""
        return {
            "step": self.step, "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                    "numpy": np.random.get_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
        }  # fmt: skip

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state` (subclasses restore theirs too)."""
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        self.engine.sync_weights(self.policy, self.step)

    def save_checkpoint(self) -> Path:
        """Write ``OUT/checkpoint-<step>``: the model and tokenizer (``save_pretrained``) and
        ``trainer_state.pt``."""
        path = Path(self.config.out) / f"checkpoint-{self.step}"
        self.policy.model.save_pretrained(path)
        self.policy.tokenizer.save_pretrained(path)
        torch.save(self.state(), path / "trainer_state.pt")
        return path

    def load_checkpoint(self, path: str | Path) -> None:
        """Resume from a checkpoint folder written by :meth:`save_checkpoint`."""
        file = Path(path) / "trainer_state.pt"
        if not file.is_file():
            raise FileNotFoundError(f"{path} has no trainer_state.pt. Fix: pass a checkpoint-N "
                                    "folder written by `repogym train`")  # fmt: skip
        self.load_state(torch.load(file, map_location="cpu", weights_only=False))

    def close(self) -> None:
        """Close the environments."""
        self.pool.close()


def _clip_and_step(params: Iterable[torch.nn.Parameter], optimizer: torch.optim.Optimizer,
                   max_grad_norm: float) -> float:  # fmt: skip
    """Clip gradients, step, zero them; returns the pre-clip gradient norm."""
    params = [p for p in params if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm) if params else torch.tensor(0.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(norm)
