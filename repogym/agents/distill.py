"""Distillation: students learn from a teacher's trajectories and next-token distributions.

One trainer, two modes of :class:`DistillConfig`:

- ``--algo distill`` (``mode="distill"``): supervised fine-tuning on teacher trajectories --
  the oracle's (the gold fix, then ``submit``, run in the real environment) or episodes the
  teacher samples (``trajectories="teacher"``) -- plus the exact token-level KL between the
  teacher's and the student's full next-token distributions on every completion token
  (``kl_direction="forward"``: ``KL(teacher || student)``, GKD's supervised form):
  ``loss = sft_coef * CE + kl_coef * mean_t KL_t`` (``loss/policy`` + ``loss/kl``).
- ``--algo opd`` (``mode="opd"``): on-policy distillation (Agarwal et al. 2024). The student
  samples; the teacher scores every sampled token; ``-(log pi_S(a_t) - log pi_T(a_t))`` is
  that token's advantage in a clipped policy-gradient loss with the engine's logprobs as the
  old policy. The exact reverse KL is reported as ``loss/kl``.

The KL over the vocabulary is computed in chunks of positions from both models' hidden states
(:func:`repogym.agents.scoring.distill_stats`): no ``[B, T, V]`` tensor is built.

Teachers (``teacher=``): a local model folder with the student's tokenizer, or ``self``:
self-distillation, where the teacher is a frozen copy of the student given the gold fix in its
first prompt (``privileged``). The teacher's sequence then has a longer first prompt; its
positions are the student's shifted by the difference.

The oracle's completions and the privileged hint come from the trainer's :class:`Oracle`
(``DistillTrainer(..., oracle=...)`` or its ``oracle`` attribute): by default
:class:`GoldPatchOracle`, tool calls that apply the task's gold patch, and the patch itself as
the hint. A format with its own action language supplies its own oracle.

Run it: ``repogym train --algo distill --model PATH --steps 20 --out runs/distill`` or
``--algo opd`` (``--set teacher=PATH``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import torch

from repogym.agents.batch import Batch, LossNorm
from repogym.agents.config import TrainConfig
from repogym.agents.engines import HFEngine, Request, ScriptedEngine
from repogym.agents.episode import Episode, collate
from repogym.agents.losses import check_choice, opd_advantages, policy_loss
from repogym.agents.policy import Policy, load_policy
from repogym.agents.rollout import SUBMIT_ACTION, collect, run_episodes
from repogym.agents.scoring import distill_stats
from repogym.agents.trainer import Trainer
from repogym.scenarios.registry import registered_tasks

__all__ = [
    "DistillBatch",
    "DistillConfig",
    "DistillTrainer",
    "GoldPatchOracle",
    "OPDConfig",
    "Oracle",
    "Teacher",
    "oracle_texts",
]


class Oracle(Protocol):
    """Where distillation's oracle trajectory and privileged hint come from, per task."""

    def oracle_texts(self, task: str) -> list[str]:
        """The completions of the gold trajectory, in the episode format's language."""
        ...

    def gold_hint(self, task: str) -> str:
        """The privileged text naming the gold fix (appended to the teacher's first prompt)."""
        ...


def oracle_texts(task: str) -> list[str]:
    """Tool calls that apply the task's gold patch and submit (as the harness oracle does)."""
    patch = registered_tasks()[task].solution_patch.read_text(encoding="utf-8")
    write = {"tool": "write", "args": {"path": "/tmp/gold.patch", "content": patch}}
    apply = {"tool": "bash", "args": {"command": "git apply /tmp/gold.patch"}}
    return [json.dumps(write), json.dumps(apply), SUBMIT_ACTION]


@dataclass
class GoldPatchOracle:
    """The default :class:`Oracle`: the gold patch as tool calls, and as the hint.

    Attributes:
        max_hint_chars: The hint's patch is clipped to this many characters.
    """

    max_hint_chars: int = 2000

    def oracle_texts(self, task: str) -> list[str]:
        """See :func:`oracle_texts`."""
        return oracle_texts(task)

    def gold_hint(self, task: str) -> str:
        """The gold patch (clipped), introduced as a reference fix."""
        patch = registered_tasks()[task].solution_patch.read_text(encoding="utf-8")
        return (
            "\n\nA correct fix (reference, do not copy blindly):\n" + patch[: self.max_hint_chars]
        )


