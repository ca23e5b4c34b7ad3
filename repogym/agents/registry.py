"""The one registry of training algorithms (``repogym train --algo NAME``).

In the style of verl's ``register_policy_loss``: each algorithm is registered once, by name,
with where its entry point, config class and trainer live (``"module:attr"`` strings,
imported only when that algorithm runs, so listing algorithms never loads torch). The CLI's
choices, ``--nproc``'s coverage and :mod:`repogym.agents.cli`'s table are derived from it.
A third-party trainer registers itself with :func:`register_algorithm` before the CLI runs.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

__all__ = ["ALGORITHMS", "Algorithm", "data_parallel", "register_algorithm", "resolve"]


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """One ``--algo``.

    Attributes:
        name: The ``--algo`` value.
        entry: ``"module:function"`` taking the parsed CLI args, returning an exit code.
        config: ``"module:Class"`` of its config (LM trainers; ``""`` otherwise).
        trainer: ``"module:factory"`` building its trainer from the config.
        preset: Config fields the name sets (the GRPO family's ``variant``).
        data_parallel: Whether ``--nproc N`` (FSDP2 data parallelism) covers it.
        deprecated: For a deprecated name, what to use instead (``repogym train`` prints it
            as a one-line note); empty otherwise.
    """

    name: str
    entry: str
    config: str = ""
    trainer: str = ""
    preset: dict[str, Any] = dataclasses.field(default_factory=dict)
    data_parallel: bool = False
    deprecated: str = ""


ALGORITHMS: dict[str, Algorithm] = {}


def register_algorithm(
    name: str,
    entry: str,
    *,
    config: str = "",
    trainer: str = "",
    preset: dict[str, Any] | None = None,
    data_parallel: bool = False,
    deprecated: str = "",
    overwrite: bool = False,
) -> Algorithm:
    """Register ``name``; a name taken already raises unless ``overwrite``."""
    if name in ALGORITHMS and not overwrite:
        raise ValueError(
            f"algorithm {name!r} is registered already. Fix: another name, or overwrite=True"
        )
    algo = Algorithm(name, entry, config, trainer, dict(preset or {}), data_parallel, deprecated)
    ALGORITHMS[name] = algo
    return algo


def resolve(ref: str) -> Any:
    """The object a ``"module:attr"`` string names."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def data_parallel() -> list[str]:
    """The algorithms ``--nproc`` covers."""
    return [n for n, a in ALGORITHMS.items() if a.data_parallel]  # in registration order


_LM = "repogym.agents.cli:main"
register_algorithm(
    "ppo",
    _LM,
    config="repogym.agents.ppo:PPOConfig",
    trainer="repogym.agents.ppo:PPOTrainer",
    data_parallel=True,
)
#: The GRPO family: one trainer, the variant set by the name (``repogym.agents.grpo``).
GRPO_FAMILY = ("grpo", "gspo", "dapo", "cispo", "dr_grpo")
for _name in GRPO_FAMILY:
    register_algorithm(
        _name,
        _LM,
        config="repogym.agents.grpo:GRPOConfig",
        trainer="repogym.agents.grpo:GRPOTrainer",
        preset={"variant": _name},
        data_parallel=True,
    )
#: Asynchronous training is the ``async_`` field of a config (``--set async_=true``); this
#: name is its deprecated alias (GRPO with one epoch and flat option fields).
register_algorithm(
    "async",
    _LM,
    config="repogym.agents.async_rl:AsyncConfig",
    trainer="repogym.agents.grpo:GRPOTrainer",
    deprecated="--algo async is deprecated: ask for asynchronous training with "
    "--set async_=true on the algorithm (e.g. --algo grpo --set "
    "epochs=1 --set async_=true; options as --set "
    "async_.max_staleness=4)",
)
register_algorithm(
    "distill",
    _LM,
    config="repogym.agents.distill:DistillConfig",
    trainer="repogym.agents.distill:DistillTrainer",
)
register_algorithm(
    "opd",
    _LM,
    config="repogym.agents.distill:OPDConfig",
    trainer="repogym.agents.distill:DistillTrainer",
)
register_algorithm(
    "echo",
    _LM,
    config="repogym.agents.echo:EchoConfig",
    trainer="repogym.agents.echo:echo_trainer",
    data_parallel=True,
)
register_algorithm("sb3-ppo", "repogym.agents.toy.sb3_ppo:main")
