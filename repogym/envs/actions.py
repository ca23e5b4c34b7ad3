"""Parsing the agent's raw text into one tool call.

Accepted forms (the first one found wins):

- JSON ``{"tool": "bash", "args": {"command": "ls"}}``;
- the OpenAI form ``{"name": "bash", "arguments": {...}}`` (``arguments`` may be a JSON
  string), optionally wrapped as ``{"type": "function", "function": {...}}``;
- a fenced block ```` ```bash ... ``` ```` (or ``sh``/``shell``), meaning ``bash(command)``.

Anything else raises :class:`ActionError` whose message is shown to the agent as the
observation: it says what was wrong and how to write the action.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

TOOLS: dict[str, dict[str, type]] = {
    "bash": {"command": str},
    "read": {"path": str, "start": int, "end": int},
    "write": {"path": str, "content": str},
    "edit": {"path": str, "old": str, "new": str},
    "submit": {},
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "bash": ("command",), "read": ("path",), "write": ("path", "content"),
    "edit": ("path", "old", "new"), "submit": (),
}

TOOL_HELP = """\
Act with exactly one tool call per turn, either as JSON:
  {"tool": "bash", "args": {"command": "ls"}}
or as a fenced bash block:
  ```bash
  ls
  ```
Tools:
  bash(command)            run a shell command at the repository root
  read(path, start?, end?) show a file with line numbers (lines start..end, 1-based)
  write(path, content)     create or overwrite a file
  edit(path, old, new)     replace the one occurrence of `old` in a file with `new`
  submit()                 finish: your changes are graded by hidden tests"""

_FENCE = re.compile(r"```(bash|sh|shell|json)?[ \t]*\n(.*?)```", re.DOTALL)


class ActionError(ValueError):
    """The action could not be parsed; the message is meant for the agent."""


@dataclasses.dataclass(frozen=True)
class ToolCall:
    name: str
    args: dict[str, Any]


def _json_objects(text: str) -> list[dict]:
    """Every top-level JSON object embedded in ``text``, in order."""
    decoder = json.JSONDecoder()
    found, i = [], text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        i = text.find("{", end)
    return found


def _from_json(obj: dict) -> ToolCall:
    if obj.get("type") == "function" and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    if "tool" in obj:
        name, args = obj["tool"], obj.get("args", obj.get("arguments", {}))
    elif "name" in obj:
        name, args = obj["name"], obj.get("arguments", obj.get("args", {}))
    else:
        raise ActionError('the JSON object has no "tool" (or "name") key.')
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            raise ActionError(f'"arguments" is a string but not valid JSON ({e}).') from e
    if not isinstance(args, dict):
        raise ActionError('"args" must be a JSON object of argument names to values.')
    return validate(ToolCall(str(name), args))


def validate(call: ToolCall) -> ToolCall:
    """Check the tool name and argument names/types."""
    if call.name not in TOOLS:
        raise ActionError(f"unknown tool {call.name!r}; the tools are {', '.join(TOOLS)}.")
    spec = TOOLS[call.name]
    unknown = set(call.args) - set(spec)
    if unknown:
        raise ActionError(f"{call.name}() got unknown argument(s) {sorted(unknown)}; "
                          f"it takes {list(spec) or 'no arguments'}.")
    missing = [a for a in REQUIRED[call.name] if a not in call.args]
    if missing:
        raise ActionError(f"{call.name}() is missing argument(s) {missing}.")
    for key, value in call.args.items():
        want = spec[key]
        if want is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if not isinstance(value, want) or isinstance(value, bool):
            raise ActionError(f"{call.name}() argument {key!r} must be {want.__name__}, "
                              f"got {type(value).__name__}.")
        call.args[key] = value
    return call


def parse_action(text: str) -> ToolCall:
    """Parse one tool call from the agent's raw text.

    Raises:
        ActionError: with a message that explains the expected form.
    """
    if not isinstance(text, str):
        raise ActionError(f"the action must be a string, got {type(text).__name__}.")
    stripped = text.strip()
    if not stripped:
        raise ActionError("the action is empty.")
    fence = _FENCE.search(text)
    first_brace = text.find("{")
    if fence and fence.group(1) != "json" and (first_brace == -1 or fence.start() < first_brace):
        return ToolCall("bash", {"command": fence.group(2).strip("\n")})
    errors = []
    for obj in _json_objects(text):
        try:
            return _from_json(obj)
        except ActionError as e:
            errors.append(str(e))
    if errors:
        raise ActionError(errors[0])
    if fence:
        return ToolCall("bash", {"command": fence.group(2).strip("\n")})
    raise ActionError("no tool call found (no JSON object and no ```bash block).")


def error_observation(err: ActionError) -> str:
    """The observation returned for a malformed action."""
    return f"Invalid action: {err}\n\n{TOOL_HELP}\n"
