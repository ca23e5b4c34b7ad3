"""Restating a bug report on other inputs, so that it states no hidden test's answer.

A synthesised report reproduces the bug with the inputs of a failing test, so its script
can hold the very value that test expects (``take_nth(2, 'ABCDE')`` should give ``['A',
'C', 'E']``). Sealing keeps that value out of the grading run's files, and the leak scan
(:mod:`repogym.quality.leaks`) rightly counts a sealed check whose value the statement
states as weak: a forger that reads the report answers it. The fix is the report a user
would write about the same bug from their own data: the same calls on other inputs.

:func:`restate` makes such a report for a fetched task:

1. **Other inputs.** :func:`variants` rewrites the script's input literals (never the
   expected values): one word of its strings renamed throughout them (``'foo'`` ->
   ``'gpp'``, a word the script does not use), or one integer moved by one.
2. **Expected values from the gold code.** Every ``assert A == B`` whose ``B`` is a literal
   (or a name bound to one) records ``A`` instead (:func:`instrument`); the script is run in
   a sandbox of the task with the gold patch, and each ``B`` becomes what gold computed
   there (:func:`rebuild`). A value that is not a literal, or that differs between the
   asserts sharing it, rejects the variant.
3. **Verified, and leak-free.** The new script must fail by its own assertion without the
   fix and exit 0 with it, and the new statement (report and script) must state no sealed
   expectation of the task's tests (:func:`repogym.quality.leaks.scan` over it alone), the
   new script may assert no value a hidden test is sealed against, however it is spelled
   (:func:`hidden_values`: compared by canonical value, so ``'\\u2560'`` and ``'╠'`` are
   one; a value too short to be specific, ``10`` or ``True``, is not compared), and
   nothing of the fix may show (:func:`repogym.scenarios.bug_reports.leaks`).
   Inputs are never what a script locates the package with (``sys.path.insert``).

A report that says what a call returned and should return (``replay``) or quotes the
script's failure (``This code fails: ...``) gets the new script's failure; a changelog
report keeps its quote. Reports of several bugs are left as they are.

4. **Or what the code gave.** A release-history report that lists the failing tests'
   messages states each test's expected value there (``assert 'a ' == 'a'``). Where no
   variant restates it and its script states no hidden value, each listed comparison is
   cut to what the code gave (:func:`cut_failures`): the report a user writes who knows
   the result is wrong before they know the right one.

5. **Or the crash alone.** Where the script fails by an exception the code raises (a
   ``TypeError`` inside the call, not its own assertion), the expected value is not what
   shows the bug: each comparison is cut to its computed side, and the assignments no
   longer read (the expected value a local held) go (:func:`crash_script`). The new script
   must fail with the same error without the fix and exit 0 with it.

``repogym suite restate`` runs it over a suite's fetched tasks and writes the manifests.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import json
import re
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from repogym.grading import gold as gd
from repogym.grading import seal as sl
from repogym.grading.grader import code_digest, planted_seals
from repogym.grading.launcher import canon
from repogym.quality.leaks import Corpus
from repogym.quality.leaks import scan as scan_leaks
from repogym.quality.pool import grading_pool
from repogym.quality.sandboxed_tests import run_reproduction
from repogym.sandbox import Limits, SandboxSpec, make_sandbox
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios import bug_reports, history
from repogym.scenarios.task import Task, load_task

if TYPE_CHECKING:
    from repogym.quality.validate import TaskReport

#: Variants tried per task, at most.
MAX_VARIANTS = 24
#: Why :func:`restate` leaves a report as it is that states no hidden value.
NO_LEAK = "the statement states no sealed expectation"
#: Why :func:`restate` leaves a task without a script as it is.
NO_SCRIPT = "no reproduction.py"
#: What the instrumented script prints before its records.
_MARK = "RG-RESTATE-RECORDS "
#: A word of a string: a run of letters, digits and ``_``; only one of letters alone is
#: renamed (``json_build_object`` is a name, not a word to change).
_WORD = re.compile(r"[A-Za-z0-9_]+")
_FENCE = re.compile(r"(^Reproduction:[ \t]*\n\s*```python[ \t]*\n)(.*?)(^```)", re.M | re.S)
#: A string literal's prefix and opening quote (``f"``, ``rf'''``).
_PREFIX = re.compile(r"[A-Za-z]*(?:'''|\"\"\"|'|\")")
#: The paragraph a replay or inline report states the failure in.
_SAID = re.compile(
    r"^(`[^\n]*` (?:returns|raises) [^\n]*; it should [^\n]*|This code fails[^\n]*)$", re.M
)
#: Its bullets, in a report of several bugs.
_BULLET = re.compile(
    r"^(- (?:`[^\n]*` (?:returns|raises) [^\n]*; it should [^\n]*|This code fails[^\n]*))$", re.M
)


#: A failure a release-history report lists that compares what the code gave with what a
#: test expects: pytest's ``assert GOT == EXPECTED`` and unittest's ``GOT != EXPECTED``,
#: with the diff either prints after it.
_COMPARED = re.compile(r"^- (?:(?P<error>\w+): )?(?:assert )?(?P<got>.+?) (?:==|!=) ")
#: :attr:`Restated.change` of a report whose listed failures were cut (:func:`cut_failures`).
CUT = "the failures it lists cut to what the code gave"
#: :attr:`Restated.change` of a report whose script was cut to the calls that crash.
CRASH = "the comparisons cut to the calls that crash"
_CRASHED = re.compile(r"^(?!AssertionError\b)\w*(?:Error|Exception)\b")


@dataclasses.dataclass(frozen=True)
class Restated:
    """A task's report on other inputs: the new ``statement`` and ``reproduction``, and
    ``change`` (what was changed in the inputs)."""

    task_id: str
    statement: str
    reproduction: str
    change: str


# -- the script's expected values -----------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Site:
    """A comparison of the script: the statement, what it computed, what it expected."""

    stmt: ast.stmt
    left: ast.expr
    right: ast.expr


#: unittest's equality assertions a script may make (``self.assertEqual(A, B)``).
_ASSERT_EQUAL = (
    "assertEqual",
    "assertEquals",
    "assertListEqual",
    "assertTupleEqual",
    "assertDictEqual",
)


def _compared(node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    """(A, B) of ``assert A == B`` or ``self.assertEqual(A, B)`` (a ``TestCase`` method
    called on a name, as a reproduction written from a unittest test does), else None."""
    if (
        isinstance(node, ast.Assert)
        and isinstance(node.test, ast.Compare)
        and len(node.test.ops) == 1
        and isinstance(node.test.ops[0], ast.Eq)
    ):
        return node.test.left, node.test.comparators[0]
    if (
        isinstance(node, ast.Expr)
        and isinstance(call := node.value, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.attr in _ASSERT_EQUAL
        and len(call.args) == 2
        and not call.keywords
        and not any(isinstance(a, ast.Starred) for a in call.args)
    ):
        return call.args[0], call.args[1]
    return None


#: The standard library's value types a script may write its expected values as calls of
#: (``datetime(2024, 2, 29)``), by their repr's name: a value of exactly one of these types
#: reads back from its repr (``datetime.datetime(2024, 2, 29, 0, 0)``) where the arguments
#: are literals, so gold's value can be written in the script's own spelling.
VALUE_TYPES = (
    "datetime.datetime",
    "datetime.date",
    "datetime.time",
    "datetime.timedelta",
    "Decimal",
    "Fraction",
)
#: What those reprs' names are bound to when the host reads one back (as sealing reads an
#: expected value: :func:`repogym.grading.seal.expected_value`).
_REPR_NAMES = sl.value_names(
    ast.parse("import datetime\nfrom decimal import Decimal\nfrom fractions import Fraction")
)


def _callee(node: ast.expr) -> str | None:
    """The last name of a call's callee (``datetime`` of ``dt.datetime(...)``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def constructed(node: ast.expr) -> bool:
    """Whether an expression builds one of :data:`VALUE_TYPES` from literals
    (``datetime(2024, 2, 29)``, ``Decimal('1.5')``, ``timedelta(days=1)``)."""
    return (
        isinstance(node, ast.Call)
        and _callee(node.func) in {k.rpartition(".")[2] for k in VALUE_TYPES}
        and all(history.written_out(a) for a in node.args)
        and all(k.arg is not None and history.written_out(k.value) for k in node.keywords)
    )


