"""Rollouts in real RepoEnv episodes (bwrap sandbox, hidden-test grading): the menu action
language, groups, dynamic sampling and infra-error masking. A scripted actor replays actions
(as mini-swe-agent's DeterministicModel does); the environments are real."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from repogym.agents.menu import PatchMenu
from repogym.agents.policy import collate
from repogym.agents.rollout import EnvPool, RolloutConfig, ScriptedActor, collect, run_episodes
from repogym.agents.tiny import build_tokenizer
from repogym.scenarios.registry import registered_tasks
from repogym.scenarios.task import load_task

TASK = "retry-zero"


@pytest.fixture(scope="module")
def menu() -> PatchMenu:
    return PatchMenu([registered_tasks()[TASK]], seed=0)


@pytest.fixture(scope="module")
def tok(menu: PatchMenu):
    return build_tokenizer(extra_corpus=menu.corpus())


@pytest.fixture(scope="module")
def labels(menu: PatchMenu) -> dict[str, str]:
    """One passing and one failing label (by the task's own patches, for the script only)."""
    cands = menu.menus[TASK]
    return {
        "good": next(c.label for c in cands if c.source == "solution"),
        "bad": next(c.label for c in cands if c.source == "no change"),
    }


@pytest.fixture(scope="module")
def pool() -> Iterator[EnvPool]:
    with EnvPool(RolloutConfig(), grade_cache={}) as p:
        yield p


def picker(tok, choose):
    """A script: ``choose(i)`` on the first turn, then submit."""

    def script(i: int, ctx: list[int]) -> str:
        _prompt, _, rest = tok.decode(ctx).partition("\n")
        return "submit\n" if rest else f"{choose(i)}\n"

    return ScriptedActor(tok, script)


def test_menu_never_puts_the_patch_in_the_sandbox(menu: PatchMenu) -> None:
    """Menu actions are plain write tool calls with file contents, computed on the host."""
    for cand in menu.menus[TASK]:
        for action in cand.actions:
            assert '"tool": "write"' in action or '"tool": "bash"' in action
            assert "diff --git" not in action and ".patch" not in action
    assert sorted(c.label for c in menu.menus[TASK]) == [f"fix {i}" for i in range(1, 7)]
    assert menu.actions("hello", TASK) == ["hello"]  # unknown text reaches the env as is


def test_episodes_are_graded_by_the_hidden_tests(tok, pool: EnvPool, labels, menu) -> None:
    cfg = RolloutConfig(group_size=2)
    actor = picker(tok, lambda i: labels["good"] if i == 0 else labels["bad"])
    good, bad = run_episodes(actor, menu, pool, [TASK, TASK], cfg)
    assert (good.reward, good.resolved, good.terminated) == (1.0, True, True)
    assert (bad.reward, bad.resolved) == (0.0, False)
    assert "Wrote" in good.turns[0].observation and "Submitted" in good.turns[1].observation
    assert good.info["diff"].startswith("diff --git a/retry.py")
    batch = collate(tok, [good, bad])
    assert batch.valid.all() and batch.rewards.tolist() == [1.0, 0.0]


def test_dynamic_sampling_resamples_zero_variance_groups(tok, pool, labels, menu) -> None:
    always_good = picker(tok, lambda i: labels["good"])
    cfg = RolloutConfig(group_size=2, dynamic_sampling=True, max_resample=2)
    out = collect(always_good, menu, pool, [TASK], cfg)
    assert (out.groups_sampled, out.zero_std_groups, out.dropped_groups) == (3, 3, 1)
    assert out.episodes == [] and len(out.all_episodes) == 6
    assert out.metrics()["frac_zero_std_groups"] == 1.0
    assert out.metrics()["resolve_rate"] == 1.0
    mixed = picker(tok, lambda i: labels["good"] if i % 2 else labels["bad"])
    out = collect(mixed, menu, pool, [TASK], cfg)
    assert (out.groups_sampled, out.zero_std_groups, len(out.episodes)) == (1, 0, 2)
    no_ds = collect(always_good, menu, pool, [TASK], RolloutConfig(group_size=2))
    assert (no_ds.groups_sampled, no_ds.zero_std_groups, len(no_ds.episodes)) == (1, 1, 2)


def test_step_budget_truncates_and_is_recorded(tok, pool, menu) -> None:
    """A policy that never submits is cut by the TimeLimit; the final state is graded."""
    actor = ScriptedActor(tok, lambda i, ctx: "ls\n")
    cfg = RolloutConfig(group_size=1, max_steps=2)
    with EnvPool(cfg, grade_cache=pool.grade_cache) as short:
        (ep,) = run_episodes(actor, menu, short, [TASK], cfg)
    assert ep.truncated and not ep.terminated and len(ep.turns) == 2
    assert ep.info["truncated_by"] == "max_steps" and ep.valid


def test_infra_errors_are_reported_and_masked(tmp_path: Path, tok) -> None:
    """A task whose hidden tests vanish makes grading fail: infra_error, masked, not a 0."""
    dst = tmp_path / TASK
    shutil.copytree(registered_tasks()[TASK].repo_dir.parent, dst)
    broken = load_task(dst)
    shutil.rmtree(dst / "tests")  # after loading: the grader cannot install them
    menu = PatchMenu([broken])
    label = next(c.label for c in menu.menus[TASK] if c.source == "solution")
    cfg = RolloutConfig(group_size=2)
    # gym.make's keyword arguments override the registered task with the broken copy.
    with EnvPool(cfg, grade_cache={}, env_kwargs={"task": broken}) as pool:
        out = collect(picker(tok, lambda i: label), menu, pool, [TASK], cfg)
    assert all(e.infra_error and not e.valid for e in out.episodes)
    assert out.metrics()["infra_error_frac"] == 1.0
    batch = collate(tok, out.episodes)
    assert int(batch.action_mask.sum()) == 0 and not batch.valid.any()
    assert torch.equal(batch.token_rewards, torch.zeros_like(batch.token_rewards))
