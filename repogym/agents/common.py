"""Plumbing shared by the trainers: config base, metrics log, loss assembly, checkpoints.

The maths lives in :mod:`repogym.agents.losses`; each trainer (``ppo.py``, ``grpo.py``) is
one file with its own ``@dataclass`` config. What they share is here:

- :class:`TrainConfig`: model, steps, output folder, tasks, interface, rollout and optimiser
  settings (each trainer's config extends it).
- :func:`assemble_loss`: sums weighted loss terms and reports each as ``loss/<name>``, so
  extra terms (the Echo observation loss, distillation KL) plug in without touching a trainer.
- :class:`MetricsLogger`: ``OUT/metrics.jsonl`` (+ TensorBoard when installed).
- :func:`build_run`: policy, interface and environments for a config; :func:`save_checkpoint`.
- :func:`sft_update`: next-token cross-entropy on action tokens (warm start on scripted
  trajectories).
"""

from __future__ import annotations

import abc
import contextlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import torch

from repogym.agents.policy import Batch, Policy, Scores, load_policy
from repogym.agents.rollout import AgentInterface, EnvPool, RolloutConfig, TextInterface

__all__ = [
    "DEMO_TASKS",
    "ExtraTerm",
    "MetricsLogger",
    "TrainConfig",
    "assemble_loss",
    "autocast",
    "build_interface",
    "check_choice",
    "optimise_epochs",
    "run_logged",
    "save_checkpoint",
    "sft_update",
    "sum_losses",
]

DEMO_TASKS = ("retry-zero", "chunk-list-remainder", "float-isclose")
"""Train-split built-in tasks whose menus the CPU demo learns."""

ExtraTerm = Callable[[Policy, Batch, Scores], torch.Tensor]
"""An extra loss term: ``(policy, micro-batch, scores) -> scalar`` (e.g. Echo, distillation)."""


@dataclass
class TrainConfig:
    """Settings every trainer shares.

    Attributes:
        model: ``"tiny"`` or a local Hugging Face model folder.
        steps: Training steps (one rollout round and its updates each).
        out: Output folder: ``metrics.jsonl``, ``config.json``, checkpoints.
        tasks: Task ids to train on (one group per task per step).
        interface: ``menu`` (the demo's compact action language, for the tiny model) or
            ``text`` (the policy writes tool calls); ``auto`` picks menu for ``tiny``.
        seed: Seeds torch, the tiny model and the environments.
        lr: Adam learning rate.
        max_grad_norm: Gradient clipping.
        micro_batch: Episodes per forward/backward (gradients accumulate to one step).
        device: ``auto``, ``cpu`` or ``cuda``.
        bf16: bf16 autocast; None means on for CUDA, off on the CPU.
        gradient_checkpointing: Recompute activations in the backward pass.
        temperature: Sampling (and scoring) temperature.
        save_every: Save a checkpoint every this many steps (0: only at the end).
        warm_start_steps: Supervised steps on one real scripted trajectory per menu entry
            before RL (menu interface only); None means 60 for the tiny model with the menu
            interface (from random weights nothing is learned: every reward is 0), else 0.
        warm_start_lr: Learning rate of the warm start.
        rollout: Group size, step budget, sandbox, dynamic sampling, ...
    """

    model: str = "tiny"
    steps: int = 20
    out: str = "runs/train"
    tasks: tuple[str, ...] = DEMO_TASKS
    interface: Literal["auto", "menu", "text"] = "auto"
    seed: int = 0
    lr: float = 3e-4
    max_grad_norm: float = 1.0
    micro_batch: int = 16
    device: str = "auto"
    bf16: bool | None = None
    gradient_checkpointing: bool = False
    temperature: float = 1.0
    save_every: int = 0
    warm_start_steps: int | None = None
    warm_start_lr: float = 1e-3
    rollout: RolloutConfig = field(default_factory=RolloutConfig)

    def __post_init__(self) -> None:
        if isinstance(self.rollout, dict):  # from JSON (``--set rollout={...}``)
            self.rollout = RolloutConfig(**self.rollout)
        self.tasks = tuple(self.tasks)
        if not self.tasks:
            raise ValueError("tasks is empty. Fix: name at least one task id (--task ID)")


