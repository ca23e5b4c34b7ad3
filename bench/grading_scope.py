"""Grading every passing test vs a sample of 20: the cost of grading regressions.

For each task given, the gold patch is graded in the real sandbox (bwrap) with the task's
own pass_to_pass (every other test that passes, ``p2p_scope = "all"``) and with a seeded
sample of 20 of them (what synthesis listed before), alternately, ``--runs`` times each.
Prints one line per task (median seconds each way and their ratio) and one per package
(the median over its tasks); the last line is ``ratio=X`` (median over all tasks).

Run: ``python bench/grading_scope.py TASK_DIR... [--runs 3]`` (a folder of task folders
works too, e.g. ``<cache>/suites/realpy/semver``).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import time
from pathlib import Path

from repogym.quality.validate import PatchGrader
from repogym.scenarios.task import Task, find_task_dirs, load_task

SAMPLE = 20


def _sampled(task: Task) -> Task:
    p2p = task.test_spec.pass_to_pass
    keep = tuple(sorted(random.Random(0).sample(p2p, min(SAMPLE, len(p2p)))))
    return dataclasses.replace(
        task, test_spec=dataclasses.replace(task.test_spec, pass_to_pass=keep)
    )


def _time(grader: PatchGrader, task: Task, diff: str) -> float:
    start = time.monotonic()
    res = grader.grade(task, diff)
    if res.reward != 1.0:
        raise SystemExit(f"{task.id}: gold scored {res.reward} ({res.untrusted or res.tests})")
    return time.monotonic() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tasks = [load_task(d) for p in args.tasks for d in find_task_dirs(p)]
    ratios: dict[str, list[tuple[float, float]]] = {}
    with PatchGrader("bwrap") as grader:
        for task in tasks:
            diff = task.solution_patch.read_text()
            full, sample = [], []
            for _ in range(args.runs):  # alternate, so load changes hit both alike
                full.append(_time(grader, task, diff))
                sample.append(_time(grader, _sampled(task), diff))
            f, s = statistics.median(full), statistics.median(sample)
            package = task.tags[1] if len(task.tags) > 1 else task.id.rsplit("-", 1)[0]
            ratios.setdefault(package, []).append((f, s))
            print(
                f"{task.id}: {len(task.test_spec.pass_to_pass)} pass_to_pass {f:.2f}s, "
                f"sample of {SAMPLE} {s:.2f}s, x{f / s:.2f}",
                flush=True,
            )
    every = []
    for package, pairs in sorted(ratios.items()):
        f = statistics.median(p[0] for p in pairs)
        s = statistics.median(p[1] for p in pairs)
        every += [a / b for a, b in pairs]
        print(f"package {package}: {len(pairs)} tasks, all {f:.2f}s, sample {s:.2f}s, x{f / s:.2f}")
    print(f"ratio={statistics.median(every):.2f}")


if __name__ == "__main__":
    main()
