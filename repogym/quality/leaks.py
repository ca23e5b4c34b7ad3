"""Leak scan: does anything a sandbox of the task can read state a sealed expected value?

Sealing keeps the hidden tests' expected values out of the grading run's sandbox
(:mod:`repogym.grading.seal`), so a forger earns a sealed check only by knowing its answer.
That fails when the task itself tells the answer: a docstring of the repository that says
``shape([]) == (0, 0)``, a doctest whose output line is the hidden literal, a statement
that quotes the expected value. A payload that greps the workspace for such lines answers
the matching checks without any fix.

:func:`scan` looks, for each sealed value check (``==``, ``approx``, ``in``, ``contains``) of
a task, in everything a sandbox of the task can read (every text file of ``repo/``, the
statement, ``reproduction.py`` when the task has one) for:

- the **assertion form**: ``<computed side> == <literal>`` (or ``in``) as the test writes
  it, whitespace (but between two words) and quote style ignored, with the computed side also
  without its module qualifier (``m.shape([])`` -> ``shape([])``), and the literal as written or as
  its ``repr``;
- the **doctest form**: a ``>>> <computed side>`` line followed by the literal's line;
- the **bare literal**, only when its text (whitespace removed) has at least
  :data:`BARE_CHARS` characters: a short literal (``0``, ``True``, ``[]``, ``'a'``)
  matches almost anywhere, so it counts only in the two forms above;
- for a ``contains`` check (``"<h1 id=...>" in html``), the **text itself**, unquoted,
  anywhere, when it is long enough to be a value seal at all: a forger's value may hold any
  phrase the workspace has.

A hit makes the check *leaked*: it no longer counts as a value seal (validation's "by a
value" count, :attr:`repogym.grading.seal.Seal.strong`), and ``repogym validate`` names the
file and line where its value can be read. Exception checks, ``is`` and truth checks are
weak already and are not scanned. The text is read and normalised once per task; each check
costs a few regular-expression searches over it.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

from repogym.grading.grader import planted_seals
from repogym.grading.seal import CONTAINS_CHARS, Seal
from repogym.scenarios.task import Task

#: A literal whose text (whitespace removed) is at least this long is looked for on its own.
BARE_CHARS = 12
#: Files larger than this are not read (data, not documentation).
MAX_FILE_BYTES = 2 << 20
_SPACE = re.compile(r"\s+")
_GAP = re.compile(r"(?<!\w) | (?!\w)")


@dataclasses.dataclass(frozen=True)
class Leak:
    """A sealed check whose expected value a sandbox of the task can read.

    Attributes:
        test: The task's node id of the test function that holds the check.
        file: The test file (workspace path) and ``line`` the check's line in it.
        where: Where the value can be read: ``repo/<path>``, ``statement`` or
            ``reproduction.py``; ``where_line`` its line there (1-based).
        form: ``assertion``, ``doctest`` or ``literal``; ``text`` what was found.
    """

    test: str
    file: str
    line: int
    where: str
    where_line: int
    form: str
    text: str

    def __str__(self) -> str:
        return (
            f"{self.file}:{self.line} ({self.test}): its expected value can be read in "
            f"{self.where}:{self.where_line} ({self.form} {self.text!r})"
        )


def normalised(text: str) -> str:
    """``text`` with one quote style and no whitespace except one space between two word
    characters (``f(1, 2) == 10 units`` -> ``f(1,2)==10 units``): how forms are compared."""
    return _GAP.sub("", _SPACE.sub(" ", text.strip())).replace('"', "'")


_BOUND = re.compile(r"^(\w+)=(?!=)(.+)$")
_NAMES_COMPARED = re.compile(r"^assert (\w+)==(\w+)(?!\w)")


def _compared_names(lines: list[str]) -> Iterator[tuple[int, str]]:
    """``X==Y`` (with the line number of the assert) for each ``assert a == b`` whose names
    the few lines before it bind (``_actual = X``, ``_expected = Y``, as a reproduction made
    from a test writes an assertion so that it says what it got): the comparison the
    assertion states, in the form the scan looks for."""
    for i, line in enumerate(lines):
        if not (m := _NAMES_COMPARED.match(line)):
            continue
        bound: dict[str, str] = {}
        for before in lines[max(0, i - 4) : i]:
            if b := _BOUND.match(before):
                bound[b.group(1)] = b.group(2)
        if m.group(1) in bound and m.group(2) in bound:
            yield i + 1, f"{bound[m.group(1)]}=={bound[m.group(2)]}"


class Corpus:
    """Everything a sandbox of a task can read, normalised line by line, in one string."""

    def __init__(self, sources: dict[str, str]) -> None:
        lines: list[str] = []
        self.places: list[tuple[str, int]] = []
        for where, text in sources.items():
            own = [normalised(line) for line in text.splitlines()]
            for i, line in enumerate(own, 1):
                lines.append(line)
                self.places.append((where, i))
            for i, line in _compared_names(own):  # after the file's lines: indices stay
                lines.append(line)
                self.places.append((where, i))
        self.lines = lines
        self.text = "\n".join(lines)
        self.starts: list[int] = []
        at = 0
        for line in lines:
            self.starts.append(at)
            at += len(line) + 1
        self.doctests: dict[str, list[int]] = {}
        for i, line in enumerate(lines):
            if line.startswith(">>>"):
                self.doctests.setdefault(line[3:], []).append(i)

    def find(self, needle: str) -> int | None:
        """The line index of the first occurrence of ``needle`` not inside a longer name or
        number, or None."""
        if not needle or needle not in self.text:  # the common case, at C speed
            return None
        head = r"(?<![\w.])" if re.match(r"\w", needle) else ""
        tail = r"(?!\w|\.\d)" if re.match(r"\w", needle[-1]) else ""
        pattern = re.compile(head + re.escape(needle) + tail)
        m = pattern.search(self.text)
        return None if m is None else bisect.bisect_right(self.starts, m.start()) - 1

    def doctest(self, computed: str, literals: set[str]) -> int | None:
        """The line index of a ``>>> computed`` line whose next line is one of ``literals``."""
        for i in self.doctests.get(computed, []):
            if i + 1 < len(self.lines) and self.lines[i + 1] in literals:
                return i
        return None


def readable(task: Task) -> dict[str, str]:
    """Where -> text of everything a sandbox of ``task`` can read that the task wrote: the
    text files of ``repo/`` (``repo/<path>``), the statement and ``reproduction.py``."""
    out: dict[str, str] = {"statement": task.statement}
    repro = task.path / "reproduction.py"
    if repro.is_file() and not repro.is_symlink():
        out["reproduction.py"] = repro.read_text(errors="replace")
    for path in sorted(_files(task.repo_dir)):
        try:
            data = path.read_bytes()
        except OSError:  # unreadable here: the sandbox's copy is the same file
            continue
        if b"\0" not in data:
            out[f"repo/{path.relative_to(task.repo_dir)}"] = data.decode("utf-8", "replace")
    return out


def _files(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        if ".git" in path.relative_to(root).parts or path.is_symlink() or not path.is_file():
            continue
        if path.stat().st_size <= MAX_FILE_BYTES:
            yield path


class _Source:
    """A test file's lines (UTF-8, as ``ast`` counts columns) and its asserts by line."""

    def __init__(self, text: str) -> None:
        self.lines = text.encode("utf-8", "surrogateescape").splitlines(keepends=True)
        self.asserts = _asserts(ast.parse(text))

    def segment(self, node: ast.AST) -> str:
        """The source text of ``node`` (``ast.get_source_segment`` splits the file on every
        call: too slow for files with thousands of assertions)."""
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            data = self.lines[first][node.col_offset : node.end_col_offset]
        else:
            data = b"".join(
                [
                    self.lines[first][node.col_offset :],
                    *self.lines[first + 1 : last],
                    self.lines[last][: node.end_col_offset],
                ]
            )
        return data.decode("utf-8", "surrogateescape")


