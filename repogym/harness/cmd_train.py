"""``repogym train --algo NAME``: train a reference agent.

Each algorithm is one line in ``ALGOS``: its name -> ``"module:function"``, where the
function takes the parsed args and returns an exit code. The module is imported only when
that algorithm runs (torch and friends load lazily). Flags common to every trainer are
defined here; algorithm-specific settings go through ``--set field=value``, which
:func:`config_from_args` applies to the trainer's ``@dataclass`` config.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import types
import typing
from typing import Any, TypeVar

#: Algorithm name -> "module:main". Add a trainer by adding a line.
ALGOS: dict[str, str] = {
    "sb3-ppo": "repogym.agents.sb3_ppo:main",
    "ppo": "repogym.agents.train_cli:ppo",
    "grpo": "repogym.agents.train_cli:grpo",
    "gspo": "repogym.agents.train_cli:gspo",
    "dapo": "repogym.agents.train_cli:dapo",
    "cispo": "repogym.agents.train_cli:cispo",
    "dr_grpo": "repogym.agents.train_cli:dr_grpo",
    "async": "repogym.agents.async_rl:main",
    "distill": "repogym.agents.distill:main_distill",
    "opd": "repogym.agents.distill:main_opd",
    "echo": "repogym.agents.echo:main",
}

C = TypeVar("C")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a reference agent (--algo)")
    p.add_argument("--algo", required=True, choices=sorted(ALGOS), help="which trainer")
    p.add_argument("--steps", type=int, help="training budget (the trainer's unit: env steps "
                                             "for sb3-*, updates for LM trainers)")
    p.add_argument("--out", help="output folder (model, metrics.jsonl, results)")
    p.add_argument("--seed", type=int, help="random seed")
    p.add_argument("--model", help="policy model: a local path, or 'tiny' (LM trainers)")
    p.add_argument("--task", action="append", dest="task_ids", metavar="ID",
                   help="restrict to this task id (repeatable)")
    p.add_argument("--set", action="append", default=[], dest="overrides",
                   metavar="FIELD=VALUE", help="set a field of the trainer's config (repeatable)")
    p.add_argument("--ray", metavar="local|ADDRESS",
                   help="--algo async: rollout workers as Ray actors ('local' starts Ray here)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    module, _, func = ALGOS[args.algo].partition(":")
    return int(getattr(importlib.import_module(module), func)(args) or 0)


def _coerce(cls: type, field: dataclasses.Field, text: str) -> Any:
    hint = typing.get_type_hints(cls)[field.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]  # X | None
    if hint is bool:
        if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise ValueError(f"{field.name}={text!r}: expected true/false")
        return text.lower() in ("1", "true", "yes")
    if hint in (int, float, str):
        return hint(text)
    if typing.get_origin(hint) is typing.Literal and text in map(str, typing.get_args(hint)):
        return text  # a Literal of strings: the choice itself
    return json.loads(text)  # lists, dicts, unions: JSON


def config_from_args(cls: type[C], args: argparse.Namespace) -> C:
    """Build ``cls`` (a dataclass) from the common flags that it has, then ``--set`` pairs.

    Raises:
        SystemExit: an unknown field or a value of the wrong type, with the fix.
    """
    names = {f.name: f for f in dataclasses.fields(cls)}
    values = {k: getattr(args, k) for k in ("steps", "out", "seed", "model", "task_ids")
              if k in names and getattr(args, k, None) is not None}
    for pair in getattr(args, "overrides", []) or []:
        key, sep, text = pair.partition("=")
        if not sep or key not in names:
            raise SystemExit(f"--set {pair!r}: unknown field. Fix: use FIELD=VALUE with FIELD "
                             f"one of {sorted(names)}")
        try:
            values[key] = _coerce(cls, names[key], text)
        except ValueError as e:
            raise SystemExit(f"--set {pair!r}: {e}. Fix: give a value of the field's type") from e
    return cls(**values)
