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

    from repogym.envs import register_task
    from repogym.harness.report import make_console
    from repogym.scenarios.registry import registered_tasks
    from repogym.scenarios.task import select_tasks

    for d in args.dir:
        register_task(d, overwrite=True)
    try:
        tasks = select_tasks(registered_tasks().values(), split=args.split, tags=args.tag)
    except ValueError as e:
        Console(stderr=True).print(f"[red]error:[/] {e}")
        return 2
    tasks.sort(key=lambda t: (t.split, t.id))
    table = Table(title=f"{len(tasks)} tasks")
    for col in ("env id", "split", "tags", "tests (f2p/p2p)", "max steps"):
        table.add_column(col, overflow="fold")
    for t in tasks:
        v = t.verifier
        table.add_row(t.env_id, t.split, ", ".join(t.tags),
                      f"{len(v.fail_to_pass)}/{len(v.pass_to_pass)}", str(t.max_steps))
    make_console().print(table)
    return 0
