"""Sessions of ``repogym serve``: one env (one sandbox) per session, TTL, a cap, clean close.

Env calls block (sandbox commands, grading), so each session runs them on a thread of its
own: the env is created, stepped and closed on that thread, and one session's slow step
never delays another session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym

from repogym.envs.remote import RESET_KEYS, ErrorCode, action_text, step_payload

#: (reward_mode, max_steps) -> a new env. The server's factory builds a SuiteEnv.
EnvFactory = Callable[[str | None, int | None], gym.Env]


class SessionError(Exception):
    """A request the session cannot serve; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, code: str, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


@dataclasses.dataclass(eq=False)
class ServerSession:
    """One client's environment and its bookkeeping."""

    id: str
    kind: str
    executor: ThreadPoolExecutor
    created: float
    last_active: float
    env: gym.Env | None = None
    env_key: tuple[str | None, int | None] | None = None
    episode_id: str | None = None
    step_count: int = 0
    done: bool = True
    busy: int = 0
    closed: bool = False
    task: dict[str, Any] | None = None
    #: The current episode's first observation (the statement) and last step's reward.
    first_observation: str | None = None
    last_reward: float | None = None
    on_expire: Callable[[], Any] | None = None
    #: False for a fork no client has taken yet (:meth:`SessionManager.adopt`).
    attached: bool = True
    #: The session this one was forked from, if any.
    forked_from: str | None = None
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)


