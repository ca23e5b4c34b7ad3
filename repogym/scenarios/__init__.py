"""Tasks: the folder format, the loader and the registry; built-in tasks live in builtin/."""

from repogym.scenarios.registry import builtin_tasks, register_task, registered_tasks
from repogym.scenarios.task import (
    Candidate,
    Task,
    TaskError,
    Verifier,
    load_task,
    load_tasks,
    select_tasks,
)

__all__ = ["Candidate", "Task", "TaskError", "Verifier", "builtin_tasks", "load_task",
           "load_tasks", "register_task", "registered_tasks", "select_tasks"]
