"""The MCP side of ``repogym serve``: JSON-RPC 2.0 ``tools/list`` and ``tools/call``.

The env's tools (``bash``, ``read``, ``write``, ``edit``, ``submit``) with their JSON
schemas, served the ways OpenEnv serves them and the way MCP clients expect:

- ``POST /mcp`` (MCP's streamable HTTP transport, answering in JSON): ``initialize`` opens
  a session, resets its env (``/mcp?task=<id>&seed=<n>`` picks the task) and answers the
  task's statement as the server's ``instructions`` and the session id in the
  ``Mcp-Session-Id`` header; ``tools/list``; ``tools/call`` steps the session's env;
  ``DELETE /mcp`` closes the session. OpenEnv's own session methods work too:
  ``openenv/session/create`` (params: the reset fields) and ``openenv/session/close``,
  with the id passed as ``params.session_id``. Without a session, ``tools/call`` is
  stateless, as OpenEnv defines it: a fresh env is reset, stepped once and closed;
- ``{"type": "mcp", "data": <JSON-RPC>}`` on ``/ws``, and JSON-RPC frames on ``WS /mcp``,
  over the connection's own session.

A ``tools/call`` result is MCP's ``CallToolResult``: the observation as text ``content``;
``structuredContent`` with ``observation``, ``reward``, ``terminated``, ``truncated``,
``done`` and ``info``; ``isError`` when the env refused the call (a malformed action). An
MCP session plays one episode: a call after it ended is an error result saying so.
"""

from __future__ import annotations

import enum
import json
from typing import Any

from repogym.envs.actions import TOOLS
from repogym.envs.remote import ErrorCode
from repogym.server.protocol import reason
from repogym.server.schema import tool_specs
from repogym.server.sessions import ServerSession, SessionError, SessionManager
from repogym.version import __version__

#: MCP protocol versions this server speaks, newest first.
PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")


