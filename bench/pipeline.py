"""Synthesis end to end at two versions of repogym, side by side: tasks per CPU-hour.

Usage: python bench/pipeline.py --baseline REV [--current REV] [--package inflection==0.5.1
       ...] [--tasks 5] [--rounds 1] [--seed 0] [--json FILE]

Runs ``repogym synth --pypi PACKAGE --max-tasks N --no-mutation --workers 1 --seed S`` (the
mutants tried, the bug reports written, every candidate validated in the sandbox: noop,
gold three times, its decoys; gold's values recorded) once with the code of the baseline
``REV`` and once with the current code (``--current REV``; default: this checkout's working
tree), each a git worktree of this repository, alternating baseline and current
``--rounds`` times per package. Each run starts from an empty record of
gold values, witnessed and forged tests (the recording is part of what a new task costs),
and shares repogym's other caches (the package's download, its built environment), which
the first run of a package fills.

One worker, so the run's wall time is the one core's time it took: the sandboxed processes'
CPU time is not visible to this process (they are reaped inside their sandbox), and wall
time at one worker is its upper bound. Prints per package and version the wall time, the
tasks written and tasks per hour, then the ratio; and checks that both versions wrote the
same tasks (their mutants, fail_to_pass and pass_to_pass lists and gold patches): a faster
grader may only save work, never change a task. Exit status 1 when they differ, unless
``--tasks-may-differ``: for a baseline from before a rule that changes which tasks are kept
(a stricter seal floor, a scope rule), where the measure is tasks per hour, not the same
work done faster. A revision whose ``synth`` has no ``--workers`` option ran one worker
already and runs without it.

Timing noise on shared machines is large: compare the ratio within one run, never a time
across machines.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from revisions import compared, parser  # bench/ is on sys.path when a script of it runs
from synthesis import tasks_written

#: Caches that hold what a grading records per task and grading code: emptied for each run.
RECORDS = ("gold", "witnessed", "forged")


def cache_of_run(shared: Path, work: Path) -> Path:
    """A cache folder for one run: the shared caches linked in, the records empty."""
    cache = work / "cache"
    cache.mkdir()
    for entry in shared.iterdir() if shared.is_dir() else ():
        if entry.name not in RECORDS:
            (cache / entry.name).symlink_to(entry)
    return cache


def has_workers_option(code: Path) -> bool:
    """Whether ``repogym synth`` at ``code`` takes ``--workers`` (older ones ran one)."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    cmd = [sys.executable, "-m", "repogym.cli", "synth", "--help"]
    return "--workers" in subprocess.run(cmd, env=env, capture_output=True, text=True).stdout


def one(code: Path, package: str, args, shared: Path, work: Path) -> dict:
    out = work / "out"
    env = {
        **os.environ,
        "PYTHONPATH": str(code),
        "REPOGYM_CACHE": str(cache_of_run(shared, work)),
    }
    cmd = [
        sys.executable,
        "-m",
        "repogym.cli",
        "synth",
        "--pypi",
        package,
        "--out",
        str(out),
        "--max-tasks",
        str(args.tasks),
        "--seed",
        str(args.seed),
        "--no-mutation",
        *(["--workers", "1"] if has_workers_option(code) else []),
    ]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{package} at {code}: synth failed:\n{proc.stdout[-3000:]}")
    tasks = tasks_written(out)
    return {
        "wall_s": round(wall, 1),
        "tasks": len(tasks),
        "tasks_per_hour": round(len(tasks) / (wall / 3600), 1) if wall else None,
        "written": tasks,
    }


def main() -> int:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--tasks-may-differ",
        action="store_true",
        help="the revisions keep different tasks by design (compare tasks per hour)",
    )
    args = p.parse_args()
    from repogym.sandbox.runtime import cache_dir

    shared = cache_dir()
    rows, same = [], True

    def run(code: Path, package: str, folder: Path) -> dict:
        return one(code, package, args, shared, folder)

    for package, runs in compared(args, "pipeline", run):
        walls = {k: statistics.median(x["wall_s"] for x in v) for k, v in runs.items()}
        per_hour = {
            k: statistics.median(x["tasks"] / (x["wall_s"] / 3600) for x in v)
            for k, v in runs.items()
        }
        agree = all(
            x["written"] == runs["baseline"][0]["written"] for v in runs.values() for x in v
        )
        same &= agree
        rows.append(
            {
                "package": package,
                "tasks": {k: [x["tasks"] for x in v] for k, v in runs.items()},
                "wall_s": walls,
                "tasks_per_hour": {k: round(v, 1) for k, v in per_hour.items()},
                "speedup": round(walls["baseline"] / walls["current"], 2),
                "per_hour_ratio": (
                    round(per_hour["current"] / per_hour["baseline"], 2)
                    if per_hour["baseline"]
                    else None
                ),
                "same_tasks": agree,
                "runs": {
                    k: [{kk: vv for kk, vv in x.items() if kk != "written"} for x in v]
                    for k, v in runs.items()
                },
            }
        )
    current = args.current or "the working tree"
    print(f"baseline {args.baseline} against {current}; {args.tasks} tasks wanted, one worker")
    print(
        f"{'package':24s} {'tasks b/c':>9s} {'baseline s':>11s} {'current s':>10s} "
        f"{'speedup':>8s} {'tasks/h b/c':>13s} {'per hour':>9s}"
    )
    for r in rows:
        tasks = f"{r['tasks']['baseline'][0]}/{r['tasks']['current'][0]}"
        hours = f"{r['tasks_per_hour']['baseline']:.0f}/{r['tasks_per_hour']['current']:.0f}"
        ratio = "-" if r["per_hour_ratio"] is None else f"{r['per_hour_ratio']:.2f}x"
        print(
            f"{r['package']:24s} {tasks:>9s} {r['wall_s']['baseline']:11.1f} "
            f"{r['wall_s']['current']:10.1f} {r['speedup']:7.2f}x {hours:>13s} {ratio:>9s}"
            + ("" if r["same_tasks"] else "  DIFFERENT TASKS")
        )
    if args.json:
        args.json.write_text(
            json.dumps({"baseline": args.baseline, "current": current, "rows": rows}, indent=1)
        )
    return 0 if same or args.tasks_may_differ else 1


if __name__ == "__main__":
    sys.exit(main())
