"""``repogym train --algo NAME``: the LM trainers' command line (the top of the layers).

Builds the algorithm's config from the common flags (``--model``, ``--steps``, ``--out``,
``--seed``, ``--task``, ``--tasks DIR``, ``--rollout-server``, ``--ray``; all defined in
:mod:`repogym.cli.cmd_train`) and ``--set FIELD=VALUE`` pairs for any config field (``--set
rollout.group_size=8`` sets a field of the rollout settings; values are parsed by the field's
type, JSON for lists and dicts), trains
(``--resume`` continues the latest checkpoint of ``--out``), prints progress from the first
second, and writes ``OUT/metrics.jsonl``, ``OUT/config.json``, ``OUT/rollouts/``,
``OUT/checkpoint-<step>/`` and ``OUT/curves.png``.

Asynchronous training is asked for one way: the config's ``async_`` field (``--set
async_=true``, or ``--set async_.FIELD=VALUE`` for a field of
:class:`repogym.agents.async_rl.AsyncOptions`, which turns it on too), with any algorithm
whose config has it (the GRPO family, Echo, PPO). ``--algo async`` is its deprecated alias.

``--model tiny`` is the CPU toy (:mod:`repogym.agents.toy`): a tiny model built offline into
``OUT/tiny-model``, speaking the toy's menu language unless ``--set interface=chat``; its own
settings and hooks are :class:`repogym.agents.toy.setup.ToyRun`'s.

Example:
    repogym train --algo grpo --model /models/qwen --steps 20 --out runs/grpo --set lr=1e-6
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import threading
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from repogym.agents.async_rl import AsyncOptions, train_async
from repogym.agents.checkpoint import checkpoint_step, resolve_resume
from repogym.agents.config import ChatFormatFactory
from repogym.agents.distill import DistillTrainer
from repogym.agents.distributed import Parallel
from repogym.agents.metrics import plot_metrics
from repogym.agents.registry import ALGORITHMS, resolve
from repogym.agents.rollout import RolloutConfig
from repogym.agents.toy.setup import ToyRun
from repogym.agents.trainer import Trainer
from repogym.envs import register_task
from repogym.scenarios import registered_tasks, select_tasks

__all__ = ["ALGOS", "async_options", "config_from_args", "main", "print_progress", "step_eta"]

C = TypeVar("C")

ALGOS: dict[str, tuple[type, Callable[..., Trainer], dict[str, Any]]] = {
    name: (resolve(a.config), resolve(a.trainer), a.preset)
    for name, a in ALGORITHMS.items()
    if a.entry == "repogym.agents.cli:main"
}
"""``--algo`` name -> (config class, trainer factory, preset fields), from the registry."""


def _coerce(cls: type, field: dataclasses.Field, text: str) -> Any:
    hint = typing.get_type_hints(cls)[field.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]  # X | None
    if text.lower() in ("none", "null") and type(None) in typing.get_args(
        typing.get_type_hints(cls)[field.name]
    ):
        return None
    if hint is bool:
        if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise ValueError(f"{field.name}={text!r}: expected true/false")
        return text.lower() in ("1", "true", "yes")
    if hint in (int, float, str):
        return hint(text)
    if typing.get_origin(hint) is typing.Literal and text in map(str, typing.get_args(hint)):
        return text
    if typing.get_origin(hint) is typing.Literal:
        raise ValueError(f"{field.name}={text!r}: expected one of {typing.get_args(hint)}")
    try:
        return json.loads(text)  # lists, dicts, unions: JSON
    except json.JSONDecodeError:
        if str in args:
            return text
        raise


def config_from_args(
    cls: type[C], args: argparse.Namespace, defaults: Mapping[str, Any] | None = None
) -> C:
    """Build ``cls`` (a dataclass) from ``defaults``, the common flags it has, then ``--set``.

    ``rollout.FIELD=VALUE`` sets a field of the config's ``rollout`` settings;
    ``async_.FIELD=VALUE`` a field of its asynchronous options (:class:`AsyncOptions`).

    Raises:
        SystemExit: An unknown field or a value of the wrong type, with the fix.
    """
    names = {f.name: f for f in dataclasses.fields(cls)}
    roll = {f.name: f for f in dataclasses.fields(RolloutConfig)}
    asyn = {f.name: f for f in dataclasses.fields(AsyncOptions)}
    values: dict[str, Any] = {}
    rollout: dict[str, Any] = {}
    async_: dict[str, Any] = {}
    for key, value in (defaults or {}).items():
        (rollout if key.startswith("rollout.") else values)[key.removeprefix("rollout.")] = value
    flags = {
        "steps": "steps",
        "out": "out",
        "seed": "seed",
        "model": "model",
        "task_ids": "tasks" if "tasks" in names else "task_ids",
    }
    for flag, name in flags.items():
        if name in names and getattr(args, flag, None) is not None:
            values[name] = getattr(args, flag)
    for pair in getattr(args, "overrides", None) or []:
        key, sep, text = pair.partition("=")
        if key.startswith("rollout."):
            target, fields, cls_, name = rollout, roll, RolloutConfig, key.removeprefix("rollout.")
        elif key.startswith("async_.") and "async_" in names:
            target, fields, cls_, name = async_, asyn, AsyncOptions, key.removeprefix("async_.")
        else:
            target, fields, cls_, name = values, names, cls, key
        if not sep or name not in fields:
            raise SystemExit(
                f"--set {pair!r}: unknown field. Fix: use FIELD=VALUE with FIELD one "
                f"of {sorted(fields)}"
                + (" (rollout.FIELD for rollout settings)" if target is values else "")
            )
        try:
            target[name] = _coerce(cls_, fields[name], text)
        except ValueError as e:
            raise SystemExit(f"--set {pair!r}: {e}. Fix: give a value of the field's type") from e
    if rollout and "rollout" in names:
        values["rollout"] = RolloutConfig(**rollout)
    if async_:
        given = values.get("async_")
        values["async_"] = {**(given if isinstance(given, dict) else {}), **async_}
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise SystemExit(f"bad settings for {cls.__name__}: {e}") from e


HEARTBEAT_S = 10.0
"""A phase that prints nothing for this long gets a ``still: <phase> (Ns)`` line."""


class _Printer:
    """Progress lines from the first second: phase, episodes, step metrics, ETA (printed by
    rank 0 only under data parallelism); a silent phase (starting sandboxes, a long
    generation) gets a ``still: ...`` line every ``heartbeat_s`` seconds. Close it."""

    def __init__(
        self,
        quiet: bool = False,
        started: float | None = None,
        heartbeat_s: float | None = HEARTBEAT_S,
    ) -> None:
        now = time.monotonic()
        self.t0 = now if started is None else started
        self.step_t0: float | None = None  # when the current step began (None: unknown)
        self.last = 0.0
        self.step_times: list[float] = []
        self.quiet = quiet
        self.phase, self.phase_t0, self.printed = "starting", now, now
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        if not quiet and heartbeat_s:
            self._beat = threading.Thread(
                target=self._heartbeat, args=(heartbeat_s,), name="train-progress", daemon=True
            )
            self._beat.start()

    def say(self, text: str, *, phase: bool = True) -> None:
        """Print ``text`` with the time since the start; it names the phase unless ``phase``
        is False (a count within it)."""
        if self.quiet:
            return
        with self._lock:
            now = time.monotonic()
            if phase:
                self.phase, self.phase_t0 = text, now
            self.printed = now
            print(f"[{now - self.t0:6.1f}s] {text}", flush=True)

    def _heartbeat(self, every: float) -> None:
        while not self._stop.wait(1.0):
            now = time.monotonic()
            if now - self.printed >= every:
                self.say(f"  still: {self.phase} ({now - self.phase_t0:.0f}s)", phase=False)

    def close(self) -> None:
        """Stop the heartbeat (idempotent)."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()

    def __call__(self, event: str, f: Mapping[str, Any]) -> None:
        now = time.monotonic()
        if event == "collect":
            self.step_t0 = now
            self.say(f"step {f['step']}: collecting {f['episodes']} episodes")
        elif event == "episode" and (now - self.last > 2.0 or f["done"] == f["total"]):
            self.last = now
            self.say(f"  episodes {f['done']}/{f['total']}", phase=False)
        elif event == "update":
            self.say(f"step {f['step']}: updating")
        elif event == "step":
            if self.step_t0 is not None:  # the asynchronous loop's first step has no start
                self.step_times.append(now - self.step_t0)
            self.step_t0 = now  # the next one starts here (a synchronous one at "collect")
            print_progress(
                f["step"],
                f["metrics"],
                prefix=self.say,
                steps=f["steps"],
                eta=step_eta(self.step_times, f["steps"] - f["step"]),
            )


