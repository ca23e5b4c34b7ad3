"""The reader forgery against every built-in, many gradings each: what it earns vs noop.

Usage: python bench/forgery.py [--gradings 20] [--tasks a,b] [--workers 2]
       [--variants hooks-honest,hooks-guess,channel-guess]

Each variant of ``READER_FORGERY`` (repogym/quality/adversarial.py) is appended to every
non-test module of each task and graded ``--gradings`` times with the real grader (fresh
random names, check numbers and forger randomness each time). The reward of every reward
mode is computed from each grading's per-test outcomes. Prints, per task and variant, the
largest and the mean reward over the gradings next to noop's, and a final line with the
number of (task, variant, mode) cells where any grading earned more than noop. The
acceptance target is zero.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import sys
import time

from repogym.envs import grader
from repogym.quality.adversarial import code_modules, reader_forgery
from repogym.sandbox import make_sandbox
from repogym.sandbox.workspace import TemplateCache, make_diff
from repogym.scenarios.registry import builtin_tasks

VARIANTS = {"hooks-honest": ("hooks", 1.0), "hooks-guess": ("hooks", 0.5),
            "channel-guess": ("channel", 0.5)}


def _rewards(res: grader.GradeResult, task) -> dict[str, float]:
    if res.untrusted or res.infra_error:
        return dict.fromkeys(grader.REWARD_MODES, 0.0)
    return {m: grader.score(res.tests, task.verifier, m)[0] for m in grader.REWARD_MODES}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gradings", type=int, default=20)
    p.add_argument("--tasks", default="")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--variants", default=",".join(VARIANTS))
    args = p.parse_args(argv)
    tasks = [t for t in builtin_tasks() if not args.tasks or t.id in args.tasks.split(",")]
    cache = TemplateCache()

    def grade(task, diff):
        return _rewards(grader.grade(task, cache.get(task.repo_dir), diff, mode="partial",
                                     make_sandbox=lambda spec: make_sandbox("bwrap", spec)),
                        task)

    start, over = time.monotonic(), 0
    print(f"{'task':28s} {'variant':14s} " + " ".join(f"{m:>17s}" for m in grader.REWARD_MODES))
    with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
        for task in tasks:
            noop = grade(task, "")
            for name in args.variants.split(","):
                mode, honesty = VARIANTS[name]
                payload = reader_forgery(mode, honesty)
                diff = make_diff(task.repo_dir, {
                    m: (task.repo_dir / m).read_text() + "\n" + payload
                    for m in code_modules(task.repo_dir, task.verifier.tests_dest)})
                runs = list(pool.map(grade, [task] * args.gradings, [diff] * args.gradings))
                cells = []
                for m in grader.REWARD_MODES:
                    got = [r[m] for r in runs]
                    over += max(got) > noop[m] + 1e-9
                    cells.append(f"{max(got):.2f}/{statistics.mean(got):.2f}/{noop[m]:.2f}")
                print(f"{task.id:28s} {name:14s} " + " ".join(f"{c:>17s}" for c in cells),
                      flush=True)
    cache.close()
    print(f"cells max/mean/noop; {len(tasks)} tasks x {len(args.variants.split(','))} "
          f"variants x {args.gradings} gradings in {time.monotonic() - start:.0f}s; "
          f"cells where a grading beat noop: {over}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
