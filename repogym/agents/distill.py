"""Distillation: students learn from a teacher's trajectories and next-token distributions.

Two trainers on one :class:`DistillConfig`:

- ``--algo distill`` (``mode="distill"``): supervised fine-tuning on teacher trajectories --
  the oracle's (the gold fix, then ``submit``, run in the real environment) or episodes sampled
  from a teacher model (``trajectories="teacher"``) -- plus the token-level KL between the
  teacher's full next-token distribution and the student's on every action token
  (``kl_direction="forward"``: ``KL(teacher || student)``, GKD's supervised form):
  ``loss = sft_coef * CE(actions) + kl_coef * mean_t KL_t`` (``loss/policy`` + ``loss/kl``).
- ``--algo opd`` (``mode="opd"``): on-policy distillation (Agarwal et al. 2024; Thinking
  Machines 2025). The student samples episodes in the environment; the teacher scores every
  sampled token; the per-token reverse KL estimate ``log pi_S(a_t) - log pi_T(a_t)`` is the
  negative advantage of that token in an importance-sampled policy-gradient loss
  (:func:`repogym.agents.losses.policy_loss` with the sampler's logprobs as the old policy).
  The exact reverse KL over the full distributions is reported as ``loss/kl``.

Teachers (``teacher=``): a local model folder with the student's tokenizer, or ``"self"``:
self-distillation, where the teacher is the same model (a frozen copy of the student when
training starts) given the gold fix in its context (``privileged``): the task's
``solution.patch`` after the prompt, or with the menu interface of the CPU demo the gold
entry's label (``gold fix 3``). The teacher's sequence then has a longer prompt; its
distributions are aligned to the student's tokens by the prompt-length offset
(:func:`aligned_teacher_logprobs`).

Metrics: ``loss/policy`` (distill: the cross-entropy on the teacher's actions; opd: the
policy-gradient loss), ``loss/kl``, ``distill/reverse_kl``,
``distill/forward_kl`` (token means over the action tokens), ``reward/mean``, ...

Run it: ``repogym train --algo distill --model tiny --steps 20 --out runs/distill`` or
``--algo opd`` (``--set teacher=PATH`` for a teacher model).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch

from repogym.agents.common import (
    TrainConfig,
    Trainer,
    assemble_loss,
    autocast,
    clip_and_step,
    mean_metrics,
)
from repogym.agents.losses import aggregate, policy_loss
from repogym.agents.policy import Batch, Episode, Policy, collate, load_policy
from repogym.agents.rollout import SUBMIT_ACTION, ScriptedActor, run_episodes

__all__ = [
    "DistillConfig",
    "DistillTrainer",
    "OPDConfig",
    "Teacher",
    "aligned_teacher_logprobs",
    "full_kl",
    "opd_advantages",
    "student_logprobs",
]


# --------------------------------------------------------------------------------------------
# Maths
# --------------------------------------------------------------------------------------------


def full_kl(
    student_logp: torch.Tensor,
    teacher_logp: torch.Tensor,
    direction: Literal["forward", "reverse"] = "forward",
) -> torch.Tensor:
    """Exact per-position KL between two next-token distributions ``[B, T, V]`` -> ``[B, T]``.

    ``forward``: ``KL(teacher || student) = sum_v p_T (log p_T - log p_S)`` (mode covering,
    SFT-like); ``reverse``: ``KL(student || teacher) = sum_v p_S (log p_S - log p_T)`` (mode
    seeking, what on-policy distillation minimises).
    """
    if direction == "forward":
        return (teacher_logp.exp() * (teacher_logp - student_logp)).sum(-1)
    if direction == "reverse":
        return (student_logp.exp() * (student_logp - teacher_logp)).sum(-1)
    raise ValueError(f"unknown KL direction {direction!r}; expected 'forward' or 'reverse'")


def opd_advantages(student_token_logp: torch.Tensor, teacher_token_logp: torch.Tensor):
    """On-policy distillation's per-token advantage ``-(log pi_S(a_t) - log pi_T(a_t))``.

    The bracket is the one-sample estimate of the reverse KL at that position; tokens the
    teacher finds likelier than the student get a positive advantage. No gradient.
    """
    return -(student_token_logp - teacher_token_logp).detach()


def student_logprobs(policy: Policy, input_ids: torch.Tensor, attention_mask: torch.Tensor):
    """The policy's full next-token log-distributions aligned with the input ``[B, T, V]``.

    Row ``t`` is the distribution of token ``t`` given ``x_<t`` (row 0 is zeros), at the
    policy's temperature, in float32.
    """
    logits = policy.model(input_ids=input_ids, attention_mask=attention_mask).logits
    logp = torch.log_softmax(logits[:, :-1].float() / policy.temperature, dim=-1)
    return torch.cat([torch.zeros_like(logp[:, :1]), logp], dim=1)


@torch.no_grad()
def aligned_teacher_logprobs(
    teacher: Policy, teacher_batch: Batch, offsets: torch.Tensor, width: int
) -> torch.Tensor:
    """The teacher's next-token log-distributions at the student's positions ``[B, width, V]``.

    The teacher's sequence ``b`` is the student's with ``offsets[b]`` more prompt tokens (0
    without privileged context), so student position ``t`` is teacher position
    ``t + offsets[b]``. Positions past the teacher's sequence repeat its last row (they are
    masked out by the caller).
    """
    full = student_logprobs(teacher, teacher_batch.input_ids, teacher_batch.attention_mask)
    idx = torch.arange(width, device=full.device)[None, :] + offsets.to(full.device)[:, None]
    idx = idx.clamp(max=full.shape[1] - 1)
    return full.gather(1, idx[..., None].expand(-1, -1, full.shape[-1]))


# --------------------------------------------------------------------------------------------
# Teacher
# --------------------------------------------------------------------------------------------


@dataclass
class Teacher:
    """A frozen teacher policy, optionally given the gold fix in its context.

    Attributes:
        policy: The teacher (no gradient).
        hints: Task id -> privileged text appended to the prompt (empty: no privilege).
    """

    policy: Policy
    hints: dict[str, str]

    def episode(self, episode: Episode) -> Episode:
        """The episode as the teacher sees it (the hint after the prompt)."""
        hint = self.hints.get(episode.task, "")
        return replace(episode, prompt=episode.prompt + hint) if hint else episode

    @torch.no_grad()
    def logprobs(self, student_tokenizer: Any, episodes: Sequence[Episode], width: int):
        """Teacher log-distributions aligned with the student batch of ``episodes``."""
        t_eps = [self.episode(e) for e in episodes]
        enc = student_tokenizer
        offsets = torch.tensor([
            len(enc(t.prompt, add_special_tokens=False)["input_ids"])
            - len(enc(e.prompt, add_special_tokens=False)["input_ids"])
            for t, e in zip(t_eps, episodes, strict=True)
        ])  # fmt: skip
        batch = collate(self.policy.tokenizer, t_eps).to(self.policy.device)
        return aligned_teacher_logprobs(self.policy, batch, offsets, width)


def gold_hints(interface: Any, tasks: Sequence[str], max_chars: int = 2000) -> dict[str, str]:
    """Per task, the gold fix as privileged context: the menu's gold label, or the patch."""
    from repogym.agents.menu import PatchMenu
    from repogym.scenarios.registry import registered_tasks

    if isinstance(interface, PatchMenu):
        return {t: f"gold {_gold_candidate(interface, t).label}\n" for t in tasks}
    known = registered_tasks()
    return {
        t: "A correct fix (reference, do not copy blindly):\n"
        + known[t].solution_patch.read_text(encoding="utf-8")[:max_chars].rstrip("\n")
        + "\n"
        for t in tasks
    }


