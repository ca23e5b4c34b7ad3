"""The FastAPI app of ``repogym serve``: OpenEnv's HTTP + WebSocket API over repogym envs.

Endpoints (OpenEnv's, so ``openenv-core``'s ``EnvClient`` drives an episode over ``/ws``):

- ``GET /health``, ``GET /metadata``, ``GET /schema``, ``GET /tasks`` (public task info);
- ``WS /ws``: one session per connection; messages ``reset``/``step``/``state``/``close``;
- ``POST /reset``, ``POST /step``, ``GET /state``, ``POST /close``: the same over HTTP. Unlike
  OpenEnv's stateless HTTP routes, these keep a session: ``/reset`` without an
  ``X-Session-Id`` header opens one and returns its id (header and body), later calls
  send it back.

A full server answers 503 (HTTP, and the WebSocket handshake); a bad request gets a 4xx
with a message that names the fix; with a token, every endpoint but ``/health`` wants
``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Body, FastAPI, Header, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from repogym.envs.remote import (
    CAPACITY_REACHED,
    EXECUTION_ERROR,
    INVALID_JSON,
    SESSION_ERROR,
    UNKNOWN_TYPE,
    VALIDATION_ERROR,
)
from repogym.server.schema import RepoAction, RepoObservation, RepoState, ResetBody, StepBody
from repogym.server.sessions import Session, SessionError, SessionManager

log = logging.getLogger("repogym.server")
SESSION_HEADER = "X-Session-Id"


def _error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse({"detail": message, "code": code}, status_code=status,
                        headers={"Retry-After": "5"} if status == 503 else None)


def create_app(manager: SessionManager, *, token: str | None = None,
               name: str = "repogym") -> FastAPI:
    """The app serving ``manager``'s sessions.

    Args:
        manager: Owns the sessions and builds their envs.
        token: If set, the bearer token every request but ``GET /health`` must carry.
        name: Shown by ``GET /metadata``.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        manager.start_reaper()
        try:
            yield
        finally:  # SIGTERM/SIGINT: uvicorn closes the sockets, then this closes every env
            await manager.close_all()

    app = FastAPI(title="repogym env server", lifespan=lifespan,
                  description="OpenEnv-compatible server for repogym environments.")

    def authorized(header: str | None) -> bool:
        if token is None:
            return True
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), token)

    @app.middleware("http")
    async def check_token(request: Request, call_next: Any) -> Response:
        if request.url.path != "/health" and not authorized(request.headers.get("authorization")):
            return _error(401, "missing or wrong bearer token. Fix: send 'Authorization: "
                          "Bearer <token>' (the token `repogym serve --token` was given)",
                          SESSION_ERROR)
        return await call_next(request)

    @app.exception_handler(SessionError)
    async def session_error(request: Request, exc: SessionError) -> JSONResponse:
        return _error(exc.status, str(exc), exc.code)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                             for e in exc.errors())
        return _error(422, f"malformed request: {problems}. Fix: see GET /schema",
                      VALIDATION_ERROR)

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("request failed")
        return _error(500, f"{type(exc).__name__}: {exc}", EXECUTION_ERROR)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "healthy", "sessions": len(manager.sessions),
                "max_sessions": manager.max_sessions, "expired": manager.expired}

    @app.get("/metadata")
    async def metadata() -> dict[str, Any]:
        from repogym import __version__

        return {"name": name, "version": __version__,
                "description": f"repogym coding tasks ({len(manager.tasks)}): fix a bug in a "
                               "sandboxed repository; hidden tests grade the diff."}

    @app.get("/schema")
    async def schema() -> dict[str, Any]:
        return {"action": RepoAction.model_json_schema(),
                "observation": RepoObservation.model_json_schema(),
                "state": RepoState.model_json_schema()}

    @app.get("/tasks")
    async def tasks() -> list[dict[str, Any]]:
        return list(manager.tasks.values())

    @app.post("/reset")
    async def reset(body: ResetBody = Body(default_factory=ResetBody),  # noqa: B008
                    session_id: str | None = Header(None, alias=SESSION_HEADER)) -> JSONResponse:
        session = manager.get(session_id) if session_id else manager.open("http")
        try:
            payload = await manager.reset(session, body.model_dump(exclude_unset=True))
        except BaseException:
            if not session_id:  # the session this request opened is of no use
                await manager.close(session)
            raise
        return JSONResponse({**payload, "session_id": session.id},
                            headers={SESSION_HEADER: session.id})

    def http_session(session_id: str | None) -> Session:
        if not session_id:
            raise SessionError(f"no {SESSION_HEADER} header. Fix: POST /reset first and send "
                               f"back the {SESSION_HEADER} it returned", SESSION_ERROR, 400)
        return manager.get(session_id)

    @app.post("/step")
    async def step(body: StepBody,
                   session_id: str | None = Header(None, alias=SESSION_HEADER)) -> JSONResponse:
        session = http_session(session_id)
        payload = await manager.step(session, body.action)
        return JSONResponse({**payload, "session_id": session.id})

    @app.get("/state")
    async def state(session_id: str | None = Header(None, alias=SESSION_HEADER)) -> dict:
        return manager.state(http_session(session_id))

    @app.post("/close")
    async def close(session_id: str | None = Header(None, alias=SESSION_HEADER)) -> dict:
        await manager.close(http_session(session_id))
        return {"closed": session_id}

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        if not authorized(websocket.headers.get("authorization")):
            await _deny(websocket, 401, "missing or wrong bearer token")
            return
        try:
            session = manager.open("ws")
        except SessionError as e:
            await _deny(websocket, e.status, str(e))
            return
        await websocket.accept()

        async def expire() -> None:
            await _send_error(websocket, f"session expired after {manager.ttl_s}s idle; its "
                              "sandbox was deleted. Fix: reconnect and reset", SESSION_ERROR)
            await websocket.close(code=1001, reason="session expired")

        session.on_expire = expire
        try:
            await _serve_ws(websocket, manager, session)
        except WebSocketDisconnect:
            pass
        finally:
            await manager.close(session)
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                await websocket.close()

    return app


