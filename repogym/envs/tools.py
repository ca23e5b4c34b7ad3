"""What each tool does: one handler per tool, run against the episode's :class:`Workbench`.

A tool is declared once in :data:`repogym.envs.actions.TOOLS` (name, description,
arguments) together with its handler from here; :meth:`repogym.envs.session.Session.run_tool`
dispatches through that table, so a new tool is one entry there and one function here.
Handlers return a :class:`ToolOutcome` (the observation and what the call did; the env turns
it into ``info`` with :func:`repogym.envs.info.tool_info`, a tool never writes ``info``); what
the agent got wrong raises ``ValueError``, ``OSError`` or ``FileNotFoundError`` (the session
turns it into an observation), and only a :class:`~repogym.sandbox.SandboxError` means the
infrastructure.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Protocol

from repogym.sandbox.base import ExecResult


class Workbench(Protocol):
    """What a tool acts on (an episode's session)."""

    max_obs_chars: int

    def bash(self, command: str) -> ExecResult:
        """Run ``command`` in the episode's shell."""

    def read_file(self, path: str) -> str:
        """A workspace file's text (raises FileNotFoundError)."""

    def write_file(self, path: str, content: str) -> None:
        """Create or overwrite a workspace file."""


@dataclasses.dataclass(frozen=True)
class ToolOutcome:
    """What one tool call did.

    Attributes:
        observation: What the agent sees.
        exit_code: The command's exit code (bash); 0 or 1 for the file tools.
        timed_out: The bash command hit its time limit.
        resource_exhausted: The sandbox limit a bash command used up ("" when none).
        shell_reset: Why the persistent shell was restarted ("" when it was not).
    """

    observation: str
    exit_code: int
    timed_out: bool = False
    resource_exhausted: str = ""
    shell_reset: str = ""


def clip_text(text: str, limit: int) -> str:
    """Keep the head and tail of a long text, saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n... [{cut} characters cut] ...\n{text[-half:]}"


def format_exec(res: ExecResult, limit: int) -> str:
    """A command's result as the agent sees it: output, then notes and the exit code."""
    out = clip_text(res.output, limit)
    notes = []
    if res.timed_out:
        notes.append(f"timed out after {res.duration_s:.0f}s; the command was killed")
    if res.output_truncated:
        notes.append("output limit reached; the command was killed")
    if res.resource_exhausted:
        notes.append(
            f"the sandbox's {res.resource_exhausted} limit is used up; free some "
            "(delete files in /tmp or the workspace, stop background processes)"
        )
    if res.shell_reset:
        notes.append(res.shell_reset)
    notes.append(f"exit code: {res.exit_code}")
    return (out.rstrip("\n") + "\n" if out else "") + "".join(f"[{n}]\n" for n in notes)


def bash(bench: Workbench, args: dict[str, Any]) -> ToolOutcome:
    res = bench.bash(args["command"])
    return ToolOutcome(
        format_exec(res, bench.max_obs_chars),
        res.exit_code,
        timed_out=res.timed_out,
        resource_exhausted=res.resource_exhausted or "",
        shell_reset=res.shell_reset or "",
    )


def read(bench: Workbench, args: dict[str, Any]) -> ToolOutcome:
    path, start, end = args["path"], args.get("start"), args.get("end")
    if start is not None and end is not None and start > end:
        raise ValueError(
            f"read() got start={start} after end={end}. Fix: give "
            f"start <= end, e.g. start={end}, end={start}"
        )
    lines = bench.read_file(path).splitlines()
    if not lines:
        return ToolOutcome(f"{path} is empty (0 lines).\n", 0)
    lo = start or 1
    if lo > len(lines):
        raise ValueError(
            f"{path} has {len(lines)} lines; start={lo} is past the end. Fix: "
            f"use start <= {len(lines)}"
        )
    hi = min(len(lines), end or len(lines))
    body = "\n".join(f"{i:6d}\t{lines[i - 1]}" for i in range(lo, hi + 1))
    return ToolOutcome(clip_text(body, bench.max_obs_chars) + "\n", 0)


def write(bench: Workbench, args: dict[str, Any]) -> ToolOutcome:
    bench.write_file(args["path"], args["content"])
    return ToolOutcome(f"Wrote {len(args['content'])} characters to {args['path']}.\n", 0)


def edit(bench: Workbench, args: dict[str, Any]) -> ToolOutcome:
    path, old, new = args["path"], args["old"], args["new"]
    if not old:
        raise ValueError(
            "edit() got an empty `old`; it must be the exact text to replace, "
            "copied from the file. Fix: to create or overwrite a whole file, "
            "use write(path, content); to insert text, put a neighbouring "
            "line in both `old` and `new`"
        )
    text = bench.read_file(path)
    count = text.count(old)
    if count == 0:
        raise ValueError(
            f"edit() did not find `old` in {path} (it occurs 0 times). Fix: "
            "copy it exactly from the file (read it first: spaces, tabs and "
            "line breaks must match)"
        )
    if count > 1:
        raise ValueError(
            f"edit() needs `old` to occur exactly once in {path}; it occurs "
            f"{count} times. Fix: include more surrounding lines in `old`"
        )
    bench.write_file(path, text.replace(old, new, 1))
    return ToolOutcome(f"Edited {path}.\n", 0)


def not_a_file(path: str, err: FileNotFoundError, is_dir: bool, limit: int) -> str:
    """The observation for a path that names no file (a folder, or nothing)."""
    if is_dir:
        ls = json.dumps({"tool": "bash", "args": {"command": f"ls {path}"}})
        return f"Error: {path} is a folder, not a file. Fix: list it: {ls}\n"
    return clip_text(f"Error: {err}", limit) + "\n"
