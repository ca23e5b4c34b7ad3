"""The FastAPI app of ``repogym serve``: OpenEnv's HTTP + WebSocket + MCP API over repogym envs.

Endpoints (OpenEnv's, so ``openenv-core``'s clients and ``openenv validate`` work):

- ``GET /health``, ``GET /metadata``, ``GET /schema``, ``GET /tasks`` (public task info);
- ``WS /ws``: one session per connection; messages ``reset``/``step``/``state``/``close``,
  ``fork`` (a new session holding a copy of the running episode, answered
  ``{"type": "fork", "data": {"session_id", ...}}``; a new connection sending that id in
  ``X-Session-Id`` takes it) and ``mcp`` (a JSON-RPC request, :mod:`repogym.server.mcp`); a ``step``
  may also carry OpenEnv's MCP actions ``{"type": "list_tools"}`` and ``{"type": "call_tool",
  "tool_name": ..., "arguments": {...}}`` (``openenv``'s ``MCPToolClient``);
- ``POST /reset``, ``POST /step``, ``GET /state``: OpenEnv's stateless HTTP routes: without
  an ``X-Session-Id`` header each request gets a fresh env that is closed when it is
  answered (``/step`` resets it first). ``X-Session-Id: new`` on ``/reset`` opens a session
  kept between requests (its id comes back in the header and the body); later calls send
  it back, ``POST /fork`` forks its episode into a new session (its id in the body),
  ``POST /close`` ends it;
- ``POST /mcp`` / ``DELETE /mcp`` (MCP over HTTP) and ``WS /mcp`` (JSON-RPC frames).

Every error carries one :class:`~repogym.envs.remote.ErrorCode` (HTTP: ``{"detail",
"code"}`` with a 4xx/5xx status; WebSocket: ``{"type": "error", "data": {"message",
"code"}}``); every malformed frame (not JSON, binary, too deep, a huge number) is answered
that way and the session goes on. A full server answers 503 (HTTP, and the WebSocket
handshake); with a token, every endpoint but ``/health`` wants ``Authorization: Bearer``.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import HTTPException, RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from repogym.envs.remote import SESSION_HEADER, ErrorCode, action_text
from repogym.server import mcp
from repogym.server.protocol import (
    HTTP_RESET,
    HTTP_STEP,
    FrameError,
    parse,
    parse_object,
    reason,
)
from repogym.server.schema import RepoAction, RepoObservation, RepoState, ResetBody, StepBody
from repogym.server.sessions import ServerSession, SessionError, SessionManager
from repogym.version import __version__

log = logging.getLogger("repogym.server")
MCP_SESSION_HEADER = "Mcp-Session-Id"
#: The OpenEnv HTTP API version this server implements (``openapi.json`` info.version).
API_VERSION = "1.0.0"
_NEW = "new"


def _error(status: int, message: str, code: ErrorCode) -> JSONResponse:
    return JSONResponse(
        {"detail": message, "code": str(code)},
        status_code=status,
        headers={"Retry-After": "5"} if status == 503 else None,
    )


def _problems(e: ValidationError | RequestValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())


def _body_schema(model: type) -> dict[str, Any]:
    return {
        "requestBody": {
            "content": {"application/json": {"schema": model.model_json_schema()}},
            "required": False,
        }
    }


def create_app(
    manager: SessionManager, *, token: str | None = None, name: str = "repogym"
) -> FastAPI:
    """The app serving ``manager``'s sessions.

    Args:
        manager: Owns the sessions and builds their envs.
        token: If set, the bearer token every request but ``GET /health`` must carry.
        name: Shown by ``GET /metadata``.
    """
    handler = mcp.McpHandler(manager)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        manager.start_reaper()
        try:
            yield
        finally:  # SIGTERM/SIGINT: uvicorn closes the sockets, then this closes every env
            await manager.close_all()

    app = FastAPI(
        title="repogym env server",
        version=API_VERSION,
        lifespan=lifespan,
        description="OpenEnv-compatible server for repogym environments.",
    )

    def authorized(header: str | None) -> bool:
        if token is None:
            return True
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), token)

    @app.middleware("http")
    async def check_token(request: Request, call_next: Any) -> Response:
        if request.url.path != "/health" and not authorized(request.headers.get("authorization")):
            return _error(
                401,
                "missing or wrong bearer token. Fix: send 'Authorization: "
                "Bearer <token>' (the token `repogym serve --token` was given)",
                ErrorCode.SESSION_ERROR,
            )
        return await call_next(request)

    @app.exception_handler(SessionError)
    async def session_error(request: Request, exc: SessionError) -> JSONResponse:
        return _error(exc.status, str(exc), exc.code)

    @app.exception_handler(FrameError)
    async def frame_error(request: Request, exc: FrameError) -> JSONResponse:
        return _error(400 if exc.code == ErrorCode.INVALID_JSON else 422, str(exc), exc.code)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(
            422,
            f"malformed request: {_problems(exc)}. Fix: see GET /schema",
            ErrorCode.VALIDATION_ERROR,
        )

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        code = ErrorCode.INVALID_JSON if exc.status_code == 400 else ErrorCode.VALIDATION_ERROR
        return _error(exc.status_code, str(exc.detail), code)

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("request failed")
        return _error(500, f"{type(exc).__name__}: {exc}", ErrorCode.EXECUTION_ERROR)

    _info_routes(app, manager, name)
    _http_routes(app, manager)
    _mcp_routes(app, manager, handler)

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await _serve_socket(
            websocket,
            manager,
            authorized,
            "ws",
            lambda s, raw, binary: _ws_message(manager, handler, s, raw, binary),
        )

    @app.websocket("/mcp")
    async def ws_mcp(websocket: WebSocket) -> None:
        await _serve_socket(
            websocket,
            manager,
            authorized,
            "mcp-ws",
            lambda s, raw, binary: _ws_rpc(handler, s, raw, binary),
        )

    return app


def _info_routes(app: FastAPI, manager: SessionManager, name: str) -> None:
    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "healthy",
            "sessions": len(manager.sessions),
            "max_sessions": manager.max_sessions,
            "expired": manager.expired,
        }

    @app.get("/metadata")
    async def metadata() -> dict[str, Any]:
        return {
            "name": name,
            "version": __version__,
            "description": f"repogym coding tasks ({len(manager.tasks)}): fix a bug in a "
            "sandboxed repository; hidden tests grade the diff.",
            "tools": [t["name"] for t in mcp.mcp_tools()],
        }

    @app.get("/schema")
    async def schema() -> dict[str, Any]:
        return {
            "action": RepoAction.model_json_schema(),
            "observation": RepoObservation.model_json_schema(),
            "state": RepoState.model_json_schema(),
        }

    @app.get("/tasks")
    async def tasks() -> list[dict[str, Any]]:
        return list(manager.tasks.values())


def _http_routes(app: FastAPI, manager: SessionManager) -> None:
    """OpenEnv's HTTP routes: an episode's and a session's."""
    _http_episode_routes(app, manager)
    _http_session_routes(app, manager)


