"""Options several commands share, with their choices derived from where each is defined."""

from __future__ import annotations

import argparse

from repogym.envs.grader import REWARD_MODES
from repogym.sandbox import BACKENDS
from repogym.scenarios.task import SPLITS

__all__ = ["REWARD_MODES", "SPLITS", "add_sandbox"]


def add_sandbox(p: argparse.ArgumentParser | argparse._ArgumentGroup,
                default: str | None = "bwrap") -> None:
    """``--sandbox``: one of the registered backends (:data:`repogym.sandbox.BACKENDS`)."""
    p.add_argument("--sandbox", default=default, choices=sorted(BACKENDS),
                   help="sandbox backend (default bwrap)")