def assemble_loss(
    terms: Mapping[str, tuple[float, torch.Tensor]],
) -> tuple[torch.Tensor, dict[str, float]]:
    """``sum(weight * term)``, and ``loss/<name>`` metrics of each unweighted term.

    Args:
        terms: Name -> (weight, scalar tensor). A term with weight 0 is reported but not added
            (so its graph is not needed).

    Returns:
        ``(total, metrics)``.
    """
    total: torch.Tensor | None = None
    metrics = {}
    for name, (weight, value) in terms.items():
        metrics[f"loss/{name}"] = float(value.detach())
        if weight:
            total = weight * value if total is None else total + weight * value
    if total is None:
        raise ValueError("assemble_loss() needs at least one term with a non-zero weight")
    return total, metrics


def mean_metrics(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Average metric dicts key by key (``is_weight/max`` takes the max)."""
    out: dict[str, float] = {}
    for key in {k for r in rows for k in r}:
        values = [r[key] for r in rows if key in r]
        out[key] = max(values) if key.endswith("/max") else sum(values) / len(values)
    return out


def sum_losses(rows: list[dict[str, float]]) -> dict[str, float]:
    """One optimiser step's micro-batch metrics: ``loss/*`` summed (global normalisers make the
    sum the batch loss), the rest averaged (``*/max``: maximum)."""
    out = mean_metrics(rows)
    for key in out:
        if key.startswith("loss/"):
            out[key] = sum(r[key] for r in rows if key in r)
    return out


def check_choice(name: str, value: str, literal: object) -> None:
    """Raise ValueError naming the choices when ``value`` is not one of ``Literal`` ``literal``."""
    if value not in get_args(literal):
        raise ValueError(
            f"unknown {name} {value!r}; expected one of {', '.join(map(repr, get_args(literal)))}"
        )


class MetricsLogger:
    """Append one JSON line per step to ``OUT/metrics.jsonl`` (and TensorBoard if installed)."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.path = self.out / "metrics.jsonl"
        self._file = self.path.open("a", encoding="utf-8")
        self._tb = _tensorboard(self.out / "tb")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Write ``metrics`` for ``step``."""
        row = {"step": step, "time": time.time(), **{k: float(v) for k, v in metrics.items()}}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self._tb is not None:
            for key, value in metrics.items():
                self._tb.add_scalar(key, float(value), step)

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if not self._file.closed:
            self._file.close()
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def _tensorboard(path: Path) -> Any:
    """A ``SummaryWriter`` when tensorboard is installed, else None."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(path))


@contextlib.contextmanager
def autocast(device: torch.device, bf16: bool | None) -> Iterator[None]:
    """bf16 autocast on CUDA by default (or when asked); a no-op otherwise."""
    enabled = (device.type == "cuda") if bf16 is None else bf16
    if not enabled:
        yield
        return
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
        yield


def build_interface(config: TrainConfig) -> AgentInterface:
    """The interface named by ``config.interface`` over ``config.tasks``."""
    kind = config.interface
    if kind == "auto":
        kind = "menu" if config.model == "tiny" else "text"
    if kind == "text":
        return TextInterface()
    from repogym.agents.menu import PatchMenu
    from repogym.scenarios.registry import registered_tasks

    known = registered_tasks()
    unknown = [t for t in config.tasks if t not in known]
    if unknown:
        raise ValueError(f"unknown tasks {unknown}. Fix: pick from {sorted(known)}")
    return PatchMenu([known[t] for t in config.tasks], seed=config.seed)