def value_of(shown: str) -> tuple[object, str | None] | None:
    """The value a record's repr reads back as, and the arguments to write for it where it
    is a call of one of :data:`VALUE_TYPES` (``"2024, 2, 29, 0, 0"``; None for a literal);
    None where it reads back as neither (``<object at 0x1>``, an aware ``datetime``: its
    ``tzinfo`` is no literal)."""
    try:
        return ast.literal_eval(shown), None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    try:
        node = ast.parse(shown, mode="eval").body
    except SyntaxError:
        return None
    if not (constructed(node) and ast.unparse(node.func) in VALUE_TYPES):
        return None
    ok, value = sl.expected_value(node, _REPR_NAMES)
    if not ok:
        return None
    return value, shown[shown.index("(") + 1 : shown.rindex(")")]


def _expected_form(node: ast.expr) -> bool:
    """Whether a side of a comparison reads as its expected value: a name, a literal or a
    value type built from literals (:func:`constructed`)."""
    return isinstance(node, ast.Name) or history.written_out(node) or constructed(node)


def _comparisons(tree: ast.Module) -> list[_Site]:
    """``assert A == B`` and ``self.assertEqual(A, B)`` statements whose ``B`` reads as the
    expected value (:func:`_expected_form`), or whose ``A`` does where ``B`` does not
    (``self.assertEqual(expected, f(x))``: unittest takes either order), in file order."""
    out = []
    for node in ast.walk(tree):
        if (pair := _compared(node)) is None:
            continue
        if _expected_form(pair[1]):
            out.append(_Site(node, *pair))
        elif _expected_form(pair[0]):
            out.append(_Site(node, pair[1], pair[0]))
    return sorted(out, key=lambda n: (n.stmt.lineno, n.stmt.col_offset))


