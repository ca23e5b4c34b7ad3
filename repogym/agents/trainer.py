"""The loop every trainer shares: collect, update, log, evaluate, save, resume.

Each algorithm's file (``grpo.py``, ``ppo.py``, ``distill.py``) extends
:class:`repogym.agents.config.TrainConfig` with its own ``@dataclass`` and implements
:meth:`Trainer.update`. What they share lives here and in :mod:`repogym.agents.plumbing`
(the loss plumbing):

- building: the policy (:func:`repogym.agents.policy.load_policy`), the episode format
  (:class:`repogym.agents.chat.ChatFormat` unless one is passed in, e.g. the CPU toy's menu),
  the engine (in-process HF, or ``rollout_server`` for vLLM/SGLang), the environments, and
  FSDP2 sharding under ``torchrun`` (:mod:`repogym.agents.distributed`);
- one training step: :meth:`Trainer.collect` (this rank's groups of the step's tasks,
  :func:`repogym.agents.sampling.step_tasks`; reward shaping; ``OUT/rollouts``), the
  algorithm's :meth:`Trainer.update` of the batch and the episodes behind it (with the
  off-policy correction when the sampler is not the learner: a server, top-p/top-k), the LR
  schedule, the engine's weight sync;
- in-training evaluation (``eval_every``, ``eval_tasks``; :mod:`repogym.agents.evaluation`);
- checkpoints ``OUT/checkpoint-N`` (:mod:`repogym.agents.checkpoint`) and :meth:`Trainer.train`
  ``resume=True``, which continues bit-identically on a CPU.
"""

from __future__ import annotations

import abc
import contextlib
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from repogym.agents.batch import Batch
from repogym.agents.checkpoint import (
    RunLog,
    read_state,
    resolve_resume,
    rng_state,
    set_rng_state,
    write_checkpoint,
)
from repogym.agents.config import (
    AsyncCorrection,
    ExtraTerm,
    Progress,
    TrainConfig,
    chat_format,
    lr_factor,
)
from repogym.agents.distributed import Parallel
from repogym.agents.engines import Engine, HFEngine
from repogym.agents.episode import Episode, collate, write_rollouts
from repogym.agents.evaluation import evaluate
from repogym.agents.plumbing import LossPlumbing
from repogym.agents.policy import Policy, load_policy
from repogym.agents.rollout import EnvPool, EpisodeFormat, collect
from repogym.agents.sampling import AdaptiveSampler, step_tasks
from repogym.agents.server_engine import ServerEngine, check_logprobs
from repogym.agents.shaping import component_counts, default_max_len, shape_episodes

__all__ = ["Trainer", "behaviour_correction"]


