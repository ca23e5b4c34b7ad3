"""The agent's tools, declared once, and parsing the agent's raw text into one tool call.

:data:`TOOLS` is the one definition of the tool schema: names, descriptions, arguments with
types, whether each is required, and the limits of what can be passed on. The parser's
validation, the prompt's tool help (:data:`TOOL_HELP`) and the OpenAI-style function list
(:func:`openai_tools`) are all derived from it.

Accepted action forms:

- JSON ``{"tool": "bash", "args": {"command": "ls"}}``;
- the OpenAI form ``{"name": "bash", "arguments": {...}}`` (``arguments`` may be a JSON
  string), optionally wrapped as ``{"type": "function", "function": {...}}``;
- a fenced block ```` ```bash ... ``` ```` (or ``sh``/``shell``, or a fence with no
  language), meaning ``bash(command)``; JSON may also sit in a ```` ```json ```` fence.

One tool call runs per action: when a reply holds several, the first one (by position)
runs and the others are named in :attr:`ToolCall.ignored`, so the env can say they were
ignored. Anything that is not a valid call raises :class:`ActionError`, whose message is
shown to the agent as the observation: it says what was wrong and how to write the action.
The parser never raises anything else on any string.
"""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from repogym.envs import tools

#: Longest action (in characters) the parser reads; also the env's action-space bound.
MAX_ACTION_CHARS = 262_144
#: Linux refuses a single exec argument of 128 KiB or more (MAX_ARG_STRLEN).
MAX_COMMAND_BYTES = 131_071
#: Linux's PATH_MAX.
MAX_PATH_BYTES = 4_095
#: Integers are line numbers: more digits than this cannot be meant.
MAX_INT_DIGITS = 18
_MAX_PREVIEW = 60
_WINDOW = 4_096
_TOKEN_MARGIN = 16  # longer than any JSON token that a window can cut (-Infinity, \uXXXX)


@dataclasses.dataclass(frozen=True)
class Arg:
    """One argument of a tool.

    Attributes:
        name: The argument's name in the JSON call.
        type: ``str`` or ``int``.
        description: What to pass (shown in the OpenAI schema).
        required: Whether the call must give it.
        minimum: Smallest allowed value of an ``int``.
        allow_nul: Whether a ``str`` may hold NUL bytes (file content may; a command or a
            path, passed to the sandbox as a process argument, cannot).
        max_bytes: Largest UTF-8 size of a ``str`` the sandbox can take.
    """

    name: str
    type: type
    description: str
    required: bool = True
    minimum: int | None = None
    allow_nul: bool = True
    max_bytes: int | None = None

    def json_schema(self) -> dict[str, Any]:
        """The argument as a JSON-schema property."""
        prop: dict[str, Any] = {
            "type": "integer" if self.type is int else "string",
            "description": self.description,
        }
        if self.minimum is not None:
            prop["minimum"] = self.minimum
        return prop


