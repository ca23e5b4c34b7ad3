"""The docs match the command line: every runnable example (a ```console block's ``$ repogym``
lines) exits 0 without a traceback, and every ``repogym <command> --flag`` the docs mention
is an option of that command's parser.

Marking an example runnable: put it in a fenced block with the info string ``console`` and
the prompt ``$ ``; mark only cheap commands (``--help``, ``repogym tasks``, ``repogym
agents``, ...), they run in the test suite.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from repogym.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
#: Where a command in a line of text ends: a comment, a pipe or another command, a code span.
_END = re.compile(r"\s#|\s\||&&|;|`|\)\s|\s\\$")
_COMMAND = re.compile(r"\brepogym ([a-z][a-z-]*)(.*)")


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """Every fenced block of a Markdown text: (info string, lines)."""
    out, info, lines = [], None, []
    for line in text.splitlines():
        fence = re.match(r"^\s*```(\S*)", line)
        if fence and info is None:
            info, lines = fence.group(1), []
        elif fence:
            out.append((info, lines))
            info = None
        elif info is not None:
            lines.append(line)
    return out


def runnable() -> list[tuple[str, str]]:
    """(doc name, command line) of every ``$ repogym ...`` line of a ```console block."""
    found = []
    for doc in DOCS:
        for info, lines in _blocks(doc.read_text()):
            if info == "console":
                found += [
                    (doc.name, x.strip()[2:]) for x in lines if x.strip().startswith("$ repogym ")
                ]
    return found


def mentions(docs: dict[str, str] | None = None) -> list[tuple[str, str, list[str]]]:
    """(doc name, command, its words) of every ``repogym <command> ...`` in the docs (name ->
    text; default: docs/ and README.md); the words stop at a comment, a pipe, the end of a
    code span."""
    found = []
    docs = docs if docs is not None else {d.name: d.read_text() for d in DOCS}
    for doc, text in docs.items():
        for line in text.splitlines():
            for m in _COMMAND.finditer(line):
                rest = _END.split(m.group(2), maxsplit=1)[0]
                try:
                    words = shlex.split(rest)
                except ValueError:
                    words = rest.split()
                found.append((doc, m.group(1), words))
    return found


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return set(parser._option_string_actions)


def test_the_docs_mark_runnable_examples() -> None:
    assert len(runnable()) >= 5, "mark cheap doc examples as ```console blocks with `$ `"


@pytest.mark.parametrize(("doc", "line"), runnable())
def test_a_runnable_doc_example_runs(
    doc: str, line: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In this process (a new interpreter per example would cost seconds each): an exception
    # fails the test with its traceback; `--help` exits through SystemExit(0).
    monkeypatch.chdir(ROOT)
    argv = shlex.split(line)
    assert argv[0] == "repogym"
    try:
        code = main(argv[1:])
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    assert code == 0, f"{doc}: `{line}` exited {code}: {out.err[-2000:]}"
    assert "Traceback" not in out.out + out.err, f"{doc}: `{line}`"
    assert out.out.strip(), f"{doc}: `{line}` printed nothing"


def unknown_flags(found: list[tuple[str, str, list[str]]]) -> tuple[list[str], int]:
    """The ``doc: repogym command --flag`` the parser does not take, and how many flags
    were checked."""
    commands = _subcommands(build_parser())
    wrong, checked = [], 0
    for doc, name, words in found:
        parser = commands.get(name)
        if parser is None:  # prose ("repogym ships ..."), not a command
            continue
        actions = _subcommands(parser)
        if actions and words and words[0] in actions:
            parser = actions[words[0]]
        known = _options(parser)
        for word in words:
            flag = word.strip("[](),.").split("=", 1)[0]
            if re.fullmatch(r"--[a-z][a-z0-9-]*", flag):
                checked += 1
                if flag not in known:
                    wrong.append(f"{doc}: repogym {name} {flag}")
    return wrong, checked


def test_the_flag_check_finds_a_flag_a_command_does_not_take() -> None:
    doc = (
        "Run `repogym new-task my-task --no-such-flag` and\n"
        "```\nrepogym suite fetch realpy --workers 2 [--bogus N]  # --ignored\n```\n"
    )
    assert unknown_flags(mentions({"x.md": doc})) == (
        ["x.md: repogym new-task --no-such-flag", "x.md: repogym suite --bogus"],
        3,
    )


def test_every_flag_the_docs_give_a_command_exists() -> None:
    wrong, checked = unknown_flags(mentions())
    assert checked > 50
    assert not wrong, "flags the docs give that the commands do not take:\n" + "\n".join(wrong)


def test_every_command_the_docs_name_exists() -> None:
    commands = _subcommands(build_parser())
    named = {name for _, name, words in mentions() if words and words[0].startswith("-")}
    assert named <= set(commands), sorted(named - set(commands))
