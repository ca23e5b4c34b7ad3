"""Mutation synthesis with and without test selection: tasks per hour, side by side.

Usage: python bench/synthesis.py [--package inflection==0.5.1] [--tasks 5] [--seed 0]
       [--max-trials N] [--json FILE]

Fetches the package once (sdist, dependencies built and pinned), then runs the mutation
stage of ``repogym synth --pypi`` (:func:`repogym.scenarios.synth.synthesize`: mutants tried
in the sandbox until ``--tasks`` of them are real bugs, and their task folders written) twice
with the same seed: **every test** for every mutant (``SandboxRunner(select=False)``), then
**only the tests that called a function the mutant touches**, as the package's traced run
on the pristine code recorded (the default). Prints, for each, the wall time, the mutant
runs, the tests they ran, the tasks written and tasks per hour, then the ratio; and checks
that both runs wrote the same tasks (mutants, fail_to_pass and pass_to_pass lists):
selection may only save work, never change a task. Exit status 1 when they differ.

The runs are sequential and use one sandbox at a time, so wall time is one core's time
(the sandboxed processes' CPU time is not visible to this process: they are reaped inside
their sandbox). Timing noise on shared machines is large: compare the ratio within one run,
never a time across machines.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from repogym.quality.sandboxed_tests import SandboxRunner
from repogym.quality.synthesis import fetch, mutate_fetched
from repogym.scenarios.synth import MAX_FAIL_TO_PASS


def tasks_written(out: Path) -> dict[str, dict]:
    """Task folder name -> what makes it the task it is (its lists and its gold patch), for
    every task folder under ``out`` (``synth --pypi`` with several packages nests them)."""
    found = {}
    for toml in sorted(out.rglob("task.toml")):
        v = tomllib.loads(toml.read_text())["verifier"]
        found[toml.parent.name] = {
            "fail_to_pass": v["fail_to_pass"],
            "pass_to_pass": v["pass_to_pass"],
            "gold": (toml.parent / "solution.patch").read_text(),
        }
    return found


def one(args, fetched, select: bool, out: Path) -> dict:
    _, _, _, built, ini, plugins = fetched
    start = time.monotonic()
    with SandboxRunner(
        built.sandbox, ini, plugins=plugins, stop_after=MAX_FAIL_TO_PASS, select=select
    ) as runner:
        mutate_fetched(
            fetched,
            out,
            runner,
            max_tasks=args.tasks,
            seed=args.seed,
            max_trials=args.max_trials,
            say=lambda m: None,
        )
        stats = dict(runner.stats)
    wall = time.monotonic() - start
    tasks = tasks_written(out)
    return {
        "select": select,
        "wall_s": round(wall, 1),
        "tasks": len(tasks),
        "tasks_per_hour": round(len(tasks) / (wall / 3600), 1) if wall else None,
        "stats": {k: round(v, 1) if isinstance(v, float) else v for k, v in stats.items()},
        "written": tasks,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--package", default="inflection==0.5.1")
    p.add_argument("--tasks", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-trials", type=int, default=None)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="repogym-bench-synth-"))
    try:
        fetched = fetch(args.package, work, say=lambda m: None)
        rows = [one(args, fetched, s, work / f"out-{s}") for s in (False, True)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.package}: {args.tasks} tasks wanted, seed {args.seed}")
    print(
        f"{'tests per mutant':18s} {'wall s':>8s} {'runs':>6s} {'tests run':>10s} "
        f"{'tasks':>6s} {'tasks/hour':>11s}"
    )
    for r in rows:
        st = r["stats"]
        print(
            f"{'selected' if r['select'] else 'all':18s} {r['wall_s']:8.1f} "
            f"{st['runs']:6d} {st['tests run']:10d} {r['tasks']:6d} "
            f"{r['tasks_per_hour']!s:>11s}"
        )
    before, after = rows
    if after["wall_s"]:
        print(
            f"selection: {before['stats']['tests run'] / max(after['stats']['tests run'], 1):.2f}x "
            f"fewer tests run, {before['wall_s'] / after['wall_s']:.2f}x less wall time"
        )
    same = before["written"] == after["written"]
    print("the same tasks written by both runs" if same else "the runs wrote DIFFERENT tasks")
    if args.json:
        args.json.write_text(json.dumps({"package": args.package, "rows": rows}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
