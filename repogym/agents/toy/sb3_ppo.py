"""The CPU toy's Stable-Baselines3 baseline: PPO on the menu (:class:`MenuEnv`).

A baseline, not a coding agent: the policy picks one of each task's candidate patches
(gold, alternatives, decoys, noop; shuffled per task) from a hashed bag of words of the
statement and of the candidates. On the train split it can memorise which slot resolves
each task; on held-out tasks it shows how far such features generalise. Every choice is
graded by a real env episode (cached per task and choice).

``repogym train --algo sb3-ppo --steps 3000 --out runs/sb3`` or
``train(Sb3PpoConfig(steps=3000))``. Install with ``pip install repogym[sb3]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from repogym.agents.cli import config_from_args
from repogym.agents.toy.menu import menu_entries
from repogym.agents.toy.menu_env import MenuEnv
from repogym.envs.repo_env import SuiteEnv
from repogym.scenarios import Task, registered_tasks, select_tasks

#: SB3 logger keys -> repogym's metric vocabulary (the names every trainer logs).
METRIC_NAMES = {
    "train/policy_gradient_loss": "loss/policy",
    "train/value_loss": "loss/value",
    "train/entropy_loss": "loss/entropy",
    "train/approx_kl": "approx_kl",
    "rollout/reward_mean": "reward/mean",
    "rollout/resolve_rate": "resolve_rate",
    "rollout/infra_error_frac": "infra_error_frac",
}


@dataclasses.dataclass
class Sb3PpoConfig:
    """SB3 PPO on the menu env. PPO fields are passed to ``stable_baselines3.PPO``."""

    steps: int = 4096
    seed: int = 0
    out: str = "runs/sb3-ppo"
    task_ids: list[str] | None = None  # None: every registered task
    train_split: str = "train"
    test_split: str = "test"
    sandbox: str = "bwrap"
    reward_mode: str = "binary"
    menu_seed: int = 0
    statement_dim: int = 256
    slot_dim: int = 32
    n_steps: int = 256
    batch_size: int = 64
    n_epochs: int = 10
    learning_rate: float = 1e-3
    ent_coef: float = 0.01
    gamma: float = 0.99
    torch_threads: int = 1
    prefill_workers: int = 2  # grade every train menu choice up front in N processes (0: lazily)
    verbose: int = 0


def split_tasks(split: str, task_ids: list[str] | None) -> list[Task]:
    """Registered tasks of ``split`` (restricted to ``task_ids`` when given), by id."""
    pool = registered_tasks().values()
    if task_ids is not None:
        pool = select_tasks(pool, task_ids=task_ids)
    return [t for t in pool if t.split == split]


def make_menu_env(
    tasks: list[Task], cfg: Sb3PpoConfig, n_slots: int, cache: dict | None = None
) -> MenuEnv:
    """A MenuEnv over a SuiteEnv of ``tasks``."""
    suite = SuiteEnv(tasks, sandbox=cfg.sandbox, reward_mode=cfg.reward_mode)
    return MenuEnv(
        suite,
        n_slots=n_slots,
        menu_seed=cfg.menu_seed,
        statement_dim=cfg.statement_dim,
        slot_dim=cfg.slot_dim,
        reward_cache=cache,
    )


def _grade_menu(job: tuple[Task, dict[str, Any], int]) -> dict[tuple[str, str], tuple]:
    """Worker: grade every choice of one task's menu (one real episode each)."""
    task, cfg_fields, n_slots = job
    env = make_menu_env([task], Sb3PpoConfig(**cfg_fields), n_slots)
    try:
        for entry in {e.name: e for e in env.menus[task.id]}.values():
            env.evaluate(task, entry)
        return dict(env.reward_cache)
    finally:
        env.close()


def prefill(tasks: list[Task], cfg: Sb3PpoConfig, n_slots: int) -> dict:
    """The reward cache for every choice of ``tasks``' menus, graded in parallel processes.

    Infra errors are not cached (their choices are graded again, lazily, during training).
    """
    if cfg.prefill_workers <= 0:
        return {}
    jobs = [(t, dataclasses.asdict(cfg), n_slots) for t in tasks]
    ctx = multiprocessing.get_context("spawn")  # the parent has torch loaded: no fork
    cache: dict = {}
    with ProcessPoolExecutor(min(cfg.prefill_workers, len(jobs)), mp_context=ctx) as pool:
        for part in pool.map(_grade_menu, jobs):
            cache.update(part)
    return cache


def chance_rate(env: MenuEnv) -> float:
    """Resolve rate of a uniform random pick if gold and alternatives (only) resolve."""
    menus = env.menus.values()
    return float(
        np.mean([sum(c.kind in ("gold", "alternative") for c in m) / len(m) for m in menus])
    )


def evaluate(model: Any, env: MenuEnv) -> dict[str, Any]:
    """Greedy choice per task: resolve rate, mean reward and the choice made per task."""
    per_task, rewards, resolved, infra = {}, [], [], 0
    for task in env.tasks:
        obs, _ = env.reset(options={"task": task.id})
        action, _ = model.predict(obs, deterministic=True)
        _, reward, *_, info = env.step(int(action))
        per_task[task.id] = {"choice": info["choice"], "resolved": info["resolved"]}
        rewards.append(reward)
        resolved.append(info["resolved"])
        infra += info["infra_error"] is not None
    return {
        "tasks": len(env.tasks),
        "resolve_rate": float(np.mean(resolved)),
        "reward/mean": float(np.mean(rewards)),
        "chance": chance_rate(env),
        "infra_errors": infra,
        "per_task": per_task,
    }


