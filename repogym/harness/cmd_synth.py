"""``repogym synth PACKAGE_DIR --out DIR``: synthesise tasks by mutating a tested package.

See :mod:`repogym.scenarios.synth`. The package's tests run as plain subprocesses (it is
your own, trusted code); check the emitted tasks with ``repogym validate DIR``.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("synth", help="make tasks from a tested Python package by mutation")
    p.add_argument("package", metavar="PACKAGE_DIR",
                   help="folder whose tests pass with `python -m pytest` run inside it")
    p.add_argument("--out", required=True, help="folder to write task folders into")
    p.add_argument("--max-tasks", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--p2p-sample", type=int, default=20, help="largest pass_to_pass list")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.scenarios.synth import SynthError, synthesize

    try:
        tasks = synthesize(args.package, args.out, max_tasks=args.max_tasks, seed=args.seed,
                           p2p_sample=args.p2p_sample)
    except (SynthError, OSError) as e:
        print(e, file=sys.stderr)
        return 2
    for t in tasks:
        print(f"wrote {t}")
    print(f"{len(tasks)} tasks; next: repogym validate {args.out}")
    return 0 if tasks else 1
