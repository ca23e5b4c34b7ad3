"""RepoEnv and SuiteEnv: Gymnasium environments over a sandboxed buggy repository."""

from __future__ import annotations

import copy
import json
import multiprocessing as mp
import shlex
import string
import sys
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
from gymnasium.wrappers import TimeLimit

from repogym.envs import grader
from repogym.envs.actions import (
    MAX_ACTION_CHARS,
    TOOL_HELP,
    ActionError,
    ToolCall,
    error_observation,
    ignored_note,
    parse_action,
)
from repogym.sandbox import Limits, Sandbox, SandboxError, SandboxSpec, make_sandbox
from repogym.sandbox.base import ExecResult
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios.task import Task, load_task, select_tasks

MAX_TEXT = 262_144


class TextSpace(spaces.Text):
    """``spaces.Text`` that contains any string (code and tool output use all of Unicode).

    Sampling draws printable ASCII, which is enough for fuzzing actions.
    """

    def __init__(self, max_length: int = MAX_TEXT, seed: int | None = None) -> None:
        super().__init__(max_length=max_length, min_length=0, charset=string.printable,
                         seed=seed)

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
    dest = np.frombuffer(shm.get_obj(), dtype=np.int32)[index * size:(index + 1) * size]
    dest[: len(codes)] = codes + 1
    dest[len(codes):] = 0


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


