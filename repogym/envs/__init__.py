"""The environments: RepoEnv, SuiteEnv, action parsing, grading, wrappers, registration."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym

from repogym.envs.repo_env import RepoEnv, SuiteEnv, TextSpace
from repogym.grading import canaries, gold, grader, grading_run, seal
from repogym.scenarios.registry import BUILTIN_DIR, add_tasks, registered_tasks
from repogym.scenarios.suites import MAX_STEPS as SUITE_MAX_STEPS
from repogym.scenarios.suites import (
    read_index,
    suite_meta,
    suite_names,
    suite_root,
    withheld_reason,
)
from repogym.scenarios.task import Task, TaskError, find_task_dirs, load_task, load_tasks

#: The grading code's old homes (it lived in this package): ``repogym.envs.grader`` and the
#: rest stay importable, as the same module objects.
for _module in (canaries, gold, grader, grading_run, seal):
    sys.modules[f"{__name__}.{_module.__name__.rsplit('.', 1)[1]}"] = _module
sys.modules[f"{__name__}.verifier"] = grading_run
verifier = grading_run

SUITE_ID = "repogym/Suite-v0"

#: Keyword arguments a client may give with ``remote=`` (the rest are the server's).
REMOTE_KWARGS = (
    "token",
    "reward_mode",
    "max_steps",
    "render_mode",
    "connect_timeout_s",
    "step_timeout_s",
)


def _maybe_log(env: gym.Env, log_dir: str | Path | None) -> gym.Env:
    if log_dir is None:
        return env
    from repogym.envs.wrappers import TrajectoryLogger

    return TrajectoryLogger(env, log_dir)


def _remote(url: str, task: str | None, kwargs: dict[str, Any]) -> gym.Env:
    from repogym.envs.remote import RemoteEnv

    local_only = sorted(set(kwargs) - set(REMOTE_KWARGS))
    if local_only:
        raise ValueError(
            f"{local_only} are set on the server, not per client, with remote=. "
            "Fix: drop them, or pass them to `repogym serve` (e.g. --sandbox, "
            "--split, --tags, --task)"
        )
    return RemoteEnv(url, task=task, **kwargs)


def make_env(
    task: Task | str | Path,
    log_dir: str | Path | None = None,
    remote: str | None = None,
    **kwargs: Any,
) -> gym.Env:
    """Entry point of ``repogym/<task>-v<version>``.

    ``log_dir`` adds a TrajectoryLogger; ``remote="http://host:port"`` gives the same env
    served by ``repogym serve`` there (a :class:`~repogym.envs.remote.RemoteEnv`).
    ``task`` is a Task, a registered task id (what a registered env id's spec holds, so
    ``env.spec.to_json()`` round-trips) or a task folder.
    """
    if remote is not None:
        task_id = task.id if isinstance(task, Task) else _task_id(task)
        return _maybe_log(_remote(remote, task_id, kwargs), log_dir)
    return _maybe_log(RepoEnv(task, **kwargs), log_dir)


def _task_id(task: str | Path) -> str:
    """The id of ``task``: a registered id, or the id of the task in that folder."""
    if str(task) in registered_tasks() or not Path(task).is_dir():
        return str(task)
    return load_task(task).id


def make_suite_env(
    log_dir: str | Path | None = None, remote: str | None = None, **kwargs: Any
) -> gym.Env:
    """Entry point of ``repogym/Suite-v0`` (``remote=``: the server's suite, see make_env)."""
    if remote is not None:
        return _maybe_log(_remote(remote, None, kwargs), log_dir)
    return _maybe_log(SuiteEnv(**kwargs), log_dir)


def register_task(path: str | Path, *, overwrite: bool = False) -> list[Task]:
    """Register one task folder, or every task folder inside ``path``, with Gymnasium.

    Args:
        path: A folder with task.toml, or a folder of such folders.
        overwrite: Replace an id already registered from another folder.

    Returns:
        The loaded tasks; each is then available as ``gym.make(task.env_id)`` and in
        ``repogym/Suite-v0``.

    Raises:
        TaskError: a task folder is malformed, or its id is taken (the message names both).
    """
    tasks = add_tasks(load_tasks(path), overwrite=overwrite)
    for task in tasks:
        _register(task.env_id, "repogym.envs:make_env", {"task": task.id}, task.max_steps)
    return tasks


def register_builtins() -> None:
    """Register the built-in tasks and ``repogym/Suite-v0`` (called on ``import repogym``)."""
    folders = find_task_dirs(BUILTIN_DIR) if any(BUILTIN_DIR.glob("*/task.toml")) else []
    for folder in folders:
        try:
            register_task(folder, overwrite=True)
        except TaskError as e:  # a broken built-in must not break `import repogym`
            warnings.warn(f"skipping built-in task: {e}", RuntimeWarning, stacklevel=2)
    _register(SUITE_ID, "repogym.envs:make_suite_env", {}, None)
    register_suites()


def register_suites() -> None:
    """Register every shipped suite fetched here (``repogym suite fetch``): its id (e.g.
    ``repogym/RealPy-v0``, a SuiteEnv over its validated tasks, ``split=`` by package) and
    ``repogym/<task>-v0`` for each validated task. Reads only the suite's index."""
    for name in suite_names():
        index = read_index(suite_root(name))
        paths = {tid: info["path"] for tid, info in index.items() if Path(info["path"]).is_dir()}
        for tid, path in sorted(paths.items()):
            _register(f"repogym/{tid}-v0", "repogym.envs:make_env", {"task": path}, SUITE_MAX_STEPS)
        served = sorted(paths[t] for t in paths if withheld_reason(index[t]) is None)
        if served:  # a task under the seal floor is made only by its own id
            _register(
                suite_meta(name)["env_id"], "repogym.envs:make_suite_env", {"tasks": served}, None
            )


#: Around every repogym env, outside the TimeLimit ``max_episode_steps`` adds: the env
#: truncates and grades at that limit itself (repogym.envs.wrappers.StepBudget).
_BUDGET = gym.envs.registration.WrapperSpec("StepBudget", "repogym.envs.wrappers:StepBudget", {})


def _register(env_id: str, entry_point: str, kwargs: dict, max_steps: int | None) -> None:
    gym.register(
        id=env_id,
        entry_point=entry_point,
        kwargs=kwargs,
        max_episode_steps=max_steps,
        disable_env_checker=False,
        additional_wrappers=(_BUDGET,),
    )


__all__ = [
    "SUITE_ID",
    "RepoEnv",
    "SuiteEnv",
    "TextSpace",
    "make_env",
    "make_suite_env",
    "register_builtins",
    "register_suites",
    "register_task",
]
