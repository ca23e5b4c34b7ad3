"""A committed statement's first line written again from its own body.

Statements written before :func:`repogym.scenarios.bug_reports.title` opened with one of a
few fixed sentences (```f` misbehaves in `pkg`.``, ``A bug report against `pkg`: code that
uses it fails with``, ``A bug report against `pkg`, written as its maintainers described
the fix in the changelog of release V:``). :func:`retitle` replaces such a first line (up to
the first blank line) with the one the generators now write, read from what the body says:

- ```call` returns X; it should return Y.`` / ```call` raises E: m; it should raise F.``
  sentences and ``This code fails: ...`` messages (one, or one ``- `` bullet each for
  several problems): :func:`~repogym.scenarios.bug_reports.title`;
- ``- `` bullets of failure messages: :func:`~repogym.scenarios.bug_reports.failures_title`;
- a quoted changelog entry: :func:`~repogym.scenarios.history.changelog_title`.

Everything after the first line is kept byte for byte; a statement that opens otherwise (a
hand-written title) is left as it is. ``python -m repogym.scenarios.retitle [MANIFEST...]``
rewrites suite manifests in place (default: RealPy's), keeping their JSON layout.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from repogym.scenarios import bug_reports, history

#: RealPy's committed manifests.
REALPY = Path(__file__).parent / "suites" / "realpy"

_ONE = re.compile(r"`(?P<f>[^`]+)` misbehaves in `(?P<p>[^`]+)`\.")
_NONE = re.compile(r"Something misbehaves in `(?P<p>[^`]+)`\.")
_SEVERAL = re.compile(r"(?P<n>\d+) problems in `(?P<p>[^`]+)`(?: \((?P<fs>.*)\))?\.")
_CHANGELOG = re.compile(
    r"A bug report against `(?P<p>[^`]+)`, written as its maintainers described the fix "
    r"in the changelog of release (?P<v>\S+):"
)
_FAILURES = re.compile(r"A bug report against `(?P<p>[^`]+)`: code that uses it fails with")
_SENTENCE = re.compile(
    r"`(?P<call>.+?)` (?P<av>returns|raises) (?P<a>.*); it should (?P<ev>return|raise) "
    r"(?P<e>.*)\."
)
_FAILS = "This code fails"
#: Lengths tried for a title from a changelog entry, longest first.
_LIMITS = (history.TITLE_CHARS, 72, 56, 40)
_CODE = re.compile(r"`[^`\n]*`")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def template(statement: str) -> str:
    """A statement's first line (up to the first blank line) with every code span and
    every number replaced by a placeholder: what two titles share when they differ only in
    names and values."""
    first = statement.split("\n\n", 1)[0]
    return _NUMBER.sub("<n>", _CODE.sub("<code>", first))


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == "`" else text


def _check(item: str, function: str) -> tuple[bug_reports.Check, str]:
    """A check (and what its report observed) read back from a sentence of a report."""
    if item.startswith(_FAILS):
        observed = item[len(_FAILS) :].removeprefix(": ").removeprefix(".")
        return bug_reports.Check((), (), "", "", "", function, source="test"), observed
    if m := _SENTENCE.fullmatch(item):
        actual = f"{m['av']} {_unquote(m['a'])}"
        expected = f"{m['ev']} {_unquote(m['e'])}"
        return bug_reports.Check((), (), m["call"], actual, expected, function), ""
    return bug_reports.Check((), (), "", "", "", function, source="test"), ""


def _report_title(first: str, body: str) -> str | None:
    """The new first line of a report of checks (None: not one)."""
    items = body.split(f"\n\n{bug_reports.HEADING}", 1)[0]
    if m := _ONE.fullmatch(first) or _NONE.fullmatch(first):
        functions = [m["f"]] if "f" in m.groupdict() else []
        check, observed = _check(items, functions[0] if functions else "")
        return bug_reports.title([check], m["p"], [observed])
    if not (m := _SEVERAL.fullmatch(first)):
        return None
    functions = re.findall(r"`([^`]+)`", m["fs"] or "")
    bullets = [line[2:] for line in items.split("\n") if line.startswith("- ")]
    if len(bullets) != int(m["n"]) or len(functions) > len(bullets):
        return None
    found = [
        _check(b, functions[i % len(functions)] if functions else "") for i, b in enumerate(bullets)
    ]
    return bug_reports.title([c for c, _ in found], m["p"], [o for _, o in found])


def _history_title(first: str, body: str) -> str | None:
    """The new first line of a report from a changelog entry or from failure messages."""
    if m := _CHANGELOG.fullmatch(first):
        entry = body.split("\n\nThis repository still has the bug", 1)[0]
        if not entry.startswith("> "):
            return None
        for limit in _LIMITS:  # a shorter title where the statement would be too long
            new = history.changelog_description(m["p"], m["v"], entry[2:], limit)
            head, _, rest = new.partition("\n\n")
            if not body.startswith(rest):
                return None
            if len(head) + 2 + len(body) <= bug_reports.MAX_CHARS:
                break
        return head
    if m := _FAILURES.fullmatch(first):
        messages = [line[2:] for line in body.split("\n\n", 1)[0].split("\n")]
        return (
            f"{bug_reports.failures_title(m['p'], messages)}\nCode that uses `{m['p']}` fails with"
        )
    return None


def retitle(statement: str) -> str:
    """``statement`` with its first line written again from its body (see the module
    docstring); the rest byte for byte as it was. A statement that does not open with an
    old fixed sentence comes back unchanged."""
    first, sep, body = statement.partition("\n\n")
    if not sep:
        return statement
    new = _report_title(first, body) or _history_title(first, body)
    return statement if new is None else new + sep + body


def retitle_manifest(path: Path) -> int:
    """Retitle every task's statement of a suite manifest in place (its JSON layout kept:
    one-space indents, UTF-8 as is); how many changed."""
    data = json.loads(path.read_text(encoding="utf-8"))
    changed = 0
    for task in data.get("tasks", []):
        new = retitle(task["statement"])
        changed += new != task["statement"]
        task["statement"] = new
    if changed:
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


def manifests(folder: Path = REALPY) -> list[Path]:
    """A suite folder's package manifests (not its ``suite.json``)."""
    return sorted(p for p in folder.glob("*.json") if p.name != "suite.json")


def statements(paths: Iterable[Path]) -> list[str]:
    """Every task's statement of the manifests ``paths``."""
    return [
        t["statement"]
        for p in paths
        for t in json.loads(p.read_text(encoding="utf-8")).get("tasks", [])
    ]


def templates(texts: Sequence[str]) -> Counter[str]:
    """How many statements share each first-line :func:`template`."""
    return Counter(template(t) for t in texts)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    paths = [Path(a) for a in args] or manifests()
    for path in paths:
        print(f"{path}: {retitle_manifest(path)} statements retitled")
    counts = templates(statements(paths))
    total = sum(counts.values())
    for text, n in counts.most_common(5):
        print(f"{n:4d}/{total}  {text!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