def _scopes(tree: ast.Module) -> dict[int, ast.AST]:
    """``id`` of each node -> the function (or module) whose body holds it."""
    out: dict[int, ast.AST] = {}

    def visit(node: ast.AST, scope: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            out[id(child)] = scope
            visit(
                child, child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else scope
            )

    visit(tree, tree)
    return out


def _expected_sites(tree: ast.Module) -> list[tuple[_Site, ast.expr]] | None:
    """Each comparison (:func:`_comparisons`) with the expression that holds its expected
    value: ``B`` when
    it is a literal, else the value of the assignment to ``B`` that the assert reads (the
    latest one before it in the same function, followed through ``expected = other``);
    None when one cannot be found."""
    scopes = _scopes(tree)
    assigns = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
    ]

    def binding(name: str, line: int, scope: ast.AST, depth: int = 0) -> ast.expr | None:
        found = [
            a
            for a in assigns
            if a.targets[0].id == name and a.lineno < line and scopes.get(id(a)) is scope
        ]
        if not found or depth > 8:
            return None
        latest = max(found, key=lambda a: a.lineno)
        if isinstance(latest.value, ast.Name):
            return binding(latest.value.id, latest.lineno, scope, depth + 1)
        return latest.value

    out = []
    for a in _comparisons(tree):
        b = a.right
        if isinstance(b, ast.Name):
            target = binding(b.id, a.stmt.lineno, scopes.get(id(a.stmt), tree))
            if target is None:
                return None
        else:
            target = b
        out.append((a, target))
    return out


def expected_nodes(tree: ast.Module) -> set[int]:
    """``id`` of every node that is (inside) an expected value of the script's asserts."""
    out: set[int] = set()
    for _, target in _expected_sites(tree) or []:
        out |= {id(n) for n in ast.walk(target)}
    return out


class _Text:
    """Edits of a text by AST positions, applied from the end."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.edits: list[tuple[int, int, str]] = []

    def offset(self, line: int, col: int) -> int:
        return sum(len(x) for x in self.lines[: line - 1]) + len(
            self.lines[line - 1].encode()[:col].decode(errors="ignore")
        )

    def replace(self, node: ast.AST, new: str) -> None:
        self.edits.append(
            (
                self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset),
                new,
            )
        )

    def result(self) -> str:
        text = self.text
        for start, end, new in sorted(self.edits, reverse=True):
            text = text[:start] + new + text[end:]
        return text


def instrument(script: str) -> str | None:
    """``script`` with each ``assert A == B`` or ``self.assertEqual(A, B)`` (``B`` as
    :func:`_comparisons` takes it) replaced by a record of ``A``'s repr (and whether it
    reads back as the value: a literal, or exactly one of :data:`VALUE_TYPES`), printed at
    exit; None when it has no such assert."""
    tree = ast.parse(script)
    found = _comparisons(tree)
    if not found:
        return None
    text = _Text(script)
    for i, a in enumerate(found):
        left = ast.get_source_segment(script, a.left)
        text.replace(a.stmt, f"_rg_record({i}, ({left}))")
    head = (
        "import atexit as _rg_atexit, ast as _rg_ast, json as _rg_json\n"
        "_rg_seen = {}\n"
        "def _rg_record(i, value):\n"
        "    shown = repr(value)\n"
        "    try:\n"
        "        ok = _rg_ast.literal_eval(shown) == value\n"
        "    except Exception:\n"
        "        import datetime as _rg_dt, decimal as _rg_dec, fractions as _rg_fr\n"
        "        ok = type(value) in (_rg_dt.datetime, _rg_dt.date, _rg_dt.time,\n"
        "                             _rg_dt.timedelta, _rg_dec.Decimal, _rg_fr.Fraction)\n"
        "    _rg_seen.setdefault(str(i), []).append([shown, ok])\n"
        f"_rg_atexit.register(lambda: print({_MARK!r} + _rg_json.dumps(_rg_seen), flush=True))\n"
    )
    body = text.result()
    lines = body.splitlines(keepends=True)
    at = _after_future(tree)
    return "".join(lines[:at]) + head + "".join(lines[at:])


def _after_future(tree: ast.Module) -> int:
    """The line index after the module's docstring and ``from __future__`` imports."""
    at = 0
    for node in tree.body:
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) or (
            isinstance(node, ast.ImportFrom) and node.module == "__future__"
        ):
            at = node.end_lineno
        else:
            break
    return at


def records(output: str) -> dict[int, list[tuple[str, bool]]] | None:
    """What an instrumented script recorded (None: it printed no records)."""
    for line in reversed(output.splitlines()):
        if line.startswith(_MARK):
            try:
                data = json.loads(line[len(_MARK) :])
            except ValueError:
                return None
            return {int(k): [(s, bool(ok)) for s, ok in v] for k, v in data.items()}
    return None


def rebuild(script: str, seen: dict[int, list[tuple[str, bool]]]) -> str | None:
    """``script`` with each asserted expected value replaced by what gold computed (the
    ``seen`` records of its instrumented run): a literal, or a call of one of
    :data:`VALUE_TYPES` written with the script's own callee where the script wrote one
    (``datetime(2024, 1, 29, 0, 0)``); None when a value reads back as neither, an assert
    was not reached, or asserts sharing an expected value saw different values."""
    tree = ast.parse(script)
    sites = _expected_sites(tree)
    if sites is None:
        return None
    text = _Text(script)
    values: dict[int, tuple[ast.expr, set[str]]] = {}
    for i, (_, target) in enumerate(sites):
        got = seen.get(i)
        if not got or not all(ok for _, ok in got) or len({s for s, _ in got}) != 1:
            return None
        values.setdefault(id(target), (target, set()))[1].add(got[0][0])
    for target, shown in values.values():
        if len(shown) != 1:
            return None
        (new,) = shown
        if (read := value_of(new)) is None:
            return None
        if read[1] is not None:  # a value type: the script's callee, gold's arguments
            kind = type(read[0])
            if not (
                isinstance(target, ast.Call)
                and _callee(target.func) == kind.__name__
                and constructed(target)
            ):
                return None
            new = f"{ast.get_source_segment(script, target.func)}({read[1]})"
        text.replace(target, new)
    return text.result()


