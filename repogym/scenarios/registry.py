"""Registering task folders as Gymnasium ids (``repogym/<id>-v<version>``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym

from repogym.scenarios.task import Task, TaskError, find_task_dirs, load_tasks

BUILTIN_DIR = Path(__file__).parent / "builtin"
ENTRY_POINT = "repogym.envs:make_env"
SUITE_ID = "repogym/Suite-v0"
_TASKS: dict[str, Task] = {}


def register_task(path: str | Path, *, overwrite: bool = False) -> list[Task]:
    """Register one task folder, or every task folder inside ``path``, with Gymnasium.

    Args:
        path: A folder with task.toml, or a folder of such folders.
        overwrite: Replace an id already registered from another folder.

    Returns:
        The loaded tasks; each is then available as ``gym.make(task.env_id)``.

    Raises:
        TaskError: a task folder is malformed, or its id is taken (the message names both).
    """
    tasks = load_tasks(path)
    for task in tasks:
        old = _TASKS.get(task.id)
        if old is not None and old.path != task.path and not overwrite:
            raise TaskError(f"{task.path}: id '{task.id}' is already registered from "
                            f"{old.path}. Fix: rename the task or pass overwrite=True")
        _TASKS[task.id] = task
        gym.register(id=task.env_id, entry_point=ENTRY_POINT, kwargs={"task": task},
                     max_episode_steps=task.max_steps, disable_env_checker=False)
    return tasks


def registered_tasks() -> dict[str, Task]:
    """Every registered task by id (built-ins and user folders)."""
    return dict(_TASKS)


def builtin_tasks() -> list[Task]:
    """The built-in tasks shipped with repogym, sorted by id."""
    return sorted(load_tasks(BUILTIN_DIR), key=lambda t: t.id) if _has_builtins() else []


def _has_builtins() -> bool:
    return BUILTIN_DIR.is_dir() and any(BUILTIN_DIR.glob("*/task.toml"))


def register_builtins() -> None:
    """Register the built-in tasks and ``repogym/Suite-v0`` (called on ``import repogym``)."""
    for folder in find_task_dirs(BUILTIN_DIR) if _has_builtins() else []:
        try:
            register_task(folder, overwrite=True)
        except TaskError as e:  # a broken built-in must not break `import repogym`
            warnings.warn(f"skipping built-in task: {e}", RuntimeWarning, stacklevel=2)
    gym.register(id=SUITE_ID, entry_point="repogym.envs:make_suite_env")