class SessionManager:
    """Opens, serves, expires and closes sessions.

    Args:
        factory: Builds a session's env from the (reward_mode, max_steps) it asked for.
        tasks: Public info of every task served (``Task.info()``), by id.
        max_sessions: Sessions open at once; one more is refused (HTTP 503).
        ttl_s: A session idle this long is closed (its sandbox deleted); None: never.
    """

    def __init__(
        self,
        factory: EnvFactory,
        tasks: dict[str, dict[str, Any]],
        *,
        max_sessions: int = 64,
        ttl_s: float | None = 600.0,
    ) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions={max_sessions}. Fix: pass a number >= 1")
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError(f"ttl_s={ttl_s}. Fix: pass a positive number of seconds or None")
        self.factory = factory
        self.tasks = tasks
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self.sessions: dict[str, ServerSession] = {}
        self.expired = 0
        self._reaper: asyncio.Task | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def open(self, kind: str) -> ServerSession:
        """A new session, or SessionError(503) when the cap is reached."""
        if len(self.sessions) >= self.max_sessions:
            raise SessionError(
                f"server at capacity: {len(self.sessions)}/{self.max_sessions} "
                "sessions open. Fix: retry later, close idle sessions, or "
                "start the server with a larger --max-sessions",
                ErrorCode.CAPACITY_REACHED,
                503,
            )
        sid = uuid.uuid4().hex
        now = time.monotonic()
        pool = ThreadPoolExecutor(1, thread_name_prefix=f"rg-{sid[:8]}")
        session = ServerSession(sid, kind, pool, created=now, last_active=now)
        self.sessions[sid] = session
        return session

    def adopt(self, sid: str, kind: str) -> ServerSession:
        """Give a client (a new WebSocket connection) the fork ``sid`` waiting for one."""
        session = self.get(sid)
        if session.attached:
            raise SessionError(
                f"session {sid!r} already has a client. Fix: connect without "
                "a session id to open a new session, or fork this one",
                ErrorCode.SESSION_ERROR,
                409,
            )
        session.attached, session.kind = True, kind
        session.last_active = time.monotonic()
        return session

    def get(self, sid: str) -> ServerSession:
        session = self.sessions.get(sid)
        if session is None:
            raise SessionError(
                f"no session {sid!r} (closed, expired after {self.ttl_s}s idle, "
                "or never opened). Fix: POST /reset without a session id to "
                "open a new one",
                ErrorCode.SESSION_ERROR,
                404,
            )
        return session

    async def close(self, session: ServerSession) -> None:
        """Close the session's env on its own thread and forget it. Idempotent."""
        if session.closed:
            return
        session.closed = True
        env, session.env = session.env, None
        try:  # counted (and refused at the cap) until its sandbox is gone
            if env is not None:
                await asyncio.get_running_loop().run_in_executor(session.executor, env.close)
        finally:
            self.sessions.pop(session.id, None)
            session.executor.shutdown(wait=False)

    async def close_all(self) -> None:
        """Close every session (server shutdown)."""
        self.stop_reaper()
        await asyncio.gather(*(self.close(s) for s in list(self.sessions.values())))

    # -- expiry ---------------------------------------------------------------------------
    def start_reaper(self) -> None:
        if self.ttl_s is not None and self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    def stop_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    async def _reap_forever(self) -> None:
        interval = min(max(self.ttl_s / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            await self.reap()

    async def reap(self) -> list[str]:
        """Close the sessions idle for longer than the TTL; returns their ids."""
        now = time.monotonic()
        stale = [
            s
            for s in list(self.sessions.values())
            if not s.busy and now - s.last_active > self.ttl_s
        ]
        for session in stale:
            self.expired += 1
            await self.close(session)
            if session.on_expire is not None:
                await session.on_expire()
        return [s.id for s in stale]

    # -- env calls ------------------------------------------------------------------------
    async def _call(self, session: ServerSession, fn: Callable[..., Any], *args: Any) -> Any:
        session.busy += 1
        session.last_active = time.monotonic()
        try:
            return await asyncio.get_running_loop().run_in_executor(session.executor, fn, *args)
        finally:
            session.busy -= 1
            session.last_active = time.monotonic()

    async def reset(self, session: ServerSession, data: dict[str, Any]) -> dict[str, Any]:
        """Reset the session's env (built on first use); returns an observation payload."""
        seed, options, key, episode_id = self._parse_reset(data)
        async with session.lock:
            if session.closed:
                raise SessionError(
                    "the session was closed. Fix: open a new one", ErrorCode.SESSION_ERROR, 404
                )
            if session.env is not None and session.env_key != key:
                env, session.env = session.env, None
                await self._call(session, env.close)
            if session.env is None:
                try:
                    session.env = await self._call(session, self.factory, *key)
                except ValueError as e:  # a bad reward_mode (the env's message names the fix)
                    raise SessionError(str(e), ErrorCode.VALIDATION_ERROR, 422) from e
                except Exception as e:
                    raise SessionError(
                        f"the session's env could not be built: {type(e).__name__}: {e}",
                        ErrorCode.FACTORY_ERROR,
                        500,
                    ) from e
                session.env_key = key
            try:
                obs, info = await self._call(session, _reset_env, session.env, seed, options)
            except ValueError as e:
                raise SessionError(str(e), ErrorCode.VALIDATION_ERROR, 422) from e
            session.episode_id = episode_id or uuid.uuid4().hex
            session.step_count, session.done = 0, False
            session.task = self.tasks.get(info.get("task"))
            session.first_observation, session.last_reward = obs, None
            return step_payload(obs, None, False, False, info)

    async def step(self, session: ServerSession, data: dict[str, Any]) -> dict[str, Any]:
        """One step of the session's episode; returns an observation payload."""
        try:
            text = action_text(data)
        except (ValueError, TypeError) as e:
            raise SessionError(str(e), ErrorCode.VALIDATION_ERROR, 422) from e
        async with session.lock:
            if session.env is None or session.done or session.closed:
                raise SessionError(
                    "no episode in progress: the session was not reset, or "
                    "its episode ended. Fix: send reset first",
                    ErrorCode.SESSION_ERROR,
                    409,
                )
            obs, reward, terminated, truncated, info = await self._call(
                session, session.env.step, text
            )
            session.step_count += 1
            session.done = bool(terminated or truncated)
            session.last_reward = float(reward)
            return step_payload(obs, float(reward), bool(terminated), bool(truncated), info)

    async def fork(self, session: ServerSession) -> ServerSession:
        """A new session holding a fork of ``session``'s running episode
        (:meth:`repogym.envs.repo_env.RepoEnv.fork`: same files, shell state, step count
        and budget), waiting for a client: a WebSocket connection that sends its id in
        ``X-Session-Id`` (:meth:`adopt`), or HTTP requests with that header. It counts
        towards the cap and expires when idle, like any session.
        """
        async with session.lock:
            if session.env is None or session.done or session.closed:
                raise SessionError(
                    "no episode in progress to fork: the session was not "
                    "reset, or its episode ended. Fix: reset, and fork before "
                    "the last step",
                    ErrorCode.SESSION_ERROR,
                    409,
                )
            make_fork = getattr(session.env.unwrapped, "fork", None)
            if make_fork is None:
                raise SessionError(
                    "this server's env cannot fork episodes", ErrorCode.VALIDATION_ERROR, 422
                )
            new = self.open("fork")
            new.attached = False
            try:
                new.env = await self._call(session, make_fork)
            except BaseException:
                await self.close(new)
                raise
        new.env_key, new.forked_from = session.env_key, session.id
        new.episode_id = uuid.uuid4().hex
        new.step_count, new.done, new.task = session.step_count, False, session.task
        new.first_observation, new.last_reward = session.first_observation, session.last_reward
        return new

    async def stateless(
        self, reset: dict[str, Any], action: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """OpenEnv's stateless call: a fresh env, reset, stepped once with ``action`` if
        given, closed; returns the last payload. Counts towards the cap while it runs."""
        session = self.open("stateless")
        try:
            payload = await self.reset(session, reset)
            if action is not None:
                payload = await self.step(session, action)
            return payload
        finally:
            await self.close(session)

    def state(self, session: ServerSession | None) -> dict[str, Any]:
        """What the client may know about its session (no hidden tests, no gold patch);
        without a session, a fresh env's state (OpenEnv's stateless ``GET /state``)."""
        if session is None:
            return {
                "episode_id": None,
                "step_count": 0,
                "session_id": None,
                "done": True,
                "task": None,
                "reward_mode": None,
                "forked_from": None,
            }
        return {
            "episode_id": session.episode_id,
            "step_count": session.step_count,
            "session_id": session.id,
            "done": session.done,
            "task": session.task,
            "reward_mode": getattr(session.env, "reward_mode", None),
            "forked_from": session.forked_from,
        }

    def _parse_reset(self, data: dict[str, Any]) -> tuple[int | None, dict | None, tuple, str]:
        if not isinstance(data, dict):
            raise SessionError(
                'reset data must be a JSON object. Fix: send {} or {"seed": 0, "task": "<id>"}',
                ErrorCode.VALIDATION_ERROR,
                422,
            )
        unknown = sorted(set(data) - set(RESET_KEYS))
        if unknown:
            raise SessionError(
                f"unknown reset field(s) {unknown}. Fix: use {list(RESET_KEYS)}",
                ErrorCode.VALIDATION_ERROR,
                422,
            )
        checks = {
            "seed": int,
            "episode_id": str,
            "task": str,
            "options": dict,
            "reward_mode": str,
            "max_steps": int,
        }
        for name, typ in checks.items():
            value = data.get(name)
            if value is not None and (not isinstance(value, typ) or isinstance(value, bool)):
                raise SessionError(
                    f"reset field {name!r} must be {typ.__name__}, got {type(value).__name__}",
                    ErrorCode.VALIDATION_ERROR,
                    422,
                )
        if data.get("seed") is not None and data["seed"] < 0:
            raise SessionError("seed must be >= 0", ErrorCode.VALIDATION_ERROR, 422)
        if data.get("max_steps") is not None and data["max_steps"] < 1:
            raise SessionError("max_steps must be >= 1", ErrorCode.VALIDATION_ERROR, 422)
        options = dict(data.get("options") or {})
        if data.get("task") is not None:
            options["task"] = data["task"]
        if "task" in options and options["task"] not in self.tasks:
            raise SessionError(
                f"unknown task {options['task']!r}: this server serves "
                f"{sorted(self.tasks)}. Fix: pick one of them (GET /tasks)",
                ErrorCode.VALIDATION_ERROR,
                422,
            )
        key = (data.get("reward_mode"), data.get("max_steps"))
        return data.get("seed"), options or None, key, data.get("episode_id")


def _reset_env(env: gym.Env, seed: int | None, options: dict | None) -> tuple[str, dict]:
    return env.reset(seed=seed, options=options)
