"""What a run records about itself so its results can be published: the model, the endpoint's
host, the sampling settings, every agent option, the task set, the dates and repogym's
version and git commit (``run.json``'s ``provenance``).

Nothing secret is recorded: a URL keeps only its scheme, host and port (no user, password,
path or query, where providers put keys and deployment names), and an option whose name says
it holds a secret (``api_key``, ``token``, ``password``...) is replaced by ``<redacted>``
(``api_key_env`` names a variable, not a key, and is kept).
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

from repogym.harness.baselines import AgentError, resolve_agent_class
from repogym.version import __version__

#: Agent options that are sampling settings, shown apart on the leaderboard.
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_tokens",
    "max_new_tokens",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "do_sample",
    "seed",
    "stop",
)
REDACTED = "<redacted>"
_SECRET_NAME = re.compile(
    r"(^|_)(api_?key|key|secret|password|passwd|token|auth|"
    r"credentials?|bearer)$",
    re.IGNORECASE,
)
_REPO_ROOT = Path(__file__).resolve().parents[2]


def endpoint_of(url: Any) -> str | None:
    """``scheme://host[:port]`` of an http(s) URL (no credentials, path or query), else None."""
    if not isinstance(url, str):
        return None
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{parts.hostname}{port}"


def public_args(args: dict[str, Any]) -> dict[str, Any]:
    """``args`` safe to record and show: URLs cut to their endpoint, secrets redacted."""
    out: dict[str, Any] = {}
    for k, v in args.items():
        if _SECRET_NAME.search(k) and v not in (None, ""):
            out[k] = REDACTED
        else:
            out[k] = endpoint_of(v) or v
    return out


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def effective_args(agent: str, agent_args: dict[str, Any]) -> dict[str, Any]:
    """Every constructor option of ``agent`` with the value the run uses: its default unless
    ``agent_args`` sets it (options without a JSON-able default are listed only when set)."""
    try:
        cls = resolve_agent_class(agent)
    except AgentError:
        return dict(agent_args)
    out: dict[str, Any] = {}
    for p in inspect.signature(cls).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in agent_args:
            continue
        if p.default is not p.empty and _jsonable(p.default):
            out[p.name] = p.default
    return dict(sorted({**out, **agent_args}.items()))


def repogym_commit() -> tuple[str | None, bool]:
    """The git commit of the repogym source in use, and whether it has uncommitted changes;
    ``(None, False)`` when repogym does not run from a git checkout (e.g. an installed wheel).
    """

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(_REPO_ROOT), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != _REPO_ROOT or not git("ls-files", "repogym/version.py"):
        return None, False  # not our own checkout (a venv inside some other repository)
    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "repogym"))
    return commit, dirty


def now_utc() -> str:
    """The time now, ISO 8601 in UTC to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def provenance(
    agent: str, agent_args: dict[str, Any], tasks: dict[str, Any], started_at: str | None = None
) -> dict[str, Any]:
    """What ``run.json`` records for publishing the run.

    Args:
        agent: The agent (built-in name or ``module:Class``).
        agent_args: The options the user gave.
        tasks: The task set (suite, split, tags, task ids, number of tasks, samples, seed,
            scoring settings).
        started_at: When the run first started (kept across resumes); default now.

    Returns:
        ``model``, ``endpoint``, ``sampling``, ``agent_options`` (effective, redacted),
        ``tasks``, ``started_at``, ``updated_at``, ``repogym_version``, ``repogym_commit``
        and ``repogym_dirty``.
    """
    options = public_args(effective_args(agent, agent_args))
    url = agent_args.get("base_url")
    if url is None:
        url = next((v for v in agent_args.values() if endpoint_of(v)), None)
    commit, dirty = repogym_commit()
    return {
        "model": options.get("model"),
        "endpoint": endpoint_of(url),
        "sampling": {k: options[k] for k in SAMPLING_KEYS if k in options},
        "agent_options": options,
        "tasks": tasks,
        "started_at": started_at or now_utc(),
        "updated_at": now_utc(),
        "repogym_version": __version__,
        "repogym_commit": commit,
        "repogym_dirty": dirty,
    }
