"""``repogym synth PACKAGE_DIR --out DIR``: synthesise tasks by mutating a tested package.

See :mod:`repogym.scenarios.synth`. The package's tests run as plain subprocesses (it is
your own, trusted code); the mutation score of each task written is then computed in the
sandbox (``--no-mutation`` skips it). Check the emitted tasks with ``repogym validate DIR``.
"""

from __future__ import annotations

import argparse
import sys

from repogym.harness.cmd_validate import add_mutation_options, mutation_args_error, run_mutation


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("synth", help="make tasks from a tested Python package by mutation")
    p.add_argument("package", metavar="PACKAGE_DIR",
                   help="folder whose tests pass with `python -m pytest` run inside it")
    p.add_argument("--out", required=True, help="folder to write task folders into")
    p.add_argument("--max-tasks", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--p2p-sample", type=int, default=20, help="largest pass_to_pass list")
    add_mutation_options(p, gate=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from repogym.scenarios.synth import SynthError, synthesize
    from repogym.scenarios.task import load_task

    if problem := mutation_args_error(args):
        print(problem, file=sys.stderr)
        return 2
    try:
        tasks = synthesize(args.package, args.out, max_tasks=args.max_tasks, seed=args.seed,
                           p2p_sample=args.p2p_sample)
    except (SynthError, OSError) as e:
        print(e, file=sys.stderr)
        return 2
    for t in tasks:
        print(f"wrote {t}")
    if tasks and not args.no_mutation:
        run_mutation([load_task(t) for t in tasks], args, Console(), diffs=False)
    print(f"{len(tasks)} tasks; next: repogym validate {args.out} (--mutation for survivors)")
    return 0 if tasks else 1
