"""A run folder: ``config.json``, ``metrics.jsonl``, ``checkpoint-N/`` and resuming them.

``OUT/checkpoint-N/`` holds the model and tokenizer (``save_pretrained``) and
``trainer_state.pt`` (weights, optimiser, LR schedule, step, Python/NumPy/torch RNG states
and what a trainer adds). :class:`RunLog` opens a run: it writes ``config.json`` and appends
to ``metrics.jsonl``; resuming after step ``N`` keeps the rows of steps ``<= N`` (the later
ones are redone), a new run starts a new file. Under data parallelism only rank 0 writes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from repogym.agents.metrics import MetricsLogger

__all__ = [
    "RunLog",
    "checkpoint_step",
    "latest_checkpoint",
    "read_state",
    "resolve_resume",
    "rng_state",
    "set_rng_state",
    "write_checkpoint",
]


def latest_checkpoint(out: str | Path) -> Path | None:
    """The ``checkpoint-N`` folder of ``out`` with the largest ``N`` (None if none)."""
    found = [
        (int(p.name.split("-")[1]), p)
        for p in Path(out).glob("checkpoint-*")
        if p.name.split("-")[1].isdigit() and (p / "trainer_state.pt").is_file()
    ]
    return max(found)[1] if found else None


def resolve_resume(out: str | Path, resume: bool | str | Path) -> Path:
    """The checkpoint ``--resume`` means: the latest of ``out`` (True) or the one given.

    Raises:
        FileNotFoundError: If there is none (the message names the fix).
    """
    path = latest_checkpoint(out) if resume is True else Path(resume)
    if path is None:
        raise FileNotFoundError(
            f"--resume: no checkpoint in {out}. Fix: train without "
            "--resume first, or pass --out of that run"
        )
    return path


def checkpoint_step(path: str | Path) -> int:
    """The step a checkpoint folder was saved after (``checkpoint-N``: N, else its state's).

    Raises:
        FileNotFoundError: If the folder is no checkpoint (the message names the fix).
    """
    path = Path(path)
    name, _, number = path.name.rpartition("-")
    if name == "checkpoint" and number.isdigit() and (path / "trainer_state.pt").is_file():
        return int(number)
    return int(read_state(path)["step"])


def rng_state() -> dict[str, Any]:
    """Python, NumPy, torch (and CUDA) RNG states."""
    return {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(rng: Mapping[str, Any]) -> None:
    """Restore :func:`rng_state`'s output."""
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    if rng["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])


def write_checkpoint(
    path: Path,
    lm: Any,
    tokenizer: Any,
    state: Mapping[str, Any],
    lm_state: Mapping[str, torch.Tensor] | None = None,
) -> Path:
    """Write ``path``: ``lm.save_pretrained`` (of ``lm_state`` when given: gathered weights),
    the tokenizer and ``trainer_state.pt``."""
    lm.save_pretrained(path, **({"state_dict": dict(lm_state)} if lm_state is not None else {}))
    tokenizer.save_pretrained(path)
    torch.save(dict(state), path / "trainer_state.pt")
    return path


def read_state(path: str | Path) -> dict[str, Any]:
    """The ``trainer_state.pt`` of a checkpoint folder.

    Raises:
        FileNotFoundError: If the folder has none (the message names the fix).
    """
    file = Path(path) / "trainer_state.pt"
    if not file.is_file():
        raise FileNotFoundError(
            f"{path} has no trainer_state.pt. Fix: pass a checkpoint-N "
            "folder written by `repogym train`"
        )
    return torch.load(file, map_location="cpu", weights_only=False)


class RunLog:
    """``OUT/config.json`` and ``OUT/metrics.jsonl`` of a run (no-ops off the main rank).

    Args:
        out: The run folder.
        config: The run's config (a dataclass), written to ``config.json``.
        resumed_after: The step a resumed run continues after (None: a new run).
        main: Whether this process writes.
    """

    def __init__(
        self, out: str | Path, config: Any, *, resumed_after: int | None = None, main: bool = True
    ) -> None:
        self.logger: MetricsLogger | None = None
        if not main:
            return
        self.logger = MetricsLogger(out, resumed_after)
        Path(out, "config.json").write_text(
            json.dumps(asdict(config), indent=2, default=str) + "\n"
        )

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Append one step's metrics."""
        if self.logger is not None:
            self.logger.log(step, metrics)

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if self.logger is not None:
            self.logger.close()
