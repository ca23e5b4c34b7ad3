"""``repogym export-harbor`` / ``repogym import-harbor``: Harbor task folders out and in.

Example::

    repogym export-harbor retry-zero --out harbor-tasks/      # or --all
    repogym import-harbor harbor-tasks/retry-zero --out my-tasks/
    repogym validate my-tasks/retry-zero
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-harbor", help="write repogym tasks as Harbor task folders")
    p.add_argument("tasks", nargs="*", metavar="TASK", help="task ids or task folders")
    p.add_argument("--all", action="store_true", help="every registered task")
    p.add_argument("--out", required=True, type=Path, help="folder for the Harbor tasks")
    p.add_argument("--base-image", default=None,
                   help="the Dockerfile's FROM image (default python:3.11-slim)")
    p.set_defaults(func=export)
    p = sub.add_parser("import-harbor", help="turn Harbor task folders into repogym tasks")
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                   help="Harbor task folders (or folders of them)")
    p.add_argument("--out", required=True, type=Path, help="folder for the repogym tasks")
    p.set_defaults(func=import_)


def _resolve(ref: str):
    from repogym.scenarios.registry import registered_tasks
    from repogym.scenarios.task import load_task

    tasks = registered_tasks()
    return tasks[ref] if ref in tasks else load_task(ref)


def export(args: argparse.Namespace) -> int:
    from repogym.integrations.harbor import DEFAULT_BASE_IMAGE, export_task
    from repogym.scenarios.registry import registered_tasks
    from repogym.scenarios.task import TaskError

    if not args.tasks and not args.all:
        print("error: name tasks or pass --all", file=sys.stderr)
        return 2
    try:
        tasks = list(registered_tasks().values()) if args.all else [_resolve(t) for t in args.tasks]
        for task in sorted(tasks, key=lambda t: t.id):
            dest = export_task(task, args.out, base_image=args.base_image or DEFAULT_BASE_IMAGE)
            print(f"{task.id} -> {dest}")
    except (TaskError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def import_(args: argparse.Namespace) -> int:
    from repogym.integrations.harbor import import_task
    from repogym.scenarios.task import TaskError

    dirs = [p.parent for d in args.dirs
            for p in ([d / "task.toml"] if (d / "task.toml").is_file()
                      else sorted(d.glob("*/task.toml")))]
    if not dirs:
        print(f"error: no task.toml in {[str(d) for d in args.dirs]} or their sub-folders",
              file=sys.stderr)
        return 2
    failed = 0
    for d in dirs:
        try:
            task = import_task(d, args.out)
            print(f"{d} -> {task.path} ({task.env_id})")
        except (TaskError, FileExistsError) as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
    return 2 if failed else 0
