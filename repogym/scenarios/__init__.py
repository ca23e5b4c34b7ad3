"""Tasks: the folder format, the loader and the catalogue; built-in tasks live in builtin/."""

from repogym.scenarios.registry import builtin_tasks, registered_tasks, suite_tasks
from repogym.scenarios.task import (
    Candidate,
    Task,
    TaskError,
    TestSpec,
    Verifier,
    load_task,
    load_tasks,
    select_tasks,
)

__all__ = [
    "Candidate",
    "Task",
    "TaskError",
    "TestSpec",
    "Verifier",
    "builtin_tasks",
    "load_task",
    "load_tasks",
    "registered_tasks",
    "select_tasks",
    "suite_tasks",
]
