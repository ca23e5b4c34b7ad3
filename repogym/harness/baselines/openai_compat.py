"""``openai``: chat completions with tool calls against any OpenAI-compatible endpoint.

Works with vLLM, SGLang and hosted APIs. Speaks HTTP with the standard library (no client
package). The env's tools are offered as functions; the model's first tool call becomes the
action (``{"name", "arguments"}``), and a plain text reply is passed to the env as is (the env
also accepts JSON and ```bash blocks in text). Transient failures (connection errors,
timeouts, 408/409/429/5xx, malformed bodies) are retried with exponential backoff; token
usage from the responses is recorded per episode. When the retries of a connection error,
timeout or 408/409/429/5xx run out, the agent raises
:class:`~repogym.harness.baselines.EndpointError`: the endpoint failed, not the model, so the
episode is not scored and a run of such episodes stops the run as an outage.

When the conversation outgrows the model's context (an HTTP 400/413 whose message says so,
as vLLM, SGLang and hosted APIs word it), the agent submits: the episode's current diff is
graded, and ``stop_reason`` records ``context_limit: <the server's message>``, as
mini-swe-agent and SWE-agent do. Authentication failures (401/403), an unknown model or URL
(404) and a request the server rejects before the first reply (``preflight``) raise
:class:`~repogym.harness.baselines.AgentConfigError`, which stops the run. Every option is
listed by ``repogym agents openai``.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from typing import Any

from repogym.envs.actions import TOOL_HELP, openai_tools
from repogym.harness.baselines.base import (
    AgentConfigError,
    AgentError,
    EndpointError,
    new_usage,
    tool_call,
)

SYSTEM_PROMPT = (
    "You are a software engineer fixing a bug in a repository. Investigate, fix "
    "the code (not the tests), then call submit."
)
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
_CONTEXT_STATUS = {400, 413, 422}
#: How servers say the prompt is too long (OpenAI, vLLM, SGLang, Anthropic-compatible, TGI).
_CONTEXT_RE = re.compile(
    r"context[_ ]length|context window|maximum context|max_model_len|prompt is too long|"
    r"input is too long|too many (input )?tokens|(prompt|input) tokens? exceed|"
    r"exceeds? the (model'?s? )?(maximum|max)|reduce the length",
    re.IGNORECASE,
)
_MODEL_RE = re.compile(
    r"model.{0,80}(not (exist|found)|does not exist|unknown|invalid)|"
    r"(unknown|invalid|no such) model|model_not_found",
    re.IGNORECASE,
)


class _Transient(Exception):
    """A failure worth retrying; ``endpoint`` when the server (not its reply) failed."""

    def __init__(self, message: str, *, endpoint: bool = True) -> None:
        super().__init__(message)
        self.endpoint = endpoint


class _ContextExceeded(Exception):
    """The server refused the conversation as longer than the model's context."""


def _http_error(url: str, code: int, detail: str, key_env: str) -> Exception:
    """The exception for a non-retryable HTTP status, with the cause and the fix."""
    if code in _CONTEXT_STATUS and _CONTEXT_RE.search(detail):
        return _ContextExceeded(f"HTTP {code}: {detail}")
    if code in (401, 403):
        return AgentConfigError(
            f"{url}: HTTP {code}: {detail}. Fix: put a valid API key in "
            f"${key_env} (or name another variable with api_key_env=)"
        )
    if code == 404 or _MODEL_RE.search(detail):
        return AgentConfigError(
            f"{url}: HTTP {code}: {detail}. Fix: check base_url (it ends "
            "in /v1 for most servers) and the model name the server serves"
        )
    return AgentError(
        f"{url}: the server rejected the request: HTTP {code}: {detail}. Fix: "
        "check the agent options (temperature, max_tokens, tools=false for a "
        "server without tool calls; see `repogym agents openai`)"
    )


