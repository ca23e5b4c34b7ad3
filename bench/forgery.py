"""Every forger of the attack library against the built-ins and every fetched suite task.

Usage: python bench/forgery.py [--suite NAME] [--dir FOLDER] [--tasks a,b] [--limit N]
       [--workers 2] [--attacks forger,reader-forgery-hooks] [--modes binary,partial,f2p]
       [--gradings 1]

The forgers are the attacks of kind ``forgery`` in :mod:`repogym.quality.adversarial`
(payloads in repogym/envs/attacks/). Each is planted the way the library plants it
(appended to every non-test module of the task) and graded with the real grader next to
the unchanged repository (noop), ``--gradings`` times each (fresh random names, check
numbers and forger randomness every time). The reward of every reward mode is computed from
each grading's per-test outcomes (the modes are functions of the same outcomes; an untrusted
run is 0 in all of them).

Tasks: the built-ins, then every task of every suite fetched and validated here (under the
suite cache root, ``repogym.scenarios.suites``); ``--suite builtin`` or ``--suite realpy``
keeps one; ``--dir`` (repeatable) attacks the task folders under a folder instead (imported
tasks, say; an imported Harbor task grades in its own image on the docker backend).
Prints one row per cell (task, mode, attack) where some grading earned more than
noop, with the largest reward and noop's; then the number of such cells per attack, their
total and the wall time. Exit status 1 when any cell beats noop (the target is none).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from repogym.grading import grader
from repogym.integrations.harbor_tasks import harbor_meta
from repogym.quality.adversarial import ATTACKS, Attack
from repogym.quality.pool import grading_pool
from repogym.quality.validate import PatchGrader
from repogym.sandbox.workspace import make_diff
from repogym.scenarios import suites
from repogym.scenarios.registry import builtin_tasks
from repogym.scenarios.task import Task, find_task_dirs, load_task

FORGERS = [a for a in ATTACKS if a.kind == "forgery"]


#: Suite tasks withheld under the seal floor (attacked too, counted apart).
WITHHELD: set[str] = set()


def fetched_tasks(only: str | None) -> list[Task]:
    """The validated tasks of every suite fetched here (or of suite ``only``), those the
    suite withholds under the seal floor included (:data:`WITHHELD`)."""
    out: list[Task] = []
    for name in suites.suite_names():
        if only not in (None, name):
            continue
        try:
            out += suites.validated_tasks(name, withheld=True)
        except suites.SuiteError:
            continue  # not fetched here
        WITHHELD.update(suites.withheld_tasks(name))
    return out


def select(args: argparse.Namespace) -> list[Task]:
    if args.dir:
        tasks = [load_task(f) for d in args.dir for f in find_task_dirs(d)]
    else:
        tasks = list(builtin_tasks()) if args.suite in (None, "builtin") else []
    if args.suite != "builtin" and not args.dir:
        tasks += fetched_tasks(args.suite)
    if args.tasks:
        wanted = set(args.tasks.split(","))
        tasks = [t for t in tasks if t.id in wanted]
    return tasks[: args.limit] if args.limit else tasks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", help="'builtin' or a fetched suite's name (default: all)")
    p.add_argument(
        "--dir",
        action="append",
        default=[],
        help="attack the task folders under this folder instead (repeatable)",
    )
    p.add_argument("--tasks", default="", help="comma-separated task ids")
    p.add_argument("--limit", type=int, default=0, help="at most this many tasks")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--attacks", default=",".join(a.name for a in FORGERS))
    p.add_argument("--modes", default=",".join(grader.REWARD_MODES))
    p.add_argument("--gradings", type=int, default=1, help="gradings per (task, attack)")
    args = p.parse_args(argv)
    by_name = {a.name: a for a in ATTACKS}
    unknown = [n for n in args.attacks.split(",") if n not in by_name]
    if unknown:
        p.error(
            f"unknown attack(s) {unknown}; the forgers are {', '.join(a.name for a in FORGERS)}"
        )
    attacks: list[Attack] = [by_name[n] for n in args.attacks.split(",")]
    modes = args.modes.split(",")
    tasks = select(args)
    if not tasks:
        p.error("no task selected (is the suite fetched? `repogym suite list`)")
    start = time.monotonic()
    over: list[tuple[str, str, str, float, float]] = []
    errors: list[str] = []
    harbor_graders: dict[str, PatchGrader] = {}  # image -> its grader (docker)

    def grader_of(task: Task, default: PatchGrader) -> PatchGrader:
        """An imported Harbor task grades in its own image on the docker backend."""
        image = harbor_meta(task).get("image")
        if not image:
            return default
        return harbor_graders.setdefault(image, PatchGrader("docker", {"image": image}))

    with PatchGrader() as patch_grader, grading_pool(args.workers) as pool:

        def one(task: Task, diff: str, timeout_s: float | None) -> dict[str, float]:
            res = grader_of(task, patch_grader).grade(
                task, diff, mode="partial", timeout_s=timeout_s
            )
            if res.infra_error:
                errors.append(f"{task.id}: {res.infra_error}")
            return res.rewards(task.test_spec)

        def cells(task: Task) -> list[tuple[str, str, str, float, float]]:
            noop = one(task, "", None)
            out = []
            for attack in attacks:
                diff = make_diff(
                    task.repo_dir, attack.changes(task.repo_dir, task.test_spec.tests_dest)
                )
                runs = [one(task, diff, attack.timeout_s) for _ in range(args.gradings)]
                for m in modes:
                    best = max(r[m] for r in runs)
                    if best > noop[m] + 1e-9:
                        out.append((task.id, m, attack.name, best, noop[m]))
            return out

        print(
            f"{len(tasks)} tasks x {len(attacks)} forgers x {args.gradings} grading(s), "
            f"modes {','.join(modes)}",
            flush=True,
        )
        print(f"{'task':40s} {'mode':8s} {'attack':26s} reward  noop", flush=True)
        for found in pool.map(cells, tasks):
            for task_id, m, name, got, base in found:
                print(f"{task_id:40s} {m:8s} {name:26s} {got:6.3f} {base:5.3f}", flush=True)
            over += found
    for g in harbor_graders.values():
        g.close()
    per_attack = Counter(name for _, _, name, _, _ in over)
    per_mode = Counter(m for _, m, _, _, _ in over)
    tasks_hit = {t for t, *_ in over}
    print(
        f"cells where an attack beat noop: {len(over)} "
        f"(tasks {len(tasks_hit)} of {len(tasks)}; by attack {dict(per_attack)}; "
        f"by mode {dict(per_mode)}); infra errors {len(errors)}; "
        f"wall {time.monotonic() - start:.0f}s"
    )
    resolved = {t for t, m, *_ in over if m == "binary"}
    served = [t.id for t in tasks if t.id not in WITHHELD]
    held = [t.id for t in tasks if t.id in WITHHELD]
    print(
        f"served tasks: {len(resolved & set(served))} of {len(served)} resolved by an attack "
        f"(binary), {len(tasks_hit & set(served))} beaten in some mode; withheld under the "
        f"seal floor: {len(resolved & set(held))} of {len(held)} resolved, "
        f"{len(tasks_hit & set(held))} beaten"
    )
    for e in errors[:10]:
        print(f"infra error: {e}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