def build_policy(config: TrainConfig, interface: AgentInterface, *, value_head: bool) -> Policy:
    """Load (or build) the policy for ``config``, seeded."""
    torch.manual_seed(config.seed)
    return load_policy(
        config.model,
        value_head=value_head,
        device=config.device,
        temperature=config.temperature,
        stop=interface.stop,
        tiny_corpus=interface.corpus(),
        seed=config.seed,
        gradient_checkpointing=config.gradient_checkpointing,
    )


def make_pool(config: TrainConfig) -> EnvPool:
    """Environments for ``config.rollout``."""
    return EnvPool(config.rollout)


def write_config(config: Any, out: str | Path) -> None:
    """Save the config as ``OUT/config.json``."""
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(asdict(config), indent=2, default=str) + "\n")


def save_checkpoint(policy: Policy, out: str | Path, step: int) -> Path:
    """Save the model, tokenizer and value head to ``OUT/checkpoint-<step>``."""
    path = Path(out) / f"checkpoint-{step}"
    policy.model.save_pretrained(path)
    policy.tokenizer.save_pretrained(path)
    if policy.value_head is not None:
        torch.save(policy.value_head.state_dict(), path / "value_head.pt")
    return path


def clip_and_step(
    parameters: Iterable[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    max_grad_norm: float,
) -> float:
    """Clip gradients, step, zero them; returns the pre-clip gradient norm."""
    params = [p for p in parameters if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm) if params else torch.tensor(0.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(norm)


def optimise_epochs(
    batch: Batch,
    micro_step: Callable[[Batch], dict[str, float]],
    params: Sequence[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    *,
    epochs: int,
    micro_batch: int,
    max_grad_norm: float,
    start: float,
) -> dict[str, float]:
    """``epochs`` passes over ``batch``, one optimiser step each, gradients accumulated over
    its micro-batches.

    Args:
        batch: The batch (on the policy's device).
        micro_step: Forward and backward of one micro-batch; returns its metrics.
        params: The parameters to clip and step.
        optimizer: Their optimiser.
        epochs: Passes (optimiser steps).
        micro_batch: Micro-batch size.
        max_grad_norm: Gradient clipping norm.
        start: ``time.monotonic()`` when the update began (for ``throughput/tokens_per_s``).

    Returns:
        The passes' metrics averaged (``loss/*`` summed over micro-batches, ``grad_norm``) and
        ``throughput/tokens_per_s``.
    """
    rows_per_epoch = []
    for _ in range(epochs):
        rows = [micro_step(mb) for mb in batch.split(micro_batch)]
        grad_norm = clip_and_step(params, optimizer, max_grad_norm)
        rows_per_epoch.append({**sum_losses(rows), "grad_norm": grad_norm})
    metrics = mean_metrics(rows_per_epoch)
    tokens = int(batch.attention_mask.sum()) * epochs
    metrics["throughput/tokens_per_s"] = tokens / max(time.monotonic() - start, 1e-9)
    return metrics


def run_logged(
    config: TrainConfig,
    policy: Policy,
    steps: int,
    step_metrics: Iterable[dict[str, float]],
    *,
    log: bool = True,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> list[dict[str, float]]:
    """Consume ``steps`` steps' metrics: log them, call ``on_step``, save checkpoints.

    Args:
        config: The trainer's config (``out``, ``save_every``).
        policy: The policy to checkpoint.
        steps: The number of steps (the final checkpoint's name).
        step_metrics: Runs one step per item and yields its metrics.
        log: Write ``OUT/metrics.jsonl``, ``OUT/config.json`` and checkpoints.
        on_step: Called with ``(step, metrics)`` after each step.

    Returns:
        Every step's metrics.
    """
    logger = MetricsLogger(config.out) if log else None
    if log:
        write_config(config, config.out)
    history = []
    try:
        for step, metrics in enumerate(step_metrics, start=1):
            history.append(metrics)
            if logger is not None:
                logger.log(step, metrics)
            if on_step is not None:
                on_step(step, metrics)
            if log and config.save_every and step % config.save_every == 0:
                save_checkpoint(policy, config.out, step)
        if log:
            save_checkpoint(policy, config.out, steps)
    finally:
        if logger is not None:
            logger.close()
    return history


def sft_update(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    *,
    micro_batch: int = 64,
    max_grad_norm: float = 1.0,
) -> float:
    """One optimiser step of cross-entropy on the batch's action tokens; returns the loss.

    The loss is the token mean over the whole batch (micro-batches use the global count).
    """
    device = policy.device
    total = max(batch.num_action_tokens, 1)
    loss_sum = 0.0
    for mb in batch.split(micro_batch):
        mb = mb.to(device)
        scores = policy.score(mb.input_ids, mb.attention_mask)
        loss = -(scores.logp * mb.action_mask).sum() / total
        loss.backward()
        loss_sum += float(loss.detach())
    clip_and_step(policy.parameters(), optimizer, max_grad_norm)
    return loss_sum


class Trainer(abc.ABC):
    """The loop every trainer shares: collect a batch, update, log, checkpoint.

    Subclasses set ``value_head`` and implement :meth:`update` (the algorithm). The pieces
    (``policy``, ``interface``, ``pool``) can be passed in, e.g. a warm-started policy.

    Args:
        config: The trainer's config.
        policy: A policy to train (default: built from ``config.model``).
        interface: Text <-> environment translation (default: from ``config.interface``).
        pool: Environments (default: made from ``config.rollout``).
        extra_terms: Extra loss terms name -> (weight, fn), reported as ``loss/<name>``.
    """

    value_head = False

    def __init__(
        self,
        config: TrainConfig,
        *,
        policy: Policy | None = None,
        interface: AgentInterface | None = None,
        pool: EnvPool | None = None,
        extra_terms: Mapping[str, tuple[float, ExtraTerm]] | None = None,
    ) -> None:
        self.config = config
        self.interface = interface or build_interface(config)
        self.policy = policy or build_policy(config, self.interface, value_head=self.value_head)
        self.pool = pool or make_pool(config)
        self.extra_terms = dict(extra_terms or {})
        self.device = self.policy.device
        self.warm_started = False

    def warm_start(self, steps: int | None = None) -> float | None:
        """Supervised steps on one real trajectory per menu entry; returns the last loss.

        Every entry (gold fix, alternatives, decoys, no change) appears once, so the policy
        learns the action format and picks uniformly; its rewards come from real grading.
        A no-op (returning None) without a menu interface or with 0 steps.
        """
        from repogym.agents.menu import PatchMenu, scripted_episodes
        from repogym.agents.policy import collate

        if steps is None:
            steps = self.config.warm_start_steps
            if steps is None:
                steps = 60 if self.config.model == "tiny" else 0
        self.warm_started = True
        if not steps or not isinstance(self.interface, PatchMenu):
            return None
        tok = self.policy.tokenizer
        episodes = scripted_episodes(self.interface, tok, self.pool, self.config.rollout)
        batch = collate(tok, episodes)
        params = [p for p in self.policy.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=self.config.warm_start_lr, weight_decay=0.0)
        loss = 0.0
        for _ in range(steps):
            loss = sft_update(
                self.policy, optimizer, batch, max_grad_norm=self.config.max_grad_norm
            )
        return loss

    @abc.abstractmethod
    def update(self, batch: Batch) -> dict[str, float]:
        """Optimise on one batch; returns metrics."""

    def collect(self, step: int) -> tuple[Batch | None, dict[str, float]]:
        """Roll out one group per task; returns the batch (None if empty) and its metrics."""
        from repogym.agents.policy import collate
        from repogym.agents.rollout import collect

        self.policy.eval()
        rollout = collect(
            self.policy,
            self.interface,
            self.pool,
            list(self.config.tasks),
            self.config.rollout,
            seed=self.config.seed + 1000 * step,
        )
        self.policy.train()
        metrics = rollout.metrics()
        if not rollout.episodes:
            return None, metrics
        return collate(self.policy.tokenizer, rollout.episodes), metrics

    def train_step(self, step: int) -> dict[str, float]:
        """One rollout round and its update."""
        start = time.monotonic()
        batch, metrics = self.collect(step)
        if batch is not None and batch.num_action_tokens:
            metrics.update(self.update(batch))
        metrics["time/step_s"] = time.monotonic() - start
        return metrics

    def train(
        self,
        steps: int | None = None,
        *,
        log: bool = True,
        on_step: Callable[[int, dict[str, float]], None] | None = None,
        **worker_options: Any,
    ) -> list[dict[str, float]]:
        """Run ``steps`` (default ``config.steps``) steps; log metrics and save checkpoints.

        ``on_step(step, metrics)`` is called after each step (e.g. to print progress). With
        ``config.async_`` set (the GRPO and PPO trainers' option) the steps run with
        asynchronous rollout workers (:func:`repogym.agents.async_rl.train_async_option`, which
        takes ``worker_options`` such as ``factory``).
        """
        if getattr(self.config, "async_", None):
            from repogym.agents.async_rl import train_async_option

            return train_async_option(self, steps, log=log, on_step=on_step, **worker_options)
        if worker_options:
            raise TypeError(f"train() got unexpected keyword arguments {sorted(worker_options)} "
                            "(they apply only with config.async_)")  # fmt: skip
        steps = self.config.steps if steps is None else steps
        loop = self._steps(steps)
        return run_logged(self.config, self.policy, steps, loop, log=log, on_step=on_step)

    def _steps(self, steps: int) -> Iterator[dict[str, float]]:
        """Warm start (once), then yield the metrics of ``steps`` training steps."""
        if not self.warm_started:
            self.warm_start()
        for step in range(1, steps + 1):
            yield self.train_step(step)

    def _backward(
        self,
        terms: dict[str, tuple[float, torch.Tensor]],
        mb: Batch,
        scores: Scores,
        metrics: dict[str, float],
    ) -> dict[str, float]:
        """Add the extra terms to ``terms``, backpropagate their weighted sum (one micro-batch).

        Returns:
            ``metrics`` with ``entropy`` (mean over the action tokens) and ``loss/<name>``.
        """
        for name, (weight, fn) in self.extra_terms.items():
            terms[name] = (weight, fn(self.policy, mb, scores))
        total, loss_metrics = assemble_loss(terms)
        total.backward()
        masked = mb.action_mask.bool()
        metrics["entropy"] = float(scores.entropy.detach()[masked].mean()) if masked.any() else 0.0
        return {**metrics, **loss_metrics}

    def evaluate(self, samples: int, *, greedy: bool = False, seed: int = 12345) -> float:
        """Resolve rate over ``samples`` sampled episodes per task (valid episodes only)."""
        return evaluate(
            self.policy, self.interface, self.pool, self.config, samples, greedy=greedy, seed=seed
        )

    def close(self) -> None:
        """Close the environments."""
        self.pool.close()


def evaluate(
    policy: Policy,
    interface: AgentInterface,
    pool: EnvPool,
    config: TrainConfig,
    samples: int,
    *,
    greedy: bool = False,
    seed: int = 12345,
) -> float:
    """Resolve rate of ``policy`` over ``samples`` episodes per task of ``config.tasks``."""
    from dataclasses import replace

    from repogym.agents.rollout import collect

    rollout_cfg = replace(config.rollout, group_size=samples, greedy=greedy, dynamic_sampling=False)
    policy.eval()
    try:
        with torch.no_grad():
            rollout = collect(policy, interface, pool, list(config.tasks), rollout_cfg, seed=seed)
    finally:
        policy.train()
    return rollout.metrics()["resolve_rate"]