def _gold_candidate(menu: Any, task: str) -> Any:
    for cand in menu.menus[task]:
        if cand.source == "solution":
            return cand
    raise ValueError(f"task {task!r} has no usable gold patch in the menu (see menu warnings)")


# --------------------------------------------------------------------------------------------
# Trainer
# --------------------------------------------------------------------------------------------


@dataclass
class DistillConfig(TrainConfig):
    """Distillation settings (see the module docstring).

    Attributes:
        mode: ``distill`` (SFT + KL on teacher trajectories) or ``opd`` (on-policy).
        teacher: ``self`` (self-distillation) or a local model folder with the student's
            tokenizer.
        privileged: Give the teacher the gold fix in its context (default: for ``self``).
        trajectories: ``distill`` mode: SFT on the ``oracle``'s or the ``teacher``'s episodes.
        sft_coef: Weight of the cross-entropy on the teacher trajectories' actions.
        kl_coef: Weight of the full-distribution KL (None: 1 for distill; for opd 0, so
            ``loss/kl`` is reported and the policy-gradient term does the work).
        kl_direction: ``forward`` (KL(teacher || student)) or ``reverse`` (None: forward for
            distill, reverse for opd).
        epochs: Optimiser steps per batch.
    """

    mode: Literal["distill", "opd"] = "distill"
    teacher: str = "self"
    privileged: bool | None = None
    trajectories: Literal["oracle", "teacher"] = "oracle"
    sft_coef: float = 1.0
    kl_coef: float | None = None
    kl_direction: Literal["forward", "reverse"] | None = None
    epochs: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, value, allowed in (
            ("mode", self.mode, ("distill", "opd")),
            ("trajectories", self.trajectories, ("oracle", "teacher")),
        ):
            if value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; expected one of {allowed}")
        if self.kl_coef is None:
            self.kl_coef = 1.0 if self.mode == "distill" else 0.0
        if self.kl_direction is None:
            self.kl_direction = "forward" if self.mode == "distill" else "reverse"
        if self.kl_direction not in ("forward", "reverse"):
            raise ValueError(
                f"unknown kl_direction {self.kl_direction!r}; expected 'forward' or 'reverse'"
            )
        if self.privileged is None:
            self.privileged = self.teacher == "self"
        if self.warm_start_steps is None and self.mode == "distill":
            self.warm_start_steps = 0  # the teacher's data is the supervision