def _asserts(tree: ast.Module) -> dict[int, list[ast.Assert]]:
    """The file's ``assert`` statements by line."""
    out: dict[int, list[ast.Assert]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            out.setdefault(node.lineno, []).append(node)
    return out


def _forms(seal: Seal, source: _Source) -> tuple[list[tuple[str, str]], set[str], list[str]]:
    """(computed side, operator) pairs, literal texts, and bare-literal texts of the
    assertion at ``seal.line`` (all normalised)."""
    # a gold check's expectation is what gold computed: the grader has no literal for it
    literals = set() if seal.gold else {normalised(_repr(seal.expected))}
    pairs: list[tuple[str, str]] = []
    for node in source.asserts.get(seal.line, []):
        parts = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
        for part in parts:
            if not (
                isinstance(part, ast.Compare)
                and len(part.ops) == 1
                and isinstance(part.ops[0], ast.Eq | ast.In)
            ):
                continue
            op = "==" if isinstance(part.ops[0], ast.Eq) else "in"
            computed, literal = _sides(part.left, part.comparators[0])
            if isinstance(literal, ast.Call) and literal.args and _name(literal.func) == "approx":
                literal = literal.args[0]
            # only a value's text: ``result == expected`` states nothing about ``expected``
            if _expected_like(literal) and (text := source.segment(literal)):
                literals.add(normalised(text))
            pairs += [(name, op) for name in _computed_names(source, computed)]
    bare = [lit for lit in literals if len(lit) >= BARE_CHARS]
    if seal.op == "contains" and len(text := normalised(seal.expected)) >= CONTAINS_CHARS:
        bare.append(text)  # the text itself, anywhere: a forger's value may hold it
    return pairs, literals, bare


def _sides(left: ast.expr, right: ast.expr) -> tuple[ast.expr, ast.expr]:
    """(computed side, expected side) of a comparison, as sealing reads it: the right side
    is the expected value unless only the left one is a literal or a value expression."""
    if not _expected_like(right) and _expected_like(left):
        return right, left
    return left, right


#: Names an expected-value expression may call (the standard library's value constructors).
_VALUE_CALLS = {
    "date",
    "datetime",
    "time",
    "timedelta",
    "timezone",
    "Decimal",
    "Fraction",
    "UUID",
    "approx",
    "tuple",
    "list",
    "set",
    "frozenset",
    "dict",
    "range",
}


def _expected_like(node: ast.expr) -> bool:
    """A literal, or an expression that calls only value constructors."""
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
    return bool(calls) and all(_name(c.func) in _VALUE_CALLS for c in calls)


def _computed_names(source: _Source, node: ast.expr) -> list[str]:
    """The computed side's text, and without its module qualifier (``m.f(x)`` -> ``f(x)``)."""
    text = source.segment(node)
    if not text:
        return []
    out = [normalised(text)]
    func = node.func if isinstance(node, ast.Call) else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        out.append(normalised(text)[len(func.value.id) + 1 :])
    return out


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:  # a value without a repr cannot be looked for
        return ""


def scan(task: Task, corpus: Corpus | None = None) -> list[Leak]:
    """Every sealed value check of ``task`` whose expected value a sandbox can read."""
    masked, files = planted_seals(task)
    corpus = corpus or Corpus(readable(task))
    sources: dict[str, _Source] = {}
    leaks: list[Leak] = []
    for seal in masked.seals:
        if seal.op not in ("==", "approx", "in", "contains"):
            continue
        rel = seal.path
        if rel not in sources:
            sources[rel] = _Source(files[rel].read_text(encoding="utf-8", errors="surrogateescape"))
        if (hit := _hit(seal, sources[rel], corpus)) is not None:
            index, form, found = hit
            where, line = corpus.places[index]
            leaks.append(Leak(seal.test, rel, seal.line, where, line, form, found))
    return leaks


def _hit(seal: Seal, source: _Source, corpus: Corpus) -> tuple[int, str, str] | None:
    pairs, literals, bare = _forms(seal, source)
    for computed, op in pairs:
        for literal in sorted(literals):
            form = normalised(f"{computed} {op} {literal}")
            if (i := corpus.find(form)) is not None:
                return i, "assertion", form
        if (i := corpus.doctest(computed, literals)) is not None:
            return i, "doctest", f">>> {computed}"
    for literal in sorted(bare):
        if (i := corpus.find(literal)) is not None:
            return i, "literal", literal
    return None


def leaked_checks(leaks: list[Leak]) -> frozenset[tuple[str, int]]:
    """(test file, line) of each leaked check: what :func:`repogym.grading.grader.grade` takes
    as ``leaked``."""
    return frozenset((leak.file, leak.line) for leak in leaks)