# -- other inputs ---------------------------------------------------------------------------
#: Words an input may be renamed to: the placeholders people write in bug reports.
PLACEHOLDERS = (
    "a b c d k m n p q v w x y z ab cd xy foo bar baz qux ham egg spam eggs alpha beta "
    "gamma delta omega apple pear plum kiwi lime mango grape red blue green pink gold "
    "alice bob carol dave erin frank grace heidi one two three four five six seven eight "
    "nine ten zero north south east west left right top bottom item value thing stuff "
    "quux fred thud plugh"
).split()


def _renamed(word: str, taken: set[str], avoid: set[str]) -> str | None:
    """A placeholder to write for ``word``: in its case, of its length where one is, that
    the script does not use and the package does not treat as a word of its own."""

    def cased(p: str) -> str:
        if word.isupper() and len(word) > 1:
            return p.upper()
        return p.capitalize() if word[:1].isupper() else p

    free = [p for p in PLACEHOLDERS if p not in taken and p not in avoid]
    same = [p for p in free if len(p) == len(word)]
    for p in same + free:
        return cased(p)
    return None


def _second(word: str, taken: set[str], avoid: set[str]) -> str | None:
    """Another placeholder for ``word`` than :func:`_renamed`'s."""
    first = _renamed(word, taken, avoid)
    return None if first is None else _renamed(word, taken | {first.lower()}, avoid)