async def _body_of(request: Request, model: type, example: str) -> Any:
    """The request's JSON body as ``model`` (an empty body: the model's defaults)."""
    raw = await request.body()
    data = parse_object(raw, example=example) if raw.strip() else {}
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise SessionError(
            f"malformed request: {_problems(e)}. Fix: e.g. {example} (the "
            "fields are in GET /schema)",
            ErrorCode.VALIDATION_ERROR,
            422,
        ) from e


def _session_of(manager: SessionManager, request: Request) -> ServerSession | None:
    """The session the request's session header names (None without the header)."""
    sid = request.headers.get(SESSION_HEADER)
    return manager.get(sid) if sid else None


def _http_episode_routes(app: FastAPI, manager: SessionManager) -> None:
    """``POST /reset`` and ``POST /step``: in a session, or stateless without its header."""

    @app.post("/reset", openapi_extra=_body_schema(ResetBody))
    async def reset(request: Request) -> JSONResponse:
        body = (await _body_of(request, ResetBody, HTTP_RESET)).model_dump(exclude_unset=True)
        sid = request.headers.get(SESSION_HEADER)
        if not sid:  # OpenEnv's stateless reset: a fresh env, closed once answered
            return JSONResponse(await manager.stateless(body))
        session = manager.open("http") if sid == _NEW else manager.get(sid)
        try:
            payload = await manager.reset(session, body)
        except BaseException:
            if sid == _NEW:  # the session this request opened is of no use
                await manager.close(session)
            raise
        return JSONResponse(
            {**payload, "session_id": session.id}, headers={SESSION_HEADER: session.id}
        )

    @app.post("/step", openapi_extra=_body_schema(StepBody))
    async def step(request: Request) -> JSONResponse:
        body = await _body_of(request, StepBody, HTTP_STEP)
        try:
            action_text(body.action)
        except (ValueError, TypeError) as e:  # in HTTP's terms: the action is a field
            raise SessionError(
                f"action: {reason(str(e))}. Fix: {HTTP_STEP}, or "
                'POST /step {"action": {"text": "<agent output>"}}',
                ErrorCode.VALIDATION_ERROR,
                422,
            ) from e
        session = _session_of(manager, request)
        if session is None:  # stateless: a fresh env, reset, stepped once, closed
            return JSONResponse(await manager.stateless({}, body.action))
        payload = await manager.step(session, body.action)
        return JSONResponse({**payload, "session_id": session.id})


