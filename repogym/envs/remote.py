"""RemoteEnv: a repogym environment served by ``repogym serve``, used over a WebSocket.

The wire format is OpenEnv's (the ``openenv-core`` package's ``EnvClient`` speaks it):
the client sends ``{"type": "reset" | "step" | "state" | "close", "data": {...}}`` and the
server answers ``{"type": "observation" | "state" | "error", "data": {...}}``. An
observation's ``data`` is ``{"observation": {"text", "info", "terminated", "truncated"},
"reward", "done"}``. This module holds that format (the server imports it from here) and the
Gymnasium client.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import json
from typing import Any, SupportsFloat

import gymnasium as gym

from repogym.envs.info import ResetInfo, StepInfo
from repogym.envs.repo_env import TextSpace

#: The header naming an existing server session (HTTP requests; a WebSocket connection
#: that takes a fork).
SESSION_HEADER = "X-Session-Id"
#: Keys a client may send in a ``reset`` message's ``data``.
RESET_KEYS = ("seed", "episode_id", "task", "options", "reward_mode", "max_steps")
#: Keys of a ``step`` message's ``data``: raw agent text, or a structured tool call.
STEP_KEYS = ("text", "tool", "args", "metadata")


class ErrorCode(enum.StrEnum):
    """Every error code of the wire format, server and client alike: OpenEnv's
    ``WSErrorCode`` values, sent in HTTP error bodies and WebSocket error messages."""

    INVALID_JSON = "INVALID_JSON"  # not JSON text (binary frame, too deep, a huge number)
    UNKNOWN_TYPE = "UNKNOWN_TYPE"  # a message type the server does not know
    VALIDATION_ERROR = "VALIDATION_ERROR"  # JSON, but not a valid request
    EXECUTION_ERROR = "EXECUTION_ERROR"  # the server failed while serving it
    CAPACITY_REACHED = "CAPACITY_REACHED"  # every session slot is taken
    FACTORY_ERROR = "FACTORY_ERROR"  # the session's env could not be built
    SESSION_ERROR = "SESSION_ERROR"  # no such session, or not in a state to serve this


class RemoteEnvError(RuntimeError):
    """The server refused a request or could not be reached; the message says why."""

    def __init__(self, message: str, code: str = ErrorCode.EXECUTION_ERROR) -> None:
        super().__init__(message)
        self.code = code


def step_payload(
    obs: str, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]
) -> dict[str, Any]:
    """The ``data`` of an observation message (OpenEnv's serialised observation)."""
    return {
        "observation": {
            "text": obs,
            "info": info,
            "terminated": terminated,
            "truncated": truncated,
        },
        "reward": reward,
        "done": terminated or truncated,
    }


def action_text(data: dict[str, Any]) -> str:
    """The raw action text for ``RepoEnv.step`` from a ``step`` message's ``data``.

    ``{"text": "..."}`` passes the agent's text through unchanged (the env parses it, and a
    malformed call becomes an observation); ``{"tool": name, "args": {...}}`` is a structured
    call, sent to the env as the JSON tool-call form.

    Raises:
        ValueError, TypeError: the data is neither form (a malformed request, not a
            malformed action).
    """
    if not isinstance(data, dict):
        raise TypeError(
            f"step data must be a JSON object, got {type(data).__name__}. "
            'Fix: send {"text": "<agent output>"} or {"tool": ..., "args": {...}}'
        )
    unknown = sorted(set(data) - set(STEP_KEYS))
    if unknown:
        raise ValueError(f"unknown step field(s) {unknown}. Fix: use {list(STEP_KEYS)}")
    has_text, has_tool = "text" in data, "tool" in data
    if has_text == has_tool:
        raise ValueError(
            'step data needs exactly one of "text" (the agent\'s raw output) or '
            '"tool" (with "args"). Fix: send {"text": "..."}'
        )
    if has_text:
        if not isinstance(data["text"], str):
            raise ValueError('"text" must be a string. Fix: send the agent\'s output as text')
        return data["text"]
    args = data.get("args", {})
    if not isinstance(data["tool"], str) or not isinstance(args, dict):
        raise TypeError(
            '"tool" must be a string and "args" an object. Fix: e.g. '
            '{"tool": "bash", "args": {"command": "ls"}}'
        )
    return json.dumps({"tool": data["tool"], "args": args})


class RemoteEnv(gym.Env[str, str]):
    """A repogym env served by ``repogym serve``: the same observations, rewards and ``info``.

    ## Description
    Each instance holds one WebSocket session (its own sandbox on the server). ``reset``
    opens the connection when needed; ``close`` ends the session, and the server deletes
    the session's sandbox. Grading happens on the server; hidden tests never leave it.

    ## Action Space / Observation Space
    ``TextSpace``, as :class:`~repogym.envs.RepoEnv`.

    ## Rewards / Episode End
    As the served env: reward from the hidden tests on the last step, terminated by
    ``submit``, truncated at the step budget or when the sandbox fails (``infra_error``).

    ## Arguments
    ``url`` (``http://host:port`` or ``ws://host:port``), ``task`` (a task id the server
    serves; None lets the server draw one per reset), ``token`` (bearer token of a server
    started with ``--token``), ``reward_mode`` and ``max_steps`` (per-session overrides),
    ``render_mode`` ("ansi"), ``connect_timeout_s``, ``step_timeout_s`` (per message).
    The budget must be given as ``max_steps`` (sent to the server, which grades the last
    step); a ``TimeLimit`` outside the env (``max_episode_steps=``) truncates on the client
    only, without grading.

    ## Version History
    * v0: initial release.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # Gymnasium convention

    def __init__(
        self,
        url: str,
        task: str | None = None,
        *,
        token: str | None = None,
        reward_mode: str | None = None,
        max_steps: int | None = None,
        render_mode: str | None = None,
        connect_timeout_s: float = 30.0,
        step_timeout_s: float | None = 900.0,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unsupported render_mode {render_mode!r}. Fix: use 'ansi' or None")
        self.url = url.rstrip("/")
        self.task = task
        self.token = token
        self.reward_mode = reward_mode
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.connect_timeout_s = connect_timeout_s
        self.step_timeout_s = step_timeout_s
        self.observation_space = TextSpace()
        self.action_space = TextSpace()
        self._ws: Any = None
        self._stack: contextlib.ExitStack | None = None
        self._done = True
        self._transcript: list[str] = []
        #: A server session (a fork) the next connection takes instead of opening one.
        self._adopt: str | None = None

    # -- connection ------------------------------------------------------------------------
    def _ws_url(self) -> str:
        for http, ws in (("http://", "ws://"), ("https://", "wss://")):
            if self.url.startswith(http):
                return ws + self.url[len(http) :] + "/ws"
        if self.url.startswith(("ws://", "wss://")):
            return self.url + "/ws"
        raise ValueError(f"url {self.url!r} has no scheme. Fix: e.g. http://127.0.0.1:8000")

    def _connect(self) -> Any:
        if self._ws is not None:
            return self._ws
        try:
            from websockets.exceptions import InvalidStatus
            from websockets.sync.client import connect
        except ImportError as e:
            raise RemoteEnvError(
                "RemoteEnv needs the websockets package. Fix: pip install 'repogym[serve]'"
            ) from e
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if self._adopt is not None:
            headers[SESSION_HEADER] = self._adopt
        stack = contextlib.ExitStack()
        try:
            self._ws = stack.enter_context(
                connect(
                    self._ws_url(),
                    additional_headers=headers,
                    open_timeout=self.connect_timeout_s,
                    max_size=None,
                    ping_interval=None,
                )
            )  # a busy server answers late; step_timeout_s
            # bounds the wait instead of keepalives
        except InvalidStatus as e:
            status = e.response.status_code
            body = e.response.body.decode(errors="replace").strip() if e.response.body else ""
            code = ErrorCode.CAPACITY_REACHED if status == 503 else ErrorCode.SESSION_ERROR
            raise RemoteEnvError(
                f"{self.url} refused the session (HTTP {status}): {body}", code
            ) from e
        except OSError as e:
            raise RemoteEnvError(
                f"cannot reach {self.url}: {e}. Fix: start the server with "
                "`repogym serve --port PORT` and check the address"
            ) from e
        self._stack = stack
        self._adopt = None
        return self._ws

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        ws = self._connect()
        try:
            ws.send(json.dumps(message))
            reply = json.loads(ws.recv(timeout=self.step_timeout_s))
        except ConnectionClosed as e:
            self._disconnect()
            reason = e.rcvd.reason if e.rcvd is not None else "no reason given"
            raise RemoteEnvError(
                f"the server closed the session ({reason}). Fix: call reset() to start a new one",
                ErrorCode.SESSION_ERROR,
            ) from e
        except TimeoutError as e:
            raise RemoteEnvError(
                f"no answer from {self.url} within {self.step_timeout_s}s (step_timeout_s)"
            ) from e
        if reply.get("type") == "error":
            data = reply.get("data", {})
            raise RemoteEnvError(str(data.get("message", data)), data.get("code", ""))
        return reply.get("data", {})

    # -- Gymnasium API -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, ResetInfo]:
        super().reset(seed=seed)
        data: dict[str, Any] = {"seed": seed}
        options = dict(options or {})
        task = options.pop("task", self.task)
        if task is not None:
            data["task"] = task
        if options:
            data["options"] = options
        if self.max_steps:
            data["max_steps"] = self.max_steps
        if self.reward_mode:
            data["reward_mode"] = self.reward_mode
        try:
            reply = self._request({"type": "reset", "data": data})
        except RemoteEnvError as e:
            if e.code != ErrorCode.SESSION_ERROR or self._ws is not None:
                raise
            self._adopt = None  # a fork that expired before it was taken: a new session
            reply = self._request({"type": "reset", "data": data})  # expired: a new session
        obs = reply["observation"]
        self._done = False
        self._transcript = [obs["text"]]
        return obs["text"], obs["info"]

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, StepInfo]:
        if self._done:
            raise gym.error.ResetNeeded("step() after the episode ended. Fix: call reset()")
        reply = self._request({"type": "step", "data": {"text": str(action)}})
        obs = reply["observation"]
        self._done = bool(reply.get("done"))
        self._transcript += [f"$ {action}", obs["text"]]
        return (
            obs["text"],
            float(reply.get("reward") or 0.0),
            bool(obs["terminated"]),
            bool(obs["truncated"]),
            obs["info"],
        )

    def fork(self) -> RemoteEnv:
        """A new RemoteEnv in this one's state: the server forks the running episode into
        a session of its own (:meth:`repogym.envs.repo_env.RepoEnv.fork`: same files,
        shell state, step count and budget) and the new env connects to it. Neither sees
        the other's actions afterwards. Close it like any env.

        Raises:
            gymnasium.error.ResetNeeded: no episode is running.
            RemoteEnvError: the server could not fork it.
        """
        if self._done:
            raise gym.error.ResetNeeded(
                "fork() needs a running episode. Fix: call reset() and fork() before the last step"
            )
        reply = self._request({"type": "fork"})
        other = RemoteEnv(
            self.url,
            self.task,
            token=self.token,
            reward_mode=self.reward_mode,
            max_steps=self.max_steps,
            render_mode=self.render_mode,
            connect_timeout_s=self.connect_timeout_s,
            step_timeout_s=self.step_timeout_s,
        )
        other._adopt = reply["session_id"]
        other._done = False
        other._transcript = list(self._transcript)
        other._np_random = copy.deepcopy(self._np_random)
        other._connect()
        return other

    def state(self) -> dict[str, Any]:
        """The server's view of this session (episode id, step count, the task's public info)."""
        return self._request({"type": "state"})

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return "\n".join(self._transcript)
        return None

    def close(self) -> None:
        """End the session (the server deletes its sandbox). Idempotent."""
        if self._ws is not None:
            with contextlib.suppress(Exception):  # the connection may already be gone
                self._ws.send(json.dumps({"type": "close"}))
        self._disconnect()
        super().close()

    def _disconnect(self) -> None:
        self._ws = None
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()
