"""Seconds per grading of a task's gold patch at two revisions, side by side.

For each task folder given, each revision (a git worktree; ``--current`` defaults to this
working tree) grades the gold patch in the real sandbox (bwrap) in a process of its own: one
grading to warm up (the task's template, imports), then ``--gradings`` timed ones, of which
the median counts. The revisions alternate, ``--rounds`` times, so a change in the
machine's load hits both alike. One line per task: the median over rounds of each
revision's median, and baseline / current (above 1: the current code grades faster). The
last line is ``speedup=X`` (the median over tasks).

Run: ``python bench/grading_speed.py --baseline REV TASK_DIR... [--rounds 3]`` (a folder of
task folders works too, e.g. ``<cache>/suites/realpy/jinja2-3.1.5``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from revisions import alternated, checked_out, parser  # bench/ is on sys.path when run

# What runs in each revision's process: the medians of its timed gradings, as JSON.
_PROBE = """
import json, statistics, sys, time
from repogym.quality.validate import PatchGrader
from repogym.scenarios.task import load_task
task, n = load_task(sys.argv[1]), int(sys.argv[2])
diff = task.solution_patch.read_text()
with PatchGrader("bwrap") as grader:
    grader.grade(task, diff)
    times = []
    for _ in range(n):
        start = time.monotonic()
        res = grader.grade(task, diff)
        times.append(time.monotonic() - start)
        if res.reward != 1.0:
            sys.exit(f"{task.id}: gold scored {res.reward}")
print(json.dumps({"median_s": statistics.median(times), "times": times}))
"""


def _grade(code: Path, task: Path, gradings: int) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, str(task), str(gradings)],
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code)},
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        raise SystemExit(f"{task} at {code}: {run.stderr.strip()[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("tasks", nargs="+", type=Path)
    p.add_argument("--gradings", type=int, default=3)
    args = p.parse_args()
    from repogym.scenarios.task import find_task_dirs

    folders = [d for t in args.tasks for d in find_task_dirs(t)]
    rows, speedups = [], []
    work = Path(tempfile.mkdtemp(prefix="repogym-bench-grading-"))
    with checked_out(work, args.baseline, args.current) as trees:
        for folder in folders:
            runs = alternated(
                trees,
                folder.name,
                args.rounds,
                work,
                lambda code, _out, f=folder: _grade(code, f, args.gradings),
            )
            med = {k: statistics.median(r["median_s"] for r in v) for k, v in runs.items()}
            speedup = med["baseline"] / med["current"]
            speedups.append(speedup)
            rows.append({"task": folder.name, "seconds": med, "speedup": round(speedup, 2)})
            print(
                f"{folder.name}: baseline {med['baseline']:.2f} s, current "
                f"{med['current']:.2f} s per grading: {speedup:.2f}x",
                flush=True,
            )
    summary = {
        "baseline": args.baseline,
        "current": args.current or "the working tree",
        "rows": rows,
        "speedup": round(statistics.median(speedups), 2),
    }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"speedup={summary['speedup']}")


if __name__ == "__main__":
    main()
