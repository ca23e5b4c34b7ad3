"""Git diffs of a task's repository: split into per-file patches, and what a path is."""

from __future__ import annotations

import dataclasses
import re
from pathlib import PurePosixPath

_HEADER = re.compile(r'^diff --git (?:"?a/(.+?)"?) (?:"?b/(.+?)"?)$')


@dataclasses.dataclass(frozen=True)
class FilePatch:
    """One file's part of a git diff."""

    old: str
    new: str
    text: str

    @property
    def paths(self) -> set[str]:
        return {self.old, self.new}


def split_diff(diff: str) -> list[FilePatch]:
    """Split a ``git diff`` into per-file patches."""
    patches: list[FilePatch] = []
    current: list[str] = []
    paths: tuple[str, str] | None = None
    for line in diff.splitlines(keepends=True):
        m = _HEADER.match(line.rstrip("\n"))
        if m:
            if paths:
                patches.append(FilePatch(paths[0], paths[1], "".join(current)))
            paths, current = (m.group(1), m.group(2)), [line]
        elif paths:
            current.append(line)
    if paths:
        patches.append(FilePatch(paths[0], paths[1], "".join(current)))
    return patches


def headerless(diff: str) -> bool:
    """Whether a diff changes lines but names no file the way ``git diff`` does (``diff
    --git a/PATH b/PATH``): a plain unified diff, which :func:`split_diff` reads as empty."""
    changes = any(
        line.startswith(("+", "-", "@@")) and not line.startswith(("+++", "---"))
        for line in diff.splitlines()
    )
    return changes and not split_diff(diff)


def is_test_file(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def junit_key(node_id: str) -> tuple[str, str]:
    """(classname, name) that pytest's junit XML uses for a node id."""
    parts = node_id.split("::")
    path = parts[0].removesuffix(".py")
    classname = ".".join([path.replace("/", ".")] + parts[1:-1])
    return classname, parts[-1]
