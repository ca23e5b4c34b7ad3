"""One worker of a run: an env and an agent, running episodes one after another.

An *episode* is ``(task id, sample index)``. :class:`EpisodeWorker` owns one environment (a
:class:`~repogym.envs.SuiteEnv` wrapped in a TrajectoryLogger) and one agent. Failures are
data: an agent that raises, or whose ``act`` exceeds ``act_timeout_s``, is an ``agent_error``
for that episode (reward 0); a sandbox or grader failure is an ``infra_error``; a model
endpoint that failed even after the agent's retries
(:class:`~repogym.harness.baselines.EndpointError`) is an ``endpoint_error``. The one
exception is :class:`~repogym.harness.baselines.AgentConfigError` (bad credentials, unknown
model): it ends the whole run, because every other episode would fail the same way.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

from repogym.harness.baselines import Agent, AgentConfigError, EndpointError, make_agent
from repogym.harness.config import RunConfig
from repogym.harness.results import TRAJECTORIES, ResultRow, new_row
from repogym.scenarios.registry import BUILTIN_DIR
from repogym.scenarios.task import Task, load_task

EpisodeRef = tuple[str, int]


def episode_seed(base: int, task_id: str, sample: int) -> int:
    """A stable seed per (base seed, task, sample)."""
    return (base * 1_000_003 + zlib.crc32(f"{task_id}:{sample}".encode())) % (2**31)


def task_ref(task: Task) -> str:
    """How a worker finds ``task`` wherever it runs: ``builtin:<id>`` or the folder path."""
    if task.path.parent == BUILTIN_DIR.resolve():
        return f"builtin:{task.path.name}"
    return str(task.path)


def load_ref(ref: str) -> Task:
    """The task a :func:`task_ref` string names."""
    if ref.startswith("builtin:"):
        return load_task(BUILTIN_DIR / ref.split(":", 1)[1])
    return load_task(ref)


class AgentTimeout(Exception):
    """``act`` (or ``reset``) ran past the per-act limit."""


def call_with_timeout(fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
    """Call ``fn(*args)`` in a daemon thread; raise AgentTimeout if it runs past ``timeout_s``.

    A hung call cannot be killed from Python: its thread is abandoned (daemon) and the caller
    drops the agent, building a fresh one for the next episode. Signals are blocked in the
    agent's thread and the wait polls, so Ctrl-C and SIGTERM always reach the caller at once
    (a signal delivered to another thread would not wake a long ``join``).
    """
    box: dict[str, Any] = {}

    def target() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        try:
            box["value"] = fn(*args)
        except BaseException as e:
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True, name="repogym-agent")
    thread.start()
    deadline = time.monotonic() + timeout_s
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(min(0.2, max(0.0, deadline - time.monotonic())))
    if thread.is_alive():
        raise AgentTimeout(
            f"{getattr(fn, '__qualname__', fn)} did not return within {timeout_s:g}s"
        )
    if "error" in box:
        raise box["error"]
    return box["value"]


class _AgentFailed(Exception):
    """Wraps whatever the agent raised, to tell it apart from env failures."""


class _EndpointFailed(Exception):
    """The agent's model endpoint failed (an outage, not the agent's doing)."""


class _EnvFailed(Exception):
    """The env raised (it should not): recorded as an infra error."""


class EpisodeWorker:
    """Owns one env (with trajectory logging) and one agent; runs episodes in turn.

    Args:
        cfg: The run configuration.
        task_refs: :func:`task_ref` strings (resolved where the worker runs, so built-ins
            work on every Ray node).
        agent: An agent already built for this run (else one is built on first use).
    """

    def __init__(self, cfg: RunConfig, task_refs: list[str], agent: Agent | None = None) -> None:
        self.cfg = cfg
        self.tasks = {t.id: t for t in (load_ref(r) for r in task_refs)}
        self._env: Any = None
        self._agent: Any = agent
        self._stop = threading.Event()

    def _get_env(self) -> Any:
        if self._env is None:
            from repogym.envs import make_suite_env

            local = (
                {}
                if self.cfg.env_server
                else {"tasks": list(self.tasks.values()), "sandbox": self.cfg.sandbox}
            )
            self._env = make_suite_env(
                log_dir=self.cfg.out / TRAJECTORIES,
                remote=self.cfg.env_server,
                reward_mode=self.cfg.reward_mode,
                max_steps=self.cfg.max_steps,
                **local,
            )
        return self._env

    def _get_agent(self) -> Any:
        if self._agent is None:
            self._agent = make_agent(self.cfg.agent, **self.cfg.agent_args)
        return self._agent

    def _agent_call(self, fn_name: str, *args: Any) -> Any:
        try:
            return call_with_timeout(
                getattr(self._get_agent(), fn_name), *args, timeout_s=self.cfg.act_timeout_s
            )
        except AgentConfigError:
            raise
        except EndpointError as e:
            self._agent = None
            raise _EndpointFailed(f"{type(e).__name__} in {fn_name}: {e}") from e
        except Exception as e:
            self._agent = None  # unknown state (or a hung thread): build a fresh one next time
            raise _AgentFailed(f"{type(e).__name__} in {fn_name}: {e}") from e

    def run(self, task_id: str, sample: int) -> ResultRow:
        """Run one episode and return its results row.

        Raises:
            AgentConfigError: the agent's configuration is wrong (the run must stop).
            KeyboardInterrupt: :meth:`stop` was called, or a signal arrived.
        """
        if self._stop.is_set():
            raise KeyboardInterrupt("run stopped: no new episode")
        try:
            return self._run(task_id, sample)
        except BaseException:
            self.close()
            raise

    def _new_row(self, task: Task, sample: int, seed: int) -> ResultRow:
        return new_row(
            agent=self.cfg.label,
            task=task.id,
            split=task.split,
            tags=list(task.tags),
            sample=sample,
            seed=seed,
        )

    def _run(self, task_id: str, sample: int) -> ResultRow:
        task = self.tasks[task_id]
        seed = episode_seed(self.cfg.seed, task_id, sample)
        row = self._new_row(task, sample, seed)
        start = time.monotonic()
        env = self._get_env()
        try:
            obs, _ = env.reset(seed=seed, options={"task": task_id})
        except Exception as e:
            row.update(
                infra_error=f"reset: {type(e).__name__}: {e}",
                wall_s=round(time.monotonic() - start, 3),
            )
            return row
        row["trajectory"] = os.path.relpath(env.path, self.cfg.out)
        try:
            self._episode(env, task, obs, row)
        except _AgentFailed as e:
            row["agent_error"] = str(e)
        except _EndpointFailed as e:
            row["endpoint_error"] = str(e)
        except _EnvFailed as e:
            row["infra_error"] = str(e)
        except AgentConfigError:
            raise
        except Exception as e:
            row["agent_error"] = f"{type(e).__name__}: {e}"
        self._record_agent_state(row)
        row["wall_s"] = round(time.monotonic() - start, 3)
        return row

    def _episode(self, env: Any, task: Task, obs: str, row: ResultRow) -> None:
        agent = self._get_agent()
        if getattr(agent, "wants_gold_patch", False):
            agent.set_gold_patch(task.solution_patch.read_text())
        self._agent_call("reset", {**task.info(), "seed": row["seed"], "sample": row["sample"]})
        done, reward, info = False, 0.0, {}
        while not done:
            if self._stop.is_set():
                raise KeyboardInterrupt("run stopped")
            action = self._agent_call("act", obs)
            try:
                obs, reward, terminated, truncated, info = env.step(action)
            except Exception as e:  # a bug or failure below the agent: not its fault
                raise _EnvFailed(f"step: {type(e).__name__}: {e}") from e
            row["steps"] += 1
            done = terminated or truncated
        row.update(
            reward=float(reward),
            resolved=bool(info.get("resolved")),
            hack_flags=list(info.get("hack_flags") or []),
            infra_error=info.get("infra_error") or None,
            truncated=info.get("truncated_reason") or None,
        )

    def _record_agent_state(self, row: ResultRow) -> None:
        row["stop_reason"] = getattr(self._agent, "stop_reason", None)
        usage = getattr(self._agent, "usage", None)
        if isinstance(usage, dict):
            row["usage"] = dict(usage)
            row["tokens"] = int(usage.get("prompt_tokens", 0)) + int(
                usage.get("completion_tokens", 0)
            )

    def stop(self) -> None:
        """Ask a running episode to stop at its next step and refuse new ones (any thread)."""
        self._stop.set()

    def close(self) -> None:
        """Close the env (its sandbox and temp folders). Idempotent."""
        env, self._env = self._env, None
        if env is not None:
            env.close()
