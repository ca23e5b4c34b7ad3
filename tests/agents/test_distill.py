"""Distillation: KL maths, teacher alignment with privileged context, the student's KL to the
teacher falling (distill, on-policy, self-distillation), and the CLI in real environments."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch

from repogym.agents.common import sft_update
from repogym.agents.distill import (
    DistillConfig,
    DistillTrainer,
    OPDConfig,
    Teacher,
    full_kl,
    opd_advantages,
    student_logprobs,
)
from repogym.agents.episode import Episode, Turn
from tests.agents._episodes import ACTIONS, episode, tiny_policy


def test_full_kl_closed_form() -> None:
    p_s = torch.tensor([[[0.5, 0.5]]]).log()
    p_t = torch.tensor([[[0.9, 0.1]]]).log()
    forward = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)
    reverse = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    assert float(full_kl(p_s, p_t, "forward")) == pytest.approx(forward)
    assert float(full_kl(p_s, p_t, "reverse")) == pytest.approx(reverse)
    assert float(full_kl(p_t, p_t, "reverse")) == 0.0
    with pytest.raises(ValueError, match="direction"):
        full_kl(p_s, p_t, "sideways")  # type: ignore[arg-type]


def test_opd_advantage_is_negative_per_token_reverse_kl() -> None:
    student = torch.tensor([[math.log(0.5), math.log(0.1)]])
    teacher = torch.tensor([[math.log(0.25), math.log(0.4)]])
    adv = opd_advantages(student, teacher)
    assert torch.allclose(adv, torch.tensor([[-math.log(2.0), math.log(4.0)]]))


def _trainer(student, teacher_obj: Teacher | None, tmp_path, **kw) -> DistillTrainer:
    cfg_cls = OPDConfig if kw.pop("opd", False) else DistillConfig
    config = cfg_cls(tasks=("t"), out=str(tmp_path), device="cpu", **kw)
    return DistillTrainer(config, policy=student, , teacher=teacher_obj)


def _teacher_episodes(policy) -> list[Episode]:
    return [episode(policy, [a, "submit\n"], 1.0) for a in ACTIONS[:2]] * 2


def test_teacher_alignment_with_privileged_context() -> None:
    student = tiny_policy(seed=0)
    eps = _teacher_episodes(student)
    batch = collate_eps(student, eps)
    s_logp = student_logprobs(student, batch.input_ids, batch.attention_mask).detach()
    # The same model without privilege: aligned distributions are the student's own, KL = 0.
    same = Teacher(student.frozen_copy(), {})
    t_logp = same.logprobs(student.tokenizer, eps, batch.input_ids.shape[1])
    mask = batch.action_mask.bool()
    assert torch.allclose(t_logp[mask], s_logp[mask], atol=1e-5)
    # With the gold fix in its context the teacher's sequence is longer by the hint; its
    # distribution for each student action token is the one at the shifted position.
    hint = "gold fix 1\n"
    privileged = Teacher(student.frozen_copy(), {"t": hint})
    t_logp = privileged.logprobs(student.tokenizer, eps, batch.input_ids.shape[1])
    t_batch = collate_eps(student, [privileged.episode(e) for e in eps])
    own = student_logprobs(privileged.policy, t_batch.input_ids, t_batch.attention_mask)
    shift = len(student.encode("task t\n" + hint)) - len(student.encode("task t\n"))
    assert shift > 0
    for b in range(len(eps)):
        for t in torch.nonzero(batch.action_mask[b]).squeeze(-1).tolist():
            assert t_batch.input_ids[b, t + shift] == batch.input_ids[b, t]
            assert torch.allclose(t_logp[b, t], own[b, t + shift], atol=1e-5)
    assert float(full_kl(s_logp, t_logp, "forward")[mask].mean()) > 0


def _falls(values: list[float]) -> bool:
    return values[-1] < 0.7 * values[0] and min(values[1:]) < values[0]


def test_distill_student_kl_to_teacher_falls(tmp_path) -> None:
    """A teacher (another tiny model) that was trained on its trajectories; the student learns
    them by SFT + forward KL to the teacher's full distribution."""
    student, other = tiny_policy(seed=0), tiny_policy(seed=1)
    eps = _teacher_episodes(student)
    batch = collate_eps(student, eps)
    optimizer = torch.optim.AdamW(other.parameters(), lr=3e-3)
    for _ in range(15):
        sft_update(other, optimizer, batch)
    trainer = _trainer(student, Teacher(other.requires_grad_(False), {}), tmp_path, lr=3e-3)
    before = [p.detach().clone() for p in student.parameters()]
    kls = [trainer.update(batch, eps)["loss/kl"] for _ in range(6)]
    assert _falls(kls), kls
    assert any(not torch.equal(a, b) for a, b in zip(before, student.parameters(), strict=True))


