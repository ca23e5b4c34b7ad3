"""RepoEnv and SuiteEnv: Gymnasium environments over a sandboxed buggy repository."""

from __future__ import annotations

import multiprocessing as mp
import string
import time
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from repogym.envs import forking
from repogym.envs.actions import (
    MAX_ACTION_CHARS,
    ActionError,
    error_observation,
    ignored_note,
    parse_action,
)
from repogym.envs.info import (
    NOT_MEASURED,
    ResetInfo,
    StepInfo,
    graded_info,
    mark_truncated,
    step_info,
    tool_info,
)
from repogym.envs.progress import ProgressMeter
from repogym.envs.session import SHELL_MODES, Session, ShellMode
from repogym.grading import grader
from repogym.sandbox import Limits, Sandbox, SandboxError, SandboxSpec, make_sandbox
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios.task import Task, load_task, select_tasks

MAX_TEXT = 262_144


class TextSpace(spaces.Text):
    """``spaces.Text`` that contains any string (code and tool output use all of Unicode).

    Sampling draws printable ASCII, which is enough for fuzzing actions.
    """

    def __init__(self, max_length: int = MAX_TEXT, seed: int | None = None) -> None:
        super().__init__(max_length=max_length, min_length=0, charset=string.printable, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is None and probability is None:
            n = int(self.np_random.integers(0, 64))
            idx = self.np_random.integers(0, len(string.printable), size=n)
            return "".join(string.printable[i] for i in idx)
        return super().sample(mask=mask, probability=probability)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length


# Async vector envs pass observations through shared memory; Gymnasium's Text layout stores
# indices into the space's charset, which would drop every character outside it. TextSpace
# stores Unicode code points + 1 instead (0 pads).
@create_shared_memory.register(TextSpace)
def _create_shm(space: TextSpace, n: int = 1, ctx: Any = mp) -> Any:
    return ctx.Array(np.dtype(np.int32).char, n * space.max_length)


@write_to_shared_memory.register(TextSpace)
def _write_shm(space: TextSpace, index: int, value: str, shm: Any) -> None:
    size = space.max_length
    codes = np.frombuffer(value[:size].encode("utf-32-le", "surrogatepass"), dtype=np.int32)
    dest = np.frombuffer(shm.get_obj(), dtype=np.int32)[index * size : (index + 1) * size]
    dest[: len(codes)] = codes + 1
    dest[len(codes) :] = 0


class SharedTexts(Sequence[str]):
    """A live view of the batch's observations in shared memory.

    AsyncVectorEnv reads its shared buffer once and then relies on the result being a view
    that workers update in place (as a numpy array is); a tuple of str would go stale.
    ``copy.deepcopy`` (what AsyncVectorEnv returns with ``copy=True``) gives a plain tuple.
    """

    def __init__(self, space: TextSpace, shm: Any, n: int) -> None:
        self._rows = np.frombuffer(shm.get_obj(), dtype=np.int32).reshape(n, space.max_length)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        row = self._rows[i]
        return (row[row > 0] - 1).tobytes().decode("utf-32-le", "surrogatepass")

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@read_from_shared_memory.register(TextSpace)
def _read_shm(space: TextSpace, shm: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(space, shm, n)


class RepoEnv(gym.Env[str, str]):
    """Fix a bug in a sandboxed repository.

    ## Description
    The agent gets a bug report (the task's statement) and a repository in a sandbox with
    no network, no git history beyond one commit, no host secrets and resource limits. It
    acts with tool calls (shell, read, write, edit) and submits; hidden tests
    grade the diff in a fresh sandbox.

    ## Action Space
    ``TextSpace``: the agent's raw text holding one tool call, JSON
    ``{"tool": "bash", "args": {"command": "ls"}}`` (or OpenAI's ``{"name", "arguments"}``)
    or a fenced ```` ```bash ```` block. Tools: bash, read, write, edit, submit (declared in
    :data:`repogym.envs.actions.TOOLS`). One call runs per step: of several in one reply, the
    first runs and the observation says the others were ignored. A malformed or hostile
    action (or one the sandbox cannot take, e.g. a NUL byte in a command) yields an
    observation explaining the expected form; it never raises and never sets
    ``infra_error``.

    ## Observation Space
    ``TextSpace``: after ``reset``, the statement, the tool instructions and the top-level
    files; after each step, the tool's output (clipped to ``max_obs_chars``).

    ## Rewards
    0 on every step but the last. The last step's reward comes from the hidden tests:
    ``binary`` (1 iff every listed test passes), ``partial`` (weighted fraction passing),
    ``f2p`` (fraction of fail_to_pass, 0 if any pass_to_pass breaks). Forged results
    score 0.

    ## Episode End
    Terminated by ``submit`` (graded). Truncated at the step budget (graded too;
    ``info["truncated_reason"] == "max_steps"``) or when the sandbox fails
    (``info["infra_error"]`` set: trainers must mask such episodes, not score them).

    ## Info
    ``reset`` returns a :class:`~repogym.envs.info.ResetInfo`; every ``step`` a
    :class:`~repogym.envs.info.StepInfo` holding every one of its keys with one type each
    (neutral values where a key does not apply: ``exit_code`` -1 and ``tool_ran`` False
    when no command ran, ``tests`` {} and ``infra_error`` "" before grading), so vector envs
    batch it (docs/trajectory-format.md lists the keys).

    ## Arguments
    ``task`` (a Task, a registered task id, or a task folder), ``sandbox`` ("bwrap",
    "docker", "process"),
    ``reward_mode``, ``render_mode`` ("ansi"), ``max_steps``, ``limits``
    (:class:`repogym.sandbox.Limits`), ``max_obs_chars``, ``sandbox_options``,
    ``shell`` ("persistent", the default: ``bash`` commands of an episode share one shell
    in the sandbox, so ``cd``, exported variables, functions and background jobs carry over
    as in a terminal; a timeout interrupts the command like Ctrl-C and keeps the shell; if
    the shell ends (``exit``, ``exec``, ``set -e``) the observation says so and the next
    command gets a new one; everything stops before grading. "fresh": each command runs in
    a new process at the repository root, as at first; see docs/sandboxes.md), ``timings``
    (add wall-clock ``duration_s``/``grade_duration_s`` to ``info``; off by default because
    Gymnasium's determinism contract, checked by ``check_env``, compares ``info`` across
    identically seeded steps; TrajectoryLogger always records timings),
    ``grade_cache`` (a dict shared across episodes: the verdict for a diff is reused once
    two gradings of it agreed, keyed by the task's files, the grading code, the sandbox,
    the reward mode and the diff; untrusted runs and infrastructure errors are never
    reused; trainers use it for speed; see ``Session.grade``), ``progress`` (after each step
    that changed the workspace, ``info["progress"]`` is the share of hidden tests passing on
    it, graded in a fresh sandbox like the final grade and cached by diff; -1.0 when not
    measured; off by default: it costs a grading per changing step; see
    :mod:`repogym.envs.progress` and docs/reward-shaping.md).

    ## Version History
    * v0: initial release. Later in v0 (task versions unchanged), ``bash`` runs in a
      persistent shell by default; ``shell="fresh"`` keeps the first behaviour.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        task: Task | str | Path,
        *,
        sandbox: str = "bwrap",
        reward_mode: grader.RewardMode = "binary",
        render_mode: str | None = None,
        max_steps: int | None = None,
        limits: Limits | None = None,
        max_obs_chars: int = 16_000,
        sandbox_options: dict[str, Any] | None = None,
        timings: bool = False,
        grade_cache: MutableMapping[tuple, Any] | None = None,
        shell: ShellMode = "persistent",
        progress: bool = False,
    ) -> None:
        if reward_mode not in grader.REWARD_MODES:
            raise ValueError(
                f"unknown reward_mode {reward_mode!r}. Fix: use one of {grader.REWARD_MODES}"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unsupported render_mode {render_mode!r}. Fix: use 'ansi' or None")
        if shell not in SHELL_MODES:
            raise ValueError(f"unknown shell {shell!r}. Fix: use one of {SHELL_MODES}")
        self.shell = shell
        self.task = task if isinstance(task, Task) else _resolve(task)
        self.sandbox_backend = sandbox
        self.reward_mode = reward_mode
        self.render_mode = render_mode
        self.max_steps = max_steps
        self.limits = limits or Limits()
        self.max_obs_chars = max_obs_chars
        self.sandbox_options = dict(sandbox_options or {})
        self.timings = timings
        self.grade_cache = grade_cache
        self.progress = progress
        self._progress = ProgressMeter()
        self.observation_space = TextSpace()
        self.action_space = TextSpace(MAX_ACTION_CHARS)
        self._templates = TemplateCache()
        #: The current episode (its sandbox, tools, diff and grading); None before reset.
        self.session: Session | None = None
        self._transcript: list[str] = []
        self._steps = 0
        self._done = False
        self._outer_limit: int | None = None

    # -- helpers -----------------------------------------------------------------------
    def _make_sandbox(self, spec: SandboxSpec) -> Sandbox:
        return make_sandbox(self.sandbox_backend, spec, **self.sandbox_options)

    def _select_task(self, options: dict[str, Any] | None) -> Task:
        return self.task

    def _budget(self) -> int:
        limits = [b for b in (self.max_steps, self._outer_limit) if b]
        return min(limits) if limits else self.task.max_steps

    def set_step_budget(self, limit: int | None) -> None:
        """Truncate (and grade) after ``limit`` steps at most, as well as at ``max_steps``
        and the task's own budget; None removes it. ``gym.make(id, max_episode_steps=N)``
        sets it through :class:`repogym.envs.wrappers.StepBudget`."""
        self._outer_limit = limit

    # -- Gymnasium API -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, ResetInfo]:
        super().reset(seed=seed)
        self._close_session()
        self.task = self._select_task(options)
        self.session = Session(
            self.task,
            self._templates.get(self.task.repo_dir, self.task.sandbox_dependencies()),
            self._make_sandbox,
            self.limits,
            self.max_obs_chars,
            shell=self.shell,
        )
        self._steps, self._done = 0, False
        obs = self.session.prompt()
        self._transcript = [obs]
        info = ResetInfo(
            task=self.task.id,
            env_id=self.task.env_id,
            split=self.task.split,
            max_steps=self._budget(),
            sandbox=self.sandbox_backend,
            shell=self.shell,
            reward_mode=self.reward_mode,
            progress=(
                self._progress.baseline(self.session, self.reward_mode)
                if self.progress
                else NOT_MEASURED
            ),
        )
        return obs, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, StepInfo]:
        if self.session is None or self.session.closed or self._done:
            raise gym.error.ResetNeeded("step() after the episode ended. Fix: call reset()")
        self._steps += 1
        start = time.monotonic()
        info = step_info(self._steps, timings=self.timings)
        reward, terminated, truncated = 0.0, False, False
        try:
            call = parse_action(action)
            info["tool"] = call.name
            if call.name == "submit":
                obs, reward = self._finish(info), info["reward"]
                terminated = True
            else:
                outcome = self.session.run_tool(call)
                info.update(tool_info(outcome))
                obs = outcome.observation
            obs += ignored_note(call)
        except ActionError as e:
            obs = error_observation(e)
            info["action_error"] = str(e)
        except SandboxError as e:
            obs, truncated = f"The sandbox failed: {e}\nThe episode ends here.\n", True
            info["infra_error"] = str(e)
            mark_truncated(info, "infra_error")
        if not (terminated or truncated) and self._steps >= self._budget():
            obs += self._finish(info)
            reward, truncated = info["reward"], True
            mark_truncated(info, "max_steps")
        info["progress"] = (
            self._progress.step(self.session, info, terminated or truncated, self.reward_mode)
            if self.progress
            else NOT_MEASURED
        )
        if self.timings:
            info["duration_s"] = time.monotonic() - start
        self._done = terminated or truncated
        self._transcript += [f"$ {action}", obs]
        return obs, float(reward), terminated, truncated, info

    def _finish(self, info: StepInfo) -> str:
        diff, flags = self.session.diff()
        self.session.close()  # nothing of the episode runs while it is graded
        result = self.session.grade(diff, flags, mode=self.reward_mode, cache=self.grade_cache)
        info.update(graded_info(result))
        if self.timings:
            info["grade_duration_s"] = result.duration_s
        if result.infra_error:
            return f"Grading failed (infrastructure): {result.infra_error}\n"
        passed = sum(s == "passed" for s in result.tests.values())
        return (
            f"Submitted. Hidden tests passed: {passed}/{len(result.tests)}. "
            f"Reward: {result.reward:.3f}\n"
        )

    # -- forks (repogym.envs.forking) ---------------------------------------------------
    def fork(self) -> RepoEnv:
        """An independent env in this one's state: the workspace's files and ``/tmp``, the
        persistent shell's working folder, exported variables and functions, the step
        count and budget, the transcript and the random generator. Neither sees the
        other's actions afterwards; grading the fork equals grading its actions replayed
        from ``reset``. Close it like any env. See docs/sandboxes.md.

        Raises:
            gymnasium.error.ResetNeeded: no episode is running.
        """
        return forking.fork(self)

    def snapshot(self) -> forking.Snapshot:
        """The running episode's state, kept aside for :meth:`restore` (close it when done)."""
        return forking.take(self)

    def restore(self, snapshot: forking.Snapshot) -> None:
        """Put the episode back in ``snapshot``'s state (as often as wanted)."""
        forking.restore(self, snapshot)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return "\n".join(self._transcript)
        return None

    def _close_session(self) -> None:
        if self.session is not None:
            self.session.close()

    def close(self) -> None:
        """Stop the sandbox and delete every temp folder. Idempotent."""
        try:
            self._close_session()
        finally:
            self._templates.close()
        super().close()


class SuiteEnv(RepoEnv):
    """Many tasks behind one id: each ``reset`` draws a task from ``self.np_random``.

    Arguments: ``tasks`` (Task objects, folders or ids), or filters ``split``, ``tags``
    (any of) and ``task_ids`` over the registered tasks; plus every RepoEnv argument.
    ``reset(options={"task": id})`` picks a task explicitly.
    """

    def __init__(
        self,
        tasks: list[Task | str | Path] | None = None,
        *,
        split: str | None = None,
        tags: list[str] | None = None,
        task_ids: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        from repogym.scenarios.registry import registered_tasks

        if tasks is None:
            pool = list(registered_tasks().values())
        else:
            pool = [t if isinstance(t, Task) else _resolve(t) for t in tasks]
        self.tasks = select_tasks(pool, split=split, tags=tags, task_ids=task_ids)
        super().__init__(self.tasks[0], **kwargs)

    def _select_task(self, options: dict[str, Any] | None) -> Task:
        if options and "task" in options:
            by_id = {t.id: t for t in self.tasks}
            if options["task"] not in by_id:
                raise ValueError(
                    f"unknown task {options['task']!r}. Fix: pick from {sorted(by_id)}"
                )
            return by_id[options["task"]]
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]


def _resolve(ref: str | Path) -> Task:
    from repogym.scenarios.registry import registered_tasks

    tasks = registered_tasks()
    if isinstance(ref, str) and ref in tasks:
        return tasks[ref]
    return load_task(ref)
