"""``repogym history NAME --out DIR``: tasks from real fixes between consecutive releases.

See :mod:`repogym.quality.synth_history`. Each written task has been validated in the
sandbox (noop fails, gold passes ``--reruns`` times, decoys fail). A summary per release
pair is printed and, with ``--report FILE``, written as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from repogym.cli.options import add_sandbox
from repogym.cli.printing import print_written

if TYPE_CHECKING:
    from repogym.quality.synth_history import HistoryMining


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "history",
        help="make tasks from a PyPI package's release history "
        "(real fixes between consecutive sdists, reverted)",
    )
    p.add_argument(
        "names",
        metavar="NAME",
        nargs="+",
        help="the PyPI project (several: each is mined in turn, or at once with --ray)",
    )
    p.add_argument("--out", required=True, help="folder to write the valid task folders into")
    p.add_argument(
        "--versions",
        metavar="A,B,...",
        help="releases to pair, comma-separated (default: the index's final releases)",
    )
    p.add_argument(
        "--last",
        type=int,
        default=6,
        help="mine only the newest LAST release pairs (default 6; 0: all)",
    )
    p.add_argument(
        "--since",
        metavar="YYYY-MM-DD",
        help="only fixes released on that day or later (the package index's upload date): "
        "a time split",
    )
    p.add_argument(
        "--max-tasks",
        type=int,
        default=None,
        help="mine no further pair once this many tasks are written",
    )
    p.add_argument(
        "--requirement",
        action="append",
        default=[],
        metavar="SPEC",
        help="add a requirement to every release's derived dependencies",
    )
    p.add_argument(
        "--no-requirement",
        action="append",
        default=[],
        metavar="NAME",
        help="drop a derived requirement",
    )
    p.add_argument(
        "--skip-tests",
        action="append",
        default=[],
        metavar="FILE",
        help="leave this test file (a path in the sdist) out of every task",
    )
    p.add_argument("--reruns", type=int, default=3, help="gold runs per task when validating")
    p.add_argument("--workers", type=int, default=1, help="parallel grading runs")
    add_sandbox(p)
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="limit of one test run in seconds (default 300)",
    )
    p.add_argument(
        "--no-reproduction",
        action="store_true",
        help="do not make reproduction scripts from the failing tests",
    )
    p.add_argument(
        "--for-suite",
        action="store_true",
        help="validate and write only candidates a suite serves: with a verified "
        "reproduction, reverting a bug fix (not a feature, speed-up or deprecation); the "
        "others are skipped before validation, with the reason in --report",
    )
    p.add_argument(
        "--no-old-tests",
        action="store_true",
        help="do not check each task against the older release's own tests (by default a "
        "task whose reverted code fails a test of that release which the newer code passes "
        "is skipped: a state no release shipped)",
    )
    p.add_argument(
        "--no-restate",
        action="store_true",
        help="keep each report as mined, even one that states a hidden test's expected "
        "value (by default it is restated on other inputs, checked in the sandbox; "
        "`suite add-history` restates it anyway)",
    )
    p.add_argument(
        "--ray",
        metavar="local|ADDRESS",
        help="mine the packages in parallel as Ray tasks ('local' starts Ray here, else a "
        "cluster address; --out must then be a folder every node sees), each with --workers "
        "grading runs",
    )
    p.add_argument("--report", metavar="FILE", help="write the per-pair summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from repogym.quality.ray_map import RayMapError, each_job
    from repogym.quality.synth_history import HistoryJob, mine_job
    from repogym.scenarios.history import parse_day

    console = Console(stderr=True)

    def say(message: str) -> None:
        console.print(message, markup=False, highlight=False)

    versions = [v.strip() for v in args.versions.split(",") if v.strip()] if args.versions else None
    if args.for_suite and args.no_reproduction:
        print(
            "--for-suite keeps only tasks with a reproduction. Fix: drop --no-reproduction",
            file=sys.stderr,
        )
        return 2
    if versions and len(args.names) > 1:
        print(
            "--versions names one package's releases. Fix: give one NAME, or drop --versions",
            file=sys.stderr,
        )
        return 2
    try:
        since = parse_day(args.since) if args.since else None
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    options = {
        "versions": versions,
        "last": args.last or None,
        "max_tasks": args.max_tasks,
        "extra": list(args.requirement),
        "drop": list(args.no_requirement),
        "skip_tests": list(args.skip_tests),
        "sandbox": args.sandbox,
        "workers": args.workers,
        "reruns": args.reruns,
        "timeout_s": args.timeout,
        "reproduce": False if args.no_reproduction else None,
        "since": since,
        "for_suite": args.for_suite,
        "old_tests": not args.no_old_tests,
        "restate": not args.no_restate,
    }
    jobs = [HistoryJob(name, str(Path(args.out).resolve()), options) for name in args.names]
    results: list = []
    try:
        for _job, res in each_job(mine_job, jobs, ray=args.ray, cpus_each=args.workers, say=say):
            results.append(res)
            _summary(res, say=say)
    except RayMapError as e:
        print(e, file=sys.stderr)
        return 2
    mined = [r for r in results if not isinstance(r, str)]
    for r in mined:
        print_written(r.written, r.dropped)
    if args.report:
        reports = [_report(r) for r in mined]
        data = reports[0] if len(args.names) == 1 and reports else {"packages": reports}
        Path(args.report).write_text(json.dumps(data, indent=1))
    if len(args.names) == 1 and isinstance(results[0], str):
        return 2  # _summary said why
    return 0 if any(r.written for r in mined) else 1


def _summary(res: HistoryMining | str, say: Callable[[str], None]) -> None:
    """The per-pair lines and the total of one package's mining (or why it could not)."""
    if isinstance(res, str):
        say(res)
        return
    for p in res.pairs:
        what = p.error or (
            f"{p.changed} functions changed, {len(p.candidates)} candidates, "
            f"{p.passing_tests} tests pass"
        )
        print(f"{res.name} {p.base} -> {p.fixed}: {what}")
    missing = [w for w in res.written if not Path(w).is_dir()]
    print(
        f"{len(res.written)} validated tasks from {len(res.pairs)} release pairs of "
        f"{res.name} ({len(res.dropped)} dropped)"
        + (
            f"; {len(missing)} written where this machine does not see them: give --out a "
            "folder every node sees"
            if missing
            else ""
        )
    )


def _report(res: HistoryMining) -> dict:
    return {
        "name": res.name,
        "written": [str(w) for w in res.written],
        "dropped": res.dropped,
        "pairs": [dataclasses.asdict(p) for p in res.pairs],
    }