def _http_session_routes(app: FastAPI, manager: SessionManager) -> None:
    """``GET /state``, ``POST /fork`` and ``POST /close`` of the session the header names."""

    @app.get("/state")
    async def state(request: Request) -> dict:
        return manager.state(_session_of(manager, request))

    @app.post("/fork")
    async def fork(request: Request) -> dict:
        session = _session_of(manager, request)
        if session is None:
            raise SessionError(
                f"no {SESSION_HEADER} header: only a session's episode can be "
                f"forked. Fix: POST /reset with '{SESSION_HEADER}: new' first",
                ErrorCode.SESSION_ERROR,
                400,
            )
        return manager.state(await manager.fork(session))

    @app.post("/close")
    async def close(request: Request) -> dict:
        session = _session_of(manager, request)
        if session is None:
            raise SessionError(
                f"no {SESSION_HEADER} header: only a session can be closed. "
                f"Fix: send the id POST /reset with '{SESSION_HEADER}: new' "
                "returned",
                ErrorCode.SESSION_ERROR,
                400,
            )
        await manager.close(session)
        return {"closed": session.id}


def _mcp_routes(app: FastAPI, manager: SessionManager, handler: mcp.McpHandler) -> None:
    @app.post("/mcp")
    async def mcp_post(request: Request) -> Response:
        try:
            message = parse(await request.body())
        except FrameError as e:
            return JSONResponse(
                mcp.error(mcp.RpcCode.PARSE_ERROR, str(e), data={"code": str(e.code)})
            )
        sid = request.headers.get(MCP_SESSION_HEADER)
        session = manager.sessions.get(sid) if sid else None
        if sid and session is None:  # MCP: an unknown session is 404; the client re-inits
            return JSONResponse(
                mcp.error(
                    mcp.RpcCode.INVALID_PARAMS,
                    f"no session {sid!r} (closed or expired). Fix: initialize again",
                ),
                status_code=404,
            )
        reset = {k: v for k, v in request.query_params.items() if k in ("task", "seed")}
        if "seed" in reset:
            reset["seed"] = int(reset["seed"]) if reset["seed"].isdigit() else reset["seed"]
        reply, opened = await handler.handle(message, session=session, reset=reset)
        if reply is None:
            return Response(status_code=202)
        headers = {MCP_SESSION_HEADER: opened.id} if opened is not None else None
        return JSONResponse(reply, headers=headers)

    @app.delete("/mcp")
    async def mcp_delete(request: Request) -> Response:
        sid = request.headers.get(MCP_SESSION_HEADER)
        session = manager.sessions.get(sid) if sid else None
        if session is None:
            return _error(
                404,
                f"no session {sid!r}. Fix: send the {MCP_SESSION_HEADER} that initialize returned",
                ErrorCode.SESSION_ERROR,
            )
        await manager.close(session)
        return Response(status_code=200)

    @app.get("/mcp")
    async def mcp_get() -> Response:  # MCP: no server-initiated stream is offered
        return Response(status_code=405, headers={"Allow": "POST, DELETE"})


# -- WebSockets -----------------------------------------------------------------------------
#: Answers one frame: the replies to send (none for a notification), or None to close.
Reply = Callable[[ServerSession, str | None, bool], Awaitable[list[dict[str, Any]] | None]]


async def _deny(websocket: WebSocket, status: int, message: str) -> None:
    """Refuse a WebSocket handshake with an HTTP status (503 when full, 401 without token)."""
    code = ErrorCode.CAPACITY_REACHED if status == 503 else ErrorCode.SESSION_ERROR
    headers = {"content-type": "application/json"}
    if status == 503:
        headers["retry-after"] = "5"
    body = json.dumps({"detail": message, "code": str(code)})
    await websocket.send_denial_response(Response(body, status_code=status, headers=headers))


def _ws_error(message: str, code: ErrorCode) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": str(code)}}


async def _send(websocket: WebSocket, reply: dict[str, Any]) -> None:
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):
        await websocket.send_text(json.dumps(reply))