@dataclasses.dataclass(frozen=True)
class Tool:
    """One tool the agent can call.

    Attributes:
        name: The tool's name.
        description: One sentence, shown in the prompt's help and the OpenAI schema.
        args: Its arguments, in signature order.
        example: Example arguments, shown in error messages.
        run: Its handler (:mod:`repogym.envs.tools`): ``run(workbench, args) ->
            ToolOutcome``; None for ``submit``, which the env itself handles.
    """

    name: str
    description: str
    args: tuple[Arg, ...] = ()
    example: dict[str, Any] = dataclasses.field(default_factory=dict)
    run: Callable[[Any, dict[str, Any]], tools.ToolOutcome] | None = None

    @property
    def signature(self) -> str:
        """E.g. ``read(path, start?, end?)``."""
        names = ", ".join(a.name + ("" if a.required else "?") for a in self.args)
        return f"{self.name}({names})"

    def arg(self, name: str) -> Arg | None:
        """The argument called ``name``, if the tool has one."""
        return next((a for a in self.args if a.name == name), None)

    def example_call(self) -> str:
        """A valid call of this tool in the JSON form."""
        return json.dumps({"tool": self.name, "args": self.example})

    def parameters(self) -> dict[str, Any]:
        """The arguments as one JSON-schema object."""
        return {
            "type": "object",
            "properties": {a.name: a.json_schema() for a in self.args},
            "required": [a.name for a in self.args if a.required],
            "additionalProperties": False,
        }

    def docstring(self) -> str:
        """A Google-style docstring (description and ``Args:``), for typed tool methods such
        as TRL's, which read their schema from it."""
        lines = [self.description]
        if self.args:
            lines += ["", "Args:", *[f"    {a.name}: {a.description}" for a in self.args]]
        return "\n".join(lines) + "\n"

    def openai_tool(self) -> dict[str, Any]:
        """The tool as an OpenAI chat-completions ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters(),
            },
        }


_PATH = Arg(
    "path",
    str,
    "File path relative to the repository root.",
    allow_nul=False,
    max_bytes=MAX_PATH_BYTES,
)

#: The one definition of the agent's tools, by name.
TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "bash",
            "Run a shell command in a persistent shell (cd and exported variables "
            "carry over, as in a terminal; it starts at the repository root).",
            (
                Arg(
                    "command",
                    str,
                    "The command, run by bash in the episode's shell.",
                    allow_nul=False,
                    max_bytes=MAX_COMMAND_BYTES,
                ),
            ),
            {"command": "ls"},
            tools.bash,
        ),
        Tool(
            "read",
            "Show a file with line numbers (lines start..end, 1-based).",
            (
                _PATH,
                Arg(
                    "start",
                    int,
                    "First line to show (1-based; default 1).",
                    required=False,
                    minimum=1,
                ),
                Arg(
                    "end",
                    int,
                    "Last line to show, inclusive (default: the end of the file).",
                    required=False,
                    minimum=1,
                ),
            ),
            {"path": "src/app.py", "start": 1, "end": 40},
            tools.read,
        ),
        Tool(
            "write",
            "Create or overwrite a file.",
            (_PATH, Arg("content", str, "The complete new content of the file.")),
            {"path": "notes.txt", "content": "hello\n"},
            tools.write,
        ),
        Tool(
            "edit",
            "Replace the one occurrence of `old` in a file with `new`.",
            (
                _PATH,
                Arg(
                    "old", str, "The exact text to replace; it must occur exactly once in the file."
                ),
                Arg("new", str, "The text to put in its place."),
            ),
            {"path": "src/app.py", "old": "return a - b", "new": "return a + b"},
            tools.edit,
        ),
        Tool("submit", "Finish: your changes are graded by hidden tests."),
    )
}


def openai_tools() -> list[dict[str, Any]]:
    """Every tool as an OpenAI chat-completions ``tools`` entry."""
    return [t.openai_tool() for t in TOOLS.values()]


def _help_text() -> str:
    width = max(len(t.signature) for t in TOOLS.values()) + 1
    lines = [
        f"  {t.signature:<{width}}{t.description[0].lower()}{t.description[1:].rstrip('.')}"
        for t in TOOLS.values()
    ]
    return (
        "Act with exactly one tool call per turn (if a reply holds several, only the first "
        "runs), either as JSON:\n"
        f"  {TOOLS['bash'].example_call()}\n"
        "or as a fenced bash block:\n"
        "  ```bash\n  ls\n  ```\n"
        "Tools:\n" + "\n".join(lines)
    )


#: The tool instructions shown to the agent (derived from :data:`TOOLS`).
TOOL_HELP = _help_text()


class ActionError(ValueError):
    """The action could not be parsed; the message is meant for the agent."""


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One parsed tool call.

    Attributes:
        name: The tool.
        args: Its arguments, validated against :data:`TOOLS`.
        ignored: What else the reply held and was not run (e.g. ``("bash", "submit")``).
    """

    name: str
    args: dict[str, Any]
    ignored: tuple[str, ...] = dataclasses.field(default=(), compare=False)