@dataclass
class DistillConfig(TrainConfig):
    """Distillation settings (see the module docstring).

    Attributes:
        mode: ``distill`` (SFT + KL on teacher trajectories) or ``opd`` (on-policy).
        teacher: ``self`` (self-distillation) or a local model folder (student's tokenizer).
        privileged: Give the teacher the gold fix in its prompt (default: for ``self``).
        trajectories: ``distill`` mode: SFT on the ``oracle``'s or the ``teacher``'s episodes.
        sft_coef: Weight of the cross-entropy on the teacher trajectories' completions.
        kl_coef: Weight of the full-distribution KL (None: 1 for distill, 0 for opd).
        kl_direction: ``forward`` or ``reverse`` (None: forward for distill, reverse for opd).
        epochs: Optimiser steps per batch.
        max_hint_chars: The privileged hint (the gold patch) is clipped to this.
    """

    mode: Literal["distill", "opd"] = "distill"
    teacher: str = "self"
    privileged: bool | None = None
    trajectories: Literal["oracle", "teacher"] = "oracle"
    sft_coef: float = 1.0
    kl_coef: float | None = None
    kl_direction: Literal["forward", "reverse"] | None = None
    epochs: int = 1
    max_hint_chars: int = 2000

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("mode", self.mode, Literal["distill", "opd"])
        check_choice("trajectories", self.trajectories, Literal["oracle", "teacher"])
        if self.kl_coef is None:
            self.kl_coef = 1.0 if self.mode == "distill" else 0.0
        if self.kl_direction is None:
            self.kl_direction = "forward" if self.mode == "distill" else "reverse"
        check_choice("kl_direction", self.kl_direction, Literal["forward", "reverse"])
        if self.privileged is None:
            self.privileged = self.teacher == "self"


@dataclass
class OPDConfig(DistillConfig):
    """:class:`DistillConfig` with ``mode="opd"`` (on-policy distillation) by default."""

    mode: Literal["distill", "opd"] = "opd"


@dataclass
class Teacher:
    """A frozen teacher policy, optionally given a privileged hint per task.

    Attributes:
        policy: The teacher (no gradient).
        hints: Task id -> text appended to the first observation (empty: no privilege).
    """

    policy: Policy
    hints: dict[str, str]


@dataclass(kw_only=True)
class DistillBatch(Batch):
    """The student's batch with the teacher's view of the same episodes.

    Attributes:
        teacher_ids: ``[B, T']`` the token ids the teacher sees (its first prompt carries the
            hint), right-padded so that every student position plus its offset is inside.
        teacher_attention: ``[B, T']`` 1 on the teacher's real tokens.
        offset: ``[B]`` teacher position minus student position of the same token (the
            hint's length in tokens).
    """

    teacher_ids: torch.Tensor
    teacher_attention: torch.Tensor
    offset: torch.Tensor


