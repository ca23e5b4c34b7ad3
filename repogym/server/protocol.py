"""Reading what clients send: any frame or body gets an answer, none breaks the server.

JSON from the network can be anything: a binary WebSocket frame, bytes that are not UTF-8,
nesting 200,000 levels deep (``json.loads`` raises RecursionError), an integer of 4,300
digits (ValueError since Python 3.11), a list where an object belongs. :func:`parse`
turns each into a :class:`FrameError` with the error code to answer with; the session
that sent it lives on.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from repogym.envs.remote import ErrorCode

#: Deepest nesting accepted in a message (the env's actions need a handful of levels).
MAX_DEPTH = 64


class FrameError(ValueError):
    """A frame or body that is not an acceptable JSON message; ``code`` says which way."""

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.code = code


def _depth_ok(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True


def parse(raw: str | bytes | None, *, binary: bool = False) -> Any:
    """The JSON value of a frame or body.

    Args:
        raw: The text or bytes received (None: an empty body).
        binary: It came as a binary WebSocket frame (refused: the protocol is text).

    Raises:
        FrameError: not acceptable (INVALID_JSON, or VALIDATION_ERROR when nested too deep).
    """
    if binary:
        raise FrameError(
            "a binary frame; this protocol is JSON text. Fix: send text frames",
            ErrorCode.INVALID_JSON,
        )
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FrameError(
                f"not UTF-8 text ({e}). Fix: send UTF-8 encoded JSON", ErrorCode.INVALID_JSON
            ) from e
    if not raw:
        raise FrameError("an empty message. Fix: send a JSON object", ErrorCode.INVALID_JSON)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise FrameError(f"invalid JSON: {e}", ErrorCode.INVALID_JSON) from e
    except RecursionError as e:
        raise FrameError(
            f"JSON nested too deep to read. Fix: at most {MAX_DEPTH} levels", ErrorCode.INVALID_JSON
        ) from e
    except ValueError as e:  # an integer longer than Python converts (4300 digits)
        digits = sys.get_int_max_str_digits()
        raise FrameError(
            f"a number with more than {digits} digits. Fix: send numbers of at "
            f"most {digits} digits",
            ErrorCode.INVALID_JSON,
        ) from e
    if not _depth_ok(value, MAX_DEPTH):
        raise FrameError(
            f"JSON nested deeper than {MAX_DEPTH} levels. Fix: send a flatter message",
            ErrorCode.VALIDATION_ERROR,
        )
    return value


#: A whole message of each protocol, as the fixes show it.
WS_MESSAGE = '{"type": "step", "data": {"tool": "bash", "args": {"command": "ls"}}}'
HTTP_STEP = 'POST /step {"action": {"tool": "bash", "args": {"command": "ls"}}}'
HTTP_RESET = 'POST /reset {"task": "<id from GET /tasks>", "seed": 0}'


def parse_object(
    raw: str | bytes | None, *, binary: bool = False, example: str = WS_MESSAGE
) -> dict[str, Any]:
    """:func:`parse`, and the value must be a JSON object (else VALIDATION_ERROR).

    Args:
        raw: The text or bytes received.
        binary: It came as a binary WebSocket frame.
        example: A valid message of the protocol it came by (the fix shows it).
    """
    value = parse(raw, binary=binary)
    if not isinstance(value, dict):
        raise FrameError(
            f"a JSON {type(value).__name__}, not an object. Fix: send e.g. {example}",
            ErrorCode.VALIDATION_ERROR,
        )
    return value


def reason(message: str) -> str:
    """A message without its ``Fix: ...`` (which speaks one protocol's shapes), for a fix in
    another protocol's terms."""
    return message.split(". Fix:", 1)[0].rstrip(".")