async def _serve_socket(
    websocket: WebSocket,
    manager: SessionManager,
    authorized: Callable[[str | None], bool],
    kind: str,
    answer: Reply,
) -> None:
    """One session per connection; ``answer`` replies to each frame (None: close)."""
    if not authorized(websocket.headers.get("authorization")):
        await _deny(websocket, 401, "missing or wrong bearer token")
        return
    try:
        sid = websocket.headers.get(SESSION_HEADER)
        session = manager.adopt(sid, kind) if sid else manager.open(kind)
    except SessionError as e:
        await _deny(websocket, e.status, str(e))
        return
    await websocket.accept()

    async def expire() -> None:
        await _send(
            websocket,
            _ws_error(
                f"session expired after {manager.ttl_s}s idle; its "
                "sandbox was deleted. Fix: reconnect and reset",
                ErrorCode.SESSION_ERROR,
            ),
        )
        await websocket.close(code=1001, reason="session expired")

    session.on_expire = expire
    try:
        while True:
            frame = await websocket.receive()
            if frame["type"] == "websocket.disconnect":
                return
            replies = await answer(session, frame.get("text"), frame.get("text") is None)
            if replies is None:
                return
            for reply in replies:
                await _send(websocket, reply)
    except WebSocketDisconnect:
        pass
    finally:
        await manager.close(session)
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await websocket.close()


async def _ws_message(
    manager: SessionManager,
    handler: mcp.McpHandler,
    session: ServerSession,
    raw: str | None,
    binary: bool,
) -> list[dict[str, Any]] | None:
    """The answer to one ``/ws`` frame (None after ``close``)."""
    reply = await _ws_reply(manager, handler, session, raw, binary)
    return None if reply is None else [reply]


async def _ws_reply(
    manager: SessionManager,
    handler: mcp.McpHandler,
    session: ServerSession,
    raw: str | None,
    binary: bool,
) -> dict[str, Any] | None:
    try:
        message = parse_object(raw, binary=binary)
    except FrameError as e:
        return _ws_error(str(e), e.code)
    kind = message.get("type")
    data = message.get("data")
    try:
        if kind == "reset":
            return {"type": "observation", "data": await manager.reset(session, data or {})}
        if kind == "step":
            return {"type": "observation", "data": await _ws_step(manager, session, data)}
        if kind == "state":
            return {"type": "state", "data": manager.state(session)}
        if kind == "fork":
            return {"type": "fork", "data": manager.state(await manager.fork(session))}
        if kind == "mcp":
            reply, _ = await handler.handle(data, session=session)
            return {"type": "mcp", "data": reply or {}}
        if kind == "close":
            return None
        return _ws_error(
            f"unknown message type {kind!r}. Fix: send one of reset, step, state, mcp, close",
            ErrorCode.UNKNOWN_TYPE,
        )
    except SessionError as e:
        return _ws_error(str(e), e.code)
    except Exception as e:  # reported to the client; the server goes on
        log.exception("session %s: %s failed", session.id, kind)
        return _ws_error(f"{type(e).__name__}: {e}", ErrorCode.EXECUTION_ERROR)


async def _ws_step(manager: SessionManager, session: ServerSession, data: Any) -> dict[str, Any]:
    """A step; OpenEnv's MCP actions (``list_tools``, ``call_tool``) are answered as its
    ``MCPToolClient`` expects."""
    mcp_kind = data.get("type") if isinstance(data, dict) else None
    if mcp_kind == "list_tools":
        return {
            "observation": {"tools": mcp.mcp_tools(), "metadata": {}},
            "reward": None,
            "done": session.done,
        }
    if mcp_kind == "call_tool":
        action = {"tool": data.get("tool_name"), "args": data.get("arguments") or {}}
        payload = await manager.step(session, action)
        observation = {
            **payload["observation"],
            "tool_name": action["tool"],
            "result": mcp.call_result(payload, action["tool"]),
            "error": None,
        }
        return {**payload, "observation": observation}
    return await manager.step(session, data)


async def _ws_rpc(
    handler: mcp.McpHandler, session: ServerSession, raw: str | None, binary: bool
) -> list[dict[str, Any]]:
    """The answer to one ``WS /mcp`` frame (a JSON-RPC request; none to a notification)."""
    try:
        message = parse(raw, binary=binary)
    except FrameError as e:
        return [mcp.error(mcp.RpcCode.PARSE_ERROR, str(e), data={"code": str(e.code)})]
    reply, _ = await handler.handle(message, session=session)
    return [] if reply is None else [reply]
