"""The settings every reference trainer shares, and the small types trainers pass around.

:class:`TrainConfig` holds what every algorithm shares (model and precision, optimiser and
learning-rate schedule, KL to a reference, chat rendering, sampling, rollout engine, task
sampling, evaluation, checkpoints); each algorithm's file (``grpo.py``, ``ppo.py``,
``distill.py``) extends it with its own ``@dataclass``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from repogym.agents.batch import Batch, LossNorm
from repogym.agents.chat import SYSTEM_PROMPT, ChatFormat
from repogym.agents.losses import Correction, KLKind, check_choice, kl_loss
from repogym.agents.policy import DType, Scores
from repogym.agents.rollout import RolloutConfig
from repogym.agents.server_engine import WeightSync
from repogym.agents.shaping import ShapingConfig

__all__ = [
    "AsyncCorrection",
    "ChatFormatFactory",
    "ExtraTerm",
    "Progress",
    "TrainConfig",
    "chat_format",
    "lr_factor",
]

Progress = Callable[[str, Mapping[str, Any]], None]
"""``progress(event, fields)``: ``collect`` (step, episodes), ``episode`` (done, total),
``update`` (step), ``step`` (step, metrics)."""


@dataclass
class ExtraTerm:
    """An extra loss term added to a trainer's loss (e.g. the Echo observation loss).

    Attributes:
        weight: Its weight (0: reported as ``loss/<name>`` but not added).
        fn: ``(scores, micro_batch, norm) -> scalar``; ``norm`` is the optimiser batch's
            :class:`repogym.agents.batch.LossNorm` (``num_tokens``, ``num_obs_tokens``, ...).
        positions: ``obs`` when it needs log-probabilities of observation tokens too.
    """

    weight: float
    fn: Callable[[Scores, Batch, LossNorm], torch.Tensor]
    positions: Literal["action", "obs"] = "action"


@dataclass
class AsyncCorrection:
    """The off-policy correction a trainer's loss applies when the sampler is not the policy
    being trained (:func:`repogym.agents.losses.async_policy_loss`): set by the asynchronous
    wrapper, or from ``behaviour_correction`` when a server samples or top-p/top-k truncate
    the sampling distribution."""

    name: Correction
    cap: float | None


@dataclass
class TrainConfig:
    """Settings every trainer shares.

    Attributes:
        model: A local Hugging Face model folder (the CLI builds the CPU toy's for ``tiny``).
        steps: Training steps (one rollout round and its update each).
        out: Output folder: ``metrics.jsonl``, ``config.json``, ``rollouts/``, checkpoints.
        tasks: Task ids to train on (one group per task per step, or see ``tasks_per_step``).
        tasks_per_step: Groups per step drawn from ``tasks`` (passes of seeded shuffles;
            None: every task every step).
        sampler: ``uniform`` (the above) or ``adaptive``: ``tasks_per_step`` (default: as many
            as there are tasks) draws per step, with replacement, weighted by a per-task Beta
            posterior toward tasks whose groups hold both outcomes
            (:class:`repogym.agents.sampling.AdaptiveSampler`).
        sampler_forget: The adaptive sampler's forgetting factor per step (1: never forget).
        sampler_explore: The adaptive sampler's uniform share of the draw.
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
        top_p: Nucleus sampling mass (1: off); the behaviour logprobs are the truncated
            distribution's, and the correction below accounts for the gap.
        top_k: Sample among the ``top_k`` most likely tokens (0: off).
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
        weight_sync: How weights reach the server (:mod:`repogym.agents.server_engine`).
        served_dir: The folder vLLM serves (``weight_sync=vllm`` overwrites it).
        restart_command: ``weight_sync=restart``'s command (``{path}``: the new weights).
        behaviour_correction: Off-policy correction in synchronous training: ``auto``
            (``decoupled`` when a server samples or top-p/top-k truncate sampling, else
            none), ``none``, ``decoupled`` (the clipped loss to the learner's own old
            logprobs, each token times ``min(pi_old/mu, C)``, as TRL's token-truncated IS)
            or ``tis``.
        behaviour_is_cap: ``C`` of that correction.
        reuse_cache: In-process engine: keep the KV cache across turns.
        shaping: Reward shaping (:class:`repogym.agents.shaping.ShapingConfig` or its dict).
        save_every: Save a checkpoint every this many steps (and always at the end).
        save_rollouts: Write ``OUT/rollouts/step-*.jsonl``.
        eval_every: Evaluate every this many steps and after the last (0: never).
        eval_tasks: The evaluation tasks (``--eval-split`` fills it).
        eval_samples: Episodes per evaluation task.
        eval_greedy: Evaluate with the most likely tokens (else sampled).
        rollout: Group size, step budget, token budgets, sandbox, dynamic sampling, ...
    """

    model: str = ""
    steps: int = 20
    out: str = "runs/train"
    tasks: tuple[str, ...] = ()
    tasks_per_step: int | None = None
    sampler: Literal["uniform", "adaptive"] = "uniform"
    sampler_forget: float = 0.95
    sampler_explore: float = 0.05
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
    top_p: float = 1.0
    top_k: int = 0
    beta: float = 0.0
    kl_mode: Literal["loss", "reward"] = "loss"
    kl_kind: KLKind = "k2"
    ent_coef: float = 0.0
    system_prompt: str | None = None
    max_obs_chars: int = 8000
    observation_role: Literal["auto", "tool", "user"] = "auto"
    rollout_server: str | None = None
    weight_sync: WeightSync = "auto"
    served_dir: str | None = None
    restart_command: str | None = None
    behaviour_correction: Literal["auto", "none", "decoupled", "tis"] = "auto"
    behaviour_is_cap: float | None = 3.0
    reuse_cache: bool = True
    shaping: ShapingConfig | dict | None = None
    save_every: int = 0
    save_rollouts: bool = True
    eval_every: int = 0
    eval_tasks: tuple[str, ...] = ()
    eval_samples: int = 1
    eval_greedy: bool = True
    rollout: RolloutConfig = field(default_factory=RolloutConfig)

    def __post_init__(self) -> None:
        if isinstance(self.rollout, dict):
            self.rollout = RolloutConfig(**self.rollout)
        self.tasks = tuple(self.tasks)
        self.eval_tasks = tuple(self.eval_tasks)
        self.shaping = ShapingConfig.coerce(self.shaping)
        check_choice(
            "behaviour_correction",
            self.behaviour_correction,
            Literal["auto", "none", "decoupled", "tis"],
        )
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1]; got {self.top_p}")
        check_choice("kl_mode", self.kl_mode, Literal["loss", "reward"])
        check_choice("sampler", self.sampler, Literal["uniform", "adaptive"])
        check_choice("lr_schedule", self.lr_schedule, Literal["constant", "linear", "cosine"])
        if self.beta and self.kl_mode == "loss":
            kl_loss(torch.zeros(1), torch.zeros(1), self.kl_kind)  # k1 as a loss: refused
        if self.kl_mode == "reward" and self.kl_kind != "k1":
            self.kl_kind = "k1"


def lr_factor(config: TrainConfig) -> Callable[[int], float]:
    """The schedule's multiplier of ``lr`` after ``n`` completed steps."""

    def factor(n: int) -> float:
        if config.warmup_steps and n < config.warmup_steps:
            return (n + 1) / config.warmup_steps
        if config.lr_schedule == "constant":
            return 1.0
        span = max(config.steps - config.warmup_steps, 1)
        done = min(max(n - config.warmup_steps, 0) / span, 1.0)
        return (
            1.0 - done if config.lr_schedule == "linear" else 0.5 * (1 + math.cos(math.pi * done))
        )

    return factor


def chat_format(config: TrainConfig, tokenizer: Any) -> ChatFormat:
    """The chat format of ``config``'s chat options for ``tokenizer``."""
    return ChatFormat(
        tokenizer,
        system_prompt=config.system_prompt or SYSTEM_PROMPT,
        max_obs_chars=config.max_obs_chars,
        observation_role=config.observation_role,
    )


@dataclass
class ChatFormatFactory:
    """Builds :func:`chat_format` of ``config`` for a tokenizer (picklable, for asynchronous
    workers).

    Attributes:
        config: The trainer's config (its chat options).
    """

    config: TrainConfig

    def __call__(self, tokenizer: Any) -> ChatFormat:
        return chat_format(self.config, tokenizer)
