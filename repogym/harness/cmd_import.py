"""``repogym import-swebench INSTANCES.jsonl --repos DIR --out DIR``: SWE-bench-format import.

``DIR/<owner>__<name>`` must be a local clone of each instance's repository (the SWE-bench
naming). Each instance becomes a task folder under ``--out`` (see
:mod:`repogym.scenarios.swebench`); run ``repogym validate`` on them next.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-swebench", help="import SWE-bench-format instances as tasks")
    p.add_argument("instances", help="JSONL file, one instance per line (or a JSON list)")
    p.add_argument("--repos", required=True,
                   help="folder of local clones named <owner>__<name>")
    p.add_argument("--out", required=True, help="folder to write task folders into")
    p.add_argument("--split", default="test", choices=["train", "test"])
    p.add_argument("--timeout", type=float, default=300.0, help="verifier timeout (s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from repogym.scenarios.swebench import InstanceError, import_swebench

    try:
        done, errors = import_swebench(args.instances, args.repos, args.out,
                                       split=args.split, timeout_s=args.timeout)
    except (OSError, InstanceError) as e:
        print(f"cannot read {args.instances}: {e}", file=sys.stderr)
        return 2
    for path in done:
        print(f"imported {path}")
    for e in errors:
        print(f"FAIL {e}", file=sys.stderr)
    print(f"{len(done)} imported, {len(errors)} failed; next: repogym validate {args.out}")
    return 1 if errors else 0
