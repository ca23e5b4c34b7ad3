"""``openai``: chat completions with tool calls against any OpenAI-compatible endpoint.

Works with vLLM, SGLang and hosted APIs. Speaks HTTP with the standard library (no client
package). The env's tools are offered as functions; the model's first tool call becomes the
action (``{"name", "arguments"}``), and a plain text reply is passed to the env as is (the env
also accepts JSON and ```bash blocks in text). Transient failures (connection errors,
timeouts, 408/409/429/5xx, malformed bodies) are retried with exponential backoff; token
usage from the responses is recorded per episode.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

from repogym.envs.actions import TOOL_HELP, openai_tools
from repogym.harness.agents.base import AgentError, new_usage

SYSTEM_PROMPT = ("You are a software engineer fixing a bug in a repository. Investigate, fix "
                 "the code (not the tests), then call submit.")
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class _Transient(Exception):
    """A failure worth retrying."""


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
        max_retries: Retries of a transient failure before the episode fails.
        backoff_s: First retry delay; doubles each retry (capped at 60 s).
        system_prompt: Replaces the default system prompt.
    """

    def __init__(self, base_url: str | None = None, model: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", temperature: float = 0.0,
                 max_tokens: int = 1024, tools: bool = True, timeout_s: float = 120.0,
                 max_retries: int = 5, backoff_s: float = 1.0,
                 system_prompt: str = SYSTEM_PROMPT) -> None:
        if not base_url or not model:
            raise AgentError("openai needs base_url and model. Fix: --agent-arg "
                             "base_url=http://127.0.0.1:8000/v1 --agent-arg model=NAME")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key_env = model, api_key_env
        self.temperature, self.max_tokens, self.tools = temperature, max_tokens, tools
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.system_prompt = system_prompt
        self.messages: list[dict[str, Any]] = []
        self.usage = new_usage()
        self._pending_tool_id: str | None = None

    def reset(self, task_info: dict[str, Any]) -> None:
        """Start a fresh conversation."""
        system = self.system_prompt if self.tools else f"{self.system_prompt}\n\n{TOOL_HELP}"
        self.messages = [{"role": "system", "content": system}]
        self.usage = new_usage()
        self._pending_tool_id = None

    def act(self, observation: str) -> str:
        """Send the observation, return the model's tool call (or its text)."""
        if self._pending_tool_id is not None:
            self.messages.append({"role": "tool", "tool_call_id": self._pending_tool_id,
                                  "content": observation})
        else:
            self.messages.append({"role": "user", "content": observation})
        message = self._complete()
        calls = message.get("tool_calls") or []
        if calls:
            call = calls[0]
            fn = call.get("function") or {}
            self._pending_tool_id = call.get("id") or f"call_{len(self.messages)}"
            self.messages.append({"role": "assistant", "content": message.get("content"),
                                  "tool_calls": [{**call, "id": self._pending_tool_id}]})
            return json.dumps({"name": fn.get("name"), "arguments": fn.get("arguments", {})})
        self._pending_tool_id = None
        content = message.get("content") or ""
        self.messages.append({"role": "assistant", "content": content})
        return content

    # -- HTTP ----------------------------------------------------------------------------
    def _body(self) -> bytes:
        body: dict[str, Any] = {"model": self.model, "messages": self.messages,
                                "temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.tools:
            body.update(tools=openai_tools(), tool_choice="auto")
        return json.dumps(body).encode()

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _complete(self) -> dict[str, Any]:
        """POST with retries; returns ``choices[0].message``."""
        delay = self.backoff_s
        for attempt in range(self.max_retries + 1):
            try:
                return self._request_once()
            except _Transient as e:
                if attempt == self.max_retries:
                    raise AgentError(f"{self.url}: gave up after {attempt + 1} attempts: {e}. "
                                     "Fix: check the server, or raise max_retries") from e
                self.usage["retries"] += 1
                time.sleep(min(delay, 60.0))
                delay *= 2
        raise AssertionError("unreachable")

    def _request_once(self) -> dict[str, Any]:
        req = urllib.request.Request(self.url, data=self._body(), headers=self._headers(),
                                     method="POST")
        self.usage["requests"] += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:500].decode(errors="replace")
            if e.code in _RETRY_STATUS:
                raise _Transient(f"HTTP {e.code}: {detail}") from e
            raise AgentError(f"{self.url}: HTTP {e.code}: {detail}. Fix: check base_url, model "
                             f"and the API key in ${self.api_key_env}") from e
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            raise _Transient(f"{type(e).__name__}: {e}") from e
        try:
            data = json.loads(raw)
            message = data["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise _Transient(f"malformed response ({e}): {raw[:200]!r}") from e
        usage = data.get("usage") or {}
        self.usage["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
        self.usage["completion_tokens"] += int(usage.get("completion_tokens") or 0)
        return message
