"""``--model tiny``: the CPU toy's model, episode format and own settings for ``repogym train``.

The toy's settings are no trainer config's fields: :meth:`ToyRun.from_args` takes them out of
``--set`` before the config is built (``interface=menu|chat``, ``warm_start_steps=N``), and
:meth:`ToyRun.prepare` plugs the toy into the built trainer: the menu's gold trajectory as
distillation's oracle (:class:`repogym.agents.distill.Oracle`), and the supervised warm start.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.agents.chat import ChatFormat
from repogym.agents.config import TrainConfig, chat_format
from repogym.agents.distill import DistillTrainer
from repogym.agents.distributed import Parallel
from repogym.agents.toy.menu import MenuFormat, scripted_episodes
from repogym.agents.toy.tiny import TinyConfig, build_tiny, save_tiny
from repogym.agents.trainer import Trainer
from repogym.scenarios import Task, registered_tasks

__all__ = [
    "TOY_DEFAULTS",
    "TOY_TASKS",
    "WARM_START_STEPS",
    "FormatFactory",
    "ToyRun",
    "toy_model",
    "toy_model_path",
    "warm_start",
]

TOY_TASKS = ("retry-zero", "chunk-list-remainder", "float-isclose")
"""Train-split built-in tasks whose menus the CPU demo learns."""

TOY_DEFAULTS = {
    "menu": {
        "lr": 3e-4,
        "micro_batch": 64,
        "rollout.max_new_tokens": 6,
        "rollout.max_steps": 4,
        "rollout.max_context": 512,
        "rollout.group_size": 8,
    },
    "chat": {"lr": 3e-4, "rollout.max_new_tokens": 24, "rollout.max_steps": 2},
}
"""The CPU toy's settings before ``--set`` (a 0.5M model on a CPU)."""

WARM_START_STEPS = 60
"""Supervised steps of the menu's warm start unless ``--set warm_start_steps=N``."""


def _tasks(ids: tuple[str, ...]) -> tuple[Task, ...]:
    known = registered_tasks()
    unknown = [t for t in ids if t not in known]
    if unknown:
        raise ValueError(
            f"unknown tasks {unknown}. Fix: pick from `repogym tasks` or pass --tasks DIR"
        )
    return tuple(known[t] for t in ids)


def toy_model(config: TrainConfig, interface: str, *, max_len: int = 4096) -> Path:
    """Build the tiny model (its tokenizer learns the menu's strings) into ``OUT/tiny-model``.

    Deterministic given the seed, so a resumed run rebuilds the same folder.
    """
    corpus = MenuFormat.corpus(_tasks(config.tasks), config.seed) if interface == "menu" else []
    model, tok = build_tiny(
        seed=config.seed,
        extra_corpus=corpus,
        config=TinyConfig(max_len=512 if interface == "menu" else max_len),
    )
    return save_tiny(model, tok, toy_model_path(config))


def toy_model_path(config: TrainConfig) -> Path:
    """Where :func:`toy_model` writes: ``OUT/tiny-model``."""
    return Path(config.out) / "tiny-model"


@dataclass
class FormatFactory:
    """Builds the episode format from a tokenizer (picklable, for asynchronous workers).

    Attributes:
        interface: ``menu`` (the CPU toy) or ``chat``.
        config: The trainer's config (tasks, seed, chat options).
    """

    interface: str
    config: TrainConfig

    def __call__(self, tokenizer: Any) -> MenuFormat | ChatFormat:
        cfg = self.config
        if self.interface == "menu":
            return MenuFormat(_tasks(cfg.tasks), tokenizer, cfg.seed)
        return chat_format(cfg, tokenizer)


