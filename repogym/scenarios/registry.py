"""The task catalogue: the built-in tasks, tasks registered at run time, suites by name.

This module only keeps track of tasks; making them Gymnasium ids is the environments' job
(:func:`repogym.envs.register_task`), so the scenarios never depend on the envs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from repogym.scenarios.suites import suite_names, validated_tasks
from repogym.scenarios.task import Task, TaskError, load_tasks

BUILTIN_DIR = Path(__file__).parent / "builtin"
BUILTIN_SUITE = "builtin"
_TASKS: dict[str, Task] = {}


def add_tasks(tasks: Iterable[Task], *, overwrite: bool = False) -> list[Task]:
    """Add tasks to the catalogue (what :func:`registered_tasks` returns).

    Raises:
        TaskError: an id is already taken by a task from another folder and ``overwrite``
            is false (the message names both folders).
    """
    tasks = list(tasks)
    for task in tasks:
        old = _TASKS.get(task.id)
        if old is not None and old.path != task.path and not overwrite:
            raise TaskError(
                f"{task.path}: id '{task.id}' is already registered from "
                f"{old.path}. Fix: rename the task or pass overwrite=True"
            )
    _TASKS.update((t.id, t) for t in tasks)
    return tasks


def registered_tasks() -> dict[str, Task]:
    """Every registered task by id (built-ins and user folders)."""
    return dict(_TASKS)


def builtin_tasks() -> list[Task]:
    """The built-in tasks shipped with repogym, sorted by id."""
    if not (BUILTIN_DIR.is_dir() and any(BUILTIN_DIR.glob("*/task.toml"))):
        return []
    return sorted(load_tasks(BUILTIN_DIR), key=lambda t: t.id)


def suite_tasks(suite: str | Path, *, withheld: bool = False) -> list[Task]:
    """The tasks of a suite: ``"builtin"``, a shipped suite by name (``"realpy"``: its tasks
    validated here and above the seal floor, or all of them with ``withheld``; see
    :mod:`repogym.scenarios.suites`), or a folder of task folders (or one task folder).

    Raises:
        TaskError: the folder is missing or a task in it is malformed (naming file and key).
        SuiteError: a shipped suite with no validated task here (the fix: fetch it).
    """
    if str(suite) == BUILTIN_SUITE:
        return builtin_tasks()
    if str(suite).lower() in suite_names():
        return validated_tasks(str(suite), withheld=withheld)
    return load_tasks(suite)
