"""JSON Lines files: one JSON value per line, blank lines skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(
    path: str | Path, *, error: type[Exception] = ValueError, what: str = "object"
) -> list[Any]:
    """The values of ``path``, in order. A line that is not JSON raises ``error`` naming the
    file and line (``what`` says what each line should hold)."""
    path = Path(path)
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise error(f"{path}:{n}: not JSON ({e}). Fix: one JSON {what} per line") from e
    return out