def step_eta(step_times: Sequence[float], remaining: int) -> float | None:
    """Seconds left: the mean measured step time (collection to logging) times the steps left;
    loading, warm start and environment start-up are not steps and do not count. None before
    any step was measured."""
    if not step_times:
        return None
    return sum(step_times) / len(step_times) * remaining


def print_progress(
    step: int,
    m: Mapping[str, float],
    *,
    prefix: Callable[[str], None] = print,
    eta: float | None = None,
    steps: int | None = None,
) -> None:
    """One line per step: reward, resolve rate, losses, entropy, staleness, time, ETA."""
    keys = (
        "reward/mean",
        "resolve_rate",
        "loss/policy",
        "loss/value",
        "loss/kl",
        "loss/echo",
        "entropy",
        "is_weight/max",
        "staleness/mean",
    )
    shown = " ".join(f"{k} {m[k]:.4g}" for k in keys if k in m)
    tail = f" ETA {eta:.0f}s" if eta is not None else ""
    of = f"/{steps}" if steps else ""
    prefix(f"step {step}{of} done: {shown} ({m.get('time/step_s', 0.0):.1f}s){tail}")


def _tasks(args: argparse.Namespace) -> list[str] | None:
    """``--task`` ids plus every task of ``--tasks DIR`` (registered on the way)."""
    ids = list(getattr(args, "task_ids", None) or [])
    for folder in getattr(args, "task_dirs", None) or []:
        if not Path(folder).is_dir():
            raise SystemExit(
                f"--tasks {folder}: not a folder. Fix: pass a folder of task folders "
                "(e.g. from `repogym synth`)"
            )
        ids += [t.id for t in register_task(folder, overwrite=True)]
    return ids or None


