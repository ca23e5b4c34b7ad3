"""``repogym train --algo NAME``: train a reference agent.

Each algorithm is one line in ``ALGOS``: its name -> ``"module:function"``, where the
function takes the parsed args and returns an exit code. The module is imported only when
that algorithm runs (torch and friends load lazily). The LM trainers' flags and ``--set
field=value`` are handled by :mod:`repogym.agents.cli`.
"""

from __future__ import annotations

import argparse
import importlib

_LM = "repogym.agents.cli:main"

#: Algorithm name -> "module:main". Add a trainer by adding a line.
ALGOS: dict[str, str] = {
    "sb3-ppo": "repogym.agents.toy.sb3_ppo:main",
    **{name: _LM for name in ("ppo", "grpo", "gspo", "dapo", "cispo", "dr_grpo", "async",
                              "distill", "opd", "echo")},
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a reference agent (--algo)")
    p.add_argument("--algo", required=True, choices=sorted(ALGOS), help="which trainer")
    p.add_argument("--steps", type=int, help="training budget (the trainer's unit: env steps "
                                             "for sb3-*, updates for LM trainers)")
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
                   help="continue from the latest OUT/checkpoint-N (or the one given)")
    p.add_argument("--rollout-server", metavar="URL",
                   help="sample from an OpenAI-compatible server (vLLM, SGLang) by token ids")
    p.add_argument("--ray", metavar="local|ADDRESS",
                   help="--algo async: rollout workers as Ray actors ('local' starts Ray here)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    module, _, func = ALGOS[args.algo].partition(":")
    return int(getattr(importlib.import_module(module), func)(args) or 0)
