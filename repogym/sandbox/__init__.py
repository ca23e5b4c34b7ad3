"""Sandbox backends: ``bwrap`` (default), ``docker``, ``process`` (unsafe, by name only)."""

from __future__ import annotations

import importlib
from typing import Any

from repogym.sandbox.base import (
    WORKSPACE,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxSpec,
)

#: backend name -> "module:Class"; third-party backends may add entries.
BACKENDS: dict[str, str] = {
    "bwrap": "repogym.sandbox.bwrap:BwrapSandbox",
    "process": "repogym.sandbox.process:ProcessSandbox",
    "docker": "repogym.sandbox.docker:DockerSandbox",
}


def make_sandbox(backend: str, spec: SandboxSpec, **options: Any) -> Sandbox:
    """Start a sandbox of the named backend over ``spec``.

    Raises:
        ValueError: unknown backend (the message lists the known ones).
        SandboxError: the backend could not start (the message says how to fix it).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}. Fix: use one of {sorted(BACKENDS)}")
    module, cls = BACKENDS[backend].split(":")
    try:
        klass = getattr(importlib.import_module(module), cls)
    except ImportError as e:
        raise SandboxError(
            f"sandbox backend {backend!r} is unavailable: {e}. Fix: install "
            f"its extra, e.g. pip install 'repogym[{backend}]'"
        ) from e
    return klass(spec, **options) if options else klass(spec)


__all__ = [
    "BACKENDS",
    "WORKSPACE",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "make_sandbox",
]
