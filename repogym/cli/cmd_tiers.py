"""``repogym tiers RUN_DIR``: difficulty tiers from a run of the ``apr`` baseline.

See :mod:`repogym.quality.tiers`. Prints the share of trivial tasks per package and per
split; ``--out FILE`` writes ``{"tiers": {task: tier}, "summary": {...}}`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tiers",
        help="difficulty tiers (trivial when the apr baseline "
        "solves a task) from a `repogym run --agent apr` folder",
    )
    p.add_argument("run", metavar="RUN_DIR", help="the folder of `repogym run --agent apr`")
    p.add_argument("--out", metavar="FILE", help="write the tiers and the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich import box
    from rich.table import Table

    from repogym.harness.report import make_console
    from repogym.harness.results import read_results
    from repogym.quality.tiers import TIERS, summarize, tiers

    try:
        rows = read_results(args.run)
    except (FileNotFoundError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    agents = sorted({str(r.get("agent")) for r in rows})
    if not agents or not all(a.startswith("apr") for a in agents):
        print(
            f"{args.run}: the rows are from {agents}, not the apr baseline. Fix: point at "
            "the folder of `repogym run --agent apr --out DIR`",
            file=sys.stderr,
        )
        return 2
    summary = summarize(rows)
    table = Table(
        title=f"difficulty tiers by blind search ({', '.join(agents)})",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for col in ("group", "tasks", *TIERS, "trivial share"):
        table.add_column(col, justify="left" if col == "group" else "right")
    for group, s in summary.items():
        share = "-" if s["trivial_share"] is None else f"{100 * s['trivial_share']:.0f}%"
        table.add_row(group, str(s["tasks"]), *(str(s[t]) for t in TIERS), share)
    make_console().print(table)
    if args.out:
        Path(args.out).write_text(
            json.dumps({"tiers": tiers(rows), "summary": summary}, indent=1) + "\n"
        )
    return 0
