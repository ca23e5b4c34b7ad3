"""``repogym tasks``: list the registered tasks with their split and tags."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="list tasks (built-ins, plus --dir folders)")
    p.add_argument("--dir", action="append", default=[], help="also register this task folder")
    p.add_argument("--split", choices=["train", "test"])
    p.add_argument("--tag", action="append", default=[], help="keep tasks with any of these tags")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    import repogym
    from repogym.scenarios.registry import registered_tasks

    for d in args.dir:
        repogym.register_task(d, overwrite=True)
    tasks = sorted(registered_tasks().values(), key=lambda t: (t.split, t.id))
    if args.split:
        tasks = [t for t in tasks if t.split == args.split]
    if args.tag:
        tasks = [t for t in tasks if set(args.tag) & set(t.tags)]
    table = Table(title=f"{len(tasks)} tasks")
    for col in ("env id", "split", "tags", "tests (f2p/p2p)", "max steps"):
        table.add_column(col)
    for t in tasks:
        v = t.verifier
        table.add_row(t.env_id, t.split, ", ".join(t.tags),
                      f"{len(v.fail_to_pass)}/{len(v.pass_to_pass)}", str(t.max_steps))
    Console().print(table)
    return 0
