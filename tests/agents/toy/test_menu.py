"""The CPU toy's menu and the rollout layer in real RepoEnv episodes (bwrap sandbox, hidden-test
grading): menu actions, groups, dynamic sampling, graded truncation, infra-error masking, the
context budget. A scripted engine replays actions; the environments are real."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
import torch

from repogym.agents.chat import ChatFormat
from repogym.agents.engines import Request, ScriptedEngine
from repogym.agents.episode import collate
from repogym.agents.rollout import EnvPool, RolloutConfig, collect, run_episodes
from repogym.agents.toy.menu import MenuFormat, menu_entries
from repogym.agents.toy.tiny import build_tokenizer
from repogym.scenarios.registry import registered_tasks

TASK = "retry-zero"


@pytest.fixture(scope="module")
def task():
    return registered_tasks()[TASK]


@pytest.fixture(scope="module")
def fmt(task) -> MenuFormat:
    tok = build_tokenizer(extra_corpus=MenuFormat.corpus((task,)))
    return MenuFormat((task,), tok)


@pytest.fixture(scope="module")
def labels(fmt) -> dict[str, str]:
    entries = fmt.entries(TASK)
    return {"good": fmt.gold_label(TASK), "bad": next(e.label for e in entries if e.kind == "noop")}


@pytest.fixture(scope="module")
def pool() -> Iterator[EnvPool]:
    with EnvPool(RolloutConfig(max_steps=4), grade_cache={}) as p:
        yield p


def picker(fmt: MenuFormat, choose) -> ScriptedEngine:
    """``choose(i)`` on the first turn, then submit."""

    def script(i: int, request: Request) -> str:
        _, _, rest = fmt.tokenizer.decode(request.prompt_ids).partition("\n")
        return "submit\n" if rest else f"{choose(i)}\n"

    return ScriptedEngine(fmt.tokenizer, script)


def test_menu_uses_the_tasks_candidates_and_never_puts_a_patch_in_the_sandbox(task) -> None:
    entries = menu_entries(task)
    names = sorted(e.name for e in entries if e.candidate is not None)
    assert names == sorted("gold" if c.kind == "gold" else c.name for c in task.candidates())
    for entry in entries:
        for action in entry.actions:
            assert '"tool": "write"' in action or '"tool": "bash"' in action
            assert "diff --git" not in action and ".patch" not in action
    assert [e.label for e in entries] == [f"fix {i}" for i in range(1, len(entries) + 1)]
    assert menu_entries(task, seed=1) != entries  # shuffled per seed


def test_episodes_are_graded_by_the_hidden_tests(fmt, pool, labels) -> None:
    cfg = RolloutConfig(group_size=2, max_steps=4)
    actor = picker(fmt, lambda i: labels["good"] if i == 0 else labels["bad"])
    good, bad = run_episodes(actor, fmt, pool, [TASK, TASK], cfg)
    assert (good.reward, good.resolved, good.terminated, good.graded) == (1.0, True, True, True)
    assert (bad.reward, bad.resolved) == (0.0, False)
    assert "Wrote" in good.turns[0].observation and "Submitted" in good.turns[1].observation
    assert good.info["diff"].startswith("diff --git a/retry.py")
    batch = collate([good, bad], fmt.tokenizer.pad_token_id)
    assert batch.valid.all() and batch.rewards.tolist() == [1.0, 0.0]


def test_dynamic_sampling_resamples_zero_variance_groups(fmt, pool, labels) -> None:
    always_good = picker(fmt, lambda i: labels["good"])
    cfg = RolloutConfig(group_size=2, max_steps=4, dynamic_sampling=True, max_resample=2)
    out = collect(always_good, fmt, pool, [TASK], cfg)
    assert (out.groups_sampled, out.zero_std_groups, out.dropped_groups) == (3, 3, 1)
    assert out.episodes == [] and len(out.all_episodes) == 6
    assert out.metrics()["frac_zero_std_groups"] == 1.0
    mixed = picker(fmt, lambda i: labels["good"] if i % 2 else labels["bad"])
    out = collect(mixed, fmt, pool, [TASK], cfg)
    assert (out.groups_sampled, out.zero_std_groups, len(out.episodes)) == (1, 0, 2)


def test_the_step_budget_truncates_and_the_env_grades_it(fmt, pool) -> None:
    actor = ScriptedEngine(fmt.tokenizer, lambda i, r: "ls\n")
    cfg = RolloutConfig(group_size=1, max_steps=2)
    with EnvPool(cfg, grade_cache=pool.grade_cache) as short:
        (ep,) = run_episodes(actor, fmt, short, [TASK], cfg)
    assert ep.truncated and not ep.terminated and len(ep.turns) == 2
    assert ep.graded and not ep.bootstrap  # graded: terminal for the critic
    assert ep.info["truncated_by"] == "max_steps" and ep.valid


def test_infra_errors_are_reported_and_masked(fmt, labels) -> None:
    """A sandbox that dies mid-episode (its workspace vanishes, as a host fault would do it):
    infra_error, masked out of every loss, not scored as a 0."""
    cfg = RolloutConfig(group_size=2, max_steps=4)
    with EnvPool(cfg, grade_cache={}) as pool:

        def crash_then_pick(i: int, request: Request) -> str:
            workspace = pool.get(TASK, i).unwrapped.session.sandbox.workspace
            subprocess.run(["umount", "-l", str(workspace.path)], check=False)
            subprocess.run(["rm", "-rf", str(workspace.path)], check=False)
            return f"{labels['good']}\n"

        out = collect(ScriptedEngine(fmt.tokenizer, crash_then_pick), fmt, pool, [TASK], cfg)
    assert all(e.infra_error and not e.valid for e in out.episodes)
    assert out.metrics()["infra_error_frac"] == 1.0
    batch = collate(out.episodes, fmt.tokenizer.pad_token_id)
    assert int(batch.action_mask.sum()) == 0 and not batch.valid.any()


def test_the_context_budget_submits_the_episode_with_a_notice(pool, qwen_dir) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen_dir, local_files_only=True)
    chat = ChatFormat(tok)
    actor = ScriptedEngine(tok, lambda i, r: '{"tool": "bash", "args": {"command": "ls"}}')
    _env, obs, _ = pool.reset(TASK, 0, 0)
    budget = len(chat.start(obs).pending) + 120  # room for about two turns
    cfg = RolloutConfig(group_size=1, max_steps=10, max_context=budget, max_new_tokens=64)
    (ep,) = run_episodes(actor, chat, pool, [TASK], cfg, max_context=4096)
    assert 1 <= len(ep.turns) < 10 and ep.info["context_full"] and ep.graded and ep.terminated
    assert "context budget reached" in ep.turns[-1].observation
    assert len(ep.token_ids()) <= budget
    assert torch.tensor(ep.token_ids()).numel() == len(ep.layout().input_ids)