def variants(  # noqa: C901 - each kind of input change, in the order they are tried
    script: str, prefer: Collection[str] = (), avoid: Collection[str] = ()
) -> Iterator[tuple[str, str]]:
    """(what changed, script) with other input literals: each word of the script's input
    strings renamed in all of them (the words of ``prefer`` first; never one of ``avoid``,
    the package's own words, such as the keywords of a language it parses: renaming
    ``select`` makes an input no user would write, but for a single letter, tried after
    the other words), then each number written in the input
    strings moved by one throughout them, then each input number (an integer, or a float
    written as a decimal) moved by one, then by two, then by seven.
    Expected values, docstrings and the ``sys.path`` lines are left as they are."""
    prefer, avoid = {w.lower() for w in prefer}, {w.lower() for w in avoid}
    tree = ast.parse(script)
    skip = expected_nodes(tree)
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    inside_fstrings = {
        id(c) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for c in ast.walk(n)
    }
    strings = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and id(n) not in skip | docs | inside_fstrings
        and "sys.path" not in ast.get_source_segment(script, n)
        and n.value not in ("src", "__main__")
    ]
    fstrings = [n for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)]
    skip |= {  # where the script finds the package, not an input
        id(c)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and "sys.path" in (ast.get_source_segment(script, n.func) or "")
        for c in ast.walk(n)
    }
    ints = [  # and floats written as decimals (``100.67``), moved by their whole part
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and id(n) not in skip
        and (
            type(n.value) is int
            or type(n.value) is float
            and re.fullmatch(r"\d+\.\d+", ast.get_source_segment(script, n) or "")
        )
    ]
    taken = {w.lower() for w in _WORD.findall(script)}
    words: list[str] = []
    for n in strings:
        for w in _WORD.findall(n.value):
            if w.isalpha() and w.isascii() and w not in words:
                words.append(w)
    # A package's own word is no input to rename, but a single letter is everyone's (the
    # package's constants hold 'f' as a format code; cssselect's `XPathExpr(element='f')`
    # had no other word): such letters come last.
    letters = [w for w in words if len(w) == 1 and w.lower() in avoid]
    words = [w for w in words if w.lower() not in avoid]
    words.sort(key=lambda w: w.lower() not in prefer)
    words += letters

    def renamed(names: dict[str, str]) -> str:
        pattern = re.compile(
            r"(?<![A-Za-z0-9_])(" + "|".join(re.escape(w) for w in names) + r")(?![A-Za-z0-9_])"
        )

        def sub(text: str) -> str:
            return pattern.sub(lambda m: names[m.group(1)], text)

        text = _Text(script)
        for n in strings:
            if pattern.search(n.value):
                text.replace(n, repr(sub(n.value)))
        for n in fstrings:  # the messages that quote the inputs say the new ones
            seg = ast.get_source_segment(script, n) or ""
            # the literal's prefix is no word of it: renaming 'f' made f"..." b"..."
            prefix = _PREFIX.match(seg)
            head, seg = (prefix.group(0), seg[prefix.end() :]) if prefix else ("", seg)
            parts = re.split(r"(\{\{|\}\}|\{[^{}]*\})", seg)
            out = "".join(p if p.startswith("{") and p != "{{" else sub(p) for p in parts)
            if out != seg:
                text.replace(n, head + out)
        return text.result()

    # every word of the hidden values at once (an input that holds two of them), then
    # each word alone
    both = [w for w in words if w.lower() in prefer and w.lower() not in avoid]
    if len(both) > 1:
        names: dict[str, str] = {}
        for w in both:
            if new := _renamed(w, taken | {n.lower() for n in names.values()}, avoid):
                names[w] = new
        if len(names) > 1:
            said = ", ".join(f"'{w}' renamed '{n}'" for w, n in names.items())
            yield f"{said} in the inputs", renamed(names)
    for pick in (_renamed, _second):  # each word to one placeholder, then to another
        for w in words:
            if (new := pick(w, taken, avoid)) is None:
                continue
            yield f"'{w}' renamed '{new}' in the inputs", renamed({w: new})
    # a number written inside an input string ('... where 1 = 2', '38.4'), never part of
    # a version or a name ('1.2.3', 'key1')
    numbers: list[str] = []
    for n in strings:
        for w in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", n.value):
            if w not in numbers:
                numbers.append(w)
    for w in numbers:
        whole, dot, fraction = w.partition(".")
        new = f"{int(whole) + 1}{dot}{fraction}"
        pattern = re.compile(rf"(?<![\w.]){re.escape(w)}(?![\w.])")
        text = _Text(script)
        for n in strings:
            if pattern.search(n.value):
                text.replace(n, repr(pattern.sub(new, n.value)))
        for f in fstrings:
            seg = ast.get_source_segment(script, f) or ""
            parts = re.split(r"(\{\{|\}\}|\{[^{}]*\})", seg)
            out = "".join(
                p if p.startswith("{") and p != "{{" else pattern.sub(new, p) for p in parts
            )
            if out != seg:
                text.replace(f, out)
        yield f"{w} made {new} in the input strings", text.result()
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}

    def argument(node: ast.AST) -> bool:
        """An integer passed to a call (``Duration(24)``, ``groupby([0], ...)``), not an
        index (``tokens[5]``): moving an index changes what is checked, not the input."""
        while (up := parents.get(id(node))) is not None:
            if isinstance(up, ast.Subscript) and node is up.slice:
                return False
            if isinstance(up, ast.Call):
                return node is not up.func
            if not isinstance(
                up, ast.List | ast.Tuple | ast.Set | ast.Dict | ast.UnaryOp | ast.keyword
            ):
                return False
            node = up
        return False

    def moved(n: ast.Constant, by: int) -> str:
        whole, dot, fraction = (ast.get_source_segment(script, n) or "").partition(".")
        return f"{int(whole) + by}{dot}{fraction}" if dot else repr(n.value + by)

    # each input number moved by one; then by two and by seven, for a table of hidden
    # tests that also holds the next value (num2words' 1000, 1001, ...)
    for by in (1, 2, 7):
        for n in (n for n in ints if argument(n)):
            new = moved(n, by)
            text = _Text(script)
            text.replace(n, new)
            call = parents.get(id(n))
            while call is not None and not isinstance(call, ast.Call):
                call = parents.get(id(call))
            if call is not None:  # the messages that quote the call quote the new one
                old_call = ast.get_source_segment(script, call) or ""
                start = _Text(old_call)
                line, col = (
                    n.lineno - call.lineno + 1,
                    n.col_offset - (call.col_offset if n.lineno == call.lineno else 0),
                )
                at = start.offset(line, col)
                new_call = (
                    old_call[:at]
                    + new
                    + old_call[at + len(ast.get_source_segment(script, n) or "") :]
                )
                for f in fstrings:
                    seg = ast.get_source_segment(script, f) or ""
                    if old_call and old_call in seg:
                        text.replace(f, seg.replace(old_call, new_call))
            old_text = ast.get_source_segment(script, n) or repr(n.value)
            yield f"{old_text} made {new} at line {n.lineno}", text.result()


# -- running and judging ----------------------------------------------------------------------
Runner = Callable[[str, bool], tuple[int, str]]


def sandbox_runner(
    task: Task, templates: TemplateCache, *, sandbox: str = "bwrap", timeout_s: float = 120.0
) -> Runner:
    """Runs a script as ``python reproduction.py`` in a fresh sandbox of ``task``: with the
    gold patch applied (``fixed``) or as the task's repo/ is (the template is built at the
    first run: a report with nothing to restate costs none)."""
    gold = task.solution_patch.read_text()

    def run(script: str, fixed: bool) -> tuple[int, str]:
        template = templates.get(task.repo_dir, task.sandbox_dependencies())  # built once
        sb = make_sandbox(sandbox, SandboxSpec(template, Limits(timeout_s=int(timeout_s))))
        try:
            if fixed:
                applied = sb.run("git apply --whitespace=nowarn -", stdin=gold.encode())
                if applied.exit_code != 0:
                    return 125, applied.output
            res = run_reproduction(sb, script, timeout_s)
            return (124 if res.timed_out else res.exit_code), res.stdout
        finally:
            sb.close()

    return run


def package_words(repo: Path) -> set[str]:
    """The words of the package's own string constants (keywords of a language it parses,
    names it knows): renaming one of those in an input changes what the input means."""
    words: set[str] = set()
    for path in sorted(repo.rglob("*.py")):
        rel = path.relative_to(repo).parts
        if any(p.startswith("test") or p in ("docs", "doc", "examples") for p in rel):
            continue
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except (SyntaxError, ValueError):
            continue
        docs = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
            and n.body
            and isinstance(n.body[0], ast.Expr)
        }
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
                words |= {w.lower() for w in _WORD.findall(n.value)}
    return words