def _samples(policy, n: int) -> list[Episode]:
    """Episodes the student samples itself (real behaviour logprobs), no environment."""
    policy.eval()
    gens = policy.generate([policy.encode("task t\n")] * n, max_new_tokens=6)
    policy.train()
    return [Episode("t", "task t\n", [Turn(g.token_ids, g.logprobs, "")]) for g in gens]


def _sft(policy, episodes: list[Episode], steps: int = 15) -> None:
    optimizer = torch.optim.AdamW(policy.parameters(), lr=3e-3)
    batch = collate_eps(policy, episodes)
    for _ in range(steps):
        sft_update(policy, optimizer, batch)


def test_on_policy_distillation_reverse_kl_falls(tmp_path) -> None:
    """The student (warm-started on a uniform mix of actions) samples; a teacher that learned
    to answer ``fix 1`` scores every token."""
    torch.manual_seed(0)
    student, teacher = tiny_policy(seed=0), tiny_policy(seed=1)
    _sft(student, [episode(student, [a], 1.0, obs="") for a in ACTIONS])
    _sft(teacher, [episode(teacher, ["fix 1\n"], 1.0, obs="")])
    trainer = _trainer(student, Teacher(teacher.requires_grad_(False), {}), tmp_path, lr=3e-3,
                       opd=True, kl_coef=0.0)  # fmt: skip
    kls = []
    for _ in range(6):
        eps = _samples(student, 16)
        metrics = trainer.update(collate_eps(student, eps), eps)
        kls.append(metrics["loss/kl"])
        assert metrics["loss/kl"] == metrics["distill/reverse_kl"]
    assert _falls(kls), kls


def test_self_distillation_with_gold_fix_in_context(tmp_path) -> None:
    """The teacher is the student itself (frozen at the start) with the gold fix in its
    context: given ``gold fix 2`` it answers ``fix 2``; without it the model is unsure."""
    torch.manual_seed(0)
    student = tiny_policy(seed=0)
    hinted = episode(student, ["fix 2\n"], 1.0, obs="")
    hinted.prompt = "task t\ngold fix 2\n"
    plain = [episode(student, [a], 1.0, obs="") for a in ACTIONS]
    _sft(student, [hinted] * 3 + plain, steps=30)
    trainer = _trainer(student, None, tmp_path, lr=1e-3, teacher="self", opd=True,
                       kl_coef=0.0, privileged=False)  # fmt: skip
    teacher = trainer.get_teacher()
    teacher.hints = {"t": "gold fix 2\n"}  # the menu interface's hint, here by hand
    assert teacher.policy is not student and not any(
        p.requires_grad for p in teacher.policy.parameters()
    )
    kls = []
    for _ in range(6):
        eps = _samples(student, 16)
        kls.append(trainer.update(collate_eps(student, eps), eps)["loss/kl"])
    assert _falls(kls), kls


@pytest.mark.parametrize("algo", ["distill", "opd"])
def test_cli_distill_real_env(tmp_path, algo: str) -> None:
    out = tmp_path / algo
    cmd = [sys.executable, "-m", "repogym.harness.cli", "train", "--algo", algo, "--model",
           "tiny", "--steps", "2", "--out", str(out), "--task", "retry-zero",
           "--set", "warm_start_steps=0", "--set", "rollout.group_size=2",
           "--set", "rollout.max_steps=2"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for key in ("loss/policy", "loss/kl", "distill/reverse_kl", "reward/mean"):
        assert key in rows[-1], key
    if algo == "distill":  # the oracle's trajectory resolves the task
        assert rows[-1]["reward/mean"] == 1.0
