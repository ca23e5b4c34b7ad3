"""Remove ``# fmt: skip`` / ``# fmt: off`` / ``# fmt: on`` markers before adopting ``ruff format``.

A one-off for the switch to the formatter: the markers kept hand-aligned lines away from a
formatter the project did not run. This removes those comments and nothing else: a marker
that ends a longer comment (``# noqa: X  # fmt: skip``) leaves the rest of the comment, a
line that held only a marker goes, and text inside strings is never touched (comments are
found with :mod:`tokenize`). Files under the ``extend-exclude`` folders of ``[tool.ruff]``
(task folders: user code) are left alone.

Usage::

    python .ci/strip_fmt_markers.py [--check] [ROOT]   # default ROOT: the repository

``--check`` changes nothing and exits 1 when a marker is left (listing where).
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
import tomllib
from pathlib import Path

#: The folders (relative to the root) whose Python files are stripped.
FOLDERS = ("repogym", "tests", "bench")

#: A formatter marker at the end of a comment, with the blanks before it.
_MARKER = re.compile(r"\s*#\s*fmt:\s*(?:skip|off|on)\s*$")


def excluded(root: Path) -> list[Path]:
    """The folders ruff is told never to look at (``[tool.ruff] extend-exclude``)."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return [root / p for p in config.get("tool", {}).get("ruff", {}).get("extend-exclude", [])]


def files(root: Path) -> list[Path]:
    """Every Python file of :data:`FOLDERS` under ``root`` outside the excluded folders."""
    skip = excluded(root)
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            if not any(path.is_relative_to(s) for s in skip):
                found.append(path)
    return found


def strip(text: str) -> str:
    """``text`` (Python source) without its formatter markers.

    Raises:
        tokenize.TokenError: ``text`` is not tokenizable Python.
    """
    lines = text.splitlines(keepends=True)
    edits: dict[int, tuple[int, str]] = {}  # line index -> (comment column, new comment)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT and _MARKER.search(tok.string):
            edits[tok.start[0] - 1] = (tok.start[1], _MARKER.sub("", tok.string))
    out = []
    for index, line in enumerate(lines):
        if index not in edits:
            out.append(line)
            continue
        column, comment = edits[index]
        body = line[:column]
        ending = line[len(line.rstrip("\r\n")) :]
        if comment.strip():
            out.append(body + comment + ending)
        elif body.strip():
            out.append(body.rstrip() + ending)
        # else: the line held only the marker: it goes.
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    """Strip (or with ``--check`` list) the markers under the root; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "root", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if any")
    args = parser.parse_args(argv)
    changed = 0
    for path in files(args.root):
        text = path.read_bytes().decode("utf-8")
        new = strip(text)
        if new == text:
            continue
        changed += 1
        rel = path.relative_to(args.root)
        if args.check:
            print(f"{rel}: formatter markers left")
        else:
            path.write_bytes(new.encode("utf-8"))
            print(f"{rel}: stripped")
    print(f"{changed} file(s) {'with markers' if args.check else 'stripped'}", file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