async def _deny(websocket: WebSocket, status: int, message: str) -> None:
    """Refuse a WebSocket handshake with an HTTP status (503 when full, 401 without token)."""
    body = json.dumps({"detail": message,
                       "code": CAPACITY_REACHED if status == 503 else SESSION_ERROR})
    headers = {"content-type": "application/json"}
    if status == 503:
        headers["retry-after"] = "5"
    await websocket.send_denial_response(Response(body, status_code=status, headers=headers))


async def _send_error(websocket: WebSocket, message: str, code: str) -> None:
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):
        await websocket.send_text(json.dumps({"type": "error",
                                              "data": {"message": message, "code": code}}))


async def _serve_ws(websocket: WebSocket, manager: SessionManager, session: Session) -> None:
    """Answer one session's messages until it sends ``close`` or disconnects."""
    while True:
        raw = await websocket.receive_text()
        try:
            message = json.loads(raw)
        except json.JSONDecodeError as e:
            await _send_error(websocket, f"invalid JSON: {e}", INVALID_JSON)
            continue
        kind = message.get("type") if isinstance(message, dict) else None
        try:
            if kind == "reset":
                reply = {"type": "observation",
                         "data": await manager.reset(session, message.get("data") or {})}
            elif kind == "step":
                reply = {"type": "observation",
                         "data": await manager.step(session, message.get("data"))}
            elif kind == "state":
                reply = {"type": "state", "data": manager.state(session)}
            elif kind == "close":
                return
            else:
                await _send_error(websocket, f"unknown message type {kind!r}. Fix: send one of "
                                  "reset, step, state, close", UNKNOWN_TYPE)
                continue
        except SessionError as e:
            await _send_error(websocket, str(e), e.code)
            continue
        except Exception as e:  # reported to the client; the server goes on
            log.exception("session %s: %s failed", session.id, kind)
            await _send_error(websocket, f"{type(e).__name__}: {e}", EXECUTION_ERROR)
            continue
        await websocket.send_text(json.dumps(reply))