def _callbacks_and_logger(out: Path) -> tuple[Any, Any]:
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import KVWriter, Logger

    class JsonlWriter(KVWriter):
        """SB3 logger output -> metrics.jsonl in repogym's metric names."""

        def __init__(self, path: Path) -> None:
            self.file = path.open("a")

        def write(self, key_values: dict, key_excluded: dict, step: int = 0) -> None:
            row = {
                METRIC_NAMES.get(k, k): v
                for k, v in key_values.items()
                if isinstance(v, int | float)
            }
            self.file.write(json.dumps({"step": step, **row}) + "\n")
            self.file.flush()

        def close(self) -> None:
            self.file.close()

    class RolloutStats(BaseCallback):
        """Reward, resolve rate and infra errors of each rollout's menu episodes."""

        def _on_rollout_start(self) -> None:
            self.rewards: list[float] = []
            self.resolved: list[bool] = []
            self.infra = 0

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                self.rewards.append(info["reward"])
                self.resolved.append(info["resolved"])
                self.infra += info["infra_error"] is not None
            return True

        def _on_rollout_end(self) -> None:
            n = max(1, len(self.rewards))
            self.logger.record("rollout/reward_mean", sum(self.rewards) / n)
            self.logger.record("rollout/resolve_rate", sum(self.resolved) / n)
            self.logger.record("rollout/infra_error_frac", self.infra / n)

    return RolloutStats(), Logger(str(out), [JsonlWriter(out / "metrics.jsonl")])


def train(cfg: Sb3PpoConfig) -> dict[str, Any]:
    """Train PPO on the train split's menus; report greedy resolve rates on train and test.

    Writes ``model.zip``, ``metrics.jsonl`` (per rollout) and ``results.json`` to ``cfg.out``.
    """
    try:
        import torch
        from stable_baselines3 import PPO
    except ImportError as e:
        raise SystemExit(
            f"sb3-ppo needs Stable-Baselines3 and torch ({e}). Fix: pip install 'repogym[sb3]'"
        ) from e

    torch.set_num_threads(cfg.torch_threads)
    train_tasks = split_tasks(cfg.train_split, cfg.task_ids)
    test_tasks = split_tasks(cfg.test_split, cfg.task_ids)
    if not train_tasks:
        raise ValueError(
            f"no {cfg.train_split!r} task matches task_ids={cfg.task_ids}. "
            "Fix: include at least one train task"
        )
    n_slots = max(len(menu_entries(t, cfg.menu_seed)) for t in train_tasks + test_tasks)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    env = make_menu_env(train_tasks, cfg, n_slots, prefill(train_tasks, cfg, n_slots))
    try:
        model = PPO(
            "MlpPolicy",
            env,
            n_steps=cfg.n_steps,
            batch_size=cfg.batch_size,
            n_epochs=cfg.n_epochs,
            learning_rate=cfg.learning_rate,
            ent_coef=cfg.ent_coef,
            gamma=cfg.gamma,
            seed=cfg.seed,
            verbose=cfg.verbose,
            device="cpu",
        )
        callback, logger = _callbacks_and_logger(out)
        model.set_logger(logger)
        model.learn(total_timesteps=cfg.steps, callback=callback)
        logger.close()
        model.save(out / "model.zip")
        results = {"train": evaluate(model, env)}
        results["train"]["cached_choices"] = len(env.reward_cache)
    finally:
        env.close()
    if test_tasks:
        test_env = make_menu_env(test_tasks, cfg, n_slots)
        try:
            results["test"] = evaluate(model, test_env)
        finally:
            test_env.close()
    results.update(
        steps=cfg.steps,
        n_slots=n_slots,
        wall_s=time.monotonic() - start,
        config=dataclasses.asdict(cfg),
    )
    (out / "results.json").write_text(json.dumps(results, indent=2))
    return results


def report(results: dict[str, Any]) -> str:
    """A short table: split, tasks, greedy resolve rate, chance level."""
    lines = [
        (
            f"sb3-ppo: {results['steps']} steps, {results['n_slots']} menu slots, "
            f"{results['wall_s']:.0f}s"
        ),
        f"{'split':<6} {'tasks':>5} {'resolve rate':>12} {'chance':>7}",
    ]
    for split in ("train", "test"):
        r = results.get(split)
        if r is None:
            lines.append(f"{split:<6} {0:>5} {'-':>12} {'-':>7}")
            continue
        lines.append(f"{split:<6} {r['tasks']:>5} {r['resolve_rate']:>12.1%} {r['chance']:>7.1%}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    """``repogym train --algo sb3-ppo``: common flags plus ``--set field=value``."""
    cfg = config_from_args(Sb3PpoConfig, args)
    results = train(cfg)
    print(report(results))
    print(f"wrote {Path(cfg.out) / 'results.json'}")
    return 0
