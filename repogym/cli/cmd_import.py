"""``repogym import-swebench INSTANCES.jsonl --repos DIR --out DIR``: SWE-bench-family import.

SWE-bench, SWE-Gym, SWE-smith and R2E-Gym rows (``--format``, default told by the keys).
``DIR/<owner>__<name>`` must be a local clone of each instance's repository (the SWE-bench
naming). Each instance becomes a task folder under ``--out`` (see
:mod:`repogym.scenarios.swebench`), and its mutation score is computed in the sandbox
(``--no-mutation`` skips it); run ``repogym validate`` on them next.
"""

from __future__ import annotations

import argparse
import sys

from repogym.cli.options import SPLITS, add_mutation_options, bad_mutation_args
from repogym.cli.printing import run_mutation


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-swebench", help="import SWE-bench-format instances as tasks")
    p.add_argument("instances", help="JSONL file, one instance per line (or a JSON list)")
    p.add_argument("--repos", required=True, help="folder of local clones named <owner>__<name>")
    p.add_argument("--out", required=True, help="folder to write task folders into")
    p.add_argument("--split", default="test", choices=SPLITS)
    p.add_argument("--timeout", type=float, default=300.0, help="verifier timeout (s)")
    p.add_argument(
        "--format",
        default="auto",
        choices=["auto", "swebench", "swesmith", "r2e"],
        help="row format (default: told by the keys; SWE-Gym rows are swebench)",
    )
    add_mutation_options(p, gate=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from repogym.scenarios.swebench import InstanceError, import_swebench
    from repogym.scenarios.task import load_task

    if bad_mutation_args(args):
        return 2
    try:
        done, errors = import_swebench(
            args.instances,
            args.repos,
            args.out,
            split=args.split,
            timeout_s=args.timeout,
            fmt=args.format,
        )
    except (OSError, InstanceError) as e:
        print(f"cannot read {args.instances}: {e}", file=sys.stderr)
        return 2
    for path in done:
        print(f"imported {path}")
    for e in errors:
        print(f"FAIL {e}", file=sys.stderr)
    if done and not args.no_mutation:
        run_mutation([load_task(p) for p in done], args, Console(), diffs=False)
    print(f"{len(done)} imported, {len(errors)} failed; next: repogym validate {args.out}")
    return 1 if errors else 0