class DistillTrainer(Trainer):
    """Distillation (SFT + KL) and on-policy distillation; see the module docstring.

    Args:
        config: :class:`DistillConfig`.
        teacher: A teacher to use instead of the one ``config.teacher`` names.
        **kwargs: ``policy``, ``interface``, ``pool``, ``extra_terms``.
    """

    config: DistillConfig

    def __init__(self, config: DistillConfig, *, teacher: Teacher | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(config, **kwargs)
        params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
        self.teacher = teacher
        self._oracle: list[Episode] | None = None
        self.episodes: list[Episode] = []

    def get_teacher(self) -> Teacher:
        """The teacher (built on first use, after any warm start of the student)."""
        if self.teacher is None:
            cfg = self.config
            if cfg.teacher == "self":
                policy = self.policy.frozen_copy()
            else:
                policy = load_policy(
                    cfg.teacher,
                    device=str(self.device),
                    temperature=cfg.temperature,
                    stop=self.interface.stop,
                )
                policy.requires_grad_(False).eval()  # fmt: skip
                _check_vocab(self.policy, policy, cfg.teacher)
            hints = gold_hints(self.interface, cfg.tasks) if cfg.privileged else {}
            self.teacher = Teacher(policy, hints)
        return self.teacher

    # -- data -------------------------------------------------------------------------------
    def collect(self, step: int) -> tuple[Batch | None, dict[str, float]]:
        """Student samples (opd), teacher samples, or the oracle's episodes (run once).

        The episodes behind the batch are kept in ``self.episodes`` (the teacher needs their
        prompts).
        """
        cfg = self.config
        if cfg.mode == "opd" or cfg.trajectories == "teacher":
            from repogym.agents.rollout import collect

            actor = self.policy if cfg.mode == "opd" else self.get_teacher().policy
            self.policy.eval()
            rollout = collect(actor, self.interface, self.pool, list(cfg.tasks), cfg.rollout,
                              seed=cfg.seed + 1000 * step)  # fmt: skip
            self.policy.train()
            episodes, metrics = rollout.episodes, rollout.metrics()
        else:
            if self._oracle is None:
                self._oracle = oracle_episodes(self.interface, self.pool, cfg,
                                               self.policy.tokenizer)  # fmt: skip
            episodes = [e for e in self._oracle if e.valid]
            n = max(len(episodes), 1)
            metrics = {"reward/mean": sum(e.reward for e in episodes) / n,
                       "resolve_rate": sum(e.resolved for e in episodes) / n,
                       "infra_error_frac": 1.0 - len(episodes) / max(len(self._oracle), 1)}  # fmt: skip
        self.episodes = list(episodes)
        if not episodes:
            return None, metrics
        return collate(self.policy.tokenizer, episodes), metrics

    # -- update -----------------------------------------------------------------------------
    def update(self, batch: Batch, episodes: Sequence[Episode] | None = None) -> dict[str, float]:
        """``epochs`` optimiser steps of the distillation loss on ``batch``.

        Args:
            batch: The collated ``episodes``.
            episodes: The episodes behind the batch (default: those of the last ``collect``).
        """
        cfg = self.config
        episodes = self.episodes if episodes is None else episodes
        if len(episodes) != len(batch):
            raise ValueError("update() needs the episodes behind the batch (same order)")
        teacher = self.get_teacher()
        batch = batch.to(self.device)
        rows = []
        for _ in range(cfg.epochs):
            micro = []
            for lo in range(0, len(batch), cfg.micro_batch):
                mb = batch.select(slice(lo, lo + cfg.micro_batch))
                eps = episodes[lo : lo + cfg.micro_batch]
                micro.append(self._micro_step(mb, eps, teacher, batch.action_mask.sum()))
            grad_norm = clip_and_step(self.policy.parameters(), self.optimizer, cfg.max_grad_norm)
            out = mean_metrics(micro)
            for key in out:
                if key.startswith(("loss/", "distill/")):
                    out[key] = sum(r[key] for r in micro)
            rows.append({**out, "grad_norm": grad_norm})
        return mean_metrics(rows)

    def _micro_step(
        self, mb: Batch, episodes: Sequence[Episode], teacher: Teacher, num_tokens: torch.Tensor
    ) -> dict[str, float]:
        cfg = self.config
        mask = mb.action_mask
        t_logp = teacher.logprobs(self.policy.tokenizer, episodes, mb.input_ids.shape[1])
        with autocast(self.device, cfg.bf16):
            s_logp = student_logprobs(self.policy, mb.input_ids, mb.attention_mask)
        token_logp = s_logp.gather(-1, mb.input_ids[..., None]).squeeze(-1)
        norm = {"global_num_tokens": num_tokens}
        kl_t = full_kl(s_logp, t_logp, cfg.kl_direction)
        terms = {"kl": (cfg.kl_coef, aggregate(kl_t, mask, "token_mean", **norm))}
        metrics: dict[str, float] = {}
        if cfg.mode == "distill":
            # The policy's loss on the teacher's actions is their cross-entropy (SFT).
            terms["policy"] = (cfg.sft_coef, aggregate(-token_logp, mask, "token_mean", **norm))
        else:
            teacher_token = t_logp.gather(-1, mb.input_ids[..., None]).squeeze(-1)
            adv = opd_advantages(token_logp, teacher_token) * mask
            pl, metrics = policy_loss(token_logp, mb.old_logp, adv, mask, kind="ppo", **norm)
            terms = {"policy": (1.0, pl), **terms}
        total, loss_metrics = assemble_loss(terms)
        total.backward()
        with torch.no_grad():
            for direction in ("reverse", "forward"):
                value = aggregate(full_kl(s_logp, t_logp, direction), mask, "token_mean", **norm)
                metrics[f"distill/{direction}_kl"] = float(value)
        return {**metrics, **loss_metrics}


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


def oracle_episodes(
    interface: Any, pool: Any, config: TrainConfig, tokenizer: Any
) -> list[Episode]:
    """One real episode per task in which the oracle applies the gold fix and submits."""
    from repogym.agents.menu import PatchMenu
    from repogym.scenarios.registry import registered_tasks

    menu = interface if isinstance(interface, PatchMenu) else None
    if menu is None:
        known = registered_tasks()
        menu = PatchMenu([known[t] for t in config.tasks], seed=config.seed, noop=False)
    episodes = []
    for task in config.tasks:
        gold = _gold_candidate(menu, task)
        if menu is interface:
            texts = [f"{gold.label}\n", "submit\n"]
        else:
            texts = [*gold.actions, SUBMIT_ACTION]
        actor = ScriptedActor(tokenizer, _script(texts))
        rollout_cfg = replace(config.rollout, max_steps=len(texts) + 2)
        episodes += run_episodes(actor, interface, pool, [task], rollout_cfg, seed=config.seed)
    return episodes


def _script(texts: list[str]) -> Any:
    """A script for one episode at a time: the texts in order, then submit."""
    state = {"n": 0}

    def script(i: int, ctx: list[int]) -> str:
        n = state["n"]
        state["n"] += 1
        return texts[n] if n < len(texts) else SUBMIT_ACTION

    return script


@dataclass
class OPDConfig(DistillConfig):
    """:class:`DistillConfig` with ``mode="opd"`` (on-policy distillation) by default."""

    mode: Literal["distill", "opd"] = "opd"


def main_distill(args: argparse.Namespace) -> int:
    """``repogym train --algo distill``."""
    from repogym.agents.train_cli import train_from_args

    return train_from_args("distill", DistillConfig, DistillTrainer, args)


def main_opd(args: argparse.Namespace) -> int:
    """``repogym train --algo opd``."""
    from repogym.agents.train_cli import train_from_args

    return train_from_args("opd", OPDConfig, DistillTrainer, args)