def warm_start(trainer: Trainer, steps: int, say: Callable[[str], None] | None = None) -> float:
    """The menu's supervised warm start: ``steps`` steps on one real trajectory per menu
    entry (the model learns the format and picks uniformly); returns the last loss.

    Args:
        trainer: The built trainer.
        steps: Supervised steps.
        say: Progress lines (the trajectories, then a step line at most every 2 s and the last).
    """
    say = say or (lambda _: None)
    say("warm start: playing one scripted trajectory per menu entry")
    last = [time.monotonic()]

    def on_episode(done: int, total: int) -> None:
        if done == total or time.monotonic() - last[0] > 2.0:
            last[0] = time.monotonic()
            say(f"warm start: trajectories {done}/{total}")

    episodes = scripted_episodes(trainer.fmt, trainer.pool, trainer.config.rollout, on_episode)

    def on_step(step: int, loss: float) -> None:
        if step == steps or time.monotonic() - last[0] > 2.0:
            last[0] = time.monotonic()
            say(f"warm start: step {step}/{steps}, loss {loss:.4g}")

    return trainer.sft(episodes, steps, lr=1e-3, on_step=on_step)


_OWN = ("interface", "warm_start_steps")


@dataclass
class ToyRun:
    """The CPU toy's own settings for one ``repogym train --model tiny`` run.

    Attributes:
        interface: ``menu`` (the toy's menu language) or ``chat`` (the real chat format).
        warm_start_steps: Supervised steps before RL (menu only; 0: none).
    """

    interface: str = "menu"
    warm_start_steps: int = WARM_START_STEPS

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ToyRun | None:
        """The toy's settings, taken out of ``args.overrides``; None unless ``--model tiny``.

        Raises:
            SystemExit: A bad value, or a toy setting without ``--model tiny`` (with the fix).
        """
        pairs = list(getattr(args, "overrides", None) or [])
        own = {key: text for key, _, text in (p.partition("=") for p in pairs) if key in _OWN}
        if getattr(args, "model", None) != "tiny":
            if "warm_start_steps" in own:
                raise SystemExit(
                    "--set warm_start_steps: a setting of the CPU toy only. Fix: "
                    "drop it, or train --model tiny"
                )
            return None
        args.overrides = [p for p in pairs if p.partition("=")[0] not in _OWN]
        run = cls()
        run.interface = own.get("interface", run.interface)
        if run.interface not in ("menu", "chat"):
            raise SystemExit(f"--set interface={run.interface}: expected menu or chat")
        steps = own.get("warm_start_steps", "none")
        if steps.lower() not in ("none", "null"):
            if not steps.isdigit():
                raise SystemExit(
                    f"--set warm_start_steps={steps}: expected a whole number "
                    "of steps (0: no warm start)"
                )
            run.warm_start_steps = int(steps)
        return run

    def defaults(self) -> dict[str, Any]:
        """Config defaults of the toy (before ``--set``): its tasks and small budgets."""
        return {"tasks": TOY_TASKS, **TOY_DEFAULTS[self.interface]}

    def build(
        self,
        config: TrainConfig,
        parallel: Parallel | None = None,
        *,
        say: Callable[[str], None] = print,
    ) -> FormatFactory:
        """Build the tiny model (on the main rank) and point ``config.model`` at it; returns
        the episode format's factory."""
        say(f"building the CPU toy's tiny model ({self.interface} interface)")
        if parallel is None or parallel.main:
            toy_model(config, self.interface)
        if parallel is not None:
            parallel.barrier()
        config.model = str(toy_model_path(config))
        return FormatFactory(self.interface, config)

    def prepare(
        self, trainer: Trainer, *, resume: bool = False, say: Callable[[str], None] = print
    ) -> None:
        """Plug the toy into a built trainer: with the menu, its gold trajectory is
        distillation's oracle, and (unless resuming) the warm start runs."""
        if self.interface != "menu":
            return
        if isinstance(trainer, DistillTrainer) and isinstance(trainer.fmt, MenuFormat):
            trainer.oracle = trainer.fmt
        if resume or not self.warm_start_steps:
            return
        say(
            f"warm start: {self.warm_start_steps} supervised steps on one trajectory per menu entry"
        )
        warm_start(trainer, self.warm_start_steps, say)
