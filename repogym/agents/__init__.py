"""Reference RL trainers for repogym environments (needs the ``train`` extra).

Importing this package is cheap: torch and transformers load on first use of a name below.

- :mod:`repogym.agents.losses`: GAE, group advantages, policy losses, aggregation, KL, entropy.
- :mod:`repogym.agents.tiny`: a tiny offline causal LM and byte-level BPE tokenizer.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "gae": "losses",
    "group_advantages": "losses",
    "policy_loss": "losses",
    "aggregate": "losses",
    "kl": "losses",
    "entropy_from_logits": "losses",
    "build_tiny": "tiny",
    "save_tiny": "tiny",
    "load_tiny": "tiny",
    "TinyConfig": "tiny",
}

__all__ = [
    "TinyConfig",
    "aggregate",
    "build_tiny",
    "entropy_from_logits",
    "gae",
    "group_advantages",
    "kl",
    "load_tiny",
    "policy_loss",
    "save_tiny",
]


def __getattr__(name: str) -> Any:
    """Import the submodule that defines ``name`` on first access (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """List the lazy exports alongside the module's own names."""
    return sorted(set(globals()) | set(__all__))
