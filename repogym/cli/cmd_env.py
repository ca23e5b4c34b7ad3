"""``repogym env build|list``: tasks' dependencies (``[environment]`` in task.toml).

    repogym env build TASK_DIR...      # each task's dependencies once (with network)
    repogym env build --suite realpy   # the dependencies of a shipped suite's packages
    repogym env list                   # what is built here

Built dependencies are a folder of installed packages keyed by a hash of their spec and of
the interpreter (docs/authoring.md, "Task dependencies"); episodes bind it read-only and
need no network. Exit status 1 when a build fails (the message names the requirement and
the fix), 2 when a task folder cannot be loaded.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="build or list tasks' dependencies ([environment] in task.toml)")
    s = p.add_subparsers(dest="env_command", metavar="ACTION", required=True)
    b = s.add_parser("build", help="build the dependencies of tasks (each distinct set once)")
    b.add_argument("tasks", nargs="*", metavar="TASK_DIR", help="task folders or folders of them")
    b.add_argument("--suite", help="the dependencies of a shipped suite's packages (e.g. realpy)")
    b.add_argument("--force", action="store_true", help="rebuild even if built")
    s.add_parser("list", help="the dependencies built here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return _build(args) if args.env_command == "build" else _list()


def _specs(args: argparse.Namespace) -> dict[str, tuple[object, list[str]]]:
    """key -> (spec, the tasks or packages that use it)."""
    from repogym.scenarios import suites
    from repogym.scenarios.task import load_tasks

    out: dict[str, tuple[object, list[str]]] = {}
    if args.suite:
        for p in suites.load_suite(args.suite).packages:
            out.setdefault(p.environment.key, (p.environment, []))[1].append(p.name)
    for folder in args.tasks:
        for task in load_tasks(Path(folder)):
            if task.dependencies is not None:
                out.setdefault(task.dependencies.key, (task.dependencies, []))[1].append(task.id)
    return out


def _build(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from repogym.scenarios.dependencies import DependenciesUnavailable, build
    from repogym.scenarios.suites import SuiteError
    from repogym.scenarios.task import TaskError

    if not args.tasks and not args.suite:
        print("give task folders or --suite NAME", file=sys.stderr)
        return 2
    try:
        specs = _specs(args)
    except (TaskError, SuiteError) as e:
        print(e, file=sys.stderr)
        return 2
    console = Console(stderr=True)
    table = Table(title=f"{len(specs)} environment(s)", title_justify="left")
    for col in ("key", "used by", "requirements", "status", "time (s)"):
        table.add_column(col, overflow="fold")
    failed = 0
    for key, (spec, users) in specs.items():
        start = time.monotonic()
        try:
            with console.status(f"environment {key}: {spec.summary()}"):
                env, new = build(spec, force=args.force)
            status = f"built ({len(env.distributions)} packages)" if new else "already built"
        except DependenciesUnavailable as e:
            failed += 1
            status = "[red]FAILED[/red]"
            console.print(
                f"FAIL {key} (used by {', '.join(users[:5])}): {e}", markup=False, soft_wrap=True
            )
        table.add_row(
            key,
            ", ".join(users[:5]) + (" ..." if len(users) > 5 else ""),
            spec.summary(),
            status,
            f"{time.monotonic() - start:.1f}",
        )
    Console().print(table)
    return 1 if failed else 0


def _list() -> int:
    from rich.console import Console
    from rich.table import Table

    from repogym.scenarios.dependencies import envs_dir, list_built

    table = Table(title=f"environments in {envs_dir()}", title_justify="left")
    for col in ("key", "python", "packages", "requirements", "build (s)"):
        table.add_column(col, overflow="fold")
    for env in list_built():
        reqs = env.info.get("spec", {}).get("requirements", [])
        table.add_row(
            env.root.name,
            env.info.get("python", "?"),
            str(len(env.distributions)),
            ", ".join(reqs)[:120] or "pytest only",
            str(env.info.get("build_s", "?")),
        )
    Console().print(table)
    return 0
