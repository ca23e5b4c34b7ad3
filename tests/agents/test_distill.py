"""Distillation: the chunked exact KL against the full-vocabulary formula, the teacher's
privileged-context alignment, and the student's KL to the teacher falling (distill, opd)."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from repogym.agents.distill import DistillConfig, DistillTrainer, OPDConfig, Teacher
from repogym.agents.losses import full_kl, opd_advantages
from repogym.agents.scoring import distill_stats
from tests.agents._episodes import ACTIONS, collate_eps, episode, tiny_policy


def test_full_kl_closed_form_and_chunked_kl_matches_it() -> None:
    p_s, p_t = torch.tensor([[0.5, 0.5]]).log(), torch.tensor([[0.9, 0.1]]).log()
    assert float(full_kl(p_s, p_t, "forward")) == pytest.approx(
        0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)
    )
    g = torch.Generator().manual_seed(0)
    h, ht = torch.randn(11, 8, generator=g), torch.randn(11, 6, generator=g)
    w, wt = torch.randn(50, 8, generator=g), torch.randn(50, 6, generator=g)
    targets = torch.randint(0, 50, (11,), generator=g)
    out = distill_stats(h, ht, targets, (w, None), (wt, None), direction="reverse", chunk=4)
    s, t = torch.log_softmax(h @ w.T, -1), torch.log_softmax(ht @ wt.T, -1)
    torch.testing.assert_close(out["kl"], full_kl(s, t, "reverse"))
    torch.testing.assert_close(out["kl_other"], full_kl(s, t, "forward"))
    torch.testing.assert_close(out["logp"], s.gather(-1, targets[:, None]).squeeze(-1))
    adv = opd_advantages(torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)]))
    assert float(adv) == pytest.approx(-math.log(2.0))


def _trainer(student, teacher, opd: bool = False, **kw) -> DistillTrainer:
    cls = OPDConfig if opd else DistillConfig
    return DistillTrainer(cls(device="cpu", lr=5e-4, **kw), policy=student, teacher=teacher)


def test_privileged_teacher_positions_are_shifted_by_the_hint(qwen_dir) -> None:
    """Self-distillation: the same model given a hint; without one the KL is exactly 0."""
    student = tiny_policy(qwen_dir)
    eps = [episode(student, [a, "submit\n"], 1.0) for a in ACTIONS[:2]]
    same = _trainer(student, Teacher(student.frozen_copy(), {}))
    _t_batch, offsets = same.teacher_batch(same.teacher, eps)
    assert offsets.tolist() == [0, 0]
    with pytest.raises(ValueError, match="episodes behind the batch"):
        same.update(collate_eps(student, eps))  # the teacher needs them: no hidden state
    m = same.update(collate_eps(student, eps), eps)
    assert m["loss/kl"] == pytest.approx(0.0, abs=1e-6)
    hinted = _trainer(tiny_policy(qwen_dir), Teacher(student.frozen_copy(), {"t": "gold fix 1\n"}))
    _, offsets = hinted.teacher_batch(hinted.teacher, eps)
    assert offsets.tolist() == [len(student.encode("gold fix 1\n"))] * 2


def _falls(values: list[float]) -> bool:
    return values[-1] < 0.7 * values[0]


def test_distill_and_opd_bring_the_student_to_the_teacher(qwen_dir) -> None:
    teacher = tiny_policy(qwen_dir, seed=1)
    eps = [episode(teacher, [ACTIONS[0], "submit\n"], 1.0)] * 4
    for opd in (False, True):
        student = copy.deepcopy(tiny_policy(qwen_dir))
        with torch.no_grad():  # a different student: perturb its head
            student.lm.get_output_embeddings().weight.mul_(3.0)
        trainer = _trainer(student, Teacher(teacher.frozen_copy(), {}), opd=opd, kl_coef=1.0)
        kls = [trainer.update(collate_eps(student, eps), eps)["loss/kl"] for _ in range(6)]
        assert _falls(kls), (opd, kls)
