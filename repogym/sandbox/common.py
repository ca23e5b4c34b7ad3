"""Old home of the sandbox base class; the contract is :class:`repogym.sandbox.base.Sandbox`.

``SandboxBase`` is the same class under its former name, kept for code that imports it.
"""

from __future__ import annotations

from repogym.sandbox.base import DiffError, Sandbox

#: The former name of :class:`repogym.sandbox.base.Sandbox` (the same class).
SandboxBase = Sandbox

__all__ = ["DiffError", "SandboxBase"]