def _did_you_mean(name: Any, choices: Iterable[str]) -> str:
    if not isinstance(name, str) or len(name) > _MAX_PREVIEW:
        return ""
    near = difflib.get_close_matches(name.lower(), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _preview(value: Any) -> str:
    """A short, printable rendering of agent-supplied text (escapes NUL and surrogates)."""
    if isinstance(value, str):
        return repr(value) if len(value) <= _MAX_PREVIEW else repr(value[:_MAX_PREVIEW]) + "..."
    return type(value).__name__


# -- JSON decoding that cannot blow up ------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _HugeNumber:
    """A JSON integer too long to be a line number (kept as its digit count)."""

    digits: int


def _parse_int(text: str) -> int | _HugeNumber:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= MAX_INT_DIGITS else _HugeNumber(digits)


# strict=False: models often put raw line breaks inside JSON strings; read them as meant.
_DECODER = json.JSONDecoder(parse_int=_parse_int, strict=False)
_TOO_DEEP = (
    "the JSON is nested too deeply to read. Fix: tool arguments are flat strings "
    "and integers, e.g. "
)
_INCOMPLETE = (
    "the JSON is incomplete: the reply ends before the tool call is closed (max "
    "tokens?). Fix: send a shorter call, e.g. write a long file in parts, like "
)


class _Incomplete(Exception):
    """The text ended inside a JSON value."""


class _BadJSON(Exception):
    """Not valid JSON: ``msg`` at ``pos`` (an index into the whole text)."""

    def __init__(self, msg: str, pos: int) -> None:
        super().__init__(msg)
        self.msg, self.pos = msg, pos


def _decode_window(doc: str, offset: int) -> tuple[Any, int]:
    try:
        value, end = _DECODER.raw_decode(doc)
    except RecursionError as e:
        raise ActionError(_TOO_DEEP + TOOLS["bash"].example_call()) from e
    except json.JSONDecodeError as e:
        if e.pos >= len(doc.rstrip()) or e.msg.startswith("Unterminated string"):
            raise _Incomplete from e
        raise _BadJSON(e.msg, offset + e.pos) from e
    return value, offset + end


def _decode(text: str, start: int) -> tuple[Any, int]:
    """The JSON value at ``text[start]`` and the index after it.

    Decodes a short window first, so that a failure costs little (the json module counts
    lines up to the error position), and the rest of the text only when the value is longer.

    Raises:
        _Incomplete: the text ends inside the value.
        _BadJSON: it is not valid JSON.
        ActionError: it is nested too deeply to decode.
    """
    if len(text) - start > _WINDOW:
        try:
            return _decode_window(text[start : start + _WINDOW], start)
        except _Incomplete:
            pass
        except _BadJSON as e:  # a cut through a token (an escape, "true") is not an error
            if e.pos < start + _WINDOW - _TOKEN_MARGIN:
                raise
    return _decode_window(text[start:], start)


def _loads_arguments(text: str) -> Any:
    """The OpenAI form's ``arguments`` given as a JSON string."""
    if not text.strip():
        return {}
    try:
        value, end = _decode(text, len(text) - len(text.lstrip()))
    except _Incomplete as e:
        raise ActionError(
            '"arguments" is a string holding incomplete JSON (max tokens?). '
            'Fix: close the object, e.g. "{\\"command\\": \\"ls\\"}"'
        ) from e
    except _BadJSON as e:
        raise ActionError(
            f'"arguments" is a string but not valid JSON ({e.msg} at character '
            f"{e.pos}). Fix: pass an "
            'object, or a string holding one, e.g. "{\\"command\\": \\"ls\\"}"'
        ) from e
    if text[end:].strip():
        raise ActionError(
            '"arguments" holds text after its JSON object. Fix: pass exactly one JSON object'
        )
    return value


# -- validation against TOOLS ---------------------------------------------------------------
def _check_int(tool: Tool, arg: Arg, value: Any) -> int:
    where = f"{tool.name}() argument {arg.name!r}"
    if isinstance(value, str) and value.strip():
        s = value.strip()
        if not _INT_TEXT.fullmatch(s):
            raise ActionError(
                f"{where} must be an integer written with the digits 0-9, got "
                f"{_preview(value)}. Fix: e.g. {tool.example_call()}"
            )
        value = _parse_int(s)
    if isinstance(value, _HugeNumber):
        raise ActionError(
            f"{where} is a {value.digits}-digit number; it is a line number. "
            f"Fix: e.g. {tool.example_call()}"
        )
    if not isinstance(value, int) or isinstance(value, bool):
        raise ActionError(
            f"{where} must be int, got {_preview(value)}. Fix: e.g. {tool.example_call()}"
        )
    if arg.minimum is not None and value < arg.minimum:
        raise ActionError(
            f"{where} must be at least {arg.minimum} (lines are numbered from "
            f"1), got {value}. Fix: e.g. {tool.example_call()}"
        )
    return value


def _check_str(tool: Tool, arg: Arg, value: Any) -> str:
    where = f"{tool.name}() argument {arg.name!r}"
    if not isinstance(value, str):
        shown = (
            f"a {value.digits}-digit number"
            if isinstance(value, _HugeNumber)
            else (type(value).__name__)
        )
        raise ActionError(f"{where} must be str, got {shown}. Fix: e.g. {tool.example_call()}")
    for i, ch in enumerate(value):
        if "\ud800" <= ch <= "\udfff":
            raise ActionError(
                f"{where} holds a lone surrogate (U+{ord(ch):04X}) at character "
                f"{i}, which is not valid Unicode text and cannot be encoded. "
                "Fix: send valid UTF-8 text"
            )
    if not arg.allow_nul and "\x00" in value:
        raise ActionError(
            f"{where} holds a NUL byte at character {value.index(chr(0))}; a "
            f"{arg.name} cannot contain NUL. Fix: remove it (in a shell command, "
            "write a NUL as printf '\\0')"
        )
    if arg.max_bytes is not None and len(value.encode()) > arg.max_bytes:
        hint = (
            "write the script to a file with write() and run it"
            if arg.name == "command"
            else "use a shorter path"
        )
        raise ActionError(
            f"{where} is {len(value.encode())} bytes; the limit is {arg.max_bytes}. Fix: {hint}"
        )
    if arg.name == "path" and not value.strip():
        raise ActionError(
            f"{where} is empty. Fix: give a path relative to the repository "
            f"root, e.g. {tool.example_call()}"
        )
    return value


def validate(call: ToolCall) -> ToolCall:
    """Check the tool name and the arguments' names, types and limits against :data:`TOOLS`.

    Returns:
        The call with integer arguments given as digit strings converted to ``int``.

    Raises:
        ActionError: naming the problem and showing a valid call.
    """
    if not isinstance(call.name, str):
        raise ActionError(
            f"the tool name must be a string, got {_preview(call.name)}. Fix: "
            f"e.g. {TOOLS['bash'].example_call()}"
        )
    tool = TOOLS.get(call.name)
    if tool is None:
        raise ActionError(
            f"unknown tool {_preview(call.name)}{_did_you_mean(call.name, TOOLS)}; "
            f"the tools are {', '.join(TOOLS)}."
        )
    unknown = [k for k in call.args if tool.arg(k) is None]
    if unknown:
        shown = ", ".join(_preview(k) for k in unknown[:5])
        near = _did_you_mean(unknown[0], [a.name for a in tool.args])
        raise ActionError(
            f"{tool.name}() got unknown argument(s) {shown}{near}; it is "
            f"{tool.signature}. Fix: e.g. {tool.example_call()}"
        )
    missing = [a.name for a in tool.args if a.required and a.name not in call.args]
    if missing:
        raise ActionError(
            f"{tool.name}() is missing argument(s) {missing}; it is "
            f"{tool.signature}. Fix: e.g. {tool.example_call()}"
        )
    args = {}
    for arg in tool.args:
        if arg.name in call.args:
            check = _check_int if arg.type is int else _check_str
            args[arg.name] = check(tool, arg, call.args[arg.name])
    return ToolCall(tool.name, args, call.ignored)


# -- finding the tool calls in a reply ------------------------------------------------------
_FENCE = re.compile(r"```([A-Za-z]*)[ \t]*\n(.*?)```", re.DOTALL)
_OPEN_BASH_FENCE = re.compile(r"```(bash|sh|shell)?[ \t]*\n")
_BASH_LANGS = ("bash", "sh", "shell", "")
_TOOL_KEY = re.compile(r'"(tool|name|function)"\s*:')
_INT_TEXT = re.compile(r"-?[0-9]+")
_OBJECT_START = re.compile(r'\{\s*["}]')
_MAX_FAILED_DECODES = 2_000


def _tool_like(obj: dict) -> bool:
    """Whether a JSON object is meant as a tool call (not just JSON in the agent's prose)."""
    if obj.get("type") == "function" and isinstance(obj.get("function"), dict):
        return True
    if "tool" in obj:
        return True
    name = obj.get("name")
    return "name" in obj and (
        "arguments" in obj or "args" in obj or (isinstance(name, str) and name in TOOLS)
    )


def _from_json(obj: dict) -> ToolCall:
    if obj.get("type") == "function" and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    if "tool" in obj:
        name, args = obj["tool"], obj.get("args", obj.get("arguments", {}))
    else:
        name, args = obj.get("name"), obj.get("arguments", obj.get("args", {}))
    if isinstance(args, str):
        args = _loads_arguments(args)
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ActionError(
            f'"args" must be a JSON object of argument names to values, got '
            f"{_preview(args)}. Fix: e.g. {TOOLS['bash'].example_call()}"
        )
    return validate(ToolCall(name, args))


@dataclasses.dataclass(frozen=True)
class _Found:
    """A tool call (or a broken attempt at one) found at ``start`` in the reply."""

    start: int
    label: str
    call: ToolCall | None = None
    error: ActionError | None = None


def _bash_fences(text: str) -> tuple[list[_Found], list[tuple[int, int]]]:
    """Bash blocks as calls, and the spans they cover (JSON inside them is shell code)."""
    found, spans = [], []
    for m in _FENCE.finditer(text):
        lang, body = m.group(1).lower(), m.group(2)
        if lang not in _BASH_LANGS or (lang == "" and body.lstrip().startswith("{")):
            continue
        spans.append((m.start(), m.end()))
        command = body.strip("\n")
        try:
            found.append(
                _Found(m.start(), "bash", validate(ToolCall("bash", {"command": command})))
            )
        except ActionError as e:
            found.append(_Found(m.start(), "bash", error=e))
    return found, spans


@dataclasses.dataclass
class _Scan:
    """What the JSON scan of a reply found."""

    calls: list[_Found] = dataclasses.field(default_factory=list)
    plain: bool = False  # a JSON object that is not a tool call (e.g. a bare "args")
    broken: ActionError | None = None  # the first tool call that is not valid JSON
    spans: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # decoded objects

    def covers(self, pos: int) -> bool:
        """Whether ``pos`` is inside a decoded JSON object (e.g. a fence in a file's content)."""
        k = bisect.bisect_right(self.spans, (pos, math.inf)) - 1
        return k >= 0 and self.spans[k][0] <= pos < self.spans[k][1]


def _scan_json(text: str, spans: list[tuple[int, int]]) -> _Scan:
    """Tool-call JSON objects outside bash blocks.

    The work is bounded: decoding stops at an incomplete or too-deep value (whatever follows
    is inside it), and after a fixed number of failed attempts or a few passes' worth of
    decoding.
    """
    scan, failures, budget = _Scan(), 0, 4 * len(text) + 100_000
    starts = [s for s, _ in spans]
    m = _OBJECT_START.search(text)
    while m is not None and failures < _MAX_FAILED_DECODES and budget > 0:
        i = m.start()
        k = bisect.bisect_right(starts, i) - 1
        if k >= 0 and i < spans[k][1]:  # inside a bash block
            m = _OBJECT_START.search(text, spans[k][1])
            continue
        try:
            obj, end = _decode(text, i)
        except _Incomplete:
            if _TOOL_KEY.search(text, i):
                scan.calls.append(
                    _Found(
                        i,
                        "an incomplete call",
                        error=ActionError(_INCOMPLETE + TOOLS["write"].example_call()),
                    )
                )
            break
        except ActionError as e:
            scan.calls.append(_Found(i, "a too-deep call", error=e))
            break
        except _BadJSON as e:
            failures, budget = failures + 1, budget - (e.pos - i)
            if scan.broken is None and _TOOL_KEY.search(text, i, e.pos + 1):
                scan.broken = ActionError(
                    f"the tool call is not valid JSON: {e.msg} at character {e.pos - i} of "
                    f"the object. Fix: check the quotes, commas and closing braces, e.g. "
                    f"{TOOLS['bash'].example_call()}"
                )
            m = _OBJECT_START.search(text, i + 1)
            continue
        budget -= end - i
        scan.spans.append((i, end))
        if isinstance(obj, dict) and _tool_like(obj):
            try:
                call = _from_json(obj)
                scan.calls.append(_Found(i, call.name, call))
            except ActionError as e:
                scan.calls.append(_Found(i, "a malformed call", error=e))
        else:
            scan.plain = scan.plain or isinstance(obj, dict)
        m = _OBJECT_START.search(text, end)
    return scan


def _nothing_found(text: str, scan: _Scan) -> ActionError:
    """The most specific explanation for a reply that holds no tool call."""
    if scan.broken is not None:
        return scan.broken
    if scan.plain:
        return ActionError(
            'the JSON object has no "tool" (or "name") key. Fix: e.g. '
            f"{TOOLS['bash'].example_call()}"
        )
    closed = max((m.end() for m in _FENCE.finditer(text)), default=0)
    if _OPEN_BASH_FENCE.search(text, closed):
        return ActionError(
            "the ```bash block is not closed: the reply ends inside it (max "
            "tokens?). Fix: end the block with ``` on its own line"
        )
    return ActionError(
        "no tool call found (no JSON object and no ```bash block). Fix: e.g. "
        f"{TOOLS['bash'].example_call()}"
    )


def parse_action(text: str) -> ToolCall:
    """Parse the tool call in the agent's raw text (the first one, if it holds several).

    Raises:
        ActionError: with a message that explains the expected form.
    """
    if not isinstance(text, str):
        how = "json.dumps() of it" if isinstance(text, dict) else "the reply's text"
        raise ActionError(
            f"the action must be a string, got {type(text).__name__}. Fix: pass "
            f"{how}, e.g. {TOOLS['bash'].example_call()}"
        )
    if len(text) > MAX_ACTION_CHARS:
        raise ActionError(
            f"the action is {len(text)} characters; the limit is "
            f"{MAX_ACTION_CHARS}. Fix: write a long file in parts (write, then "
            "bash with cat >> FILE)"
        )
    if not text.strip():
        raise ActionError(
            f"the action is empty. Fix: send one tool call, e.g. {TOOLS['bash'].example_call()}"
        )
    fenced, spans = _bash_fences(text)
    scan = _scan_json(text, spans)
    fenced = [f for f in fenced if not scan.covers(f.start)]
    found = sorted(fenced + scan.calls, key=lambda f: f.start)
    if not found:
        raise _nothing_found(text, scan)
    first, rest = found[0], tuple(f.label for f in found[1:])
    if first.error is not None:
        more = f" (the reply held {len(rest)} more tool call(s); none ran)" if rest else ""
        raise ActionError(f"{first.error}{more}")
    return dataclasses.replace(first.call, ignored=rest)


def ignored_note(call: ToolCall) -> str:
    """The observation's note about the other calls of a reply (empty when there were none)."""
    if not call.ignored:
        return ""
    return (
        f"[note: your reply held {len(call.ignored) + 1} tool calls; only the first "
        f"({call.name}) ran, the others ({', '.join(call.ignored)}) were ignored. Send one "
        "tool call per turn.]\n"
    )


def error_observation(err: ActionError) -> str:
    """The observation returned for a malformed action."""
    return f"Invalid action: {err}\n\n{TOOL_HELP}\n"