def _run_flags(args: argparse.Namespace, defaults: dict[str, Any]) -> None:
    """``--tasks-per-step``, ``--eval-every`` and ``--eval-split`` as config defaults."""
    if getattr(args, "tasks_per_step", None) is not None:
        defaults["tasks_per_step"] = args.tasks_per_step
    if getattr(args, "eval_every", None) is not None:
        defaults["eval_every"] = args.eval_every
    if getattr(args, "eval_split", None):
        try:
            tasks = select_tasks(registered_tasks().values(), split=args.eval_split)
        except ValueError as e:
            raise SystemExit(f"--eval-split {args.eval_split}: {e}") from e
        defaults["eval_tasks"] = tuple(t.id for t in tasks)
        defaults.setdefault("eval_every", 10)


def _nothing_to_do(config: Any, resume: bool | str, say: Callable[[str], None] | None) -> bool:
    """True (said) when the checkpoint ``--resume`` names is already at ``--steps`` (the total
    number of steps, not how many more)."""
    try:
        path = resolve_resume(config.out, resume)
        step = checkpoint_step(path)
    except FileNotFoundError as e:
        raise SystemExit(str(e)) from e
    if step < config.steps:
        return False
    if say is not None:
        say(
            f"nothing to do: {path} is at step {step} and --steps {config.steps} is the total "
            f"number of steps (not how many more). Fix: to train further, resume with --steps "
            f"above {step}, e.g. --steps {step + config.steps} for {config.steps} more"
        )
    return True


