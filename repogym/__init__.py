"""repogym: Gymnasium environments over sandboxed bug-fix repositories, and RL trainers.

``import repogym`` registers every built-in task (``repogym/<id>-v0``) and
``repogym/Suite-v0`` with Gymnasium; it has no other side effect.
"""

from repogym.envs import RepoEnv, SuiteEnv, register_builtins, register_task
from repogym.scenarios import Task, TaskError, builtin_tasks, load_task
from repogym.version import __version__

register_builtins()

__all__ = [
    "RepoEnv",
    "SuiteEnv",
    "Task",
    "TaskError",
    "__version__",
    "builtin_tasks",
    "load_task",
    "register_task",
]
