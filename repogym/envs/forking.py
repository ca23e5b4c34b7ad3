"""Forks and snapshots of a running episode (:meth:`RepoEnv.fork`, ``snapshot``, ``restore``).

An episode's state is its :class:`~repogym.envs.session.Session` (the sandbox's files and
``/tmp``, and the persistent shell's working folder, exported variables, functions,
aliases and options) plus what the env counts: the step number and budget, whether the
episode ended, the transcript and the random generator. A fork copies all of it into a new
sandbox (:meth:`Session.fork`: the workspace's overlay layer is copied, so a fork costs
what the episode changed); afterwards neither episode sees the other's actions. Grading a
fork is grading the same actions replayed from ``reset``.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import gymnasium as gym

from repogym.envs.progress import ProgressMeter
from repogym.envs.session import Session
from repogym.sandbox.workspace import TemplateCache

#: A :class:`repogym.envs.repo_env.RepoEnv` (which imports this module).
RepoEnv = Any


@dataclasses.dataclass
class Snapshot:
    """An episode's state kept aside (:meth:`RepoEnv.snapshot`); restore it any number of
    times with :meth:`RepoEnv.restore`. It holds a stopped copy of the sandbox's files
    (no process runs in it): call :meth:`close` when it is no longer needed.
    """

    session: Session
    task: Any
    steps: int
    transcript: list[str]
    rng: Any
    progress: ProgressMeter
    templates: TemplateCache

    @property
    def closed(self) -> bool:
        return self.session.closed

    def close(self) -> None:
        """Free the copy's sandbox (and its hold on the templates). Idempotent."""
        self.session.close()
        self.templates.close()


def _live_session(env: RepoEnv, what: str) -> Session:
    if env.session is None or env.session.closed or env._done:
        raise gym.error.ResetNeeded(
            f"{what}() needs a running episode (before reset, or "
            "after the episode ended, there is nothing to copy). "
            f"Fix: call reset() and {what}() before the last step"
        )
    return env.session


def take(env: RepoEnv) -> Snapshot:
    """A :class:`Snapshot` of ``env``'s running episode."""
    session = _live_session(env, "snapshot").fork()
    return Snapshot(
        session=session,
        task=env.task,
        steps=env._steps,
        transcript=list(env._transcript),
        rng=copy.deepcopy(env._np_random),
        progress=env._progress.fork(),
        templates=env._templates.share(),
    )


def restore(env: RepoEnv, snapshot: Snapshot) -> None:
    """Put ``env`` back in ``snapshot``'s state (its current episode is closed)."""
    if snapshot.closed:
        raise ValueError("the snapshot is closed. Fix: restore a snapshot before closing it")
    session = snapshot.session.fork()  # the snapshot stays restorable
    env._close_session()
    env._templates.close()  # the restored episode lives on the snapshot's templates
    env._templates = snapshot.templates.share()
    env.session, env.task = session, snapshot.task
    env._steps, env._done = snapshot.steps, False
    env._transcript = list(snapshot.transcript)
    env._np_random = copy.deepcopy(snapshot.rng)
    env._progress = snapshot.progress.fork()


def fork(env: RepoEnv) -> RepoEnv:
    """A new env, independent of ``env``, in the same state (see the module docstring).

    The fork shares ``env``'s templates (the lease is freed when both have closed) and its
    ``grade_cache``; it has its own sandbox, transcript and random generator. Close it
    like any env. (Per-episode state added to RepoEnv must be copied here: ``copy.copy``
    shares mutable attributes.)
    """
    session = _live_session(env, "fork").fork()
    other = copy.copy(env)
    other.session = session
    other._templates = env._templates.share()
    other.sandbox_options = dict(env.sandbox_options)
    other._transcript = list(env._transcript)
    other._np_random = copy.deepcopy(env._np_random)
    other._progress = env._progress.fork()
    return other
