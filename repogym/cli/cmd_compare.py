"""``repogym compare A B``: two runs, task by task, on the tasks both scored.

Counts the tasks only A resolved and only B resolved (with several samples per task: where
A's fraction of resolved samples is higher, and where B's is) and gives the exact two-sided
sign test of those counts, which with one sample per task is McNemar's exact test
(:func:`repogym.harness.metrics.paired_comparison`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from repogym.cli.options import EXIT_USAGE


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="compare two runs on their common tasks (paired, exact sign test / McNemar)"
    )
    p.add_argument("run_a", type=Path, metavar="A", help="a run folder (`repogym run --out`)")
    p.add_argument("run_b", type=Path, metavar="B", help="another run folder")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=run)


def _one_run(folder: Path) -> tuple[str, list[dict]]:
    """The label and rows of the one run in ``folder``.

    Raises:
        ValueError: the folder holds several runs (labels).
    """
    from repogym.harness.metrics import group_by_agent
    from repogym.harness.results import read_results

    groups = group_by_agent(read_results(folder))
    if len(groups) != 1:
        raise ValueError(
            f"{folder} holds {len(groups)} runs ({sorted(groups)}). Fix: pass a "
            "folder written by one `repogym run --out DIR`"
        )
    return next(iter(groups.items()))


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from repogym.harness.metrics import paired_comparison
    from repogym.harness.report import make_console

    console = make_console(stderr=args.json)
    try:
        (label_a, rows_a), (label_b, rows_b) = _one_run(args.run_a), _one_run(args.run_b)
    except (ValueError, FileNotFoundError) as e:
        console.print(f"[red]error:[/] {escape(str(e))}")
        return EXIT_USAGE
    c = paired_comparison(rows_a, rows_b)
    if args.json:
        print(
            json.dumps(
                {
                    "a": {"label": label_a, "folder": str(args.run_a)},
                    "b": {"label": label_b, "folder": str(args.run_b)},
                    **c,
                    "test": "exact two-sided sign test (McNemar's exact test with one "
                    "sample per task)",
                },
                indent=2,
            )
        )
        return 0

    def rate(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    n = c["common_tasks"]
    lines = [
        f"A: {label_a} ({args.run_a}): {rate(c['a_rate'])} of {n} common tasks",
        f"B: {label_b} ({args.run_b}): {rate(c['b_rate'])} of {n} common tasks",
        (
            f"only A resolved (A better): {c['a_better']}   only B resolved (B better): "
            f"{c['b_better']}   both: {c['both']}   neither: {c['neither']}"
        ),
        (
            "exact two-sided sign test (McNemar's exact test with one sample per task): "
            f"p = {c['p_value']:.4g}"
        ),
    ]
    for line in lines:
        console.print(escape(line), soft_wrap=True, highlight=False)
    if n == 0:
        console.print("[yellow]note:[/] the runs have no scored task in common")
    return 0
