"""Two versions of repogym side by side, for the benches that compare them
(``bench/pipeline.py``, ``bench/discovery.py``): git worktrees of the revisions, and runs
that alternate between them."""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

#: This checkout's root.
HERE = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def checked_out(work: Path, baseline: str, current: str | None) -> Iterator[dict[str, Path]]:
    """``{"baseline": folder, "current": folder}``: a git worktree of each revision under
    ``work`` (``current`` None: this checkout's working tree), removed on leaving, with
    ``work`` itself."""
    trees = {"baseline": work / "baseline", "current": work / "current"}
    revs = {"baseline": baseline, "current": current}
    try:
        for label, tree in trees.items():
            if revs[label] is None:
                trees[label] = HERE
                continue
            subprocess.run(
                ["git", "-C", str(HERE), "worktree", "add", "--detach", str(tree), revs[label]],
                check=True,
                capture_output=True,
            )
        yield trees
    finally:
        for tree in trees.values():
            if tree != HERE and tree.exists():
                subprocess.run(
                    ["git", "-C", str(HERE), "worktree", "remove", "--force", str(tree)],
                    capture_output=True,
                )
        shutil.rmtree(work, ignore_errors=True)


def alternated(
    trees: dict[str, Path], name: str, rounds: int, work: Path, run: Callable[[Path, Path], dict]
) -> dict[str, list[dict]]:
    """``run(code, folder)`` with each version's code, alternating, ``rounds`` times, each
    in a fresh folder under ``work`` (removed after): label -> its results, in order."""
    runs: dict[str, list[dict]] = {label: [] for label in trees}
    for r in range(rounds):
        for label, code in trees.items():
            folder = work / f"{name}-{label}-{r}"
            folder.mkdir()
            runs[label].append(run(code, folder))
            shutil.rmtree(folder, ignore_errors=True)
    return runs


def parser(description: str) -> argparse.ArgumentParser:
    """The options every comparison takes: ``--baseline``, ``--current``, ``--package``
    (again for more), ``--rounds``, ``--json``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--baseline", required=True, help="git revision to compare with")
    p.add_argument("--current", help="git revision to measure (default: the working tree)")
    p.add_argument("--package", action="append", help="NAME==VERSION (again for more)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--json", type=Path)
    return p


def compared(
    args: argparse.Namespace, name: str, run: Callable[[Path, str, Path], dict]
) -> Iterator[tuple[str, dict[str, list[dict]]]]:
    """For each of ``args.package`` (default inflection 0.5.1): the package and
    :func:`alternated`'s runs of ``run(code, package, folder)`` at the two revisions, in
    worktrees under a temporary folder named after ``name``."""
    work = Path(tempfile.mkdtemp(prefix=f"repogym-bench-{name}-"))
    with checked_out(work, args.baseline, args.current) as trees:
        for package in args.package or ["inflection==0.5.1"]:
            yield (
                package,
                alternated(
                    trees,
                    package,
                    args.rounds,
                    work,
                    lambda code, folder, p=package: run(code, p, folder),
                ),
            )