def clip_text(text: str, limit: int) -> str:
    """Keep the head and tail of a long text, saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n... [{cut} characters cut] ...\n{text[-half:]}"


def format_exec(res: ExecResult, limit: int) -> str:
    out = clip_text(res.output, limit)
    notes = []
    if res.timed_out:
        notes.append(f"timed out after {res.duration_s:.0f}s; the command was killed")
    if res.output_truncated:
        notes.append("output limit reached; the command was killed")
    notes.append(f"exit code: {res.exit_code}")
    return (out.rstrip("\n") + "\n" if out else "") + "".join(f"[{n}]\n" for n in notes)


class RepoEnv(gym.Env[str, str]):
    """Fix a bug in a sandboxed repository.

    ## Description
    The agent gets a bug report (the task's statement) and a repository in a sandbox with
    no network, no git history beyond one commit, no host secrets and resource limits. It
    acts with tool calls (shell, read, write, edit) and submits; hidden verifier tests
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
    ``info["truncated"] == "max_steps"``) or when the sandbox fails
    (``info["infra_error"]`` set: trainers must mask such episodes, not score them).

    ## Arguments
    ``task`` (Task or folder), ``sandbox`` ("bwrap", "docker", "process"),
    ``reward_mode``, ``render_mode`` ("ansi"), ``max_steps``, ``limits``
    (:class:`repogym.sandbox.Limits`), ``max_obs_chars``, ``sandbox_options``,
    ``timings`` (add wall-clock ``duration_s``/``grade_duration_s`` to ``info``; off by
    default because Gymnasium's determinism contract, checked by ``check_env``, compares
    ``info`` across identically seeded steps; TrajectoryLogger always records timings),
    ``grade_cache`` (a dict shared across episodes: a result per (task, version, reward
    mode, diff) is reused instead of grading the same diff again; trainers use it for speed;
    infrastructure errors are never cached).

    ## Version History
    * v0: initial release.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012 (Gymnasium convention)

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
        grade_cache: MutableMapping[tuple, grader.GradeResult] | None = None,
    ) -> None:
        if reward_mode not in grader.REWARD_MODES:
            raise ValueError(f"unknown reward_mode {reward_mode!r}. Fix: use one of "
                             f"{grader.REWARD_MODES}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unsupported render_mode {render_mode!r}. Fix: use 'ansi' or None")
        self.task = task if isinstance(task, Task) else load_task(task)
        self.sandbox_backend = sandbox
        self.reward_mode = reward_mode
        self.render_mode = render_mode
        self.max_steps = max_steps
        self.limits = limits or Limits()
        self.max_obs_chars = max_obs_chars
        self.sandbox_options = dict(sandbox_options or {})
        self.timings = timings
        self.grade_cache = grade_cache
        self.observation_space = TextSpace()
        self.action_space = TextSpace(MAX_ACTION_CHARS)
        self._templates = TemplateCache()
        self._sandbox: Sandbox | None = None
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

    def _find_outer_limit(self) -> int | None:
        """The step limit of a TimeLimit wrapping this env, if ``reset`` came through one.

        ``gym.make(id, max_episode_steps=N)`` puts a TimeLimit outside the env, which would
        truncate without grading. The wrapper's ``reset`` is on the call stack of ours, so
        we read its limit there and grade at that step ourselves.
        """
        frame = sys._getframe(2)
        for _ in range(12):
            if frame is None:
                break
            owner = frame.f_locals.get("self")
            if isinstance(owner, TimeLimit) and owner.unwrapped is self:
                return owner._max_episode_steps
            frame = frame.f_back
        return None

    def _prompt(self, template: Path) -> str:
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in template.iterdir()
                       if p.name != ".git")
        listing = "\n".join(f"  {n}" for n in names[:60])
        return (f"# Task: {self.task.id}\n\n{self.task.statement}\n"
                f"The repository is checked out at the current folder. Top-level files:\n"
                f"{listing}\n\n{TOOL_HELP}\n")

    # -- Gymnasium API -------------------------------------------------------------------
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._outer_limit = self._find_outer_limit()
        self._close_sandbox()
        self.task = self._select_task(options)
        self._template = self._templates.get(self.task.repo_dir)
        spec = SandboxSpec(template=self._template, limits=self.limits)
        self._sandbox = self._make_sandbox(spec)
        self._steps, self._done = 0, False
        obs = self._prompt(self._template)
        self._transcript = [obs]
        info = {"task": self.task.id, "env_id": self.task.env_id, "split": self.task.split,
                "max_steps": self._budget(), "sandbox": self.sandbox_backend,
                "reward_mode": self.reward_mode}
        return obs, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._sandbox is None or self._done:
            raise gym.error.ResetNeeded("step() after the episode ended. Fix: call reset()")
        self._steps += 1
        start = time.monotonic()
        info: dict[str, Any] = {"tool": None, "exit_code": None, "step": self._steps}
        reward, terminated, truncated = 0.0, False, False
        try:
            call = parse_action(action)
            info["tool"] = call.name
            if call.name == "submit":
                obs, reward = self._finish(info), info["reward"]
                terminated = True
            else:
                obs = self._run_tool(call, info)
            obs += ignored_note(call)
        except ActionError as e:
            obs = error_observation(e)
            info["action_error"] = str(e)
        except SandboxError as e:
            obs, truncated = f"The sandbox failed: {e}\nThe episode ends here.\n", True
            info.update(infra_error=str(e), truncated="infra_error", resolved=False,
                        tests={}, hack_flags=[], diff="", reward_breakdown={})
        if not (terminated or truncated) and self._steps >= self._budget():
            obs += self._finish(info)
            reward, truncated = info["reward"], True
            info["truncated"] = "max_steps"
        if self.timings:
            info["duration_s"] = time.monotonic() - start
        self._done = terminated or truncated
        self._transcript += [f"$ {action}", obs]
        return obs, float(reward), terminated, truncated, info

    def _run_tool(self, call: ToolCall, info: dict[str, Any]) -> str:
        """Run a validated non-submit call. What the agent got wrong becomes the observation
        (``exit_code`` 1); only a :class:`SandboxError` (the infrastructure) propagates."""
        sb, a = self._sandbox, call.args
        try:
            if call.name == "bash":
                res = sb.run(a["command"], timeout_s=self.limits.timeout_s)
                info.update(exit_code=res.exit_code, timed_out=res.timed_out)
                return format_exec(res, self.max_obs_chars)
            if call.name == "read":
                out = self._read(a["path"], a.get("start"), a.get("end"))
            elif call.name == "write":
                sb.write_file(a["path"], a["content"])
                out = f"Wrote {len(a['content'])} characters to {a['path']}.\n"
            else:
                out = self._edit(a["path"], a["old"], a["new"])
            info["exit_code"] = 0
            return out
        except FileNotFoundError as e:
            info["exit_code"] = 1
            return self._not_a_file(a["path"], e)
        except (OSError, ValueError) as e:  # ValueError: an argument the sandbox cannot take
            info["exit_code"] = 1
            return clip_text(f"Error: {e}", self.max_obs_chars) + "\n"

    def _not_a_file(self, path: str, err: FileNotFoundError) -> str:
        folder = shlex.quote(path)
        if self._sandbox.run(f"test -d {folder}").exit_code == 0:
            ls = json.dumps({"tool": "bash", "args": {"command": f"ls {folder}"}})
            return f"Error: {path} is a folder, not a file. Fix: list it: {ls}\n"
        return clip_text(f"Error: {err}", self.max_obs_chars) + "\n"

    def _read(self, path: str, start: int | None, end: int | None) -> str:
        if start is not None and end is not None and start > end:
            raise ValueError(f"read() got start={start} after end={end}. Fix: give "
                             f"start <= end, e.g. start={end}, end={start}")
        lines = self._sandbox.read_file(path).splitlines()
        if not lines:
            return f"{path} is empty (0 lines).\n"
        lo = start or 1
        if lo > len(lines):
            raise ValueError(f"{path} has {len(lines)} lines; start={lo} is past the end. Fix: "
                             f"use start <= {len(lines)}")
        hi = min(len(lines), end or len(lines))
        body = "\n".join(f"{i:6d}\t{lines[i - 1]}" for i in range(lo, hi + 1))
        return clip_text(body, self.max_obs_chars) + "\n"

    def _edit(self, path: str, old: str, new: str) -> str:
        if not old:
            raise ValueError("edit() got an empty `old`; it must be the exact text to replace, "
                             "copied from the file. Fix: to create or overwrite a whole file, "
                             "use write(path, content); to insert text, put a neighbouring "
                             "line in both `old` and `new`")
        text = self._sandbox.read_file(path)
        count = text.count(old)
        if count == 0:
            raise ValueError(f"edit() did not find `old` in {path} (it occurs 0 times). Fix: "
                             "copy it exactly from the file (read it first: spaces, tabs and "
                             "line breaks must match)")
        if count > 1:
            raise ValueError(f"edit() needs `old` to occur exactly once in {path}; it occurs "
                             f"{count} times. Fix: include more surrounding lines in `old`")
        self._sandbox.write_file(path, text.replace(old, new, 1))
        return f"Edited {path}.\n"

    def _finish(self, info: dict[str, Any]) -> str:
        diff, flags = grader.diff_or_flag(self._sandbox)
        key = (self.task.id, self.task.version, self.reward_mode, diff, tuple(flags))
        cache = self.grade_cache if self.grade_cache is not None else {}
        result = copy.deepcopy(cache.get(key))  # a fresh info per step, as Gymnasium asks
        if result is None:
            result = grader.grade(self.task, self._template, diff, mode=self.reward_mode,
                                  make_sandbox=self._make_sandbox, limits=self.limits,
                                  extra_flags=flags)
            if not result.infra_error:
                cache[key] = result
        info.update(
            reward=result.reward, tests=result.tests, reward_breakdown=result.reward_breakdown,
            resolved=result.resolved, hack_flags=result.hack_flags, diff=result.diff,
            infra_error=result.infra_error, verifier_exit_code=result.verifier_exit_code,
        )
        if self.timings:
            info["grade_duration_s"] = result.duration_s
        if result.infra_error:
            return f"Grading failed (infrastructure): {result.infra_error}\n"
        passed = sum(s == "passed" for s in result.tests.values())
        return (f"Submitted. Hidden tests passed: {passed}/{len(result.tests)}. "
                f"Reward: {result.reward:.3f}\n")

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return "\n".join(self._transcript)
        return None

    def _close_sandbox(self) -> None:
        if self._sandbox is not None:
            sb, self._sandbox = self._sandbox, None
            sb.close()

    def close(self) -> None:
        """Stop the sandbox and delete every temp folder. Idempotent."""
        try:
            self._close_sandbox()
        finally:
            self._templates.close()
        super().close()


class SuiteEnv(RepoEnv):
    """Many tasks behind one id: each ``reset`` draws a task from ``self.np_random``.

    Arguments: ``tasks`` (Task objects, folders or ids), or filters ``split``, ``tags``
    (any of) and ``task_ids`` over the registered tasks; plus every RepoEnv argument.
    ``reset(options={"task": id})`` picks a task explicitly.
    """

    def __init__(self, tasks: list[Task | str | Path] | None = None, *, split: str | None = None,
                 tags: list[str] | None = None, task_ids: list[str] | None = None,
                 **kwargs: Any) -> None:
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
                raise ValueError(f"unknown task {options['task']!r}. Fix: pick from "
                                 f"{sorted(by_id)}")
            return by_id[options["task"]]
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]


def _resolve(ref: str | Path) -> Task:
    from repogym.scenarios.registry import registered_tasks

    tasks = registered_tasks()
    if isinstance(ref, str) and ref in tasks:
        return tasks[ref]
    return load_task(ref)