def async_options(config: Any, ray: str | None = None) -> AsyncOptions | None:
    """The asynchronous options ``config.async_`` asks for (None: synchronous), with ``--ray``.

    Raises:
        SystemExit: Bad options, or ``--ray`` without asynchronous training, with the fix.
    """
    value = getattr(config, "async_", None)
    if not value:
        if ray:
            raise SystemExit(
                f"--ray {ray}: Ray actors are asynchronous rollout workers. Fix: "
                "add --set async_=true, or drop --ray"
            )
        return None
    try:
        opts = AsyncOptions.coerce(value)
    except (TypeError, ValueError) as e:
        names = ", ".join(f.name for f in dataclasses.fields(AsyncOptions))
        raise SystemExit(
            f"--set async_: {e}. Fix: async_=true, or async_.FIELD=VALUE with FIELD one of {names}"
        ) from e
    return dataclasses.replace(opts, ray=ray) if ray else opts


def main(args: argparse.Namespace) -> int:
    """``repogym train --algo <LM algorithm>``; returns the exit code."""
    parallel = Parallel.from_env()
    printer = _Printer(quiet=not parallel.main, started=getattr(args, "started", None))
    try:
        return _main(args, parallel, printer)
    finally:
        printer.close()
        parallel.close()


def _main(args: argparse.Namespace, parallel: Parallel, printer: _Printer) -> int:
    cls, make, preset = ALGOS[args.algo]
    args.task_ids = _tasks(args)
    defaults: dict[str, Any] = dict(preset)
    if getattr(args, "out", None) is None:
        args.out = f"runs/{args.algo}"
    if getattr(args, "rollout_server", None):
        defaults["rollout_server"] = args.rollout_server
    if getattr(args, "ray", None) and "ray" in {f.name for f in dataclasses.fields(cls)}:
        defaults["ray"] = args.ray  # --algo async's own field (its deprecated flat spelling)
    _run_flags(args, defaults)
    toy = ToyRun.from_args(args)
    if toy is not None:
        defaults.update(toy.defaults())
    config = config_from_args(cls, args, defaults)
    if not config.tasks:
        raise SystemExit("no tasks. Fix: --task ID (repeatable) or --tasks DIR")
    opts = async_options(config, getattr(args, "ray", None))
    if parallel.enabled and (make is DistillTrainer or opts is not None):
        raise SystemExit(
            f"--nproc {parallel.world} with --algo {args.algo} and these settings: "
            "data parallelism covers the synchronous GRPO family and PPO. Fix: "
            "drop --nproc"
        )
    resume = getattr(args, "resume", False) or False
    if resume and _nothing_to_do(config, resume, say=printer.say if parallel.main else None):
        return 0
    fmt_factory = None
    if toy is not None:
        fmt_factory = toy.build(config, parallel, say=printer.say)
    printer.say(
        f"loading {config.model} and starting the environments"
        + (f" ({parallel.world} processes)" if parallel.enabled else "")
    )
    trainer = make(config, progress=printer, fmt_factory=fmt_factory, parallel=parallel)
    try:
        if toy is not None:
            toy.prepare(trainer, resume=bool(resume), say=printer.say)
        if opts is not None:
            train_async(
                trainer, opts, fmt_factory=fmt_factory or ChatFormatFactory(config), resume=resume
            )
        else:
            trainer.train(resume=resume)
    finally:
        trainer.close()
    if parallel.main:
        print(
            f"metrics: {config.out}/metrics.jsonl; rollouts: {config.out}/rollouts; curves: "
            f"{plot_metrics(config.out)}",
            flush=True,
        )
    return 0