class DistillTrainer(Trainer):
    """Distillation (SFT + KL) and on-policy distillation; see the module docstring.

    Args:
        config: :class:`DistillConfig`.
        teacher: A teacher to use instead of the one ``config.teacher`` names.
        oracle: The oracle's completions and hints (default: :class:`GoldPatchOracle`); it
            may also be set as the ``oracle`` attribute before training starts.
        **kwargs: As for :class:`repogym.agents.trainer.Trainer`.
    """

    config: DistillConfig

    def __init__(
        self,
        config: DistillConfig,
        *,
        teacher: Teacher | None = None,
        oracle: Oracle | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, **kwargs)
        self.teacher = teacher
        self.oracle: Oracle = oracle or GoldPatchOracle(config.max_hint_chars)
        self._oracle: list[Episode] | None = None

    def get_teacher(self) -> Teacher:
        """The teacher (built on first use, after any warm start of the student)."""
        if self.teacher is None:
            cfg = self.config
            if cfg.teacher == "self":
                policy = self.policy.frozen_copy()
            else:
                policy = (
                    load_policy(
                        cfg.teacher,
                        device=str(self.device),
                        dtype=cfg.dtype,
                        temperature=cfg.temperature,
                    )
                    .requires_grad_(False)
                    .eval()
                )
                _check_vocab(self.policy, policy, cfg.teacher)
            hints = {t: self.hint(t) for t in cfg.tasks} if cfg.privileged else {}
            self.teacher = Teacher(policy, hints)
        return self.teacher

    def hint(self, task: str) -> str:
        """The privileged text for ``task``: the oracle's gold hint."""
        return self.oracle.gold_hint(task)

    # -- data -------------------------------------------------------------------------------
    def collect(self, step: int) -> tuple[Batch | None, list[Episode], dict[str, float]]:
        """Student samples (opd), teacher samples, or the oracle's episodes (run once)."""
        cfg = self.config
        if cfg.mode == "opd":
            return super().collect(step)
        if cfg.trajectories == "teacher":
            return self._teacher_collect(step)
        if self._oracle is None:
            self._oracle = self.oracle_episodes()
        episodes = [e for e in self._oracle if e.valid]
        n = max(len(episodes), 1)
        metrics = {
            "reward/mean": sum(e.reward for e in episodes) / n,
            "resolve_rate": sum(e.resolved for e in episodes) / n,
            "infra_error_frac": 1.0 - len(episodes) / max(len(self._oracle), 1),
        }
        if not episodes:
            return None, [], metrics
        return collate(episodes, self.policy.tokenizer.pad_token_id), episodes, metrics

    def _teacher_collect(self, step: int) -> tuple[Batch | None, list[Episode], dict[str, float]]:
        cfg = self.config
        engine = HFEngine(self.get_teacher().policy, self.fmt.stops)
        rollout = collect(
            engine,
            self.fmt,
            self.pool,
            list(cfg.tasks),
            cfg.rollout,
            seed=cfg.seed + 1000 * step,
            max_context=self.policy.max_len,
        )
        episodes = rollout.episodes
        if not episodes:
            return None, [], rollout.metrics()
        return collate(episodes, self.policy.tokenizer.pad_token_id), episodes, rollout.metrics()

    def oracle_episodes(self) -> list[Episode]:
        """One real episode per task in which the oracle applies the gold fix and submits."""
        cfg = self.config
        episodes = []
        for task in cfg.tasks:
            texts = self.oracle.oracle_texts(task)
            turn = iter(range(10**6))

            def script(i: int, request: Request, texts: list[str] = texts, turn=turn) -> str:
                n = next(turn)
                return texts[n] if n < len(texts) else SUBMIT_ACTION

            engine = ScriptedEngine(self.policy.tokenizer, script)
            rollout_cfg = replace(cfg.rollout, max_steps=len(texts) + 2, group_size=1)
            episodes += run_episodes(
                engine,
                self.fmt,
                self.pool,
                [task],
                rollout_cfg,
                seed=cfg.seed,
                max_context=self.policy.max_len,
            )
        return episodes

    # -- update -----------------------------------------------------------------------------
    def update(self, batch: Batch, episodes: Sequence[Episode] | None = None) -> dict[str, float]:
        """``epochs`` optimiser steps of the distillation loss on ``batch``.

        Raises:
            ValueError: ``episodes`` is not the list of the episodes behind ``batch``.
        """
        if episodes is None or len(episodes) != len(batch):
            raise ValueError(
                "distillation's update needs the episodes behind the batch (the "
                "teacher sees them with its hint). Fix: pass them, "
                "update(batch, episodes)"
            )
        teacher = self.get_teacher()
        prepared = self.prepare(batch.to(self.device), teacher, episodes)
        norm = self.norm(prepared)
        return self.optimise(
            prepared,
            lambda mb: self.micro_step(mb, teacher, norm),
            epochs=self.config.epochs,
            optimizer=self.optimizer,
        )

    def prepare(self, batch: Batch, teacher: Teacher, episodes: Sequence[Episode]) -> DistillBatch:
        """``batch`` with the teacher's view of ``episodes`` (:meth:`teacher_batch`)."""
        t_batch, offsets = self.teacher_batch(teacher, episodes)
        width, pad = batch.input_ids.shape[1], self.policy.tokenizer.pad_token_id
        return DistillBatch(
            **batch.batch_fields(),
            offset=offsets.to(self.device),
            teacher_ids=_pad_to(t_batch.input_ids, width, offsets, pad).to(self.device),
            teacher_attention=_pad_to(t_batch.attention_mask, width, offsets, 0).to(self.device),
        )

    def teacher_batch(self, teacher: Teacher, episodes: Sequence[Episode]):
        """The episodes as the teacher sees them (hinted first prompt) and the offsets."""
        t_eps, offsets = [], []
        for ep in episodes:
            hint = teacher.hints.get(ep.task, "")
            first = self.fmt.start(ep.prompt, {"task": ep.task, "hint": hint}).pending
            turns = [replace(ep.turns[0], prompt_ids=first), *ep.turns[1:]] if ep.turns else []
            t_eps.append(replace(ep, turns=turns))
            offsets.append(len(first) - (len(ep.turns[0].prompt_ids) if ep.turns else 0))
        return collate(t_eps, self.policy.tokenizer.pad_token_id), torch.tensor(offsets)

    def micro_step(self, mb: DistillBatch, teacher: Teacher, norm: LossNorm) -> dict[str, float]:
        """Forward and backward of one micro-batch; returns its metrics."""
        cfg = self.config
        need = mb.action_mask.bool().clone()
        need[:, 0] = False
        b, t = need.nonzero(as_tuple=True)
        hidden = self.policy.hidden_states(mb.input_ids, mb.attention_mask)
        with torch.no_grad():
            t_hidden = teacher.policy.hidden_states(mb.teacher_ids, mb.teacher_attention)
        shift = mb.offset[b]
        stats = distill_stats(
            hidden[b, t - 1],
            t_hidden[b, t - 1 + shift],
            mb.input_ids[b, t],
            self.policy.head(),
            teacher.policy.head(),
            direction=cfg.kl_direction,
            temperature=cfg.temperature,
            chunk=cfg.chunk_size,
        )
        n = norm.num_tokens.clamp(min=1)
        full = {
            k: torch.zeros(need.shape, device=hidden.device).index_put((b, t), v)
            for k, v in stats.items()
        }
        kl = stats["kl"].sum() / n
        metrics: dict[str, float] = {
            "entropy": float(stats["entropy"].mean()) if len(stats["entropy"]) else 0.0,
            f"distill/{cfg.kl_direction}_kl": float(kl.detach()),
            f"distill/{'reverse' if cfg.kl_direction == 'forward' else 'forward'}_kl": float(
                stats["kl_other"].sum() / n
            ),
        }
        if cfg.mode == "distill":
            terms = {"policy": (cfg.sft_coef, -stats["logp"].sum() / n), "kl": (cfg.kl_coef, kl)}
        else:
            adv = opd_advantages(full["logp"], full["teacher_logp"]) * mb.action_mask
            pl, pm = policy_loss(
                full["logp"],
                mb.old_logp,
                adv,
                mb.action_mask,
                kind="ppo",
                global_num_tokens=norm.num_tokens,
            )
            metrics.update(pm)
            terms = {"policy": (1.0, pl), "kl": (cfg.kl_coef, kl)}
        out = {}
        total = sum(w * v for w, v in terms.values() if w)
        if isinstance(total, torch.Tensor) and total.requires_grad:
            total.backward()
        for name, (_, value) in terms.items():
            out[f"loss/{name}"] = float(value.detach())
        return {**metrics, **out}


def _pad_to(x: torch.Tensor, width: int, offsets: torch.Tensor, value: int) -> torch.Tensor:
    """Right-pad ``x`` so that every student position plus its offset is inside it."""
    need = width + int(offsets.max().clamp(min=0)) if len(offsets) else width
    if x.shape[1] >= need:
        return x
    pad = x.new_full((x.shape[0], need - x.shape[1]), value)
    return torch.cat([x, pad], dim=1)


def _check_vocab(student: Policy, teacher: Policy, where: str) -> None:
    """Raise unless the teacher tokenises like the student (the KL is over one vocabulary)."""
    probe = "def f(x):\n    return x + 1  # ok\n"
    if len(student.tokenizer) != len(teacher.tokenizer) or student.encode(probe) != teacher.encode(
        probe
    ):
        raise ValueError(
            f"teacher {where!r} has a different tokenizer from the student; token-level "
            "distillation needs one vocabulary. Fix: use a teacher of the student's family, or "
            "teacher=self"
        )