class Trainer(LossPlumbing, abc.ABC):
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
        parallel: The data-parallel group (default: from torchrun's environment, else one).
    """

    value_head = False
    """Load the policy with a value head (see :meth:`wants_value_head`)."""

    def __init__(
        self,
        config: TrainConfig,
        *,
        policy: Policy | None = None,
        fmt: EpisodeFormat | None = None,
        fmt_factory: Callable[[Any], EpisodeFormat] | None = None,
        engine: Engine | None = None,
        pool: EnvPool | None = None,
        extra_terms: Mapping[str, ExtraTerm] | None = None,
        progress: Progress | None = None,
        parallel: Parallel | None = None,
    ) -> None:
        self.progress = progress
        parallel = parallel or Parallel.from_env(config.device)
        if parallel.enabled and config.lora is not None:
            raise ValueError(
                "lora with data parallelism is not supported yet (FSDP2 over peft "
                "adapters is untested). Fix: drop --nproc, or train every weight"
            )
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        policy = policy or _load_policy(config, parallel, value_head=self.wants_value_head(config))
        self.fmt = fmt or (fmt_factory or (lambda t: chat_format(config, t)))(policy.tokenizer)
        self.pool = pool or EnvPool(config.rollout)
        super().__init__(
            config,
            policy,
            parallel,
            extra_terms=extra_terms,
            ref=policy.reference() if config.beta else None,
            correction=behaviour_correction(config),
        )
        for model in [self.policy, *self.build_models()]:
            self.parallel.shard(model)
        if self.ref is not None and not self.ref.adapters_off:
            self.parallel.shard(self.ref.policy)
        self.engine = engine or self._engine()
        self.optimizer = torch.optim.AdamW(
            self.param_groups(), lr=config.lr, weight_decay=config.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_factor(config))
        self.step = 0
        self.metric_counts: dict[str, float] = {}  # this step's: see reduce_metrics
        self._checked_server = False
        self.sampler: AdaptiveSampler | None = None
        if config.sampler == "adaptive":
            self.sampler = AdaptiveSampler(
                config.tasks,
                config.rollout.group_size,
                forget=config.sampler_forget,
                explore=config.sampler_explore,
            )

    # -- building ----------------------------------------------------------------------------
    @classmethod
    def wants_value_head(cls, config: TrainConfig) -> bool:
        """Whether the policy is loaded with a value head (PPO's critic; by default
        :attr:`value_head`)."""
        return cls.value_head

    def build_models(self) -> list[Policy]:
        """Extra trained models (a separate critic), built before sharding."""
        return []

    def _engine(self) -> Engine:
        c = self.config
        if c.rollout_server:
            return ServerEngine(
                c.rollout_server,
                self.fmt.stops,
                temperature=c.temperature,
                top_p=c.top_p,
                top_k=c.top_k,
                sync_dir=Path(c.out) / "weights",
                weight_sync=c.weight_sync,
                served_dir=c.served_dir,
                restart_command=c.restart_command,
                parallel=self.parallel,
            )
        return HFEngine(
            self.policy, self.fmt.stops, reuse_cache=c.reuse_cache, top_p=c.top_p, top_k=c.top_k
        )

    def parameters(self) -> list[torch.nn.Parameter]:
        """The parameters the optimiser trains."""
        return [p for group in self.param_groups() for p in group["params"]]

    def param_groups(self) -> list[dict[str, Any]]:
        """The optimiser's parameter groups (subclasses add theirs, e.g. a critic's lr)."""
        return [{"params": [p for p in self.policy.parameters() if p.requires_grad]}]

    def state_module(self) -> torch.nn.Module:
        """The module holding every trained parameter (the optimiser state's keys)."""
        return self.policy

    def report(self, event: str, **fields: Any) -> None:
        """Send a progress event (see :data:`Progress`)."""
        if self.progress is not None and self.parallel.main:
            self.progress(event, fields)

    # -- one step ----------------------------------------------------------------------------
    @abc.abstractmethod
    def update(self, batch: Batch, episodes: Sequence[Episode] | None = None) -> dict[str, float]:
        """Optimise on one batch; returns metrics.

        Args:
            batch: The collated episodes (:func:`repogym.agents.episode.collate`).
            episodes: The episodes behind ``batch``, in its order (a trainer that needs more
                than the tensors, such as distillation's teacher, reads them; None where a
                rank only runs padding passes).
        """

    @contextlib.contextmanager
    def sampling(self) -> Iterator[None]:
        """The weights in-process generation needs (gathered on each rank under FSDP)."""
        if isinstance(self.engine, HFEngine) and self.engine.policy is self.policy:
            with self.parallel.full_weights(self.policy):
                yield
        else:
            yield

    def collect(self, step: int) -> tuple[Batch | None, list[Episode], dict[str, float]]:
        """Sample this rank's groups of the step (shaped, saved): the batch (None if empty),
        the episodes behind it, and the collection's metrics."""
        cfg = self.config
        mine = self.parallel.mine(self.step_tasks(step))
        total = len(mine) * cfg.rollout.group_size
        self.report("collect", step=step, episodes=total * self.parallel.world)
        done = [0]

        def on_episode(_: Episode) -> None:
            done[0] += 1
            self.report("episode", done=done[0], total=total)

        with self.sampling():
            rollout = collect(
                self.engine,
                self.fmt,
                self.pool,
                [t for _, t in mine],
                cfg.rollout,
                seed=cfg.seed + 1000 * step,
                max_context=self.policy.max_len,
                on_episode=on_episode,
                group_ids=[i for i, _ in mine],
            )
        self.engine.release()
        metrics = rollout.metrics()
        self.metric_counts.update(rollout.counts())
        if self.sampler is not None:
            metrics.update(self.update_sampler(rollout.all_episodes))
        if cfg.shaping is not None:
            metrics.update(
                shape_episodes(rollout.episodes, cfg.shaping, default_max_len(cfg.rollout))
            )
            self.metric_counts.update(component_counts(rollout.episodes))
        if cfg.save_rollouts:
            self.write_episodes(Path(cfg.out) / "rollouts", step, rollout.all_episodes)
        if not rollout.episodes:
            return None, [], metrics
        batch = collate(rollout.episodes, self.policy.tokenizer.pad_token_id)
        return batch, rollout.episodes, metrics

    def step_tasks(self, step: int) -> list[str]:
        """The tasks of training step ``step``, one group each (every rank gets the same)."""
        cfg = self.config
        if self.sampler is None:
            return step_tasks(cfg.tasks, cfg.tasks_per_step, step, cfg.seed)
        return self.sampler.draw(cfg.tasks_per_step or len(cfg.tasks), step, cfg.seed)

    def update_sampler(self, episodes: Sequence[Episode]) -> dict[str, float]:
        """Feed every rank's valid outcomes of the step to the adaptive sampler; returns
        ``sampler/*`` metrics (before the update: what the step's draw was based on)."""
        mine: dict[str, list[float]] = {}
        for ep in episodes:
            if ep.valid:
                mine.setdefault(ep.task, []).append(ep.reward)
        outcomes: dict[str, list[float]] = {}
        for part in self.parallel.gather_objects(mine):
            for task, rewards in part.items():
                outcomes.setdefault(task, []).extend(rewards)
        probs = self.sampler.probabilities()
        drawn = [self.sampler.signal(t) for t in outcomes]
        metrics = {
            "sampler/max_prob": float(probs.max()),
            "sampler/signal_prob_mean": sum(drawn) / max(len(drawn), 1),
            "sampler/distinct_tasks": float(len(outcomes)),
        }
        self.sampler.update(outcomes)
        return metrics

    def write_episodes(self, folder: Path, step: int, episodes: Sequence[Episode]) -> None:
        """Rollout files of this rank's episodes (``r<rank>-`` in the names under DP)."""
        tag = f"r{self.parallel.rank}-" if self.parallel.enabled else ""
        write_rollouts(folder, step, episodes, self.fmt_decode, tag=tag)

    def fmt_decode(self, ids: list[int]) -> str:
        """Text of token ids (special tokens kept), for rollout files."""
        return self.policy.tokenizer.decode(ids, skip_special_tokens=False)

    def train_step(self, step: int) -> dict[str, float]:
        """One rollout round, its update, the LR schedule and the engine's weight sync."""
        start = time.monotonic()
        self.metric_counts = {}
        batch, episodes, metrics = self.collect(step)
        self.report("update", step=step)
        tokens = int(self.parallel.sum(batch.num_action_tokens if batch is not None else 0))
        if tokens:
            own = batch is not None
            batch = batch if batch is not None else self.empty_batch()
            metrics.update(self.check_server(batch))
            updated = self.update(batch, episodes if own else None)
            metrics.update(updated)
            self.metric_counts.update(self.update_counts(updated, batch if own else None))
            self.engine.sync_weights(self.policy, step)
        metrics["lr"] = self.optimizer.param_groups[0]["lr"]
        self.scheduler.step()
        metrics["time/step_s"] = time.monotonic() - start
        return self.parallel.reduce_metrics(metrics, self.metric_counts)

    def update_counts(self, metrics: Mapping[str, float], batch: Batch | None) -> dict[str, float]:
        """How many items each of :meth:`update`'s means is over on this rank: its real
        micro-batches (per-micro-batch metrics are averaged over them), its episodes for
        ``kl/reward_penalty``; 0 for every key on a rank that only ran padding passes."""
        n_micro = len(batch.split(self.config.micro_batch)) if batch is not None else 0
        counts = dict.fromkeys(metrics, float(n_micro))
        if "kl/reward_penalty" in metrics:
            counts["kl/reward_penalty"] = float(len(batch)) if batch is not None else 0.0
        return counts

    def check_server(self, batch: Batch) -> dict[str, float]:
        """On a run's first update, compare a server's behaviour logprobs with the learner's
        (:func:`repogym.agents.server_engine.check_logprobs`)."""
        if not isinstance(self.engine, ServerEngine) or self._checked_server:
            return {}
        self._checked_server = True
        batch = batch.to(self.device)
        learner = self.score_batch(batch).logp
        temperature = self.policy.temperature
        self.policy.temperature = 1.0
        try:
            raw = self.score_batch(batch).logp
        finally:
            self.policy.temperature = temperature
        return check_logprobs(batch.old_logp, learner, raw, batch.action_mask, temperature)

    def evaluate(self, step: int) -> dict[str, float]:
        """``eval/*`` metrics of ``eval_samples`` episodes per evaluation task (see
        :mod:`repogym.agents.evaluation`); the episodes go to ``OUT/eval``."""
        cfg = self.config
        mine = self.parallel.mine(list(cfg.eval_tasks))
        with self.sampling():
            metrics, episodes = evaluate(
                self.engine,
                self.fmt,
                self.pool,
                [t for _, t in mine],
                cfg.rollout,
                samples=cfg.eval_samples,
                greedy=cfg.eval_greedy,
                seed=cfg.seed + 10**6 + step,
                max_context=self.policy.max_len,
                group_ids=[i for i, _ in mine],
            )
        if cfg.save_rollouts:
            self.write_episodes(Path(cfg.out) / "eval", step, episodes)
        rows = [(e.reward, e.resolved) for e in episodes if e.valid]
        everyone = [r for part in self.parallel.gather_objects(rows) for r in part]
        n = max(len(everyone), 1)
        metrics = self.parallel.reduce_metrics(  # eval/episodes summed, fractions weighted
            metrics, {"eval/infra_error_frac": metrics.get("eval/episodes", 0.0)}
        )
        metrics.update(
            {
                "eval/reward_mean": sum(r for r, _ in everyone) / n,
                "eval/resolve_rate": sum(bool(x) for _, x in everyone) / n,
            }
        )
        return metrics

    def open_run(self, resume: bool | str | Path = False, *, log: bool = True) -> RunLog | None:
        """Resume if asked (weights, optimiser, schedule, RNG, step), then open ``OUT``'s
        ``config.json`` and ``metrics.jsonl`` (None when not logging)."""
        if resume:
            self.load_checkpoint(resolve_resume(self.config.out, resume))
        if not log:
            return None
        return RunLog(
            self.config.out,
            self.config,
            resumed_after=self.step if resume else None,
            main=self.parallel.main,
        )

    def end_of_step(
        self, step: int, steps: int, metrics: dict[str, float], run: RunLog | None
    ) -> None:
        """Evaluate if due, log, report, checkpoint if due (every trainer loop's tail)."""
        cfg = self.config
        if cfg.eval_every and cfg.eval_tasks and (step % cfg.eval_every == 0 or step == steps):
            metrics.update(self.evaluate(step))
        if run is not None:
            run.log(step, metrics)
        self.report("step", step=step, steps=steps, metrics=metrics)
        if run is not None and (step == steps or (cfg.save_every and step % cfg.save_every == 0)):
            self.save_checkpoint()

    def train(
        self, steps: int | None = None, *, resume: bool | str | Path = False, log: bool = True
    ) -> list[dict[str, float]]:
        """Run to step ``steps`` (default ``config.steps``); log, save, optionally resume.

        Args:
            steps: The last step.
            resume: True (the latest ``OUT/checkpoint-N``) or a checkpoint folder: continue
                after its step with its weights, optimiser, schedule and RNG states.
            log: Write ``OUT/metrics.jsonl``, ``OUT/config.json`` and checkpoints.

        Returns:
            The metrics of the steps run.
        """
        steps = self.config.steps if steps is None else steps
        run = self.open_run(resume, log=log)
        history = []
        try:
            for step in range(self.step + 1, steps + 1):
                metrics = self.train_step(step)
                self.step = step
                history.append(metrics)
                self.end_of_step(step, steps, metrics, run)
        finally:
            if run is not None:
                run.close()
        return history

    # -- checkpoints -------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What a checkpoint holds besides the model folder (subclasses add theirs); every
        rank calls it (FSDP gathers the weights and optimiser state on rank 0)."""
        par = self.parallel
        policy = par.full_state_dict(self.policy) if par.enabled else self.policy.state_dict()
        return {
            "step": self.step,
            "policy": policy,
            "optimizer": par.optimizer_state(self.state_module(), self.optimizer),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng_state(),
            "sampler": self.sampler.state() if self.sampler is not None else None,
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state` (subclasses restore theirs too)."""
        self.parallel.load_full_state_dict(self.policy, state["policy"])
        self.parallel.load_optimizer_state(self.state_module(), self.optimizer, state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])
        if self.sampler is not None and state.get("sampler"):
            self.sampler.load_state(state["sampler"])
        set_rng_state(state["rng"])
        self.engine.sync_weights(self.policy, self.step)

    def save_checkpoint(self) -> Path:
        """Write ``OUT/checkpoint-<step>``: the model and tokenizer (``save_pretrained``) and
        ``trainer_state.pt`` (rank 0 writes; every rank calls it)."""
        path = Path(self.config.out) / f"checkpoint-{self.step}"
        state = self.state()
        if self.parallel.main:
            lm, lm_state = self.policy.model, None
            if self.parallel.enabled:  # the gathered weights, in the LM's own key names
                lm, lm_state = (
                    self.policy.lm,
                    {
                        k.removeprefix("model."): v
                        for k, v in state["policy"].items()
                        if k.startswith("model.")
                    },
                )
            write_checkpoint(path, lm, self.policy.tokenizer, state, lm_state)
        self.parallel.barrier()
        return path

    def load_checkpoint(self, path: str | Path) -> None:
        """Resume from a checkpoint folder written by :meth:`save_checkpoint`."""
        self.load_state(read_state(path))

    def close(self) -> None:
        """Close the environments."""
        self.pool.close()


def _load_policy(config: TrainConfig, parallel: Parallel, *, value_head: bool) -> Policy:
    """The policy ``config.model`` names, on this rank's device."""
    c = config
    if not c.model:
        raise ValueError(
            "no model. Fix: --model PATH (a saved Hugging Face model) or --model tiny (the CPU toy)"
        )
    device = parallel.device if parallel.enabled else c.device
    return load_policy(
        c.model,
        value_head=value_head,
        device=device,
        dtype=c.dtype,
        param_dtype=c.param_dtype,
        temperature=c.temperature,
        gradient_checkpointing=c.gradient_checkpointing,
        lora=c.lora,
        chunk_size=c.chunk_size,
    )


def behaviour_correction(config: TrainConfig) -> AsyncCorrection | None:
    """The synchronous off-policy correction ``config.behaviour_correction`` asks for
    (``auto``: ``decoupled`` when sampling from a server or with top-p/top-k, else none)."""
    name = config.behaviour_correction
    if name == "auto":
        truncated = config.top_p < 1.0 or config.top_k > 0
        name = "decoupled" if config.rollout_server or truncated else "none"
    return None if name == "none" else AsyncCorrection(name, config.behaviour_is_cap)