def failures(output: str) -> list[str]:
    """The problems the script's own AssertionError reports, one per line (a script of
    several checks reports each), without the ``AssertionError:`` prefixes and without
    memory addresses (they differ per run). The diff unittest's ``assertEqual`` prints
    under its message (``- got``, ``+ expected``, ``? ^``) belongs to that problem."""
    lines = output.rstrip().splitlines()
    at = len(lines)
    while at > 0 and lines[at - 1].strip() and not lines[at - 1].startswith((" ", "\t")):
        at -= 1  # the exception's lines follow the traceback's last indented one
    out: list[str] = []
    for line in lines[at:]:
        while line.startswith("AssertionError"):
            line = line.partition(":")[2].strip() if ":" in line else ""
        if out and line.startswith(("- ", "+ ", "? ")):
            out[-1] += " " + bug_reports.without_addresses(" ".join(line.split()))
        elif line:
            out.append(bug_reports.without_addresses(line))
    return out or ["AssertionError"]


def hidden_values(task: Task) -> set[str]:
    """The fingerprints (:func:`repogym.grading.seal.fingerprint`) of the values the task's
    fail_to_pass tests are sealed against: literal expectations, and gold's values where
    recorded. A restated script may assert none of them, however it spells them."""
    masked, _ = planted_seals(task)
    gd.resolve(masked, gd.load(task.digest(), code_digest()) or {})
    wanted = {sl.function_of(masked.installed(t)) for t in task.test_spec.fail_to_pass}
    out: set[str] = set()
    for seal in masked.seals:
        if seal.test not in wanted or seal.op not in ("==", "approx", "in", "contains"):
            continue
        if seal.gold:
            out |= {p for prints in seal.cases.values() for p in prints}
        elif seal.op == "in":
            for value in seal.expected:
                out.add(_print(value))
        else:
            out.add(_print(seal.expected))
    out.discard("")
    return out


#: A value whose repr (whitespace removed) is shorter than this (``10``, ``True``, ``'ab'``)
#: is one many inputs share: asserting it states nothing of a hidden test.
SPECIFIC_CHARS = 5


def specific(shown: str) -> bool:
    """Whether a value, by its repr, is specific enough to give a hidden one away."""
    return len(re.sub(r"\s+", "", shown)) >= SPECIFIC_CHARS


def _print(value: object) -> str:
    try:
        return sl.fingerprint({"v": canon.encode(value)}) or ""
    except (TypeError, ValueError, RecursionError):
        return ""


def leaked_in(task: Task, statement: str) -> list[str]:
    """The sealed expectations of the task's fail_to_pass tests that ``statement`` states
    (``test: text``)."""
    f2p = {t.partition("[")[0] for t in task.test_spec.fail_to_pass}
    found = scan_leaks(task, Corpus({"statement": statement}))
    return [f"{x.test}: {x.text}" for x in found if x.test in f2p]


def _with_script(statement: str, script: str) -> str | None:
    """``statement`` with ``script`` as its reproduction; None when it has not exactly one."""
    if statement.count("```python") != 1 or not _FENCE.search(statement):
        return None
    return _FENCE.sub(lambda m: m.group(1) + script.rstrip() + "\n" + m.group(3), statement)


def new_statement(statement: str, script: str, observed: list[str]) -> str | None:
    """``statement`` with ``script`` as its reproduction and, for a replay or inline report,
    the failures ``observed`` as what it says (one sentence, or one bullet per check of a
    report of several; a release-history report that quotes the failing tests' messages
    quotes the new script's instead); None for a report it cannot restate."""
    if (out := _with_script(statement, script)) is None:
        return None
    said = _SAID.findall(out)
    bullets = _BULLET.findall(out)
    if bullets:
        if len(bullets) != len(observed) or said:
            return None
        for old, new in zip(bullets, observed, strict=True):
            out = out.replace(old, f"- This code fails: {new}", 1)
        return out
    if len(said) > 1 or (said and len(observed) != 1):
        return None
    if said:
        out = out.replace(said[0], f"This code fails: {observed[0]}", 1)
    elif quoted := history.LISTED_FAILURES.search(out):  # the old messages, the old values
        items = "".join(f"- AssertionError: {o}\n" for o in observed[:2])  # as it quoted
        out = out[: quoted.start(1)] + items + out[quoted.end(1) :]
    return out


def cut_failures(task: Task, statement: str) -> str | None:
    """``statement`` with each failure it lists (a release-history report that quotes the
    failing tests' messages, :data:`repogym.scenarios.history.LISTED_FAILURES`) that
    compares what the code gave with what a test expects cut to what the code gave, as a
    user reports a wrong result before they know the right one; None when there is none to
    cut, or the report still states a sealed expectation after (its script asserts one,
    or a test writes the expected value first)."""
    m = history.LISTED_FAILURES.search(statement)
    if m is None:
        return None
    lines = []
    for line in m[1].splitlines():
        if c := _COMPARED.match(line):
            error = c["error"] or "AssertionError"
            line = f"- {error}: the result is {c['got']}, not what the tests expect"
        lines.append(line)
    out = statement[: m.start(1)] + "".join(x + "\n" for x in lines) + statement[m.end(1) :]
    return None if out == statement or leaked_in(task, out) else out


