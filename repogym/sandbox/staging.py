"""Folders published whole: built under a temporary name beside their place, then renamed.

A reader sees either no folder or a complete one, never a half-built one, and a build that
fails or is interrupted leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def staged_dir(dest: Path, *, replace: bool = False) -> Iterator[Path]:
    """Yield an empty folder beside ``dest``; when the block ends, it becomes ``dest``.

    ``replace=False`` (caches that any builder fills the same way): when another process
    published ``dest`` first, its folder is kept and this one removed. ``replace=True``:
    an existing ``dest`` is removed and replaced. On an exception the folder is removed
    and the exception goes on.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        yield tmp
        if replace and dest.exists():
            shutil.rmtree(dest)
        try:
            os.rename(tmp, dest)
        except OSError:
            if replace or not dest.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process won the race
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