class OpenAIAgent:
    """An LLM behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1`` (vLLM/SGLang) or a hosted API's URL.
        model: The model name the server expects.
        api_key_env: Environment variable holding the API key (no header when unset).
        temperature: Sampling temperature.
        max_tokens: Completion tokens per reply.
        tools: Offer the env's tools as functions (set false for servers without tool calls).
        timeout_s: HTTP timeout per request.
        max_retries: Retries of a transient failure (connection, timeout, 408/409/429/5xx,
            malformed body) before the episode fails.
        backoff_s: First retry delay; doubles each retry (capped at 60 s).
        system_prompt: Replaces the default system prompt.
    """

    #: How to reach the model, not how it behaves: not part of the label or resume check.
    TRANSPORT_OPTIONS = ("base_url", "api_key_env", "timeout_s", "max_retries", "backoff_s")

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.0,
        max_tokens: int = 1024,
        tools: bool = True,
        timeout_s: float = 120.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        system_prompt: str = SYSTEM_PROMPT,
    ) -> None:
        if not base_url or not model:
            raise AgentError(
                "openai needs base_url and model. Fix: --agent-arg "
                "base_url=http://127.0.0.1:8000/v1 --agent-arg model=NAME"
            )
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key_env = model, api_key_env
        self.temperature, self.max_tokens, self.tools = temperature, max_tokens, tools
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.system_prompt = system_prompt
        self.messages: list[dict[str, Any]] = []
        self.usage = new_usage()
        self.stop_reason: str | None = None
        self._pending_tool_id: str | None = None

    def preflight(self) -> None:
        """One tiny request (max_tokens=1) with this agent's settings, before a run starts.

        Raises:
            AgentConfigError: the server rejects the key, the model, the URL or the options,
                or cannot be reached after two retries.
        """
        body = json.loads(self._body())
        body.update(messages=[{"role": "user", "content": "Reply with OK."}], max_tokens=1)
        try:
            self._complete(json.dumps(body).encode(), retries=min(self.max_retries, 2))
        except _ContextExceeded as e:
            raise AgentConfigError(
                f"{self.url}: a one-line prompt exceeds the context: {e}. Fix: lower max_tokens"
            ) from e
        except AgentConfigError:
            raise
        except AgentError as e:
            raise AgentConfigError(str(e)) from e

    def reset(self, task_info: dict[str, Any]) -> None:
        """Start a fresh conversation."""
        system = self.system_prompt if self.tools else f"{self.system_prompt}\n\n{TOOL_HELP}"
        self.messages = [{"role": "system", "content": system}]
        self.usage = new_usage()
        self.stop_reason = None
        self._pending_tool_id = None

    def act(self, observation: str) -> str:
        """Send the observation, return the model's tool call (or its text)."""
        if self._pending_tool_id is not None:
            self.messages.append(
                {"role": "tool", "tool_call_id": self._pending_tool_id, "content": observation}
            )
        else:
            self.messages.append({"role": "user", "content": observation})
        try:
            message = self._complete()
        except _ContextExceeded as e:  # submit what the episode has so far: it gets graded
            self.stop_reason = f"context_limit: {str(e)[:300]}"
            return tool_call("submit")
        calls = message.get("tool_calls") or []
        if calls:
            call = calls[0]
            fn = call.get("function") or {}
            self._pending_tool_id = call.get("id") or f"call_{len(self.messages)}"
            self.messages.append(
                {
                    "role": "assistant",
                    "content": message.get("content"),
                    "tool_calls": [{**call, "id": self._pending_tool_id}],
                }
            )
            return json.dumps({"name": fn.get("name"), "arguments": fn.get("arguments", {})})
        self._pending_tool_id = None
        content = message.get("content") or ""
        self.messages.append({"role": "assistant", "content": content})
        return content

    # -- HTTP ----------------------------------------------------------------------------
    def _body(self) -> bytes:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.tools:
            body.update(tools=openai_tools(), tool_choice="auto")
        return json.dumps(body).encode()

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _complete(self, body: bytes | None = None, retries: int | None = None) -> dict[str, Any]:
        """POST ``body`` (default: the conversation) with retries; returns the reply message."""
        delay = self.backoff_s
        retries = self.max_retries if retries is None else retries
        for attempt in range(retries + 1):
            try:
                return self._request_once(body or self._body())
            except _Transient as e:
                if attempt == retries:
                    error = EndpointError if e.endpoint else AgentError
                    raise error(
                        f"{self.url}: gave up after {attempt + 1} attempts: {e}. "
                        "Fix: check the server, or raise max_retries"
                    ) from e
                self.usage["retries"] += 1
                time.sleep(min(delay, 60.0))
                delay *= 2
        raise AssertionError("unreachable")

    def _request_once(self, body: bytes) -> dict[str, Any]:
        req = urllib.request.Request(self.url, data=body, headers=self._headers(), method="POST")
        self.usage["requests"] += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:500].decode(errors="replace")
            if e.code in _RETRY_STATUS:
                raise _Transient(f"HTTP {e.code}: {detail}") from e
            raise _http_error(self.url, e.code, detail, self.api_key_env) from e
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            raise _Transient(f"{type(e).__name__}: {e}") from e
        try:
            data = json.loads(raw)
            message = data["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise _Transient(f"malformed response ({e}): {raw[:200]!r}", endpoint=False) from e
        usage = data.get("usage") or {}
        self.usage["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
        self.usage["completion_tokens"] += int(usage.get("completion_tokens") or 0)
        return message
