"""``repogym train --algo NAME``: train a reference agent.

The algorithms come from :mod:`repogym.agents.registry` (``ALGOS`` here is its name ->
``"module:function"`` view): the function takes the parsed args and returns an exit code,
and its module is imported only when that algorithm runs (torch and friends load lazily). The LM trainers' flags and ``--set
field=value`` are handled by :mod:`repogym.agents.cli`.

``--nproc N`` (N > 1) runs the same command in N data-parallel processes with torchrun
(``python -m torch.distributed.run --standalone --nproc-per-node N``): FSDP2 shards the
models over them (:mod:`repogym.agents.distributed`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from repogym.agents.registry import ALGORITHMS, data_parallel, resolve
from repogym.cli.options import SPLITS

#: Algorithm name -> "module:main", from the registry (add a trainer by registering it).
ALGOS: dict[str, str] = {name: algo.entry for name, algo in ALGORITHMS.items()}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a reference agent (--algo)")
    p.add_argument("--algo", required=True, choices=sorted(ALGOS), help="which trainer")
    p.add_argument("--steps", type=int, help="training budget, the total of the run (the "
                   "trainer's unit: env steps for sb3-*, updates for LM trainers); with "
                   "--resume too, the last step, not how many more")  # fmt: skip
    p.add_argument("--out", help="output folder (model, metrics.jsonl, rollouts, checkpoints)")
    p.add_argument("--seed", type=int, help="random seed")
    p.add_argument("--model", help="policy model: a local Hugging Face folder, or 'tiny' (the "
                                   "CPU toy)")
    p.add_argument("--task", action="append", dest="task_ids", metavar="ID",
                   help="train on this task id (repeatable)")
    p.add_argument("--tasks", action="append", dest="task_dirs", metavar="DIR",
                   help="train on every task in this folder (e.g. from `repogym synth`)")
    p.add_argument("--set", action="append", default=[], dest="overrides",
                   metavar="FIELD=VALUE", help="set a field of the trainer's config (repeatable; "
                                               "rollout.FIELD for rollout settings)")
    p.add_argument("--resume", nargs="?", const=True, default=False, metavar="CHECKPOINT",
                   help="continue from the latest OUT/checkpoint-N (or the one given) up to "
                        "--steps in all (nothing to do if the checkpoint is at or past it)")
    p.add_argument("--rollout-server", metavar="URL",
                   help="sample from an OpenAI-compatible server (vLLM, SGLang) by token ids")
    p.add_argument("--ray", metavar="local|ADDRESS",
                   help="--algo async: rollout workers as Ray actors ('local' starts Ray here)")
    p.add_argument("--tasks-per-step", type=int, metavar="N",
                   help="groups per step, drawn from the tasks in seeded passes (default: all)")
    p.add_argument("--eval-every", type=int, metavar="K",
                   help="evaluate every K steps and after the last (eval/* metrics)")
    p.add_argument("--eval-split", choices=SPLITS,
                   help="evaluate on the registered tasks of this split")
    p.add_argument("--nproc", type=int, default=1, metavar="N",
                   help="data-parallel processes (torchrun; FSDP2 shards the models)")
    p.set_defaults(func=run)


#: The algorithms ``--nproc`` covers (FSDP2 data parallelism).
DATA_PARALLEL = tuple(data_parallel())


def run(args: argparse.Namespace) -> int:
    if args.nproc > 1 and args.algo not in DATA_PARALLEL:
        raise SystemExit(f"--nproc {args.nproc} with --algo {args.algo}: data parallelism "
                         f"covers {', '.join(DATA_PARALLEL)}. Fix: drop --nproc")  # fmt: skip
    if args.nproc > 1 and "WORLD_SIZE" not in os.environ:
        return _torchrun(args)
    args.started = time.monotonic()  # progress lines count from here
    if os.environ.get("RANK", "0") == "0":
        print(f"[{0.0:6.1f}s] loading the {args.algo} trainer (importing torch)", flush=True)
    return int(resolve(ALGOS[args.algo])(args) or 0)


_FLAGS = {"algo": "--algo", "steps": "--steps", "out": "--out", "seed": "--seed",
          "model": "--model", "rollout_server": "--rollout-server", "ray": "--ray",
          "tasks_per_step": "--tasks-per-step", "eval_every": "--eval-every",
          "eval_split": "--eval-split"}  # fmt: skip
_LISTS = {"task_ids": "--task", "task_dirs": "--tasks", "overrides": "--set"}


def _train_argv(args: argparse.Namespace) -> list[str]:
    """The ``train`` command line of ``args`` (without ``--nproc``)."""
    argv = ["train"]
    for name, flag in _FLAGS.items():
        if getattr(args, name, None) is not None:
            argv += [flag, str(getattr(args, name))]
    for name, flag in _LISTS.items():
        for value in getattr(args, name, None) or []:
            argv += [flag, str(value)]
    if args.resume:
        argv += ["--resume"] if args.resume is True else ["--resume", str(args.resume)]
    return argv


def _torchrun(args: argparse.Namespace) -> int:
    """Run this ``repogym train`` command in ``--nproc`` processes under torchrun."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={args.nproc}", "-m", "repogym.cli", *_train_argv(args)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    return subprocess.run(cmd, env=env, check=False).returncode
