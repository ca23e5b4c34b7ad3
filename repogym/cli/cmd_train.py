"""``repogym train --algo NAME``: train a reference agent.

The algorithms come from :mod:`repogym.agents.registry` (``ALGOS`` here is its name ->
``"module:function"`` view): the function takes the parsed args and returns an exit code,
and its module is imported only when that algorithm runs (torch and friends load lazily).
The LM trainers' flags and ``--set field=value`` are handled by :mod:`repogym.agents.cli`.

The command's options are defined once, in :data:`TRAIN_OPTIONS`: the parser is built from
it, and so is the command line ``--nproc N`` (N > 1) hands to torchrun
(:func:`relaunch_argv`; ``python -m torch.distributed.run --standalone --nproc-per-node N``),
which runs the same command in N data-parallel processes; FSDP2 shards the models over them
(:mod:`repogym.agents.distributed`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from typing import Any

from rich.console import Console

from repogym.agents.registry import ALGORITHMS, data_parallel, resolve
from repogym.cli.options import SPLITS
from repogym.cli.reports import print_note

__all__ = [
    "ALGOS",
    "DATA_PARALLEL",
    "TRAIN_OPTIONS",
    "TrainOption",
    "add_train_options",
    "register",
    "relaunch_argv",
    "run",
]

#: Algorithm name -> "module:main", from the registry (add a trainer by registering it).
ALGOS: dict[str, str] = {name: algo.entry for name, algo in ALGORITHMS.items()}


@dataclasses.dataclass(frozen=True)
class TrainOption:
    """One option of ``repogym train``.

    Attributes:
        flag: The option (``--steps``).
        dest: Its attribute on the parsed args.
        kwargs: The rest of :meth:`argparse.ArgumentParser.add_argument`'s arguments; ``action``
            is ``store`` (the default), ``append`` or ``store_true``, and ``nargs="?"`` takes
            a ``const``. ``choices`` may be a function returning them, called when the parser
            is built (``--algo``: the algorithm registry may have grown since import).
        relaunch: Passed on to the processes ``--nproc`` starts (``--nproc`` itself is not).
    """

    flag: str
    dest: str
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    relaunch: bool = True

    def parser_kwargs(self) -> dict[str, Any]:
        """:attr:`kwargs` with ``choices`` as the list (the function called)."""
        choices = self.kwargs.get("choices")
        return {**self.kwargs, "choices": choices()} if callable(choices) else dict(self.kwargs)

    def argv(self, value: Any) -> list[str]:
        """The command-line words that parse back to ``value`` (none for the default)."""
        default = self.kwargs.get("default")
        action = self.kwargs.get("action", "store")
        if action == "append":
            return [w for v in value or [] for w in (self.flag, str(v))]
        if value is None or value == default:
            return []
        if action == "store_true":
            return [self.flag]
        if self.kwargs.get("nargs") == "?" and value == self.kwargs.get("const"):
            return [self.flag]
        return [self.flag, str(value)]


TRAIN_OPTIONS: tuple[TrainOption, ...] = (
    TrainOption(
        "--algo",
        "algo",
        {"required": True, "choices": lambda: sorted(ALGOS), "help": "which trainer"},
    ),
    TrainOption(
        "--steps",
        "steps",
        {
            "type": int,
            "help": "training budget, the total of the "
            "run (the trainer's unit: env steps for sb3-*, updates for LM trainers); with "
            "--resume too, the last step, not how many more",
        },
    ),
    TrainOption(
        "--out", "out", {"help": "output folder (model, metrics.jsonl, rollouts, checkpoints)"}
    ),
    TrainOption("--seed", "seed", {"type": int, "help": "random seed"}),
    TrainOption(
        "--model",
        "model",
        {"help": "policy model: a local Hugging Face folder, or 'tiny' (the CPU toy)"},
    ),
    TrainOption(
        "--task",
        "task_ids",
        {"action": "append", "metavar": "ID", "help": "train on this task id (repeatable)"},
    ),
    TrainOption(
        "--tasks",
        "task_dirs",
        {
            "action": "append",
            "metavar": "DIR",
            "help": "train on every task in this folder (e.g. from `repogym synth`)",
        },
    ),
    TrainOption(
        "--set",
        "overrides",
        {
            "action": "append",
            "default": [],
            "metavar": "FIELD=VALUE",
            "help": "set a field of the trainer's config "
            "(repeatable; rollout.FIELD for rollout settings; async_=true trains with "
            "asynchronous rollout workers)",
        },
    ),
    TrainOption(
        "--resume",
        "resume",
        {
            "nargs": "?",
            "const": True,
            "default": False,
            "metavar": "CHECKPOINT",
            "help": "continue from the latest OUT/checkpoint-N (or "
            "the one given) up to --steps in all (nothing to do if the checkpoint is at or "
            "past it)",
        },
    ),
    TrainOption(
        "--rollout-server",
        "rollout_server",
        {
            "metavar": "URL",
            "help": "sample from an OpenAI-compatible server (vLLM, SGLang) by token ids",
        },
    ),
    TrainOption(
        "--ray",
        "ray",
        {
            "metavar": "local|ADDRESS",
            "help": "asynchronous training: "
            "rollout workers as Ray actors ('local' starts Ray here)",
        },
    ),
    TrainOption(
        "--tasks-per-step",
        "tasks_per_step",
        {
            "type": int,
            "metavar": "N",
            "help": "groups per step, drawn from the tasks in seeded passes (default: all)",
        },
    ),
    TrainOption(
        "--eval-every",
        "eval_every",
        {
            "type": int,
            "metavar": "K",
            "help": "evaluate every K steps and after the last (eval/* metrics)",
        },
    ),
    TrainOption(
        "--eval-split",
        "eval_split",
        {"choices": SPLITS, "help": "evaluate on the registered tasks of this split"},
    ),
    TrainOption(
        "--nproc",
        "nproc",
        {
            "type": int,
            "default": 1,
            "metavar": "N",
            "help": "data-parallel processes (torchrun; FSDP2 shards the models)",
        },
        relaunch=False,
    ),
)
"""Every option of ``repogym train``, once: the parser and :func:`relaunch_argv` read it."""


def add_train_options(parser: argparse.ArgumentParser) -> None:
    """Add :data:`TRAIN_OPTIONS` to ``parser``."""
    for option in TRAIN_OPTIONS:
        parser.add_argument(option.flag, dest=option.dest, **option.parser_kwargs())


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a reference agent (--algo)")
    add_train_options(p)
    p.set_defaults(func=run)


#: The algorithms ``--nproc`` covers (FSDP2 data parallelism).
DATA_PARALLEL = tuple(data_parallel())


def run(args: argparse.Namespace) -> int:
    if args.nproc > 1 and args.algo not in DATA_PARALLEL:
        raise SystemExit(
            f"--nproc {args.nproc} with --algo {args.algo}: data parallelism "
            f"covers {', '.join(DATA_PARALLEL)}. Fix: drop --nproc"
        )
    if args.nproc > 1 and "WORLD_SIZE" not in os.environ:
        return _torchrun(args)
    args.started = time.monotonic()  # progress lines count from here
    if os.environ.get("RANK", "0") == "0":
        algo = ALGORITHMS.get(args.algo)
        if algo is not None and algo.deprecated:  # one line on stderr; the alias then runs
            print_note(Console(stderr=True), algo.deprecated)
        print(f"[{0.0:6.1f}s] loading the {args.algo} trainer (importing torch)", flush=True)
    return int(resolve(ALGOS[args.algo])(args) or 0)


def relaunch_argv(args: argparse.Namespace) -> list[str]:
    """The ``train`` command line that parses back to ``args`` (every option but ``--nproc``)."""
    argv = ["train"]
    for option in TRAIN_OPTIONS:
        if option.relaunch:
            argv += option.argv(getattr(args, option.dest, None))
    return argv


def _torchrun(args: argparse.Namespace) -> int:
    """Run this ``repogym train`` command in ``--nproc`` processes under torchrun."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={args.nproc}",
        "-m",
        "repogym.cli",
        *relaunch_argv(args),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    return subprocess.run(cmd, env=env, check=False).returncode
