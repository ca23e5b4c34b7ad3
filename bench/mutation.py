"""Time of the mutation check (``repogym validate --mutation``) per task, and its scaling.

Runs the mutation check of each chosen built-in task once per worker count, into a fresh
cache folder (so nothing is read from earlier runs), and prints per worker count the median
and total time per task, mutants graded per second and the speed-up over the first worker
count. Also prints the score of each task (the same for every worker count: mutants and
their sample do not depend on scheduling).

    python bench/mutation.py [--workers 1 2 4] [--tasks retry-zero date-range-dst ...]
                             [--max-mutants N] [--json FILE]

Timing noise on shared machines is large (3-8x): compare ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

from repogym.quality.validate import PatchGrader
from repogym.quality.validate_mutation import mutation_check
from repogym.scenarios.registry import builtin_tasks
from repogym.scenarios.task import select_tasks

DEFAULT_TASKS = [
    "retry-zero",
    "date-range-dst",
    "paginate-off-by-one",
    "memoize-kwargs",
    "api-contract-sort",
]


def measure(tasks: list, workers: int, max_mutants: int | None) -> dict:
    """One mutation check per task with ``workers`` parallel gradings."""
    rows = []
    with PatchGrader() as grader:
        for task in tasks:
            r = mutation_check(
                task, grader, workers=workers, max_mutants=max_mutants, budget_s=3600.0
            )
            graded = sum(r.count(s) for s in ("killed", "survived", "reviewed", "error"))
            rows.append(
                {
                    "task": task.id,
                    "seconds": r.duration_s,
                    "graded": graded,
                    "score": r.score,
                    "summary": r.summary(),
                }
            )
    seconds = [row["seconds"] for row in rows]
    return {
        "workers": workers,
        "median_s": statistics.median(seconds),
        "total_s": sum(seconds),
        "mutants_per_s": sum(row["graded"] for row in rows) / sum(seconds),
        "tasks": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=DEFAULT_TASKS,
        help="built-in task ids (default: five small ones)",
    )
    parser.add_argument("--max-mutants", type=int, default=None)
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args()

    tasks = select_tasks(builtin_tasks(), task_ids=args.tasks)
    results = []
    with tempfile.TemporaryDirectory(prefix="repogym-bench-") as cache:
        os.environ["REPOGYM_CACHE"] = cache
        for w in args.workers:
            results.append(measure(tasks, w, args.max_mutants))
            r = results[-1]
            print(
                f"workers={w}: median {r['median_s']:.1f}s per task, total "
                f"{r['total_s']:.1f}s, {r['mutants_per_s']:.2f} mutants/s "
                f"(x{r['mutants_per_s'] / results[0]['mutants_per_s']:.2f})",
                flush=True,
            )
    for row in results[0]["tasks"]:
        print(f"  {row['task']}: {row['summary']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
