"""``repogym export-harbor`` / ``repogym import-harbor``: Harbor task folders out and in.

``import-harbor`` takes repogym's own exports back, and any other Harbor task
(:mod:`repogym.integrations.harbor_tasks`: its Dockerfile built on the docker backend's
engine, offline; graded by its own ``tests/test.sh``); ``--validate`` then checks each in
its image (the oracle must score 1.0, the unchanged repository less), and what the task
needs that an offline sandbox lacks is printed by name.

Example::

    repogym export-harbor retry-zero --out harbor-tasks/      # or --all
    repogym import-harbor harbor-tasks/retry-zero --out my-tasks/
    repogym import-harbor harbor/examples/tasks/ --out harbor-imported/ --validate
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from repogym.cli.options import SPLITS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-harbor", help="write repogym tasks as Harbor task folders")
    p.add_argument("tasks", nargs="*", metavar="TASK", help="task ids or task folders")
    p.add_argument("--all", action="store_true", help="every registered task")
    p.add_argument("--out", required=True, type=Path, help="folder for the Harbor tasks")
    p.add_argument(
        "--base-image", default=None, help="the Dockerfile's FROM image (default python:3.11-slim)"
    )
    p.set_defaults(func=export)
    p = sub.add_parser("import-harbor", help="turn Harbor task folders into repogym tasks")
    p.add_argument(
        "dirs", nargs="+", type=Path, metavar="DIR", help="Harbor task folders (or folders of them)"
    )
    p.add_argument("--out", required=True, type=Path, help="folder for the repogym tasks")
    p.add_argument(
        "--split",
        default="test",
        choices=SPLITS,
        help="split of tasks made outside repogym (default test)",
    )
    p.add_argument(
        "--base-image",
        default=None,
        help="local image to build FROM when a Dockerfile's FROM cannot be pulled "
        "(default: the docker backend's repogym/python:bookworm)",
    )
    p.add_argument(
        "--validate",
        action="store_true",
        help="validate each imported task in its sandbox (docker for Harbor "
        "tasks made outside repogym)",
    )
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

    dirs = [
        p.parent
        for d in args.dirs
        for p in (
            [d / "task.toml"] if (d / "task.toml").is_file() else sorted(d.glob("*/task.toml"))
        )
    ]
    if not dirs:
        print(
            f"error: no task.toml in {[str(d) for d in args.dirs]} or their sub-folders",
            file=sys.stderr,
        )
        return 2
    failed, tasks = 0, []
    for d in dirs:
        try:
            task = import_task(d, args.out, split=args.split, base_image=args.base_image)
        except (TaskError, FileExistsError) as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
            continue
        tasks.append(task)
        print(f"{d} -> {task.path} ({task.env_id})")
        for note in _missing(task):
            print(f"  missing here: {note}")
    if args.validate and tasks:
        failed += _validate(tasks)
    return 2 if failed else 0


def _missing(task) -> list[str]:
    from repogym.integrations.harbor_tasks import harbor_meta

    return list(harbor_meta(task).get("missing") or [])


def _validate(tasks: list) -> int:
    """Validate each task in its own sandbox; the number that failed."""
    from rich.console import Console

    from repogym.cli.printing import print_report
    from repogym.integrations.harbor_tasks import harbor_meta, sandbox_options
    from repogym.quality.validate import validate_tasks

    console, bad = Console(), 0
    for task in tasks:
        docker = bool(harbor_meta(task).get("image"))
        (report,) = validate_tasks(
            [task],
            sandbox="docker" if docker else "bwrap",
            sandbox_options=sandbox_options(task) if docker else None,
            reruns=1,
        )
        print_report(report, console)
        bad += not report.ok
    return bad