def _stdlib_names(tree: ast.Module) -> set[str]:
    """Names a script binds by importing the standard library (``dedent``, ``OrderedDict``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            for a in node.names:
                top = (module or a.name).split(".")[0]
                if top in sys.stdlib_module_names and not getattr(node, "level", 0):
                    out.add(a.asname or a.name.split(".")[0])
    return out


def _pure(node: ast.expr, names: set[str]) -> bool:
    """Whether an expression calls nothing but builtins and the standard library's
    ``names`` (so dropping it drops no call of the code)."""
    return all(
        not isinstance(n, ast.Call)
        or (isinstance(n.func, ast.Name) and (n.func.id in names or hasattr(builtins, n.func.id)))
        for n in ast.walk(node)
    )


def crash_script(script: str) -> str | None:
    """``script`` with each comparison (``assert A == B``, ``self.assertEqual(A, B)``) cut
    to the side that computes (the other is a name or a value written out), and each
    assignment to a name no longer read whose value calls only builtins and the standard
    library removed (the expected value it held); None when nothing is cut."""
    try:
        tree = ast.parse(script)
    except SyntaxError:
        return None
    text, cut = _Text(script), 0
    for node in ast.walk(tree):
        if (pair := _compared(node)) is None:
            continue
        computes = [side for side in pair if not _expected_form(side)]
        if len(computes) == 1 and (segment := ast.get_source_segment(script, computes[0])):
            text.replace(node, segment)
            cut += 1
    if not cut:
        return None
    new = text.result()
    tree = ast.parse(new)
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    names, lines = _stdlib_names(tree), new.splitlines(keepends=True)
    gone: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and all(isinstance(t, ast.Name) and t.id not in read for t in node.targets)
            and _pure(node.value, names)
            and not lines[node.lineno - 1][: node.col_offset].strip()
            and not lines[node.end_lineno - 1][node.end_col_offset :].strip()
        ):
            gone |= set(range(node.lineno - 1, node.end_lineno))
    return "".join(line for i, line in enumerate(lines) if i not in gone)


def _crash_only(task: Task, run: Runner) -> Restated | str:
    """The report with its script cut to the calls that crash (:func:`crash_script`), or
    why not."""
    script = (task.path / "reproduction.py").read_text()
    code, out = run(script, False)
    crashed = failures(out)
    if code == 0 or not all(_CRASHED.match(f) for f in crashed):
        return "the script fails by its own comparison, not by a crash"
    new = crash_script(script)
    if new is None:
        return "the script crashes, and compares nothing to cut"
    code, out = run(new, False)
    if code == 0 or not bug_reports.fails_itself(out) or failures(out) != crashed:
        return "the script cut to its calls does not crash the same way"
    if run(new, True)[0] != 0:
        return "the script cut to its calls fails with the fix"
    if (stmt := _with_script(task.statement, new)) is None:
        return "a report without one reproduction block"
    if stmt == task.statement or leaked_in(task, stmt) or _shows_fix(task, stmt):
        return "the script cut to its calls still states a hidden value"
    return Restated(task.id, stmt, new, CRASH)


def restate(task: Task, run: Runner, *, max_variants: int = MAX_VARIANTS) -> Restated | str:
    """The task's report restated on other inputs (see the module docstring), or why not.
    A report no variant restates whose script fails by a crash has its comparisons cut to
    the calls (:func:`crash_script`); one whose leak is in the failures it lists, not in
    its script, has those failures cut to what the code gave (:func:`cut_failures`)."""
    why = _on_other_inputs(task, run, max_variants)
    if isinstance(why, Restated) or why in (NO_LEAK, NO_SCRIPT):
        return why
    if isinstance(crash := _crash_only(task, run), Restated):
        return crash
    if (cut := cut_failures(task, task.statement)) is not None and not _shows_fix(task, cut):
        return Restated(task.id, cut, (task.path / "reproduction.py").read_text(), CUT)
    return why


def _shows_fix(task: Task, statement: str) -> bool:
    """Whether a new report states a line of the task's fix or a test's name
    (:func:`repogym.scenarios.bug_reports.leaks`)."""
    gold = task.solution_patch.read_text()
    buggy = [
        (task.repo_dir / f).read_text(errors="replace")
        for f in re.findall(r"^\+\+\+ b/(\S+)", gold, re.M)
        if (task.repo_dir / f).is_file()
    ]
    return bug_reports.leaks(statement, gold, buggy, task.test_spec.all_tests)


def _on_other_inputs(task: Task, run: Runner, max_variants: int) -> Restated | str:
    """:func:`restate` on other inputs alone."""
    script_path = task.path / "reproduction.py"
    if not script_path.is_file():
        return NO_SCRIPT
    script = script_path.read_text()
    if not (leaked := leaked_in(task, task.statement)):
        return NO_LEAK
    prefer = {w for x in leaked for w in _WORD.findall(x.split(": ", 1)[1])}
    hidden = hidden_values(task)
    why = "no variant of the inputs"
    for n, (change, variant) in enumerate(variants(script, prefer, package_words(task.repo_dir))):
        if n >= max_variants:
            break
        probe = instrument(variant)
        if probe is None:
            return "the script asserts no expected value"  # no variant will
        code, out = run(probe, True)
        seen = records(out)
        if code != 0 or seen is None:
            why = f"{change}: the gold code fails the new inputs"
            continue
        rebuilt = rebuild(variant, seen)
        if rebuilt is None:
            why = f"{change}: gold's values there are no literals"
            continue
        asserted = {
            _print(read[0])
            for got in seen.values()
            for v, _ in got
            if specific(v) and (read := value_of(v)) is not None
        }
        if asserted & hidden:
            why = f"{change}: asserts a value a hidden test expects"
            continue
        code, out = run(rebuilt, False)
        if code == 0 or not bug_reports.fails_itself(out):
            why = f"{change}: the bug does not show on the new inputs"
            continue
        if run(rebuilt, True)[0] != 0:
            why = f"{change}: the new script fails with the fix"
            continue
        stmt = new_statement(task.statement, rebuilt, failures(out))
        if stmt is None:
            return "a report of several bugs"
        if len(stmt) > bug_reports.MAX_CHARS:
            why = f"{change}: statement too long"
            continue
        if found := leaked_in(task, stmt):
            why = f"{change}: still states {found[0]}"
            continue
        if _shows_fix(task, stmt):
            why = f"{change}: states a line of the fix or a test's name"
            continue
        return Restated(task.id, stmt, rebuilt, change)
    return why


def restate_all(
    tasks: list[Task],
    *,
    sandbox: str = "bwrap",
    workers: int = 1,
    say: Callable[[str], None] = print,
) -> dict[str, Restated | str]:
    """:func:`restate` for each task (``workers`` at once, a fresh template per task,
    removed after), in the order of ``tasks``."""
    templates = TemplateCache()

    def one(task: Task) -> Restated | str:
        try:
            got = restate(task, sandbox_runner(task, templates, sandbox=sandbox))
        except Exception as e:  # one task's failure is reported, the rest go on
            got = f"error: {type(e).__name__}: {e}"
        say(f"{task.id}: " + (got.change if isinstance(got, Restated) else got))
        return got

    try:
        with grading_pool(workers) as pool:
            found = list(pool.map(one, tasks))
    finally:
        templates.close()
    return {t.id: got for t, got in zip(tasks, found, strict=True)}


#: The files of a task folder that :func:`rewrite` changes. No grading reads them (the
#: sandbox holds ``repo/`` and the planted ``tests/``), so what was recorded at gold for the
#: folder before holds after.
REPORT_FILES = ("STATEMENT.md", "reproduction.py")


def rewrite(task: Task, got: Restated) -> Task:
    """Write ``got`` into ``task``'s folder (``STATEMENT.md``, the task's statement file,
    and ``reproduction.py``) and return the task as it now is. Gold's recorded values
    (:mod:`repogym.grading.gold`, keyed by every file of the folder) are recorded for the
    new folder too: they come from files the rewrite leaves alone. What a noop grading
    recorded is not carried: which checks are witnessed depends on what the statement
    states (the leak scan), so it is graded again when asked for.

    Raises:
        ValueError: the task's statement is not read from ``STATEMENT.md`` (a statement
            written inside ``task.toml`` is left to whoever wrote it).
    """
    statement = task.path / REPORT_FILES[0]
    if not statement.is_file() or statement.read_text() != task.statement:
        raise ValueError(
            f"{task.path}: its statement is not read from {REPORT_FILES[0]}, which a "
            "restated report replaces. Fix: move the statement there (statement_file = "
            f'"{REPORT_FILES[0]}" in task.toml)'
        )
    code = code_digest()
    gold = gd.load(task.digest(), code)
    statement.write_text(got.statement)
    (task.path / REPORT_FILES[1]).write_text(got.reproduction)
    new = load_task(task.path)
    if gold is not None:
        gd.save(new.digest(), code, gold)
    return new


def restate_valid(
    folders: Sequence[Path],
    reports: Sequence[TaskReport],
    *,
    sandbox: str = "bwrap",
    workers: int = 1,
    say: Callable[[str], None] = print,
) -> dict[str, Restated | str]:
    """Restate on other inputs, in its folder (:func:`rewrite`), each report of a task
    that validated (``reports``, one per folder) and states a hidden test's expected
    value: the stage ``repogym synth --pypi`` and ``repogym history`` run between validation
    and what measures the seal floor. A report that states one and cannot be restated is
    kept, and said: the floor counts the checks it gives away as weak.

    Returns:
        Task id -> the restated report, or why it was left as it is.
    """
    valid = [load_task(f) for f, r in zip(folders, reports, strict=True) if r.ok]
    found = restate_all(valid, sandbox=sandbox, workers=workers, say=lambda m: None)
    for task in valid:
        got = found[task.id]
        if isinstance(got, Restated):
            try:
                rewrite(task, got)
            except ValueError as e:  # a statement in task.toml: said, the task goes on
                found[task.id] = str(e)
                say(f"{task.id}: its report states a hidden value and was not restated: {e}")
                continue
            say(f"{task.id}: report restated ({got.change})")
        elif got != NO_LEAK:
            say(f"{task.id}: its report states a hidden value and was not restated: {got}")
    return found
