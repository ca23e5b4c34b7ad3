"""``repogym serve``: repogym envs over OpenEnv's HTTP/WebSocket API (needs ``repogym[serve]``).

Example::

    from repogym.server import ServeConfig, serve
    serve(ServeConfig(port=8000, split="test"))          # blocks until SIGTERM/SIGINT

    # elsewhere
    env = gym.make("repogym/retry-zero-v0", remote="http://127.0.0.1:8000")
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from repogym.scenarios.registry import suite_tasks
from repogym.scenarios.task import Task, select_tasks


@dataclasses.dataclass
class ServeConfig:
    """What ``repogym serve`` serves and how.

    Attributes:
        host: Address to bind (default loopback only).
        port: TCP port (0 picks a free one).
        suite: ``builtin`` (every registered task), a shipped suite fetched here
            (``realpy``) or a folder of task folders.
        task_ids: Serve only these tasks; clients name one per reset, or get one drawn.
        split: Serve only this split.
        tags: Serve only tasks with any of these tags.
        sandbox: Sandbox backend of every session.
        reward_mode: Default reward mode (a client may ask for another at reset).
        max_sessions: Sessions open at once; more get HTTP 503.
        ttl_s: Idle seconds after which a session is closed; None keeps sessions.
        token: Bearer token required from clients (None: no auth; bind loopback then).
        sandbox_options: Extra keyword arguments of the sandbox backend.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    suite: str = "builtin"
    task_ids: list[str] | None = None
    split: str | None = None
    tags: list[str] | None = None
    sandbox: str = "bwrap"
    reward_mode: str = "binary"
    max_sessions: int = 64
    ttl_s: float | None = 600.0
    token: str | None = None
    sandbox_options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ServeConfig:
        """The configuration from ``REPOGYM_SERVE_*`` variables (a container's way):
        ``HOST``, ``PORT``, ``SUITE``, ``TASKS`` (comma-separated), ``SPLIT``, ``TAGS``
        (comma-separated), ``SANDBOX``, ``REWARD_MODE``, ``MAX_SESSIONS``, ``TTL`` (0:
        never) and ``TOKEN``; unset ones keep the defaults."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            return env.get(f"REPOGYM_SERVE_{name}") or None

        def items(name: str) -> list[str] | None:
            value = get(name)
            return [v.strip() for v in value.split(",") if v.strip()] if value else None

        cfg = cls(
            token=get("TOKEN"), task_ids=items("TASKS"), tags=items("TAGS"), split=get("SPLIT")
        )
        for field, name, cast in (
            ("host", "HOST", str),
            ("port", "PORT", int),
            ("suite", "SUITE", str),
            ("sandbox", "SANDBOX", str),
            ("reward_mode", "REWARD_MODE", str),
            ("max_sessions", "MAX_SESSIONS", int),
            ("ttl_s", "TTL", float),
        ):
            if get(name) is not None:
                setattr(cfg, field, cast(get(name)))
        if cfg.ttl_s == 0:
            cfg.ttl_s = None
        return cfg

    def tasks(self) -> list[Task]:
        """The served tasks (the filters applied)."""
        if self.suite == "builtin":
            from repogym.scenarios.registry import registered_tasks

            pool = list(registered_tasks().values())
        else:
            pool = suite_tasks(self.suite)
        return select_tasks(pool, split=self.split, tags=self.tags, task_ids=self.task_ids)


def build_app(cfg: ServeConfig) -> Any:
    """The FastAPI app for ``cfg`` (each session gets a SuiteEnv over the served tasks)."""
    from repogym.envs import SuiteEnv
    from repogym.server.app import create_app
    from repogym.server.sessions import SessionManager

    tasks = cfg.tasks()

    def factory(reward_mode: str | None, max_steps: int | None) -> SuiteEnv:
        return SuiteEnv(
            tasks,
            sandbox=cfg.sandbox,
            reward_mode=reward_mode or cfg.reward_mode,
            max_steps=max_steps,
            sandbox_options=cfg.sandbox_options,
        )

    manager = SessionManager(
        factory, {t.id: t.info() for t in tasks}, max_sessions=cfg.max_sessions, ttl_s=cfg.ttl_s
    )
    return create_app(manager, token=cfg.token)


def serve(cfg: ServeConfig) -> None:
    """Run the server until SIGTERM/SIGINT; every session's sandbox is deleted on the way out."""
    try:
        import uvicorn
    except ImportError as e:
        raise RuntimeError(
            "repogym serve needs fastapi and uvicorn. Fix: pip install 'repogym[serve]'"
        ) from e
    # Keepalive pings are answered late by a loaded machine (64 sessions grading at once on
    # two cores missed uvicorn's default 20 s): a generous timeout, and the session TTL (not
    # the pings) reaps clients that went away.
    config = uvicorn.Config(
        build_app(cfg),
        host=cfg.host,
        port=cfg.port,
        log_level="warning",
        timeout_graceful_shutdown=60,
        ws_max_size=64 << 20,
        ws_ping_interval=30.0,
        ws_ping_timeout=300.0,
    )
    uvicorn.Server(config).run()


__all__ = ["ServeConfig", "build_app", "serve"]