class RpcCode(enum.IntEnum):
    """JSON-RPC 2.0 error codes (OpenEnv's ``JsonRpcErrorCode``)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_ERROR = -32000


class RpcError(Exception):
    """A JSON-RPC error to answer with (``data`` carries repogym's ErrorCode)."""

    def __init__(self, code: RpcCode, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


def mcp_tools() -> list[dict[str, Any]]:
    """The env's tools as MCP tool definitions (``name``, ``description``, ``inputSchema``)."""
    return [
        {"name": t["name"], "description": t["description"], "inputSchema": t["parameters"]}
        for t in tool_specs()
    ]


def error(code: RpcCode, message: str, request_id: Any = None, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response."""
    err: dict[str, Any] = {"code": int(code), "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": err}


def result(value: Any, request_id: Any) -> dict[str, Any]:
    """A JSON-RPC success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def call_result(payload: dict[str, Any], tool: str | None = None) -> dict[str, Any]:
    """MCP's CallToolResult of a step payload (see the module docstring).

    A call the env refused (``info["action_error"]``) is told why in MCP's terms: the tool's
    arguments and its ``inputSchema``, not the text-action forms the env's observation shows
    an agent that writes its calls as text.
    """
    obs = payload["observation"]
    info = obs.get("info") or {}
    text = obs["text"]
    if info.get("action_error") and tool in TOOLS:
        text = (
            f"Invalid arguments for tool {tool}: {reason(info['action_error'])}. Fix: call "
            f"{tool} with arguments like {json.dumps(TOOLS[tool].example)} (its "
            "inputSchema is in tools/list)"
        )
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {
            "observation": text,
            "reward": payload["reward"],
            "terminated": obs["terminated"],
            "truncated": obs["truncated"],
            "done": payload["done"],
            "info": info,
        },
        "isError": bool(info.get("action_error")),
    }


def _check(message: Any) -> tuple[str, dict[str, Any], Any, bool]:
    """(method, params, id, is_notification) of a JSON-RPC request, or RpcError."""
    if not isinstance(message, dict):
        raise RpcError(
            RpcCode.INVALID_REQUEST,
            "a JSON-RPC request must be an object (batches "
            'are not supported). Fix: send {"jsonrpc": "2.0", "method": ..., '
            '"id": 1}',
        )
    request_id = message.get("id")
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        raise RpcError(
            RpcCode.INVALID_REQUEST,
            'not a JSON-RPC 2.0 request: it needs "jsonrpc": "2.0" and a string "method"',
        )
    if request_id is not None and (
        isinstance(request_id, bool) or not isinstance(request_id, str | int)
    ):
        raise RpcError(RpcCode.INVALID_REQUEST, '"id" must be a string or an integer')
    params = message.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(RpcCode.INVALID_PARAMS, '"params" must be an object')
    return message["method"], params, request_id, "id" not in message


class McpHandler:
    """Answers JSON-RPC requests over one :class:`SessionManager`.

    Args:
        manager: The server's sessions.
    """

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager

    async def handle(
        self,
        message: Any,
        *,
        session: ServerSession | None = None,
        reset: dict[str, Any] | None = None,
        kind: str = "mcp",
    ) -> tuple[dict[str, Any] | None, ServerSession | None]:
        """Answer one request.

        Args:
            message: The parsed JSON-RPC request.
            session: The session it belongs to (a WebSocket's, or named by a header).
            reset: Reset fields for a session ``initialize`` opens (from the URL).
            kind: Kind of a session opened here.

        Returns:
            (response, or None for a notification; the session opened, if one was).
        """
        request_id = message.get("id") if isinstance(message, dict) else None
        opened: ServerSession | None = None
        try:
            method, params, request_id, notification = _check(message)
            if notification:
                return None, None
            session = self._named(params, session)
            if method == "initialize":
                value, opened = await self._initialize(params, session, reset or {}, kind)
            elif method == "openenv/session/create":
                value, opened = await self._create(params, session, kind)
            else:
                value = await self._dispatch(method, params, session)
            return result(value, request_id), opened
        except RpcError as e:
            return error(e.code, str(e), request_id, e.data), opened
        except SessionError as e:
            code = RpcCode.SERVER_ERROR if e.status >= 500 else RpcCode.INVALID_PARAMS
            return error(code, str(e), request_id, {"code": str(e.code)}), opened

    def _named(self, params: dict[str, Any], session: ServerSession | None) -> ServerSession | None:
        sid = params.get("session_id")
        if sid is None or (session is not None and sid == session.id):
            return session
        if not isinstance(sid, str) or sid not in self.manager.sessions:
            raise RpcError(
                RpcCode.INVALID_PARAMS,
                f"Unknown session_id: {sid!r}. Fix: "
                "openenv/session/create (or MCP initialize) first",
                {"code": str(ErrorCode.SESSION_ERROR)},
            )
        return self.manager.sessions[sid]

    async def _reset(self, session: ServerSession, data: dict[str, Any]) -> dict[str, Any]:
        return await self.manager.reset(session, data)

    async def _initialize(
        self,
        params: dict[str, Any],
        session: ServerSession | None,
        reset: dict[str, Any],
        kind: str,
    ) -> tuple[dict[str, Any], ServerSession | None]:
        opened = None
        if session is None:
            session = opened = self.manager.open(kind)
        try:
            if session.env is None:
                payload = await self._reset(session, reset)
                statement = payload["observation"]["text"]
            else:
                statement = session.first_observation or ""
        except BaseException:
            if opened is not None:
                await self.manager.close(opened)
            raise
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "repogym", "version": __version__},
            "instructions": statement,
        }, opened

    async def _create(
        self, params: dict[str, Any], session: ServerSession | None, kind: str
    ) -> tuple[dict[str, Any], ServerSession | None]:
        if session is not None:  # a WebSocket's own session
            return {"session_id": session.id}, None
        data = {k: v for k, v in params.items() if k != "session_id"}
        opened = self.manager.open(kind)
        try:
            payload = await self._reset(opened, data)
        except BaseException:
            await self.manager.close(opened)
            raise
        return {"session_id": opened.id, "observation": payload["observation"]["text"]}, opened

    async def _dispatch(
        self, method: str, params: dict[str, Any], session: ServerSession | None
    ) -> Any:
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": mcp_tools()}
        if method == "tools/call":
            return await self._call(params, session)
        if method == "openenv/session/close":
            if session is None:
                raise RpcError(RpcCode.INVALID_PARAMS, "Invalid params - 'session_id' is required")
            await self.manager.close(session)
            return {"session_id": session.id, "closed": True}
        raise RpcError(
            RpcCode.METHOD_NOT_FOUND,
            f"Method not found: {method}. Fix: use "
            "initialize, tools/list, tools/call, ping, openenv/session/create or "
            "openenv/session/close",
        )

    async def _call(self, params: dict[str, Any], session: ServerSession | None) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments") or {}
        names = [t["name"] for t in tool_specs()]
        if not isinstance(name, str) or name not in names:
            raise RpcError(
                RpcCode.INVALID_PARAMS,
                f"Tool not found: {name!r}. Fix: one of {names} (tools/list)",
            )
        if not isinstance(arguments, dict):
            raise RpcError(
                RpcCode.INVALID_PARAMS,
                '"arguments" must be an object. Fix: e.g. '
                f'{{"name": {json.dumps(name)}, "arguments": '
                f"{json.dumps(TOOLS[name].example)}}} (inputSchema in tools/list)",
            )
        action = {"tool": name, "args": arguments}
        if session is None:  # OpenEnv's stateless call: a fresh env, reset, one step, closed
            payload = await self.manager.stateless({}, action)
        else:
            if session.env is None:
                await self._reset(session, {})
            elif session.done:
                text = (
                    f"The episode has ended (reward {session.last_reward}). Fix: open a new "
                    "session (MCP initialize or openenv/session/create), or reset over /ws"
                )
                return {"content": [{"type": "text", "text": text}], "isError": True}
            payload = await self.manager.step(session, action)
        return call_result(payload, name)
