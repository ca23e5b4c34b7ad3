"""Sealed expectations: the expected values of the hidden tests never enter the sandbox.

The agent's code runs inside the pytest process that runs the hidden tests, so whatever that
process can read, a forger can read: the test bodies, the result channel, the process's
memory. Detection inside that process (canaries, twins) can therefore always be read and
told apart. Sealing takes the information away instead. Before the hidden tests are
installed, every top-level assertion of a test that compares with a literal is rewritten
into a **sealed check** that only reports the value the code computed:

    assert iso_week(date(2021, 1, 1)) == (2020, 53)
    ->
    _rg_seal_x.check(48213, iso_week(date(2021, 1, 1)))

The expected value, the operator and the assertion's message stay with the grader (a
:class:`Seal`); the check sends the computed value, canonically encoded
(``launcher/canon.py``), on the result channel, and the grader decides. A test is passed
only if pytest reports it passed *and* every one of its sealed checks reported, for that
test case, values that satisfy the hidden expectation. A forger can rewrite every record,
but to earn a test it must name the right value of each of its sealed checks: it must know
the answer. ``pytest.raises(E, match="...")`` at a test's top level is sealed the same way
(the exception's class, its bases and its message are reported; the grader checks them).

Checks are soft: a wrong value does not stop the test (the sandbox cannot know it is
wrong), so the statements after it still run. Checks are sealed in a test that has no
``return`` or ``yield``: its top-level statements, the bodies of ``for`` loops over
non-empty literals that never ``break`` (each run reaches them a known number of times) or
over a module table of literal rows that the file reads nowhere else (whose expected column
leaves it: :func:`loop_tables`),
and the branches of ``if`` and ``try`` statements (judged against what gold reported, for
the cases gold reached them in). In ``assert a and b``, each part is checked in turn.
Parametrize tables lose their expectation columns (a table that feeds one test its
expectations and another its inputs is planted once per such test: ``focus``). What is not
sealed is still checked by pytest inside the sandbox, where a forger can flip it;
:func:`repogym.grading.grader.value_sealed` measures each task's share, and
docs/grading.md says what an unsealed test still allows.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import importlib
import random
import re
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import PurePosixPath

from repogym.grading.launcher import canon

#: Name of the module the launcher provides inside the sandbox.
RUNTIME_MODULE = "_repogym_seal"
#: CPython 3.11 keeps the depth counter of its AST conversions per interpreter, not per
#: thread: gradings running in threads have raised "SystemError: AST constructor recursion
#: depth mismatch" (CPython gh-106905). Parsing is cheap; it is done one at a time.
_AST_LOCK = threading.RLock()


def parse(text: str) -> ast.Module:
    """``ast.parse``, one thread at a time (see ``_AST_LOCK``)."""
    with _AST_LOCK:
        return ast.parse(text)


#: Comparison operators a sealed ``check`` can stand for.
_OPS = {ast.Eq: "==", ast.In: "in", ast.Is: "is"}
#: A text looked for in what the code computed (``"<h1>" in html``) is sealed as a
#: ``contains`` check when it has at least this many characters: a shorter one is found in
#: a text of gold's length made of likely words, so it is left to pytest.
CONTAINS_CHARS = 8
#: What a ``contains`` check searches in (the canonical decodings of a text or a container).
_HAYSTACKS = (str, list, tuple, set, frozenset, dict)
#: ``assert <x>`` / ``assert not <x>`` is sealed as a truth check when <x> is one of these
#: (a comparison, ``and``/``or`` or ``not`` would show the verdict it expects).
_TRUTHY = (ast.Call, ast.Name, ast.Attribute, ast.Subscript)
_NO_SEAL = (ast.Return, ast.Yield, ast.YieldFrom, ast.Await)


@dataclasses.dataclass(frozen=True)
class Seal:
    """One sealed check, as the grader keeps it.

    Attributes:
        cid: The check's number in the installed file (random per grading).
        test: Installed node id of the test function that holds it (no parameters).
        line: Its line in the file.
        op: ``==``, ``in``, ``contains`` (the expected text in the computed one), ``is``,
            ``truth``, ``approx`` or ``raises``.
        expected: The hidden value (for ``raises``: the accepted class names).
        options: ``approx``'s keyword arguments; ``raises``' ``match`` pattern.
        times: How often a passing run of the test reaches it (loops over literals).
        key: The check's identity across gradings (the task's node id of its test, its line,
            column and part): how a value recorded at gold is found again.
        gold: The expectation is what the check reported when the gold patch was graded
            (:mod:`repogym.grading.gold`): the test compared with a value the grader cannot
            compute by itself (a local, a helper's result, an object), which left the file.
        cases: For a ``gold`` check, installed test case id -> the fingerprints
            (:func:`fingerprint`) its values had at gold; a case without an entry is not
            judged by this check (gold did not reach it, or reached it unstably). For a
            ``raises`` with a pattern, gold's exceptions (class and message); for a
            ``contains``, the lengths of gold's values (:func:`size_print`).
        gold_strong: For a ``gold`` check, whether its gold values carry more than a bit;
            for a ``raises`` with a pattern, whether gold's exceptions had messages; for a
            ``contains``, whether gold's values were all texts or containers.
        leaked: Whether a sandbox of the task can read its expected value (the task's own
            files state it; ``repogym.quality.leaks``): it is weak, however long the value.
        local_eq: The test's own ``==`` with a local runs beside the check (``x == want``,
            kept because ``__eq__`` may be what the test checks): the local is in the
            sandbox, so code can report it as the computed value. Weak, however long.
        file: The file that holds it, where that is not the test's own (a mixin's test,
            which a class in another file inherits: :func:`inherited_tests`).
    """

    cid: int
    test: str
    line: int
    op: str
    expected: object
    options: tuple[tuple[str, object], ...] = ()
    times: int = 1
    key: str = ""
    gold: bool = False
    cases: dict[str, frozenset[str]] = dataclasses.field(
        default_factory=dict, hash=False, compare=False
    )
    gold_strong: bool = False
    leaked: bool = False
    file: str = ""
    local_eq: bool = False

    @property
    def path(self) -> str:
        """The test file that holds the check."""
        return self.file or self.test.split("::", 1)[0]

    @property
    def where(self) -> str:
        """``line N`` (``line N of <file>`` for a check in another file than its test's)."""
        return f"line {self.line}" + (f" of {self.file}" if self.file else "")

    @property
    def strong(self) -> bool:
        """Whether guessing its hidden expectation is hopeless: a value (``==`` of anything
        but a bool or None, ``approx``, ``in``, a gold value that is more than a bit) or an
        exception whose message must match a hidden pattern within about gold's length,
        that the task's files do not state (:attr:`leaked`). A truth or ``is`` check carries
        a bit or two, an exception class a few: a forger can guess those."""
        if self.leaked or self.local_eq:
            return False
        if self.op == "raises":  # a class is a few bits; a hidden pattern, on a short text
            return bool(dict(self.options).get("match")) and self.gold_strong
        if self.op == "contains":  # a hidden text, searched in one of about gold's length
            return self.gold_strong and len(self.expected) >= CONTAINS_CHARS
        if self.gold:
            return self.gold_strong
        if self.op == "==" and (self.expected is None or isinstance(self.expected, bool)):
            return False  # ``== True`` is a truth check
        return self.op in ("==", "approx", "in")

    def strong_in(self, case: str) -> bool:
        """:attr:`strong`, for one installed test case: a gold check by the values gold
        reported in that case (a table's row whose gold value is ``255`` is sealed by a
        value even if another row's is ``0``)."""
        if self.local_eq:
            return False
        if self.gold and not self.leaked:
            prints = self.cases.get(case)
            return bool(prints) and informative(prints)
        if self.op == "contains":  # gold's length there is what bounds the text searched
            return self.strong and sized(self.cases.get(case, ()))
        return self.strong

    @property
    def records_gold(self) -> bool:
        """Whether gold's values are recorded for it: a gold check, a ``raises`` with a
        message pattern (the message it is searched in may be no longer than about gold's:
        :func:`message_fits`), or a ``contains`` (likewise its text: :func:`contains_failure`)."""
        return (
            self.gold
            or self.op == "contains"
            or (self.op == "raises" and bool(dict(self.options).get("match")))
        )

    def holds(self, got: object) -> bool:
        """Whether one reported value ``got`` satisfies the hidden expectation.

        ``got`` comes from the sandbox, where a forger may have written it: any JSON value,
        of any size the channel allows. It holds only if it has the launcher's shape, is
        within the record caps (:func:`record_problem`) and satisfies the expectation;
        anything else, whatever it holds, does not (this never raises).
        """
        if record_problem(got) is not None:
            return False
        try:
            return self._holds(got)
        except (
            ArithmeticError,
            LookupError,
            TypeError,
            ValueError,
            AttributeError,
            RecursionError,
            MemoryError,
            re.error,
        ):
            return False  # e.g. approx of a number past float's range, an ``in`` of a str

    def _holds(self, got: dict) -> bool:
        if self.op == "raises":
            chain = raised_chain(got)
            pattern = dict(self.options).get("match")
            return (
                chain is not None
                and any(_names_class(n, chain) for n in self.expected)
                and (pattern is None or re.search(pattern, got["message"]) is not None)
            )
        if self.op == "is":
            return got.get("is") == canon.singleton(self.expected)
        if self.op == "truth":
            return got.get("truth") is self.expected
        if self.op == "==":
            if "digest" in got:
                return got["digest"] == canon.digest(canon.encode(self.expected))
            return canon.dumps(got.get("v")) == canon.dumps(canon.encode(self.expected))
        try:
            value = canon.decode(got.get("v"))
        except canon.NotCanonical:
            return False
        if self.op == "in":
            return value in self.expected
        if self.op == "contains":
            return isinstance(value, _HAYSTACKS) and self.expected in value
        if self.op == "approx":
            import pytest

            return bool(value == pytest.approx(self.expected, **dict(self.options)))
        return False

    def shown(self, got: object) -> str:
        """What the code computed, for the log (never the expected value)."""
        if (problem := record_problem(got)) is not None:
            return f"a malformed record ({problem})"
        if self.op == "raises":
            if got.get("raised") is None:
                return "no exception"
            chain = raised_chain(got)
            if chain is None:
                return "an exception record that is not one class's chain of bases"
            return f"{chain[0][1]}: {got['message']}"[:300]
        return str(got.get("shown", ""))[:300]


#: The largest sealed-check record the grader reads (its canonical text); a larger one holds
#: against no expectation. The launcher sends values up to ``canon.VALUE_BYTES`` whole.
RECORD_BYTES = canon.VALUE_BYTES + (16 << 10)
#: Longest ``module:qualname`` entry of a ``raises`` record.
_NAME_CHARS = 520
#: Most builtin exceptions a raised class may derive from on separate branches (numpy's
#: ``AxisError(ValueError, IndexError)`` has two): no record names a class that derives from
#: every exception.
_BUILTIN_LEAVES = 2


def record_problem(got: object) -> str | None:
    """Why a sealed check's record is malformed or over the caps (None: it is not)."""
    if not isinstance(got, dict):
        return "not an object"
    try:
        size = len(canon.dumps(got))
    except (ValueError, TypeError, RecursionError):
        return "not JSON data"
    if size > RECORD_BYTES:
        return f"over {RECORD_BYTES} bytes"
    if size > canon.VALUE_BYTES and len(canon.dumps(got.get("v"))) > canon.VALUE_BYTES:
        return f"a value over {canon.VALUE_BYTES} bytes (the launcher sends its digest)"
    if "raised" in got and got["raised"] is not None:
        message, mro = got.get("message"), got.get("mro")
        if not isinstance(message, str) or len(message) > canon.MESSAGE_CHARS:
            return (
                f"an exception message that is not a string of at most "
                f"{canon.MESSAGE_CHARS} characters"
            )
        if not isinstance(mro, list) or len(mro) > canon.MAX_MRO:
            return f"not a list of at most {canon.MAX_MRO} classes"
    return None


def raised_chain(got: dict) -> list[tuple[str, str]] | None:
    """The (module, qualified name) of the raised class and its bases, as the launcher
    reports one exception, or None unless the record is one class's consistent chain.

    Consistent: ``raised``/``module`` name the chain's first class; no class appears twice;
    it ends with ``builtins:object`` and holds ``builtins:BaseException``; every entry that
    names a class of the ``builtins`` module is followed by that class's own bases in their
    order; and the builtin exceptions it holds derive from at most :data:`_BUILTIN_LEAVES`
    of them. A record that lists every exception class the process knows is none of these.
    """
    raised, module, mro = got.get("raised"), got.get("module"), got.get("mro")
    if not (isinstance(raised, str) and isinstance(module, str) and isinstance(mro, list)):
        return None
    if not 2 <= len(mro) <= canon.MAX_MRO or len(set(map(str, mro))) != len(mro):
        return None
    chain = []
    for entry in mro:
        if not isinstance(entry, str) or len(entry) > _NAME_CHARS or entry.count(":") != 1:
            return None
        mod, _, name = entry.partition(":")
        if not mod or not name:
            return None
        chain.append((mod, name))
    if (
        chain[0] != (module, raised)
        or chain[-1] != ("builtins", "object")
        or ("builtins", "BaseException") not in chain
    ):
        return None
    return chain if _builtins_consistent(chain) else None


def _builtins_consistent(chain: list[tuple[str, str]]) -> bool:
    # a "builtins" class that the builtins module does not hold (a C extension's exception
    # without a dotted name) cannot be checked, like the repository's own classes
    names = [
        name
        for mod, name in chain
        if mod == "builtins" and isinstance(getattr(builtins, name, None), type)
    ]
    classes = [getattr(builtins, n) for n in names]
    for i, c in enumerate(classes):
        bases = [b.__qualname__ for b in c.__mro__]
        rest = iter(names[i:])
        if not all(b in rest for b in bases):  # its bases, in order, after it
            return False
    leaves = [
        c
        for c in classes
        if issubclass(c, BaseException)
        and not any(d is not c and issubclass(d, c) for d in classes)
    ]
    return len(leaves) <= _BUILTIN_LEAVES


def _names_class(name: str, chain: list[tuple[str, str]]) -> bool:
    """Whether ``pytest.raises(<name>)`` accepts the chain's class. A builtin exception's
    name means the builtin (only a ``builtins`` entry can match it); another name matches
    a class of that name (the last part of its qualified name) from any module."""
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        return ("builtins", cls.__qualname__) in chain  # IOError is OSError
    return any(qual.rpartition(".")[2] == name for _, qual in chain)


@dataclasses.dataclass
class Sealed:
    """A file's seals, and the functions that had none (node id -> why)."""

    seals: list[Seal] = dataclasses.field(default_factory=list)
    #: Installed node id of every test function -> its number of sealed checks.
    checks_by_test: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The line that imports the sandbox's check runtime; it goes at the file's end.
    footer: str = ""
    #: Installed test case id -> the task's parameter id, for the parametrized tests whose
    #: expectation columns left the file (their cases run under random ids).
    case_ids: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Installed node ids of the test functions a module-constant table feeds whose
    #: expectation columns other tests of the table read as inputs: sealed only in a run of
    #: their own (``seal_file(focus=...)``), where the table loses those columns; each with
    #: the constants its table is made of (``<file>:<NAME>``).
    focusable: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


#: Modules whose names a sealed expectation may call (pure value constructors).
_VALUE_MODULES = ("datetime", "decimal", "fractions", "uuid", "math", "textwrap", "collections")
#: Attributes a sealed expectation never uses (time- or randomness-dependent, or contexts).
_IMPURE = {
    "now",
    "today",
    "utcnow",
    "uuid1",
    "uuid4",
    "getcontext",
    "setcontext",
    "localcontext",
    "fromtimestamp",
    "utcfromtimestamp",
}
_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "abs",
        "bool",
        "bytes",
        "complex",
        "dict",
        "enumerate",
        "float",
        "frozenset",
        "int",
        "len",
        "list",
        "max",
        "min",
        "reversed",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
    )
}
_NODES = (
    ast.Constant,
    ast.Tuple,
    ast.List,
    ast.Set,
    ast.Dict,
    ast.UnaryOp,
    ast.UAdd,
    ast.USub,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.Call,
    ast.keyword,
    ast.Name,
    ast.Load,
    ast.Store,
    ast.Attribute,
    ast.ListComp,
    ast.SetComp,
    ast.GeneratorExp,
    ast.comprehension,
    ast.JoinedStr,
    ast.FormattedValue,
)
#: Largest ``range`` a sealed expectation may build.
_MAX_RANGE = 100_000


def _bounded_range(*args: int) -> range:
    r = range(*args)
    if len(r) > _MAX_RANGE:
        raise ValueError("range too large for an expected value")
    return r


def value_names(tree: ast.Module) -> dict[str, object]:
    """The names a test file imports from :data:`_VALUE_MODULES` (module or member)."""
    ns: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in _VALUE_MODULES:
                    ns[a.asname or a.name] = importlib.import_module(a.name)
        elif isinstance(node, ast.ImportFrom) and node.module in _VALUE_MODULES and not node.level:
            module = importlib.import_module(node.module)
            for a in node.names:
                if a.name != "*" and a.name not in _IMPURE and hasattr(module, a.name):
                    ns[a.asname or a.name] = getattr(module, a.name)
    return ns


def _literal(node: ast.expr) -> tuple[bool, object]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _value(node: ast.expr, ns: dict[str, object], local: set[str]) -> tuple[bool, object]:
    """The value of an expected-value expression the grader can compute by itself.

    A literal, or an expression of literals, displays, comprehensions, pure builtins and
    the standard library's value constructors the file imports (``date(2024, 3, 1)``,
    ``[timedelta(hours=h) for h in (2, 1)]``, ``Decimal("0.10")``). Names the test
    assigns (``local``) are never read: their value is the sandbox's.
    """
    ok, value = _literal(node)
    if ok:
        return True, value
    bound = {
        n.id
        for c in ast.walk(node)
        if isinstance(c, ast.comprehension)
        for n in ast.walk(c.target)
        if isinstance(n, ast.Name)
    }
    for n in ast.walk(node):
        if not isinstance(n, _NODES):
            return False, None
        if (
            isinstance(n, ast.Name)
            and n.id not in bound
            and (n.id in local or (n.id not in ns and n.id not in _BUILTINS and n.id != "range"))
        ):
            return False, None
        if isinstance(n, ast.Attribute) and (n.attr.startswith("_") or n.attr in _IMPURE):
            return False, None
    for n in ast.walk(node):  # 10**18 yes, 10**10**10 no
        if (
            isinstance(n, ast.BinOp)
            and isinstance(n.op, ast.Pow)
            and not (
                isinstance(n.left, ast.Constant)
                and isinstance(n.right, ast.Constant)
                and isinstance(n.right.value, int)
                and 0 <= n.right.value <= 1000
            )
        ):
            return False, None
    try:
        with _AST_LOCK:  # compiling an AST converts it too
            code = compile(ast.Expression(node), "<expected value>", "eval")
        scope = {"__builtins__": {**_BUILTINS, "range": _bounded_range}, **ns}
        value = eval(code, scope)
    except Exception:
        return False, None
    if "opaque" in canon.dumps(canon.encode(value)):
        return False, None
    return True, value


def expected_value(node: ast.expr, ns: dict[str, object]) -> tuple[bool, object]:
    """(whether the grader can compute it, its value) of an expected-value expression, as
    sealing computes one (:func:`_value`; ``ns``: names from :func:`value_names`)."""
    return _value(node, ns, set())


def _stores(fn: ast.FunctionDef) -> set[str]:
    """Names the function binds (arguments, assignments, loop and ``with`` targets)."""
    names = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    return names | {
        n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _is_pytest_attr(node: ast.expr, attr: str, pytest_names: set[str]) -> bool:
    """``pytest.<attr>`` or a bare ``<attr>`` imported from pytest."""
    if (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id in pytest_names
    ):
        return True
    return isinstance(node, ast.Name) and node.id == attr and f"from:{attr}" in pytest_names


def _pytest_names(tree: ast.Module) -> set[str]:
    """How the file refers to pytest: its module aliases, ``from:<name>`` imports, and
    ``parametrize:<name>`` for a module-level alias of the parametrize mark (pydash's
    ``parametrize = pytest.mark.parametrize``, then ``@parametrize(...)``)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name == "pytest"}
        elif isinstance(node, ast.ImportFrom) and node.module == "pytest":
            names |= {f"from:{a.name}" for a in node.names if a.asname is None}
    bound = [
        n.targets[0].id
        for n in tree.body
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and _is_parametrize(n.value, names)
    ]
    stores = [
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    ]
    # an alias bound more than once (anywhere in the file) is not known to be the mark
    names |= {f"parametrize:{b}" for b in bound if stores.count(b) == 1}
    return names


def _expectation(
    test: ast.expr,
    pytest_names: set[str],
    ns: dict[str, object],
    local: set[str],
    gold: bool = False,
) -> tuple[str, object, tuple, ast.expr] | None:
    """(op, expected, options, computed side) of an assertion that can be sealed.

    With ``gold``, an ``==`` whose sides the grader can compute neither of is sealed too:
    its expected side leaves the file, and the expectation is the value the other side had
    when the gold patch was graded (``expected`` None; :class:`Seal` ``gold``).
    """
    if (
        isinstance(test, ast.UnaryOp)
        and isinstance(test.op, ast.Not)
        and isinstance(test.operand, _TRUTHY)
    ):
        return "truth", False, (), test.operand
    if isinstance(test, _TRUTHY):
        return "truth", True, (), test
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    op = _OPS.get(type(test.ops[0]))
    left, right = test.left, test.comparators[0]
    if op is None:
        return None
    if (
        op == "=="
        and isinstance(right, ast.Call)
        and _is_pytest_attr(right.func, "approx", pytest_names)
    ):
        return _approx(right, left)
    ok, value = _value(right, ns, local)
    if not ok and op == "in":  # ``"<h1>" in html``: the needle is the expectation
        found, needle = _value(left, ns, local)
        if found and isinstance(needle, str) and len(needle) >= CONTAINS_CHARS:
            return "contains", needle, (), right
        return None  # a shorter text is left to pytest: sealed, it would be a weak check
    if not ok and op == "==":
        ok, value = _value(left, ns, local)
        if ok:
            left = right
        elif gold:  # neither side is the grader's to compute: the left one's value at gold
            return "==", None, (), left
    if not ok or _value(left, ns, local)[0]:
        return None  # nothing hidden, or nothing the code computes
    if op == "is" and canon.singleton(value) is None:
        return None
    if op == "in":
        try:
            hash(value) if isinstance(value, set | frozenset) else iter(value)
        except TypeError:
            return None
    return op, value, (), left


def _approx(call: ast.Call, computed: ast.expr) -> tuple[str, object, tuple, ast.expr] | None:
    """``x == pytest.approx(<literal>, <literal keywords>)`` as a sealed check, or None."""
    ok, args = _literal(ast.Tuple(elts=list(call.args), ctx=ast.Load()))
    kwargs = {}
    for kw in call.keywords:
        good, value = _literal(kw.value)
        if kw.arg is None or not good:
            return None
        kwargs[kw.arg] = value
    if not ok or len(args) != 1:
        return None
    return "approx", args[0], tuple(sorted(kwargs.items())), computed


def _exception_names(node: ast.expr) -> tuple[str, ...] | None:
    """Class names accepted by ``pytest.raises(<node>)`` (a name, attribute or tuple)."""
    if isinstance(node, ast.Tuple):
        parts = [_exception_names(e) for e in node.elts]
        return None if not parts or None in parts else tuple(n for p in parts for n in p)
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Attribute):
        return (node.attr,)
    return None


def _raises(
    item: ast.withitem, pytest_names: set[str], self_name: str | None = None
) -> tuple[tuple[str, ...], tuple] | None:
    """(accepted class names, options) of ``with pytest.raises(E[, match=...])`` or
    unittest's ``with self.assertRaises(E)`` / ``self.assertRaisesRegex(E, pattern)``."""
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    if (
        isinstance(f, ast.Attribute)
        and isinstance(f.value, ast.Name)
        and f.value.id == self_name
        and f.attr in ("assertRaises", "assertRaisesRegex")
    ):
        regex = f.attr == "assertRaisesRegex"
        if call.keywords or len(call.args) != 1 + regex:
            return None
        pattern = call.args[1] if regex else None
    elif _is_pytest_attr(f, "raises", pytest_names):
        if len(call.args) != 1 or any(kw.arg != "match" for kw in call.keywords):
            return None
        pattern = call.keywords[0].value if call.keywords else None
    else:
        return None
    names = _exception_names(call.args[0])
    if names is None:
        return None
    if pattern is None:
        return names, ()
    ok, text = _literal(pattern)
    if not ok or not isinstance(text, str):
        return None
    return names, (("match", text),)


#: Exceptions whose handler would also catch a failing ``assert``.
_CATCH_ASSERT = frozenset({"AssertionError", "Exception", "BaseException"})

#: Context managers that let every exception raised in their body out (by the last part of
#: their dotted name; ``mock.patch`` and its forms are matched on any part).
_LETS_OUT = frozenset(
    {
        "warns",
        "deprecated_call",
        "catch_warnings",
        "subTest",
        "assertWarns",
        "assertWarnsRegex",
        "assertLogs",
        "assertNoLogs",
        "TemporaryDirectory",
        "NamedTemporaryFile",
        "nullcontext",
        "open",
    }
)


def _module_raisers(
    tree: ast.Module, pytest_names: set[str]
) -> dict[str, tuple[tuple[str, ...], tuple]]:
    """Module names bound to a ``pytest.raises(E)`` context (``SE = raises(SchemaError)``),
    with what :func:`_raises` says of it."""
    out = {}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and (found := _raises(ast.withitem(stmt.value), pytest_names))
        ):
            out[stmt.targets[0].id] = found
    return out


def _lets_failures_out(
    item: ast.withitem,
    raisers: dict[str, tuple[tuple[str, ...], tuple]],
    pytest_names: set[str],
    self_name: str | None,
) -> bool:
    """Whether a failing ``assert`` in the body of ``with <item>:`` fails the test: the
    context is a ``raises`` of exceptions an ``AssertionError`` is not, or one known to let
    every exception out. A sealed check never raises, so sealing an assertion whose failure
    the context would swallow could turn gold's pass into a failure."""
    found = _raises(item, pytest_names, self_name)
    call = item.context_expr
    if found is None and isinstance(call, ast.Name):
        found = raisers.get(call.id)
    if found is not None:
        return not _CATCH_ASSERT & set(found[0])
    if not isinstance(call, ast.Call):
        return False
    parts = []
    f = call.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name):
        parts.append(f.id)
    return bool(parts) and (parts[0] in _LETS_OUT or "patch" in parts)


#: unittest's assertion methods, by the assertion each stands for (``assertEqual(a, b)`` is
#: ``assert a == b``). Messages (a third argument or ``msg=``) are dropped like assert's.
_UNITTEST = {
    "assertEqual": "==",
    "assertEquals": "==",
    "assertListEqual": "==",
    "assertTupleEqual": "==",
    "assertDictEqual": "==",
    "assertSetEqual": "==",
    "assertMultiLineEqual": "==",
    "assertIn": "in",
    "assertIs": "is",
    "assertIsNone": "none",
    "assertTrue": "truth",
    "assertFalse": "not",
}
_ARITY = {"==": 2, "in": 2, "is": 2, "none": 1, "truth": 1, "not": 1}


#: How :func:`membership_helpers` are named among a file's helpers (``in:assert_in``).
MEMBERSHIP = "in:"


def _prints_only(stmt: ast.stmt) -> bool:
    """A statement that only prints: ``print(...)`` (or a docstring), or a ``for`` loop of
    such."""
    if isinstance(stmt, ast.Expr):
        v = stmt.value
        return isinstance(v, ast.Constant) or (
            isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "print"
        )
    return isinstance(stmt, ast.For) and not stmt.orelse and all(_prints_only(b) for b in stmt.body)


def _assert_helper(node: ast.stmt) -> str | None:
    """``"=="`` for a module-level function that asserts its two first arguments are equal,
    ``"in"`` for one that asserts the first is in the second; None for anything else. Before
    its assert (the last statement that does more than print) it may only print and bind
    names from builtins, never its arguments: a sealed call skips it, so nothing it did may
    matter."""
    if (
        not isinstance(node, ast.FunctionDef)
        or len(node.args.args) < 2
        or node.args.vararg
        or node.args.kwarg
        or all(_prints_only(b) for b in node.body)
    ):
        return None
    at = max(i for i, b in enumerate(node.body) if not _prints_only(b))
    before, last = node.body[:at], node.body[at]  # what follows it only prints
    first, second = node.args.args[0].arg, node.args.args[1].arg
    if not (
        isinstance(last, ast.Assert)
        and isinstance(t := last.test, ast.Compare)
        and len(t.ops) == 1
        and isinstance(t.left, ast.Name)
        and isinstance(t.comparators[0], ast.Name)
    ):
        return None
    pair = (t.left.id, t.comparators[0].id)
    if isinstance(t.ops[0], ast.Eq) and set(pair) == {first, second}:
        kind = "=="
    elif isinstance(t.ops[0], ast.In) and pair == (first, second):
        kind = "in"
    else:
        return None
    bound = {
        n.id
        for b in before
        for n in ast.walk(b)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    if bound & {first, second}:
        return None  # the assert would not compare the arguments as they were passed
    for b in before:
        if not (
            _prints_only(b)
            or (
                isinstance(b, ast.Assign)
                and all(isinstance(x, ast.Name) for x in b.targets)
                and not any(
                    isinstance(n, ast.Call)
                    and not (isinstance(n.func, ast.Name) and n.func.id in {*_BUILTINS, "range"})
                    for n in ast.walk(b.value)
                )
            )
        ):
            return None
    return kind


def own_helpers(tree: ast.Module) -> set[str]:
    """The equality helpers (:func:`equality_helpers`) and membership helpers (``in:NAME``:
    :func:`membership_helpers`) a file defines, as sealing names them."""
    return equality_helpers(tree) | {MEMBERSHIP + n for n in membership_helpers(tree)}


def equality_helpers(tree: ast.Module) -> set[str]:
    """Module-level functions of a test file that only assert their two first arguments
    are equal (``def eq_(a, b): assert a == b, msg``, nose's style), perhaps printing them
    first (tabulate's ``assert_equal``: ``print("Expected:\n%s\n" % expected)``): a call to
    one is sealed like the assertion it makes (the sealed call no longer prints)."""
    return {n.name for n in tree.body if _assert_helper(n) == "=="}


def membership_helpers(tree: ast.Module) -> set[str]:
    """Module-level functions of a test file that assert their first argument is in their
    second (tabulate's ``assert_in(result, expected_set)``, which prints each candidate
    first): a call to one is sealed like ``assert result in expected_set``."""
    return {n.name for n in tree.body if _assert_helper(n) == "in"}


def _call_assertion(call: ast.expr, helpers: set[str], self_name: str | None) -> ast.expr | None:
    """The ``assert`` test a statement's call stands for: ``self.assertEqual(a, b)`` and a
    call to an equality helper (:func:`equality_helpers`) are ``a == b``, a call to a
    membership helper (:func:`membership_helpers`, named ``in:NAME`` among ``helpers``)
    ``a in b``; None for any other call."""
    if not isinstance(call, ast.Call) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    f = call.func
    if (
        isinstance(f, ast.Attribute)
        and isinstance(f.value, ast.Name)
        and f.value.id == self_name
        and f.attr in _UNITTEST
    ):
        kind = _UNITTEST[f.attr]
        if any(kw.arg not in ("msg",) for kw in call.keywords):
            return None
    elif isinstance(f, ast.Name) and f.id in helpers and not call.keywords:
        kind = "=="
    elif isinstance(f, ast.Name) and MEMBERSHIP + f.id in helpers and not call.keywords:
        kind = "in"
    else:
        return None
    n = _ARITY[kind]
    if len(call.args) < n:
        return None
    args = call.args[:n]

    def at(node: ast.expr) -> ast.expr:
        return ast.copy_location(node, call)

    if kind == "truth":
        return args[0]
    if kind == "not":
        return at(ast.UnaryOp(op=ast.Not(), operand=args[0]))
    if kind == "none":
        return at(
            ast.Compare(left=args[0], ops=[ast.Is()], comparators=[at(ast.Constant(value=None))])
        )
    op = {"==": ast.Eq(), "in": ast.In(), "is": ast.Is()}[kind]
    return at(ast.Compare(left=args[0], ops=[op], comparators=[args[1]]))


@dataclasses.dataclass
class _Use:
    """One assertion of an expectation helper that compares with a parameter."""

    computed: ast.expr  # the side the code computes
    expected: ast.expr  # the side that reads the parameter only (``e``, ``str(e)``)
    cond: bool  # in a branch (or the helper may return early): judged against gold
    #: The unittest method that asserts it, where that method checks its arguments' type
    #: before it compares them (``self.assertMultiLineEqual``: a ``str``): a handle's check
    #: must then call ``assertEqual``, which only compares.
    typed: ast.Attribute | None = None


@dataclasses.dataclass
class _Helper:
    """A function that asserts its arguments are what the code computes (``def
    assert_match(parser, text, name, expected): assert parser.parse(text)[name] ==
    expected``): its expectation parameters and their uses, in order."""

    params: list[str]  # positional parameters, ``self`` dropped for a method
    uses: dict[str, list[_Use]]


def _only_reads(node: ast.expr, name: str) -> bool:
    """Whether ``node`` reads ``name`` and nothing else but pure builtins it calls
    (``e``, ``str(e)``, ``tuple(expected)``)."""
    return _names_read(node) == {name} and all(isinstance(n, _NODES) for n in ast.walk(node))


#: unittest's equality assertions that check their arguments' type before comparing them.
_TYPED = {
    "assertMultiLineEqual",
    "assertListEqual",
    "assertTupleEqual",
    "assertDictEqual",
    "assertSetEqual",
    "assertSequenceEqual",
}


def _typed(stmt: ast.stmt) -> ast.Attribute | None:
    """The ``self.assertXEqual`` a statement calls, where X is a type it checks first."""
    if (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(f := stmt.value.func, ast.Attribute)
        and f.attr in _TYPED
    ):
        return f
    return None


def _compared_pairs(test: ast.Compare) -> list[tuple[ast.expr, ast.expr]]:
    """The pairs ``a == b`` compares: its sides, or, for two tuples (or lists) written out
    with as many items (``(e, e.inv) == (val, inv)``), each pair of items."""
    left, right = test.left, test.comparators[0]
    if (
        isinstance(left, ast.Tuple | ast.List)
        and type(left) is type(right)
        and len(left.elts) == len(right.elts)
        and not any(isinstance(e, ast.Starred) for e in (*left.elts, *right.elts))
    ):
        return list(zip(left.elts, right.elts, strict=True))
    return [(left, right)]


def expectation_helper(fn: ast.FunctionDef, method: bool = False) -> _Helper | None:
    """``fn`` as an expectation helper (:class:`_Helper`), or None.

    A parameter is an expectation when every read of it is the expected side of an ``==``
    the helper asserts (``assert x == p``, ``self.assertEqual(p, x)``; the side may apply a
    pure builtin: ``str(p)``) whose other side does not read it, outside loops, and the
    helper never rebinds it. An assertion in a branch or ``try``, or in a helper that may
    return early, is judged against what gold reported."""
    if fn.name.startswith("test") or isinstance(fn, ast.AsyncFunctionDef):
        return None
    args = fn.args.posonlyargs + fn.args.args
    self_name = args[0].arg if method and args else None
    params = [a.arg for a in args if a.arg != self_name]
    early = not _sealable(fn)
    uses: dict[str, list[_Use]] = {}
    seen: set[int] = set()

    def walk(body: list[ast.stmt], cond: bool) -> None:
        for stmt in body:
            test = None
            if isinstance(stmt, ast.Assert):
                test = stmt.test
            elif isinstance(stmt, ast.Expr):
                test = _call_assertion(stmt.value, set(), self_name)
            if (
                isinstance(test, ast.Compare)
                and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq)
            ):
                for sides in _compared_pairs(test):
                    for i in (1, 0):
                        p = next((q for q in params if _only_reads(sides[i], q)), None)
                        other = {n.id for n in ast.walk(sides[1 - i]) if isinstance(n, ast.Name)}
                        if p is not None and p not in other:
                            uses.setdefault(p, []).append(
                                _Use(sides[1 - i], sides[i], cond or early, _typed(stmt))
                            )
                            seen.update(
                                id(n) for n in ast.walk(sides[i]) if isinstance(n, ast.Name)
                            )
                            break
            elif isinstance(stmt, ast.If):
                walk(stmt.body, True)
                walk(stmt.orelse, True)
            elif isinstance(stmt, ast.Try):
                for branch in (
                    stmt.body,
                    stmt.orelse,
                    stmt.finalbody,
                    *(h.body for h in stmt.handlers),
                ):
                    walk(branch, True)

    walk(fn.body, False)
    for p in list(uses):
        reads = [
            n for stmt in fn.body for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == p
        ]
        if any(not isinstance(n.ctx, ast.Load) or id(n) not in seen for n in reads):
            del uses[p]
    return _Helper(params, uses) if uses else None


@dataclasses.dataclass
class Imported:
    """What a test file takes from the other files grading installs, as sealing needs it
    (:func:`imported_helpers`): the expectation helpers it calls by the names it knows
    them (``from markdown.test_tools import TestCase``, whose ``assertMarkdownRenders``
    its tests call as ``self.assertMarkdownRenders(...)``)."""

    #: Module functions that are expectation helpers, by local name.
    functions: dict[str, _Helper] = dataclasses.field(default_factory=dict)
    #: Local class name -> its expectation-helper methods (with its bases' in its file).
    classes: dict[str, dict[str, _Helper]] = dataclasses.field(default_factory=dict)
    #: Local class name -> every method it and those bases define.
    methods: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    #: Workspace path of a defining file -> the names (module functions and classes) whose
    #: helpers a sealed call of this file may hand a handle: there they must report what
    #: they compare (:func:`export_helpers`).
    definers: dict[str, set[str]] = dataclasses.field(default_factory=dict)


def _class_members(
    tree: ast.Module, imported: Imported | None = None
) -> tuple[dict[str, dict[str, _Helper]], dict[str, frozenset[str]]]:
    """Each class of the file by name -> its expectation-helper methods, and -> the names
    of all its methods; both with those of its bases, the ones the file defines and the
    ones it imports (``imported``)."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    imported = imported or Imported()
    helpers: dict[str, dict[str, _Helper]] = {}
    names: dict[str, frozenset[str]] = {}

    def of(name: str, depth: int = 0) -> tuple[dict[str, _Helper], frozenset[str]]:
        if name in helpers:
            return helpers[name], names[name]
        cls = classes.get(name)
        if cls is None or depth > 8:
            return imported.classes.get(name, {}), imported.methods.get(name, frozenset())
        found: dict[str, _Helper] = {}
        defined: set[str] = set()
        for base in reversed(cls.bases):
            if isinstance(base, ast.Name):
                h, m = of(base.id, depth + 1)
                found.update(h)
                defined |= m
        for sub in cls.body:
            if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                defined.add(sub.name)
                found.pop(sub.name, None)
                if isinstance(sub, ast.FunctionDef) and (h := expectation_helper(sub, method=True)):
                    found[sub.name] = h
        helpers[name], names[name] = found, frozenset(defined)
        return found, names[name]

    for name in classes:
        of(name)
    return helpers, names


def _helpers_of(
    tree: ast.Module, imported: Imported | None = None
) -> tuple[dict[str, _Helper], dict[str, dict[str, _Helper]]]:
    """The file's module-level expectation helpers by name (its own and those it imports),
    and each class's (its own methods and those of its bases) by class name."""
    functions = dict(imported.functions) if imported else {}
    functions.update(
        {
            n.name: h
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and (h := expectation_helper(n))
        }
    )
    return functions, _class_members(tree, imported)[0]


def imported_helpers(sources: dict[str, str], rel: str) -> Imported:
    """The expectation helpers the test file at ``rel`` imports from the other files of
    ``sources`` (workspace path -> text of the Python files grading installs): module
    functions, and classes (a test class's base) with their helper methods. A name
    imported from a file grading does not install (the package's own code, which the
    agent may change) gives nothing."""
    out = Imported()
    trees: dict[str, ast.Module | None] = {}
    members: dict[str, tuple[dict, dict, dict]] = {}

    def tree_of(path: str) -> ast.Module | None:
        if path not in trees:
            try:
                trees[path] = parse(sources[path])
            except (SyntaxError, ValueError):
                trees[path] = None
        return trees[path]

    if rel not in sources or (tree := tree_of(rel)) is None:
        return out
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        for a in node.names:
            path = next(
                (
                    p
                    for p in _module_files(rel, node.module, node.level)
                    if p in sources and p != rel
                ),
                None,
            )
            if path is None or (dtree := tree_of(path)) is None:
                continue
            local = a.asname or a.name
            if path not in members:  # each defining file is read once
                members[path] = (_helpers_of(dtree)[0], *_class_members(dtree))
            functions, classes, methods = members[path]
            if a.name in functions:
                out.functions[local] = functions[a.name]
                out.definers.setdefault(path, set()).add(a.name)
            elif any(isinstance(n, ast.ClassDef) and n.name == a.name for n in dtree.body):
                out.classes[local] = classes.get(a.name, {})
                out.methods[local] = methods[a.name]
                if out.classes[local]:
                    out.definers.setdefault(path, set()).add(a.name)
    return out


def _report_uses(src: _Text, alias: str, helper: _Helper) -> None:
    """Make each use of a helper's expectation parameter report, for a handle, the value it
    compares with it (``alias.at(p, k, computed)``; any other argument is compared as
    written)."""
    typed: dict[int, ast.Attribute] = {}
    for p, uses in helper.uses.items():
        for k, u in enumerate(uses):
            src.replace(u.computed, f"{alias}.at({p}, {k}, ({src.segment(u.computed)}))")
            if u.typed is not None:
                typed[id(u.typed)] = u.typed
    for f in typed.values():  # a handle's check compares a stand-in of no type: no type check
        src.replace(f, f"({src.segment(f.value)}.assertEqual)")


def _alias(rng: random.Random, taken: set[str]) -> str:
    """A name for the check runtime's module that the file does not use."""
    alias = "_rg_seal_" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6))
    while alias in taken:
        alias += rng.choice("abcdefghijklmnopqrstuvwxyz")
    return alias


def export_helpers(
    text: str, tree: ast.Module, names: Collection[str], rng: random.Random, taken: set[str]
) -> tuple[str, str]:
    """``text`` with the expectation helpers of ``names`` (module functions, and the
    methods of classes with those of their bases in the file) made to report what they
    compare when a sealed call of another file hands them a handle
    (:attr:`Imported.definers`); and the footer the file then needs (empty if none).
    Line numbers stay true."""
    functions, classes = _helpers_of(tree)
    chosen = {id(h): h for n in names if n in functions for h in [functions[n]]}
    chosen.update({id(h): h for n in names for h in classes.get(n, {}).values()})
    if not chosen:
        return text, ""
    src = _Text(text)
    alias = _alias(rng, taken)
    for h in chosen.values():
        _report_uses(src, alias, h)
    return src.text(), f"import {RUNTIME_MODULE} as {alias}  # noqa: E402\n"


def _suite_call(node: ast.expr, self_name: str | None, methods: frozenset[str]) -> bool:
    """Whether an argument is written with literals and calls of the test suite's own
    methods alone (``self.dedent(\"\"\"...\"\"\")``, a method its class or a base grading
    installs defines, not an assertion): nothing of the sandbox's state or the package's
    code goes into it, so its value at gold is what the helper compared with."""
    if self_name is None:
        return False
    called = {
        id(n.func.value)
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == self_name
        and n.func.attr in methods
        and not n.func.attr.startswith(("assert", "_"))
    }
    if not called:
        return False
    for n in ast.walk(node):
        if not isinstance(n, _NODES):
            return False
        if isinstance(n, ast.Name) and id(n) not in called and n.id not in _BUILTINS:
            return False
    return True


def _literal_locals(fn: ast.FunctionDef, ns: dict[str, object]) -> dict[str, ast.expr]:
    """Names the test binds once, at its top level, to an expected value the grader can
    compute (``expected = [1, 2]``), and never rebinds: name -> the value's expression."""
    counts: dict[str, int] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
            counts[n.id] = counts.get(n.id, 0) + 1
    args = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    found = {}
    for stmt in fn.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(name := stmt.targets[0], ast.Name)
            and counts.get(name.id) == 1
            and name.id not in args
            and _value(stmt.value, ns, set())[0]
        ):
            found[name.id] = stmt.value
    return found


@dataclasses.dataclass
class _Table:
    """A test's ``@pytest.mark.parametrize`` table, when the grader can read all of it."""

    names: list[str]
    rows: list[list[ast.expr]]
    values: list[list[object]]
    ids: list[str]  # pytest's ids of the rows, as the task's node ids name them
    values_node: ast.expr
    single: bool
    ids_node: ast.expr | None = None  # the table's own ``ids=[...]``
    #: The module constants the table is (``@parametrize("a, b", CASES)``, or ``A + B``):
    #: their names, and the reference's place in the decorator.
    shared: tuple[str, ...] = ()
    ref_node: ast.expr | None = None
    #: Each constant's literal and its rows' span in ``rows``: (name, node, start, end).
    parts: list[tuple[str, ast.expr, int, int]] = dataclasses.field(default_factory=list)
    #: What the ids of the parametrize decorators stacked above it add to each row's id
    #: (``-<id>`` per decorator, nearest first; pytest runs every combination).
    combos: list[str] = dataclasses.field(default_factory=lambda: [""])


def _is_parametrize(node: ast.expr, pytest_names: set[str]) -> bool:
    """``pytest.mark.parametrize``, ``mark.parametrize`` (``from pytest import mark``) or a
    module-level alias of it (:func:`_pytest_names`)."""
    if isinstance(node, ast.Name):
        return f"parametrize:{node.id}" in pytest_names
    if not isinstance(node, ast.Attribute) or node.attr != "parametrize":
        return False
    mark = node.value
    return (
        isinstance(mark, ast.Attribute)
        and mark.attr == "mark"
        and isinstance(mark.value, ast.Name)
        and mark.value.id in pytest_names
    ) or (isinstance(mark, ast.Name) and mark.id == "mark" and "from:mark" in pytest_names)


def _param_row(
    node: ast.expr, pytest_names: Collection[str], width: int
) -> tuple[list[ast.expr], str | None] | None:
    """(cells, id) of a table row written ``pytest.param(a, b, id="name")`` (or ``param``
    imported from pytest) with ``width`` cells and no keyword but a literal ``id``; None for
    anything else (``marks=`` included: the planted table writes its rows as tuples)."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if not (
        isinstance(f, ast.Attribute)
        and f.attr == "param"
        and isinstance(f.value, ast.Name)
        and f.value.id in pytest_names
        or isinstance(f, ast.Name)
        and f.id == "param"
        and "from:param" in pytest_names
    ):
        return None
    if len(node.args) != width or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    explicit = None
    for kw in node.keywords:
        if kw.arg != "id" or not isinstance(kw.value, ast.Constant):
            return None
        if not isinstance(kw.value.value, str) or not kw.value.value:
            return None
        explicit = kw.value.value
    return list(node.args), explicit


def _table_names(node: ast.expr) -> list[ast.Name] | None:
    """The names of a table argument that is a name or a sum of names (``A + B``)."""
    if isinstance(node, ast.Name):
        return [node]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _table_names(node.left), _table_names(node.right)
        return left + right if left is not None and right is not None else None
    return None


def shared_tables(tree: ast.Module, pytest_names: set[str]) -> dict[str, ast.expr]:
    """Module constants that are parametrize tables and nothing else: name -> its literal
    list or tuple of rows, for a name bound once at module level whose every use is (a
    term of a sum that is) the table argument of a test's ``@pytest.mark.parametrize``."""
    bound: dict[str, list[ast.expr]] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            bound.setdefault(node.targets[0].id, []).append(node.value)
    tables = {
        name: values[0]
        for name, values in bound.items()
        if len(values) == 1 and isinstance(values[0], ast.List | ast.Tuple)
    }
    as_table = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            for d in node.decorator_list:
                if (
                    isinstance(d, ast.Call)
                    and _is_parametrize(d.func, pytest_names)
                    and len(d.args) == 2
                    and (names := _table_names(d.args[1]))
                ):
                    as_table.update(id(n) for n in names)
    bindings = {id(n.targets[0]) for n in tree.body if isinstance(n, ast.Assign)}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Name)
            and node.id in tables
            and id(node) not in bindings
            and (not isinstance(node.ctx, ast.Load) or id(node) not in as_table)
        ):
            tables.pop(node.id)
    return tables


#: A table cell whose value the grader cannot compute (an object of the package's, a
#: constant it imports): its id is read from the task's listed ids (:func:`_matched_ids`).
_UNKNOWN = object()


def _table_rows(
    node: ast.expr,
    shared: dict[str, ast.expr],
    width: int,
    pytest_names: Collection[str] = (),
) -> (
    tuple[
        list[list[ast.expr]],
        tuple[str, ...],
        list[tuple[str, ast.expr, int, int]],
        list[str | None],
    ]
    | None
):
    """The rows of a parametrize table argument of ``width`` columns (a literal list, or
    module constants and their sum), the constants it is made of, their spans, and each
    row's own id (``pytest.param(..., id="name")``; None where it has none); None when it
    is neither or a row is not a literal row of that width or a ``pytest.param`` of one."""
    consts: tuple[str, ...] = ()
    parts: list[tuple[str, ast.expr, int, int]] = []
    if (terms := _table_names(node)) and all(t.id in shared for t in terms):
        consts = tuple(t.id for t in terms)
        if len(set(consts)) != len(consts):
            return None
        start = 0
        for name in consts:
            parts.append((name, shared[name], start, start + len(shared[name].elts)))
            start += len(shared[name].elts)
        elts = [e for name in consts for e in shared[name].elts]
    elif isinstance(node, ast.List | ast.Tuple):
        elts = node.elts
    else:
        return None
    rows = []
    explicit: list[str | None] = []
    for e in elts:
        if (param := _param_row(e, pytest_names, width)) is not None:
            rows.append(param[0])
            explicit.append(param[1])
            continue
        explicit.append(None)
        if width == 1:
            rows.append([e])
        elif (
            isinstance(e, ast.Tuple | ast.List)
            and len(e.elts) == width
            and not any(isinstance(x, ast.Starred) for x in e.elts)
        ):
            rows.append(list(e.elts))
        else:
            return None
    return (rows, consts, parts, explicit) if rows else None


def _table(
    fn: ast.FunctionDef,
    pytest_names: set[str],
    ns: dict[str, object],
    shared: dict[str, ast.expr] | None = None,
    listed: Collection[str] = (),
) -> _Table | None:
    """The test's one parametrize table, if it has exactly one, written as a literal list
    of rows, in the decorator or as a module constant (:func:`shared_tables`). Row ids are
    the table's own (``ids=[...]``), or pytest's, computed from the values the grader can
    compute; where a row has a cell it cannot (``datetime(..., tzinfo=FixedOffset(4))``,
    ``FORMAT + "T"``), from the ``listed`` ids (the task's, of this function's cases), each
    row matched to exactly one.
    """
    decs = [
        d
        for d in fn.decorator_list
        if isinstance(d, ast.Call) and _is_parametrize(d.func, pytest_names)
    ]
    if (
        not decs
        or any(len(d.args) != 2 for d in decs)
        or any("parametrize" in ast.dump(d) for d in fn.decorator_list if d not in decs)
        or any(kw.arg != "ids" for d in decs for kw in d.keywords)
    ):
        return None
    combos = [""]
    if len(decs) > 1:  # the table is the nearest; the ones above it feed inputs only
        for d in reversed(decs[:-1]):
            if (found := _input_ids(d, ns)) is None:
                return None
            combos = [c + "-" + i for c in combos for i in found]
        decs = decs[-1:]
    ids_node = decs[0].keywords[0].value if decs[0].keywords else None
    if (names := _argnames(decs[0].args[0])) is None:
        return None
    node = decs[0].args[1]
    found = _table_rows(node, shared if combos == [""] else {}, len(names), pytest_names)
    if not names or found is None:
        return None
    rows, consts, parts, explicit = found
    if any(explicit) and ids_node is not None:
        return None  # a row's own id and the table's ``ids=``: leave it to pytest
    single = len(names) == 1
    values = []
    for row in rows:
        cells = [_value(c, ns, set()) for c in row]
        values.append([v if ok else _UNKNOWN for ok, v in cells])
    unknown = any(v is _UNKNOWN for row in values for v in row)
    if all(explicit):  # every row names itself (``pytest.param(..., id="touching")``)
        ids = list(explicit) if len(set(explicit)) == len(explicit) else None
    elif unknown and ids_node is None and (not listed or combos != [""]):
        return None
    elif unknown and ids_node is None:
        shown = [[ast.unparse(c) for c in row] for row in rows]
        ids = _matched_ids(names, values, single, listed, explicit, shown)
    elif ids_node is None:
        ids = _ids_like_listed(names, values, single, explicit, listed)
    else:  # the table names its rows itself
        ok, ids = _literal(ids_node)
        if (
            not ok
            or not isinstance(ids, list | tuple)
            or len(ids) != len(rows)
            or len(set(ids)) != len(ids)
            or not all(isinstance(i, str) and i for i in ids)
        ):
            return None
        ids = list(ids)
    if not ids or (
        combos != [""] and len({i + c for i in ids for c in combos}) != len(ids) * len(combos)
    ):
        return None
    return _Table(
        names, rows, values, ids, node, single, ids_node, consts, decs[0].args[1], parts, combos
    )


def _argnames(node: ast.expr) -> list[str] | None:
    """A parametrize decorator's argument names (``"a, b"`` or ``["a", "b"]``), or None."""
    ok, argnames = _literal(node)
    if ok and isinstance(argnames, str):
        return [n.strip() for n in argnames.split(",") if n.strip()]
    if ok and isinstance(argnames, list | tuple) and all(isinstance(n, str) for n in argnames):
        return list(argnames)
    return None


def _input_ids(dec: ast.Call, ns: dict[str, object]) -> list[str] | None:
    """The ids pytest gives the rows of a parametrize decorator stacked above a test's table
    (its own ``ids=[...]``, or made from values the grader can compute); None otherwise."""
    if (names := _argnames(dec.args[0])) is None:
        return None
    found = _table_rows(dec.args[1], {}, len(names)) if names else None
    if found is None or any(found[3]):
        return None
    if dec.keywords:
        ok, ids = _literal(dec.keywords[0].value)
        if not ok or not isinstance(ids, list | tuple) or len(ids) != len(found[0]):
            return None
        return [str(i) for i in ids] if all(isinstance(i, str) and i for i in ids) else None
    values = []
    for row in found[0]:
        cells = [_value(c, ns, set()) for c in row]
        if not all(ok for ok, _ in cells):
            return None
        values.append([v for _, v in cells])
    return _pytest_ids(names, values, len(names) == 1)


def _matched_ids(
    names: list[str],
    values: list[list[object]],
    single: bool,
    listed: Collection[str],
    explicit: Sequence[str | None] = (),
    shown: Sequence[Sequence[str]] = (),
) -> list[str] | None:
    """Row ids for a table with cells the grader cannot compute, read from the ``listed``
    ids: pytest's id of each row with every unknown cell a wildcard, matched against them.
    Every listed id must be matched by exactly one row, and no row may match two (a row no
    listed id matches gets a placeholder: no listed case is its). None otherwise. Where a
    row's wildcards fit several listed ids, the one that spells each unknown cell as its
    source does (``shown``: ``RenderingStyle.CLEAN``, as pytest names an enum member) is
    its, if exactly one does."""
    marks = [
        [f"RGCELL{r}x{c}Z" if v is _UNKNOWN else v for c, v in enumerate(row)]
        for r, row in enumerate(values)
    ]
    for way in _LONG_STRINGS:  # as the task's pytest names long string cells
        ids = _pytest_ids(names, marks, single, explicit, way)
        if ids is not None and (found := _matched(ids, listed, len(values), shown)) is not None:
            return found
    return None


def _matched(
    ids: list[str], listed: Collection[str], rows: int, shown: Sequence[Sequence[str]] = ()
) -> list[str] | None:
    """:func:`_matched_ids` for one way of naming the rows (``ids``, wildcards in them)."""

    def pattern(i: str, exact: bool) -> re.Pattern[str]:
        def part(p: str) -> str:
            cell = re.fullmatch(r"RGCELL(\d+)x(\d+)Z", p)
            if cell is None:
                return re.escape(p)
            r, c = int(cell[1]), int(cell[2])
            if exact and r < len(shown) and c < len(shown[r]) and shown[r][c]:
                return re.escape(shown[r][c])
            return ".+?"

        return re.compile("".join(part(p) for p in re.split(r"(RGCELL\d+x\d+Z)", i)) + r"\Z")

    listed = list(dict.fromkeys(listed))
    fits = []
    for i in ids:
        loose = pattern(i, False)
        found = [x for x in listed if loose.match(x)]
        if len(found) > 1:  # the row that spells its unknown cells as written, if one does
            exact = pattern(i, True)
            found = [x for x in found if exact.match(x)] or found
        fits.append(found)
    taken: dict[str, int] = {}
    for r, found in enumerate(fits):
        if len(found) > 1:
            return None
        if found:
            if found[0] in taken:
                return None
            taken[found[0]] = r
    if len(taken) != len(listed):
        return None
    return [fits[r][0] if fits[r] else f"unlisted-{r}" for r in range(rows)]


class _IdConfig:
    """What pytest's id maker reads of its config, as a task's own pytest has it: how it
    names a string cell over 100 characters (``long_strings``: pytest 8 writes it out,
    ``legacy``; pytest 9 writes ``<argname><index>``, ``short``, so the host's pytest
    alone cannot say), ids escaped, and no plugin's id hook."""

    def __init__(self, long_strings: str) -> None:
        self.long_strings = long_strings
        self.hook = self

    def getini(self, name: str) -> object:
        return self.long_strings if name == "parametrize_long_str_id_strategy" else False

    def pytest_make_parametrize_id(self, **_: object) -> None:
        return None


#: How pytest versions name a long string cell: the first is what pytest 8 does.
_LONG_STRINGS = ("legacy", "short")


def _ids_like_listed(
    names: list[str],
    values: list[list[object]],
    single: bool,
    explicit: Sequence[str | None],
    listed: Collection[str],
) -> list[str] | None:
    """:func:`_pytest_ids` as the task's pytest gives them: the way of naming long string
    cells whose ids hold every ``listed`` id of the function (pytest 8's without any)."""
    first = None
    for way in _LONG_STRINGS:
        ids = _pytest_ids(names, values, single, explicit, way)
        first = first or ids
        if ids is not None and (not listed or set(listed) <= set(ids)):
            return ids
    return first


def _pytest_ids(
    names: list[str],
    values: list[list[object]],
    single: bool,
    explicit: Sequence[str | None] = (),
    long_strings: str = _LONG_STRINGS[0],
) -> list[str] | None:
    """The ids pytest gives the rows of a parametrize table (its own id maker, configured
    as :class:`_IdConfig` says), a row's own id (``explicit``, from ``pytest.param(...,
    id=...)``) where it has one."""
    try:
        from _pytest.mark.structures import ParameterSet
        from _pytest.python import IdMaker

        sets = [
            ParameterSet.extract_from(v[0] if single else tuple(v), force_tuple=single)
            for v in values
        ]
        sets = [
            s._replace(id=e) if e else s
            for s, e in zip(sets, list(explicit) or [None] * len(sets), strict=True)
        ]
        config = _IdConfig(long_strings)
        ids = IdMaker(names, sets, None, None, config, None).make_unique_parameterset_ids()
    except Exception:
        return None
    return [str(i) for i in ids] if len(ids) == len(values) else None


def _names_read(node: ast.expr) -> set[str]:
    """The names an expression reads, but a pure builtin it calls (``tuple(expected)``)."""
    called = {
        id(n.func)
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _BUILTINS
    }
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in called}


def _column_side(test: ast.expr, params: dict[str, int]) -> tuple[ast.expr, str] | None:
    """(computed side, column) of ``<x> == <column>`` (either order), or of ``<x> ==
    <an expression of one column only>`` (``expected.replace("-", "_")``,
    ``tuple(expected)``): the side that reads nothing but the column (and the pure builtins
    it calls) is the expectation."""
    if (
        not params
        or not isinstance(test, ast.Compare)
        or len(test.ops) != 1
        or not isinstance(test.ops[0], ast.Eq)
    ):
        return None
    sides = [test.left, test.comparators[0]]
    names = [_names_read(s) for s in sides]
    for i in (1, 0):
        if (
            len(names[i]) == 1
            and (col := next(iter(names[i]))) in params
            and col not in names[1 - i]
        ):
            return sides[1 - i], col
    return None


def _gold_side(test: ast.Compare, args: set[str], bound: Collection[str] = ()) -> ast.expr | None:
    """The side of ``a == b`` whose value at gold a gold check compares: the side that
    calls code when the other does not (``assert expected == f(x)`` checks ``f(x)``), else
    the side that reads more than the test's arguments and literals, else the side that is
    not a list, tuple, set or dict written out when the other is one (``result == [("",
    root)]`` checks ``result``), else not a bare name when the other is one, else the left.
    None when a side is a bare argument of the test (a parameter or fixture: its value is
    the process's to read, so such a check would hold no secret), or when both sides call
    code (``f(x) == g(x)``:
    dropping the expected side would drop a failure it raises, and keeping it would hand
    a forger the value). None too when the expected side reads nothing the checked side
    does not (``cache == copy.copy(cache)``): that is a relation between values the test
    holds, not an expectation, and gold's value there may be one of many (a random
    choice) that a correct fix need not repeat."""
    chosen = _gold_side_of(test, args, bound)
    if chosen is None:
        return None
    other = test.comparators[0] if chosen is test.left else test.left
    reads = [{n.id for n in ast.walk(s) if isinstance(n, ast.Name)} for s in (chosen, other)]
    writes = any(
        isinstance(n, ast.Constant) and n.value is not None for n in ast.walk(other)
    )  # a value built from literals (``D({2: 3})``) is an expectation, not a relation
    if reads[1] and reads[1] <= reads[0] and not writes:
        return None
    return chosen


#: Expressions that write a value out: the expected side of ``a == b`` when the other is not.
_DISPLAYS = (ast.List, ast.Tuple, ast.Set, ast.Dict)


def _callees(node: ast.expr) -> frozenset[str] | None:
    """The names of the functions an expression calls (None if it calls anything else)."""
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name):
                return None
            names.add(n.func.id)
    return frozenset(names)


def _built_of_literals(node: ast.expr, bound: Collection[str]) -> bool:
    """Whether an expression builds a value from literals with calls of dotted names alone
    (``P.IntervalDict([(P.closedopen(1, 2), (1, None))])``, ``P.closed(-P.inf, 0) |
    P.closed(3, 4)``, ``Version(1, 2, 3)``): it reads no name but the modules and types
    it calls (and their attributes, ``P.inf``), none of them a name the test binds or is
    given (``bound``: ``d.as_dict()`` reads the test's ``d``), so its value is the same
    whatever the test did before it."""

    def rooted(dotted: str | None) -> bool:
        return dotted is not None and dotted.partition(".")[0] not in bound

    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return all(_built_of_literals(e, bound) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _built_of_literals(k, bound) for k in node.keys) and all(
            _built_of_literals(v, bound) for v in node.values
        )
    if isinstance(node, ast.UnaryOp):
        return _built_of_literals(node.operand, bound)
    if isinstance(node, ast.BinOp):
        return _built_of_literals(node.left, bound) and _built_of_literals(node.right, bound)
    if isinstance(node, ast.Attribute):  # a constant of a module (``P.inf``)
        return isinstance(node.value, ast.Attribute | ast.Name) and rooted(_dotted(node))
    if isinstance(node, ast.Call):
        return (
            rooted(_dotted(node.func))
            and all(
                not isinstance(a, ast.Starred) and _built_of_literals(a, bound) for a in node.args
            )
            and all(k.arg is not None and _built_of_literals(k.value, bound) for k in node.keywords)
        )
    return False


def _constructs(node: ast.expr) -> bool:
    """Whether an expression is a call of a type, by the convention that names classes in
    CapWords (``Version(1, 2)``, ``P.IntervalDict(...)``), not of a function."""
    name = _dotted(node.func) if isinstance(node, ast.Call) else None
    last = (name or "").rpartition(".")[2]
    return last[:1].isupper() and not last.isupper()


def _gold_side_of(
    test: ast.Compare, args: set[str], bound: Collection[str] = ()
) -> ast.expr | None:
    """:func:`_gold_side`'s choice of side, before the relation rule."""
    sides = [test.left, test.comparators[0]]
    if any(isinstance(s, ast.Name) and s.id in args for s in sides):
        return None
    calls = [any(isinstance(n, ast.Call) for n in ast.walk(s)) for s in sides]
    if all(calls):
        # the expected side runs code too: dropping it could drop the failure, unless
        # every function it calls the other side calls as well (``keyfilter(even, D({1:
        # 2})) == D({})``: the type the test builds both with)
        callees = [_callees(s) for s in sides]
        for i in (0, 1):
            if None not in callees and callees[1 - i] < callees[i]:
                return sides[i]
        # or it is a value the package builds from literals alone, the other side is not
        # (``d.combine(e) == P.IntervalDict([(P.closedopen(1, 2), 1)])``): an expectation
        # written in the package's constructors. Its constructors are not run there any
        # more; a fix that breaks them fails the tests that call them for what they return
        built = [_built_of_literals(s, set(bound) | args) for s in sides]
        if built[0] != built[1]:
            return sides[1] if built[0] else sides[0]
        if all(built):  # ``parse("1.2") == Version(1, 2)``: a type's value is the expectation
            typed = [_constructs(s) for s in sides]
            if typed[0] != typed[1]:
                return sides[1] if typed[0] else sides[0]
        return None
    if calls[0] != calls[1]:
        return sides[0] if calls[0] else sides[1]
    # a side built of the test's arguments and literals alone is the expectation
    # (``result == {"items": {keyword: value}}``): its value is the same at noop
    reads = [{n.id for n in ast.walk(s) if isinstance(n, ast.Name)} for s in sides]
    given = [bool(r) and r <= args for r in reads]
    if given[0] != given[1]:
        return sides[1] if given[0] else sides[0]
    if all(given):
        return None
    # a list, tuple, set or dict written out is the expectation (``result == [("", root)]``)
    shown = [isinstance(s, _DISPLAYS) for s in sides]
    if shown[0] != shown[1]:
        return sides[1] if shown[0] else sides[0]
    named = [isinstance(s, ast.Name) for s in sides]
    return sides[1] if named == [True, False] else sides[0]


#: Decorators that run a test's body as many times as they choose, not once: hypothesis's
#: ``@given`` runs it once per example it draws (a check in it is reached 100 times, or
#: fewer, and sees values drawn at random). Such a test stays pytest's to judge.
_REPEATING = frozenset({"given"})


def _sealable(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A test whose top-level statements all run whenever it passes (one with no ``return``,
    ``yield`` or ``await``, but a bare ``return`` that ends it), once per run (no decorator
    of :data:`_REPEATING`)."""
    if isinstance(fn, ast.AsyncFunctionDef):
        return False
    for d in fn.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) in _REPEATING:
            return False

    def walk(node: ast.AST) -> Iterator[ast.AST]:
        for child in ast.iter_child_nodes(node):
            if isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef
            ):
                continue
            yield child
            yield from walk(child)

    last = fn.body[-1] if fn.body else None
    tail = last if isinstance(last, ast.Return) and last.value is None else None
    # a bare ``return`` that ends the body skips nothing
    return not any(isinstance(n, _NO_SEAL) and n is not tail for n in walk(fn))


def _iterations(loop: ast.For) -> int:
    """How many times the body of a ``for`` runs to its end, when the source says so: a loop
    over a literal sequence (or ``range`` of literals) with no ``break``, ``continue`` or
    ``else``; 0 otherwise."""
    if loop.orelse or any(isinstance(n, ast.Break | ast.Continue) for n in ast.walk(loop)):
        return 0
    it = loop.iter
    if isinstance(it, ast.Tuple | ast.List) and not any(
        isinstance(e, ast.Starred) for e in it.elts
    ):
        return len(it.elts)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
        ok, args = _literal(ast.Tuple(elts=list(it.args), ctx=ast.Load()))
        try:
            return len(range(*args)) if ok and not it.keywords else 0
        except (TypeError, ValueError):
            return 0
    ok, value = _literal(it)
    return len(value) if ok and isinstance(value, str | bytes | set | frozenset) else 0


class _Text:
    """A source text and its edits by (line, column) spans, columns in UTF-8 bytes."""

    def __init__(self, text: str) -> None:
        self.lines = text.encode("utf-8", "surrogateescape").splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.data = b"".join(self.lines)
        self.edits: list[tuple[int, int, bytes]] = []

    def at(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def segment(self, node: ast.AST) -> str:
        return self.data[
            self.at(node.lineno, node.col_offset) : self.at(node.end_lineno, node.end_col_offset)
        ].decode("utf-8", "surrogateescape")

    def replace(self, node: ast.AST, new: str) -> None:
        """Replace ``node``'s span with ``new``, padded to the same number of lines."""
        pad = (node.end_lineno - node.lineno) - new.count("\n")
        assert pad >= 0 and new.endswith(")")
        new = new[:-1] + "\n" * pad + ")"
        self.edits.append(
            (
                self.at(node.lineno, node.col_offset),
                self.at(node.end_lineno, node.end_col_offset),
                new.encode("utf-8", "surrogateescape"),
            )
        )

    def text(self) -> str:
        data = self.data
        for start, end, new in sorted(self.edits, reverse=True):
            data = data[:start] + new + data[end:]
        return data.decode("utf-8", "surrogateescape")


def is_unittest_class(node: ast.ClassDef) -> bool:
    """A class that names ``TestCase`` (``unittest.TestCase``, ``TestCase``, a
    ``...TestCase`` base) among its bases: pytest collects it whatever its name."""
    return any(
        isinstance(b, ast.Name)
        and b.id.endswith("TestCase")
        or isinstance(b, ast.Attribute)
        and b.attr.endswith("TestCase")
        for b in node.bases
    )


def unittest_classes_of(tree: ast.Module, bases: Collection[str] = ()) -> set[str]:
    """The module-level classes of ``tree`` that are unittest classes: one that names a
    ``TestCase`` among its bases (:func:`is_unittest_class`) or one of ``bases`` (the
    unittest classes of other installed files, as this file names them:
    ``test_es.Num2WordsESTest``; :func:`file_links`), or one of the file's classes that
    are (croniter's ``class CroniterHashTest(CroniterHashBase)``, whose base derives from
    ``base.TestCase``): pytest collects each whatever its name."""
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    found = {
        n.name for n in classes if is_unittest_class(n) or any(_dotted(b) in bases for b in n.bases)
    }
    grew = True
    while grew:
        grew = False
        for n in classes:
            if n.name not in found and any(
                isinstance(b, ast.Name) and b.id in found for b in n.bases
            ):
                found.add(n.name)
                grew = True
    return found


def _tests(
    tree: ast.Module,
    rel: str,
    also: Collection[tuple[str, str]] = (),
    bases: Collection[str] = (),
) -> Iterator[tuple[str, ast.FunctionDef]]:
    """(node id, function) of every module-level test and method of a ``Test*`` or unittest
    class (``bases``: :func:`unittest_classes_of`), and of the methods ``also`` names
    (``(class, method)``: a mixin's tests, which the classes that inherit them run;
    :func:`inherited_tests`)."""
    also = set(also)
    unittest_classes = unittest_classes_of(tree, bases)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            yield f"{rel}::{node.name}", node
        elif isinstance(node, ast.ClassDef):
            collected = node.name.startswith("Test") or node.name in unittest_classes
            for sub in node.body:
                if (
                    isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef)
                    and sub.name.startswith("test")
                    and (collected or (node.name, sub.name) in also)
                ):
                    yield f"{rel}::{node.name}::{sub.name}", sub


def _module_files(rel: str, module: str | None, level: int) -> list[str]:
    """Workspace paths the file at ``rel`` may import ``module`` from (``level``: the
    import's leading dots; an absolute import is looked for beside the file and above)."""
    here = PurePosixPath(rel).parent
    if level:
        roots = [here]
        for _ in range(level - 1):
            roots = [roots[0].parent]
    else:
        roots = [here, *here.parents]
    parts = module.split(".") if module else []
    out = []
    for root in roots:
        stem = root.joinpath(*parts)
        out += [f"{stem}.py", str(stem / "__init__.py")] if parts else [str(stem / "__init__.py")]
    return [str(PurePosixPath(p)) for p in out]


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of a chain of names and attributes, or None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _module_names(tree: ast.Module, rel: str) -> dict[str, list[str]]:
    """A name the file at ``rel`` binds to a module (``import x``, ``from . import x``) ->
    the workspace paths that module may be (:func:`_module_files`)."""
    modules: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                modules[a.asname or a.name] = _module_files(rel, a.name, 0)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                sub = f"{node.module}.{a.name}" if node.module else a.name
                modules[a.asname or a.name] = _module_files(rel, sub, node.level)
    return modules


def foreign_reads(sources: dict[str, str]) -> dict[str, frozenset[str] | None]:
    """For each file of ``sources`` (workspace path -> text of the Python files grading
    installs), the names the other files read from it: those they import from it and the
    attributes they read of it as a module (``test_fr.TEST_CASES``); None for a file
    another one star-imports (it may read any name)."""
    trees = {}
    for rel, text in sources.items():
        try:
            trees[rel] = parse(text)
        except (SyntaxError, ValueError):
            continue
    return _foreign_reads(list(sources), trees)


def _foreign_reads(
    files: Iterable[str], trees: dict[str, ast.Module]
) -> dict[str, frozenset[str] | None]:
    """:func:`foreign_reads` of ``files``, of which ``trees`` are those that parse."""
    reads: dict[str, set[str] | None] = {rel: set() for rel in files}

    def note(files: Iterable[str], name: str | None, other: str) -> None:
        for f in files:
            if f in reads and f != other:
                found = reads[f]
                if name is None or found is None:
                    reads[f] = None
                else:
                    found.add(name)

    for other, tree in trees.items():
        modules = _module_names(tree, other)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    note(
                        _module_files(other, node.module, node.level),
                        None if a.name == "*" else a.name,
                        other,
                    )
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (d := _dotted(node.value)) in modules:
                note(modules[d], node.attr, other)
    return {rel: None if r is None else frozenset(r) for rel, r in reads.items()}


def inherited_tests(  # noqa: C901 - a walk over bases, files and imports, in one place
    sources: dict[str, str], node_ids: Iterable[str]
) -> dict[str, str]:
    """Listed test method -> the method it runs, where that is a mixin's: for
    ``rel::Class::test_x`` whose class does not define ``test_x``, the one class among its
    bases (``Mixin`` or ``module.Mixin``, followed through the file and the test files it
    imports from, ``sources``:
    workspace path -> text) that does, as ``defining_rel::Mixin::test_x``. A test whose
    method is found in no base, or in two, is left out (its verdict stays pytest's)."""
    trees: dict[str, ast.Module | None] = {}

    def tree_of(rel: str) -> ast.Module | None:
        if rel not in trees:
            try:
                trees[rel] = parse(sources[rel]) if rel in sources else None
            except (SyntaxError, ValueError):
                trees[rel] = None
        return trees[rel]

    def find(rel: str, name: str, depth: int = 0) -> tuple[str, ast.ClassDef] | None:
        """The class ``name`` as the file at ``rel`` sees it: defined there or imported."""
        tree = tree_of(rel)
        if tree is None or depth > 8:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return rel, node
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if (a.asname or a.name) == name:
                        for path in _module_files(rel, node.module, node.level):
                            if path in sources and (hit := find(path, a.name, depth + 1)):
                                return hit
        return None

    modules: dict[str, dict[str, list[str]]] = {}

    def find_base(rel: str, base: ast.expr, depth: int) -> tuple[str, ast.ClassDef] | None:
        """The class a base names: ``Mixin`` (:func:`find`) or ``test_es.Mixin``, a class
        of a module the file imports."""
        if isinstance(base, ast.Name):
            return find(rel, base.id, depth)
        tree = tree_of(rel)
        if not isinstance(base, ast.Attribute) or tree is None:
            return None
        if rel not in modules:
            modules[rel] = _module_names(tree, rel)
        for path in modules[rel].get(_dotted(base.value) or "", ()):
            if path != rel and path in sources and (hit := find(path, base.attr, depth + 1)):
                return hit
        return None

    def definers(rel: str, cls: ast.ClassDef, method: str, depth: int = 0) -> set[str]:
        out: set[str] = set()
        if depth > 8:
            return out
        for base in cls.bases:
            if (found := find_base(rel, base, depth)) is None:
                continue
            brel, bcls = found
            if any(
                isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == method
                for n in bcls.body
            ):
                out.add(f"{brel}::{bcls.name}::{method}")
            else:
                out |= definers(brel, bcls, method, depth + 1)
        return out

    found: dict[str, str] = {}
    for node_id in node_ids:
        parts = node_id.partition("[")[0].split("::")
        if len(parts) != 3 or (tree := tree_of(parts[0])) is None:
            continue
        rel, cname, method = parts
        cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cname), None)
        if cls is None or any(
            isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == method
            for n in cls.body
        ):
            continue
        if len(hits := definers(rel, cls, method)) == 1:
            found[f"{rel}::{cname}::{method}"] = hits.pop()
    return found


# -- loops over module tables ----------------------------------------------------------------
@dataclasses.dataclass
class _LoopTable:
    """A module constant of rows that tests loop over and use for nothing else (``for test
    in CASES: self.assertEqual(f(test[0]), test[1])``): its rows, and the columns that
    leave the file (each read only as the expected side of a sealed equality)."""

    rows: list[list[ast.expr]]
    hidden: set[int]


@dataclasses.dataclass
class LoopTables:
    """What :func:`loop_tables` found in one file."""

    tables: dict[str, _LoopTable] = dataclasses.field(default_factory=dict)
    #: ``id`` of each ``for`` statement over such a table -> its number of rows.
    loops: dict[int, int] = dataclasses.field(default_factory=dict)
    #: ``id`` of each expected side of an equality that reads a hidden column.
    expected: set[int] = dataclasses.field(default_factory=set)


def _row_constants(tree: ast.Module) -> dict[str, list[list[ast.expr]]]:
    """Module constants bound once to a literal list or tuple of rows of one width (at
    least two columns): name -> its rows."""
    bound: dict[str, list[ast.expr]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        bound.setdefault(n.id, []).append(
                            node.value if isinstance(node, ast.Assign) and t is n else None
                        )
    out = {}
    for name, values in bound.items():
        if len(values) == 1 and (rows := _literal_rows(values[0])) is not None:
            out[name] = rows
    return out


def _literal_rows(value: ast.expr | None) -> list[list[ast.expr]] | None:
    """The rows of a literal list or tuple of rows of one width (at least two columns),
    else None."""
    if not isinstance(value, ast.List | ast.Tuple) or not value.elts:
        return None
    rows = [
        list(e.elts)
        for e in value.elts
        if isinstance(e, ast.Tuple | ast.List)
        and not any(isinstance(x, ast.Starred) for x in e.elts)
    ]
    widths = {len(r) for r in rows}
    if len(rows) == len(value.elts) and len(widths) == 1 and widths.pop() >= 2:
        return rows
    return None


def _column_reads(loop: ast.For, width: int) -> dict[int, list[ast.expr]] | None:
    """Column -> the nodes of the loop's body that read it (``row[1]`` of ``for row in``,
    ``expected`` of ``for value, expected in``); None when the body reads the row any other
    way (whole, by a computed index, or binds its name again)."""
    target, reads = loop.target, {k: [] for k in range(width)}
    nodes = [n for stmt in loop.body for n in ast.walk(stmt)]
    if isinstance(target, ast.Name):
        index = {}
        for n in nodes:
            if (
                isinstance(n, ast.Subscript)
                and isinstance(n.ctx, ast.Load)
                and isinstance(n.value, ast.Name)
                and n.value.id == target.id
                and isinstance(n.slice, ast.Constant)
                and type(n.slice.value) is int
                and -width <= n.slice.value < width
            ):
                index[id(n.value)] = (n.slice.value % width, n)
        for n in nodes:
            if isinstance(n, ast.Name) and n.id == target.id:
                if id(n) not in index:
                    return None
                k, sub = index[id(n)]
                reads[k].append(sub)
        return reads
    if (
        isinstance(target, ast.Tuple)
        and len(target.elts) == width
        and all(isinstance(e, ast.Name) for e in target.elts)
        and len({e.id for e in target.elts}) == width
    ):
        column = {e.id: k for k, e in enumerate(target.elts)}
        for n in nodes:
            if isinstance(n, ast.Name) and n.id in column:
                if not isinstance(n.ctx, ast.Load):
                    return None
                reads[column[n.id]].append(n)
        return reads
    return None


def _expected_reads(
    loop: ast.For, reads: dict[int, list[ast.expr]], helpers: set[str], self_name: str | None
) -> dict[int, set[int]]:
    """Column -> ``id`` of its reads that are the whole expected side of an equality at the
    top of the loop's body, whose other side calls code and does not read that column."""
    expected: dict[int, set[int]] = {k: set() for k in reads}
    for stmt in loop.body:
        test = (
            stmt.test
            if isinstance(stmt, ast.Assert)
            else _call_assertion(stmt.value, helpers, self_name)
            if isinstance(stmt, ast.Expr)
            else None
        )
        if not (
            isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
        ):
            continue
        pair = (test.left, test.comparators[0])
        for side, other in (pair[::-1], pair):
            inside = {id(n) for n in ast.walk(other)}
            if not any(isinstance(n, ast.Call) for n in ast.walk(other)):
                continue
            for k, nodes in reads.items():
                if any(n is side for n in nodes) and not any(id(n) in inside for n in nodes):
                    expected[k].add(id(side))
    return expected


def _table_loops(
    tree: ast.Module,
    funcs: dict[str, ast.FunctionDef],
    constants: dict[str, list[list[ast.expr]]],
    self_names: dict[str, str | None],
) -> dict[str, list[tuple[ast.For, str | None]]]:
    """Constant -> the ``for`` statements at the top of sealable tests that loop over it
    (with the test's ``self``), for the constants that the file reads nowhere else."""
    loops: dict[str, list[tuple[ast.For, str | None]]] = {}
    iters: set[int] = set()
    for node_id, fn in funcs.items():
        if not _sealable(fn):
            continue
        for stmt in _loops_at_top(fn):
            if isinstance(stmt.iter, ast.Name) and stmt.iter.id in constants:
                loops.setdefault(stmt.iter.id, []).append((stmt, self_names.get(node_id)))
                iters.add(id(stmt.iter))
    bindings = {
        id(n)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        for n in ast.walk(t)
    }
    skip, stray = bindings | iters, set()
    for n in ast.walk(tree):  # a read anywhere else: the constant stays whole
        if isinstance(n, ast.Name) and n.id in constants and id(n) not in skip:
            stray.add(n.id)
    for name in stray:
        loops.pop(name, None)
    return loops


def _hidden_columns(
    found: list[tuple[ast.For, str | None]], width: int, helpers: set[str]
) -> tuple[set[int], set[int]] | None:
    """The columns of a table that the loops ``found`` over it read only as an expected
    side (:func:`_expected_reads`), if at all, and those they read; None when a loop reads
    its rows otherwise."""
    columns = set(range(width))
    read: set[int] = set()
    seen: set[int] = set()
    for loop, self_name in found:
        if id(loop) in seen:  # a mixin's method, under each class that runs it
            continue
        seen.add(id(loop))
        reads = _column_reads(loop, width)
        if reads is None:
            return None
        expected = _expected_reads(loop, reads, helpers, self_name)
        for k, nodes in reads.items():
            if nodes:
                read.add(k)
                if not {id(n) for n in nodes} <= expected[k]:
                    columns.discard(k)
    return columns, read


def _loops_at_top(fn: ast.FunctionDef) -> Iterator[ast.For]:
    """The ``for`` statements at the top of a test that run their body to its end for
    every item (no ``break``, ``continue`` or ``else``)."""
    for stmt in fn.body:
        if (
            isinstance(stmt, ast.For)
            and not stmt.orelse
            and not any(isinstance(n, ast.Break | ast.Continue) for n in ast.walk(stmt))
        ):
            yield stmt


def _remote_loops(
    funcs: dict[str, ast.FunctionDef],
    helpers: set[str],
    self_names: dict[str, str | None],
    remote: dict[str, tuple[int, int, frozenset[int]]],
    out: LoopTables,
) -> None:
    """Loops over another file's table whose expected columns leave that file
    (``for test in test_es.CASES``: :attr:`Links.remote`): each read of such a column is an
    expected side, as for the file's own tables."""
    for node_id, fn in funcs.items():
        if not _sealable(fn):
            continue
        for loop in _loops_at_top(fn):
            if (d := _dotted(loop.iter)) not in remote:  # keys are ``module.NAME``
                continue
            rows, width, hidden = remote[d]
            if (reads := _column_reads(loop, width)) is None:
                continue
            expected = _expected_reads(loop, reads, helpers, self_names.get(node_id))
            if all({id(n) for n in reads[k]} <= expected[k] for k in hidden):
                out.loops[id(loop)] = rows
                out.expected |= {id(n) for k in hidden for n in reads[k]}


def _inline_loops(
    funcs: dict[str, ast.FunctionDef],
    helpers: set[str],
    self_names: dict[str, str | None],
    out: LoopTables,
) -> None:
    """Loops at the top of sealable tests over rows written in place (``for value, expected
    in [(15, 10), (20, 10)]: assert clamp(value, 0, 10) == expected``): a table of the
    loop's own, whose expected columns leave the file as a module table's do."""
    for node_id, fn in funcs.items():
        if not _sealable(fn):
            continue
        for loop in _loops_at_top(fn):
            if (rows := _literal_rows(loop.iter)) is None:
                continue  # its length is :func:`_iterations`'
            found = [(loop, self_names.get(node_id))]
            if (got := _hidden_columns(found, len(rows[0]), helpers)) is not None:
                _hide(out, f"<rows at {node_id}:{loop.lineno}>", rows, found, got[0] & got[1])


def _hide(
    out: LoopTables,
    name: str,
    rows: list[list[ast.expr]],
    found: list[tuple[ast.For, str | None]],
    hidden: set[int],
) -> None:
    """Record table ``name`` whose columns ``hidden`` leave the file, each read of them in
    the loops ``found`` over it an expected side; nothing when no column leaves, or every
    one would (a row of expectations alone: nothing computes them)."""
    width = len(rows[0])
    if not hidden or len(hidden) == width:
        return
    out.tables[name] = _LoopTable(rows, hidden)
    for loop, _ in found:
        for k, nodes in (_column_reads(loop, width) or {}).items():
            if k in hidden:
                out.expected |= {id(n) for n in nodes}


def _loaded(tree: ast.Module, name: str) -> bool:
    """Whether the module reads the name anywhere."""
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        for n in ast.walk(tree)
    )


def loop_tables(
    tree: ast.Module,
    funcs: dict[str, ast.FunctionDef],
    helpers: set[str],
    self_names: dict[str, str | None],
    links: Links | None = None,
) -> LoopTables:
    """The module tables of literal rows whose expected columns can leave the file.

    A constant qualifies when every read of it is the iterable of a ``for`` statement at the
    top of a sealable test (no ``break``, ``continue`` or ``else``), which reads each row's
    cells by constant index or by unpacking, and no other installed file reads it
    (``links.foreign``: the names other files read from this one; None: any name) but
    through such loops of their own (``links.shared``). A column leaves the file when, in
    every loop that reads it, each read is the whole expected side of an equality at the top
    of the loop's body (``assert f(row[0]) == row[1]``, ``self.assertEqual(f(row[0]),
    row[1])``) whose other side calls code and does not read that column: the check reports
    the computed side, judged against what gold computed for the whole table (the run
    reaches it once per row). Loops over another file's such table (``links.remote``) are
    sealed the same way."""
    links = links or Links()
    out = LoopTables()
    _remote_loops(funcs, helpers, self_names, links.remote, out)
    _inline_loops(funcs, helpers, self_names, out)
    if links.foreign is None:
        return out
    constants = {
        n: rows
        for n, rows in _row_constants(tree).items()
        if n not in links.foreign or n in links.shared
    }
    if not constants:
        return out
    loops = _table_loops(tree, funcs, constants, self_names)
    for name in links.shared:  # a table only other files loop over
        if name in constants and name not in loops and not _loaded(tree, name):
            loops[name] = []
    for name, found in loops.items():
        rows = constants[name]
        width = len(rows[0])
        out.loops.update({id(loop): len(rows) for loop, _ in found})  # the lengths are known
        if (got := _hidden_columns(found, width, helpers)) is None:
            continue
        columns, read = got
        if name in links.shared:  # what every file's loops agree on
            hidden = set(links.shared[name]) if links.shared[name] <= columns else set()
        else:
            hidden = columns & read
        _hide(out, name, rows, found, hidden)
    return out


@dataclasses.dataclass(frozen=True)
class Links:
    """What the other installed files mean for sealing one test file (:func:`file_links`)."""

    #: The names other files read from this one (:func:`foreign_reads`; None: any name).
    foreign: frozenset[str] | None = frozenset()
    #: Bases of its classes that are unittest classes of other files, as this file names
    #: them (``test_es.Num2WordsESTest``): its classes that name one are collected too.
    bases: frozenset[str] = frozenset()
    #: Its module tables that other files loop over too -> the columns that leave it (every
    #: loop over the table, in any file, reads them only as expected sides).
    shared: dict[str, frozenset[int]] = dataclasses.field(default_factory=dict)
    #: Another file's such table as this file names it (``test_es.TEST_CASES``) -> (rows,
    #: width, the columns that leave it).
    remote: dict[str, tuple[int, int, frozenset[int]]] = dataclasses.field(default_factory=dict)


def _self_name(node_id: str, fn: ast.FunctionDef) -> str | None:
    """A test method's first argument (None for a module-level test)."""
    args = fn.args.posonlyargs + fn.args.args
    return args[0].arg if "::" in node_id.split("::", 1)[1] and args else None


def _unittest_bases(
    trees: dict[str, ast.Module], modules: dict[str, dict[str, list[str]]]
) -> dict[str, frozenset[str]]:
    """Each file's class bases that are unittest classes of another file
    (:attr:`Links.bases`), followed through chains of files."""
    candidates: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for rel, tree in trees.items():
        imported: dict[str, list[tuple[str, str]]] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    imported[a.asname or a.name] = [
                        (f, a.name)
                        for f in _module_files(rel, node.module, node.level)
                        if f in trees and f != rel
                    ]
        found: dict[str, list[tuple[str, str]]] = {}
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for b in cls.bases:
                if isinstance(b, ast.Name) and b.id in imported:
                    found[b.id] = imported[b.id]
                elif isinstance(b, ast.Attribute) and (m := _dotted(b.value)) in modules[rel]:
                    found[f"{m}.{b.attr}"] = [
                        (f, b.attr) for f in modules[rel][m] if f in trees and f != rel
                    ]
        candidates[rel] = found
    bases: dict[str, frozenset[str]] = {rel: frozenset() for rel in trees}
    for _ in range(8):  # a chain of files, one link a round
        classes = {rel: unittest_classes_of(tree, bases[rel]) for rel, tree in trees.items()}
        grown = {
            rel: frozenset(
                d
                for d, targets in candidates[rel].items()
                if any(c in classes[f] for f, c in targets)
            )
            for rel in trees
        }
        if grown == bases:
            break
        bases = grown
    return bases


_Readers = dict[tuple[str, str], list[tuple[str, ast.For, str | None]]]


def _table_readers(
    trees: dict[str, ast.Module],
    modules: dict[str, dict[str, list[str]]],
    constants: dict[str, dict[str, list[list[ast.expr]]]],
    funcs_of: dict[str, dict[str, ast.FunctionDef]],
    sealed: Collection[str],
) -> _Readers:
    """(file, table) -> the loops of other sealed files over it (with the reading file
    and the test's ``self``), for the tables no other file reads any other way."""
    readers: _Readers = {}
    bad: set[tuple[str, str]] = set()
    for rel, tree in trees.items():
        loops = {
            id(loop.iter): (loop, _self_name(i, fn))
            for i, fn in funcs_of[rel].items()
            if _sealable(fn)
            for loop in _loops_at_top(fn)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for f in _module_files(rel, node.module, node.level):
                    for a in node.names if f != rel and f in constants else ():
                        bad |= {(f, n) for n in constants[f] if a.name in ("*", n)}
            elif isinstance(node, ast.Attribute) and (m := _dotted(node.value)) in modules[rel]:
                for f in modules[rel][m]:
                    if f != rel and node.attr in constants.get(f, {}):
                        if id(node) in loops and rel in sealed:
                            readers.setdefault((f, node.attr), []).append((rel, *loops[id(node)]))
                        else:
                            bad.add((f, node.attr))
    return {k: v for k, v in readers.items() if k not in bad}


def _shared_tables(
    trees: dict[str, ast.Module],
    modules: dict[str, dict[str, list[str]]],
    sealed: Collection[str],
    also: dict[str, Collection[tuple[str, str]]],
    bases: dict[str, frozenset[str]],
) -> tuple[
    dict[str, dict[str, frozenset[int]]], dict[str, dict[str, tuple[int, int, frozenset[int]]]]
]:
    """:attr:`Links.shared` and :attr:`Links.remote` of every file: a table of a sealed file
    that sealed files read only as the iterable of loops at the top of their sealable tests
    (``for test in test_es.CASES``), never by import, whose columns every loop in any file
    reads only as expected sides (:func:`loop_tables`)."""
    constants = {rel: _row_constants(trees[rel]) for rel in sealed if rel in trees}
    funcs_of = {
        rel: dict(_tests(t, rel, also.get(rel, ()), bases[rel])) for rel, t in trees.items()
    }
    readers = _table_readers(trees, modules, constants, funcs_of, sealed)
    shared: dict[str, dict[str, frozenset[int]]] = {}
    remote: dict[str, dict[str, tuple[int, int, frozenset[int]]]] = {}
    for (f, name), reading in readers.items():
        rows = constants[f][name]
        width = len(rows[0])
        self_names = {i: _self_name(i, fn) for i, fn in funcs_of[f].items()}
        own = _table_loops(trees[f], funcs_of[f], {name: rows}, self_names).get(name, [])
        if not own and _loaded(trees[f], name):
            continue  # its own file reads it otherwise
        columns, read = set(range(width)), set()
        groups = [(f, own)] + [(r, [(loop, s)]) for r, loop, s in reading]
        for rel, found in groups:
            if (got := _hidden_columns(found, width, own_helpers(trees[rel]))) is None:
                break
            columns &= got[0]
            read |= got[1]
        else:
            hidden = frozenset(columns & read)
            if hidden and len(hidden) < width:
                shared.setdefault(f, {})[name] = hidden
                for r, loop, _ in reading:
                    remote.setdefault(r, {})[_dotted(loop.iter) or ""] = (len(rows), width, hidden)
    return shared, remote


def file_links(
    sources: dict[str, str],
    sealed: Collection[str] = (),
    also: dict[str, Collection[tuple[str, str]]] | None = None,
) -> dict[str, Links]:
    """:class:`Links` of each file of ``sources`` (workspace path -> text of the Python
    files grading installs), of which grading seals ``sealed`` (``also``: the mixin tests
    each file defines for classes elsewhere, as :func:`seal_file` takes them)."""
    trees: dict[str, ast.Module] = {}
    for rel, text in sources.items():
        try:
            trees[rel] = parse(text)
        except (SyntaxError, ValueError):
            continue
    modules = {rel: _module_names(tree, rel) for rel, tree in trees.items()}
    foreign = _foreign_reads(list(sources), trees)
    bases = _unittest_bases(trees, modules)
    shared, remote = _shared_tables(trees, modules, set(sealed), also or {}, bases)
    return {
        rel: Links(
            foreign.get(rel, frozenset()),
            bases.get(rel, frozenset()),
            shared.get(rel, {}),
            remote.get(rel, {}),
        )
        for rel in sources
    }


@dataclasses.dataclass
class _Scope:
    """What sealing one test needs to know of it."""

    local: set[str]  # names it binds
    literals: dict[str, object]  # its literal locals being inlined, with their values
    consumed: dict[str, int]  # literal local -> uses sealed away so far
    self_name: str | None  # a method's first argument (for unittest's assertions)
    #: Parametrized arguments being tried as expectation columns -> their column.
    params: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The test's arguments (fixtures and parameters; not ``self``).
    args: set[str] = dataclasses.field(default_factory=set)
    #: Columns the test also branches on (``if expected is None:``: ``"none"``; ``if
    #: altstr:``: ``"truth"``; both: ``"mixed"``): hidden, their cells keep what the branch
    #: reads of them.
    guarded: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Inside a branch (``if``, ``try``): its checks are judged against gold's per case.
    cond: bool = False
    #: Expectation helpers the test defines in its body, by name.
    helpers: dict[str, _Helper] = dataclasses.field(default_factory=dict)


def _bound(scope: _Scope) -> set[str]:
    """The names a test binds or is given (``self`` too)."""
    return scope.local | scope.args | ({scope.self_name} if scope.self_name else set())


def _guard(test: ast.expr, params: dict[str, int]) -> tuple[str, str] | None:
    """(column, ``"none"``) of ``<column> is [not] None``, (column, ``"truth"``) of
    ``<column>`` or ``not <column>`` as a branch's test; None otherwise."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Name) and test.id in params:
        return test.id, "truth"
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is | ast.IsNot)
        and isinstance(test.left, ast.Name)
        and test.left.id in params
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return test.left.id, "none"
    return None


def _kept(value: object, kind: str | None) -> str:
    """A hidden cell as written in the planted table: ``None``, or, in a column a branch
    reads (:func:`_guard`), ``None`` where the branch would see None (or a false value)
    and ``...`` elsewhere."""
    if kind == "none":
        return "None" if value is None else "..."
    if kind == "truth":
        return "None" if not value else "..."
    return "None"


def _reads(fn: ast.FunctionDef, name: str) -> bool:
    """Whether the function's body reads ``name``."""
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        for stmt in fn.body
        for n in ast.walk(stmt)
    )


def seal_file(  # noqa: C901 - one pass over a file's tests whose steps share its edits
    text: str,
    tree: ast.Module,
    rel: str,
    rng: random.Random,
    taken: set[str],
    helpers: Iterable[str] = (),
    gold: bool = False,
    focus: Collection[str] = (),
    listed: dict[str, list[str]] | None = None,
    also: Collection[tuple[str, str]] = (),
    imported: Imported | None = None,
    exports: Collection[str] = (),
    links: Links | None = None,
) -> tuple[str, Sealed]:
    """``text`` with its sealable assertions replaced by sealed checks.

    The returned text has the same lines as ``text`` (line numbers stay true); the file must
    end with ``Sealed.footer`` (empty when nothing was sealed).

    Args:
        text: The test file (already renamed, as installed).
        tree: ``text`` parsed.
        rel: The file's workspace path (node ids are ``rel::...``).
        rng: Draws the check numbers and the runtime module's alias.
        taken: Names the file uses (the alias avoids them).
        helpers: Names of equality helpers the file imports from other test files (its own
            are found here: :func:`equality_helpers`).
        gold: Also seal ``==`` assertions whose expected side the grader cannot compute,
            against the value recorded at gold (:mod:`repogym.grading.gold`).
        focus: Installed node ids of tests of :attr:`Sealed.focusable` whose tables share no
            constant: the file is planted for a run of those tests alone. The
            module-constant table it reads loses
            every column the test does not read as an input (the other tests of the table
            break; that run does not judge them), and every check key is marked as this
            run's (``...:f``), so gold values of the two plantings never mix.
        listed: Installed node id of a test function -> the parameter ids of its cases the
            task lists (how a table with cells the grader cannot compute is read).
        also: ``(class, method)`` of mixin tests the file defines for classes elsewhere
            (:func:`inherited_tests`): sealed like the file's own tests.
        imported: The expectation helpers the file imports from other installed files
            (:func:`imported_helpers`): calls of them are sealed too.
        exports: Helpers of this file that other files' sealed calls hand handles
            (:func:`export_helpers`).
        links: What the other installed files mean for this one (:func:`file_links`): a
            module table they read keeps its columns unless they read it only in loops
            that seal (:func:`loop_tables`); a class whose base is another file's unittest
            class is collected.
    """
    links = links or Links()
    listed = listed or {}
    pytest_names = _pytest_names(tree)
    helpers = set(helpers) | own_helpers(tree)
    ns = value_names(tree)
    raisers = _module_raisers(tree, pytest_names)
    src = _Text(text)
    out = Sealed()
    alias = _alias(rng, taken)
    used: set[int] = set()

    def cid() -> int:
        while (n := rng.randrange(10_000, 10_000_000)) in used:
            pass
        used.add(n)
        return n

    def compare(
        node_id: str, test: ast.expr, stmt: ast.stmt, part: int, scope: _Scope, times: int
    ) -> str | None:
        """The sealed check for one assertion's test, or None."""
        names = {**ns, **scope.literals}
        local = scope.local - set(scope.literals)
        key = f"{rel}:{stmt.lineno}:{stmt.col_offset}:{part}" + (":f" if focus else "")
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)
            and (
                computed := next(
                    (
                        other
                        for side, other in (
                            (test.comparators[0], test.left),
                            (test.left, test.comparators[0]),
                        )
                        if id(side) in looped.expected
                    ),
                    None,
                )
            )
            is not None
        ):  # a hidden column of a module table: gold's values over the whole table
            n = cid()
            out.seals.append(Seal(n, node_id, stmt.lineno, "==", None, (), times, key, gold=True))
            return f"{alias}.check({n}, ({src.segment(computed)}))"
        if (column := _column_side(test, scope.params)) is not None:
            computed, name = column
            scope.consumed[name] = scope.consumed.get(name, 0) + sum(
                1 for n in ast.walk(test) if isinstance(n, ast.Name) and n.id == name
            )
            n = cid()
            out.seals.append(Seal(n, node_id, stmt.lineno, "==", None, (), times, key, gold=True))
            return f"{alias}.check({n}, ({src.segment(computed)}))"
        if not (exp := _expectation(test, pytest_names, names, local, gold=gold)):
            return None
        op, expected, options, computed = exp
        if op == "contains" and scope.cond:
            return None  # judged against gold's whole value there: no text of its own to find
        equality = None
        if expected is None and op == "==":
            if (computed := _gold_side(test, scope.args, _bound(scope))) is None:
                return None  # a side is one of the test's arguments, which code can read
            other = test.comparators[0] if computed is test.left else test.left
            if isinstance(other, ast.Name):  # ``x == local``: the equality stays too
                equality = f"{other.id}, {computed is test.left}"
        n = cid()
        out.seals.append(
            Seal(
                n,
                node_id,
                stmt.lineno,
                op,
                expected,
                options,
                times,
                key,
                gold=scope.cond or (expected is None and op == "=="),
                local_eq=equality is not None,
            )
        )
        inside = {id(c) for c in ast.walk(computed)}
        for c in ast.walk(test):  # the expected side's names are gone from the file
            if isinstance(c, ast.Name) and id(c) not in inside and c.id in scope.literals:
                scope.consumed[c.id] = scope.consumed.get(c.id, 0) + 1
        if equality:  # ``__eq__`` may be what the test checks (``assert f1 == f2``)
            return f"{alias}.equal({n}, ({src.segment(computed)}), {equality})"
        if op == "contains":
            return f"{alias}.contains({n}, ({src.segment(computed)}))"
        return f"{alias}.check({n}, ({src.segment(computed)}))"

    def assertion(node_id: str, stmt: ast.stmt, test: ast.expr, scope: _Scope, times: int) -> None:
        parts = (
            test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        )
        calls = [compare(node_id, p, stmt, i, scope, times) for i, p in enumerate(parts)]
        if not any(calls):
            return
        if len(parts) == 1:
            src.replace(stmt, calls[0])
        else:  # assert a and b: each part checked in turn, as the ``and`` would
            src.replace(
                stmt,
                "("
                + ", ".join(
                    c or f"{alias}.hold(({src.segment(p)}))"
                    for c, p in zip(calls, parts, strict=True)
                )
                + ")",
            )

    def block(node_id: str, body: list[ast.stmt], scope: _Scope, times: int = 1) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Assert):
                assertion(node_id, stmt, stmt.test, scope, times)
            elif isinstance(stmt, ast.Expr) and (
                test := _call_assertion(stmt.value, helpers, scope.self_name)
            ):
                assertion(node_id, stmt, test, scope, times)
            elif isinstance(stmt, ast.Expr) and (found := helper_of(stmt.value, node_id, scope)):
                helper_call(node_id, stmt, found, scope, times)
            elif isinstance(stmt, ast.If | ast.Try) and times == 1:
                if isinstance(stmt, ast.If) and (found := _guard(stmt.test, scope.params)):
                    col, kind = found
                    scope.consumed[col] = scope.consumed.get(col, 0) + 1
                    scope.guarded[col] = kind if scope.guarded.get(col, kind) == kind else "mixed"
                branches = (
                    [stmt.body, stmt.orelse]
                    if isinstance(stmt, ast.If)
                    else [stmt.body, stmt.orelse, stmt.finalbody, *(h.body for h in stmt.handlers)]
                )
                was, scope.cond = scope.cond, True
                for branch in branches:
                    block(node_id, branch, scope, times)
                scope.cond = was
            elif isinstance(stmt, ast.With):
                for item in stmt.items if not scope.cond else ():
                    if found := _raises(item, pytest_names, scope.self_name):
                        names, options = found
                        n = cid()
                        src.replace(item.context_expr, f"{alias}.raises({n})")
                        out.seals.append(
                            Seal(
                                n,
                                node_id,
                                stmt.lineno,
                                "raises",
                                names,
                                options,
                                times,
                                f"{rel}:{stmt.lineno}:{stmt.col_offset}:r"
                                + (":f" if focus else ""),
                            )
                        )
                if times == 1 and all(
                    _lets_failures_out(item, raisers, pytest_names, scope.self_name)
                    for item in stmt.items
                ):  # the body may stop early (a raise): its checks count where gold ran them
                    was, scope.cond = scope.cond, True
                    block(node_id, stmt.body, scope, times)
                    scope.cond = was
            elif isinstance(stmt, ast.For) and (
                k := _iterations(stmt) or looped.loops.get(id(stmt), 0)
            ):
                block(node_id, stmt.body, scope, times * k)

    def helper_of(call: ast.expr, node_id: str, scope: _Scope) -> _Helper | None:
        """The expectation helper a statement's call calls: one the test defines, one of
        the file's functions, or a method of the test's class."""
        if not isinstance(call, ast.Call):
            return None
        f = call.func
        if isinstance(f, ast.Name):
            if f.id in scope.helpers:
                return scope.helpers[f.id]
            return module_helpers.get(f.id) if f.id not in scope.local else None
        parts = node_id.split("::")
        if (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id == scope.self_name
            and len(parts) == 3
        ):
            return class_helpers.get(parts[1], {}).get(f.attr)
        return None

    def helper_call(
        node_id: str, stmt: ast.stmt, helper: _Helper, scope: _Scope, times: int
    ) -> None:
        """Seal a call of an expectation helper: each expectation argument the grader can
        compute leaves the file for a handle, and each of its uses in the helper becomes a
        check of the value the helper compares with it."""
        call = stmt.value
        assert isinstance(call, ast.Call)
        parts = node_id.split("::")
        methods_of = class_methods.get(parts[1], frozenset()) if len(parts) == 3 else frozenset()
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            return
        bound = dict(zip(helper.params, call.args, strict=False))
        bound.update({k.arg: k.value for k in call.keywords if k.arg})
        names = {**ns, **scope.literals}
        local = scope.local - set(scope.literals)
        for p, uses in helper.uses.items():
            if (arg := bound.get(p)) is None:
                continue
            ok, value = _value(arg, names, local)
            # an argument of literals and the suite's own methods is compared with what
            # gold's helper computed (its value at gold is the one it was compared with)
            at_gold = not ok and times == 1 and _suite_call(arg, scope.self_name, methods_of)
            if not (ok or at_gold) or (times != 1 and any(u.cond for u in uses)):
                continue
            plan: list[tuple[bool, object]] = []
            for u in uses:
                if u.cond or scope.cond or at_gold:
                    plan.append((True, None))
                    continue
                if isinstance(u.expected, ast.Name):
                    plan.append((False, value))
                    continue
                ok, expected = _value(u.expected, {**ns, p: value}, set())
                if not ok:
                    break
                plan.append((False, expected))
            if len(plan) != len(uses):
                continue
            cids = []
            for k, (is_gold, expected) in enumerate(plan):
                n = cid()
                cids.append(n)
                helper_of_cid[n] = helper
                key = f"{rel}:{call.lineno}:{call.col_offset}:h:{p}:{k}" + (":f" if focus else "")
                out.seals.append(
                    Seal(n, node_id, stmt.lineno, "==", expected, (), times, key, gold=is_gold)
                )
            src.replace(arg, f"{alias}.handle({', '.join(map(str, cids))})")
            for c in ast.walk(arg):  # its literal locals' uses leave with it
                if isinstance(c, ast.Name) and c.id in scope.literals:
                    scope.consumed[c.id] = scope.consumed.get(c.id, 0) + 1

    def seal_test(
        node_id: str, fn: ast.FunctionDef, self_name: str | None, *, dry: bool = False
    ) -> set[int]:
        """Seal one test; returns the table columns that leave the file (with ``dry``,
        only says which would, and changes nothing)."""
        local = _stores(fn)
        args = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)} - {self_name}
        nested = {
            n.name: h
            for n in fn.body
            if isinstance(n, ast.FunctionDef) and (h := expectation_helper(n))
        }
        candidates = _literal_locals(fn, ns)
        table = _table(fn, pytest_names, ns, shared, listed.get(node_id, ()))
        columns = {name: c for c, name in enumerate(table.names)} if table else {}
        if table and table.shared and not dry:  # the columns every user leaves
            if any(focus_of.get(c, node_id) != node_id or c not in allowed for c in table.shared):
                columns = {}
            else:
                hide = set.intersection(*(allowed[c] for c in table.shared))
                columns = {k: c for k, c in columns.items() if c in hide}
        loads = {
            k: sum(
                1
                for n in ast.walk(fn)
                if isinstance(n, ast.Name) and n.id == k and isinstance(n.ctx, ast.Load)
            )
            for k in {*candidates, *columns}
        }
        start = len(src.edits), len(out.seals)
        while True:  # a literal local or a column leaves the file only if all its uses do
            literals = {k: _value(v, ns, set())[1] for k, v in candidates.items()}
            scope = _Scope(local, literals, {}, self_name, columns, args, helpers=nested)
            marks = len(src.edits), len(out.seals)
            block(node_id, fn.body, scope)
            partial = {k for k in {*candidates, *columns} if scope.consumed.get(k, 0) != loads[k]}
            # a branch on a column whose cells the planted table cannot keep for it
            partial |= {
                k
                for k, kind in scope.guarded.items()
                if k in columns
                and (
                    kind == "mixed"
                    or kind == "truth"
                    and any(row[columns[k]] is _UNKNOWN for row in table.values)
                )
            }
            if not partial:
                break
            del src.edits[marks[0] :], out.seals[marks[1] :]
            candidates = {k: v for k, v in candidates.items() if k not in partial}
            columns = {k: v for k, v in columns.items() if k not in partial}
        blank = {c for k, c in columns.items() if scope.consumed.get(k)}
        guards[node_id] = {
            c: scope.guarded[k] for k, c in columns.items() if k in scope.guarded and c in blank
        }
        if dry:
            del src.edits[start[0] :], out.seals[start[1] :]
            return blank
        for stmt in fn.body:  # the inlined values leave the file with their assertions
            if (
                isinstance(stmt, ast.Assign)
                and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id in candidates
                and scope.consumed.get(stmt.targets[0].id)
            ):
                src.replace(stmt.value, "(None)")
        if table and table.shared:
            if columns:
                users.append((node_id, table))
        elif table and blank:
            hide_columns(node_id, table, blank, guards[node_id])
        return blank

    def blanked(
        table: _Table,
        blank: set[int],
        keep_none: dict[int, str] | None = None,
        span: tuple[int, int] | None = None,
        as_tuple: bool = False,
    ) -> str:
        """The table's rows (those of ``span``), written with ``None`` for the ``blank``
        columns, in parens, as a list (or a tuple: a constant that was one stays one, so
        ``A + B`` still adds); a cell of a ``keep_none`` column is ``None`` only where it
        was (else ``...``)."""
        rows = []
        start, end = span or (0, len(table.rows))
        for values, row in zip(table.values[start:end], table.rows[start:end], strict=True):
            cells = [
                _kept(values[c], (keep_none or {}).get(c)) if c in blank else src.segment(e)
                for c, e in enumerate(row)
            ]
            rows.append(cells[0] if table.single else "(" + ", ".join(cells) + ",)")
        if as_tuple:
            return "((" + "".join(r + ", " for r in rows) + "))"
        return "([" + ", ".join(rows) + "])"

    def hide_columns(
        node_id: str, table: _Table, blank: set[int], keep_none: dict[int, str] | None = None
    ) -> None:
        """The table without its expectation columns, its cases under random ids (pytest
        would name them by their values). The checks against a column are gold checks:
        per case, what the gold patch computes there (the column's value, or an object of
        the package's own that equals it)."""
        tokens = []
        while len(tokens) < len(table.rows):
            if (
                t := "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8))
            ) not in tokens:
                tokens.append(t)
        if table.shared and table.ids_node is None:  # the constants are blanked once
            src.replace(table.ref_node, f"{src.segment(table.ref_node)}, ids=({tokens!r})")
        elif table.shared:
            src.replace(table.ids_node, "(" + repr(tokens) + ")")
        elif table.ids_node is None:
            src.replace(
                table.values_node, blanked(table, blank, keep_none) + ", ids=(" + repr(tokens) + ")"
            )
        else:
            src.replace(table.values_node, blanked(table, blank, keep_none))
            src.replace(table.ids_node, "(" + repr(tokens) + ")")
        for token, original in zip(tokens, table.ids, strict=True):
            for combo in table.combos:
                out.case_ids[f"{node_id}[{token}{combo}]"] = original + combo

    # A module constant loses the columns that every test whose table it is (or is a term of)
    # only expects. A test that expects more columns than the others is sealed in a run of
    # its own (``focus``), where its constants lose every column it does not read as input.
    shared = shared_tables(tree, pytest_names)
    own_functions, own_classes = _helpers_of(tree)
    class_helpers, class_methods = _class_members(tree, imported)
    module_helpers = {**(imported.functions if imported else {}), **own_functions}
    helper_of_cid: dict[int, _Helper] = {}
    guards: dict[str, dict[int, str]] = {}
    funcs = dict(_tests(tree, rel, also, links.bases))
    looped = loop_tables(
        tree, funcs, helpers, {i: _self_name(i, f) for i, f in funcs.items()}, links
    )
    tables_of = {
        i: t
        for i, f in funcs.items()
        if (t := _table(f, pytest_names, ns, shared, listed.get(i, ()))) and t.shared
    }
    users_of = {c: [i for i, t in tables_of.items() if c in t.shared] for c in shared}
    good = {c for c, us in users_of.items() if us and all(_sealable(funcs[i]) for i in us)}
    cols = {
        i: seal_test(i, funcs[i], _self_name(i, funcs[i]), dry=True)
        for i, t in tables_of.items()
        if set(t.shared) <= good
    }
    dry_guards = {i: dict(guards[i]) for i in cols}
    allowed: dict[str, set[int]] = {}
    for c in good:
        us = users_of[c]
        if all(i in cols for i in us):
            common = set.intersection(*(cols[i] for i in us))
            # a hidden cell keeps being None only where every test guards the column
            allowed[c] = {k for k in common if len({dry_guards[i].get(k) for i in us}) == 1}
    changed = True
    while changed:  # a test's columns are hidden only if every constant of its table hides them
        changed = False
        for i in cols:
            if all(c in allowed for c in tables_of[i].shared):
                hide = set.intersection(*(allowed[c] for c in tables_of[i].shared))
                for c in tables_of[i].shared:
                    changed |= bool(allowed[c] - hide)
                    allowed[c] &= hide
    keep_none = {
        c: {k: dry_guards[users_of[c][0]][k] for k in allowed[c] if k in dry_guards[users_of[c][0]]}
        for c in allowed
    }
    focus_of: dict[str, str] = {}
    for i, expects in cols.items():
        if all(c in allowed for c in tables_of[i].shared) and expects - set.intersection(
            *(allowed[c] for c in tables_of[i].shared)
        ):
            out.focusable[i] = tuple(f"{rel}:{c}" for c in tables_of[i].shared)
    for f in (f for f in focus if f in out.focusable):
        table, fn = tables_of[f], funcs[f]
        if any(c in focus_of for c in table.shared):
            raise ValueError(f"focus tests {focus_of[table.shared[0]]} and {f} share a table")
        unread = {k for k, name in enumerate(table.names) if not _reads(fn, name)}
        for c in table.shared:
            allowed[c], keep_none[c], focus_of[c] = cols[f] | unread, dry_guards[f], f
    users: list[tuple[str, _Table]] = []
    for node_id, fn in funcs.items():
        out.checks_by_test[node_id] = 0
        if _sealable(fn):
            seal_test(node_id, fn, _self_name(node_id, fn))
    done: set[str] = set()
    for _, table in users:
        for name, node, start, stop in table.parts:
            if name not in done:
                done.add(name)
                written = blanked(
                    table,
                    allowed[name],
                    keep_none[name],
                    (start, stop),
                    as_tuple=isinstance(node, ast.Tuple),
                )
                src.replace(node, written)
    for node_id, table in users:
        hide_columns(node_id, table, set.intersection(*(allowed[c] for c in table.shared)))
    for looped_table in looped.tables.values():  # cells only: the rows and lines stay
        for row in looped_table.rows:
            for k in looped_table.hidden:
                src.replace(row[k], "(None)")
    # a helper with a sealed call reports, for a handle, what it compares: the file's own
    # (one imported from another file reports there: ``export_helpers``), and the ones
    # other files' sealed calls use
    nodes = {id(n) for n in ast.walk(tree)}
    chosen = [h for s in out.seals if (h := helper_of_cid.get(s.cid))]
    chosen += [own_functions[n] for n in exports if n in own_functions]
    chosen += [h for n in exports for h in own_classes.get(n, {}).values()]
    rewritten: set[int] = set()
    for h in chosen:
        first = next(u.computed for us in h.uses.values() for u in us)
        if id(first) in nodes and id(first) not in rewritten:  # this file's, once
            rewritten.add(id(first))
            _report_uses(src, alias, h)
    for s in out.seals:
        out.checks_by_test[s.test] += 1
    if out.seals or rewritten:
        out.footer = f"import {RUNTIME_MODULE} as {alias}  # noqa: E402\n"
    return src.text(), out


# -- judging ---------------------------------------------------------------------------------
def function_of(case: str) -> str:
    """The test function's node id of a test case's (its parameters dropped)."""
    head, sep, _ = case.partition("[")
    return head if sep else case


@dataclasses.dataclass
class CheckOutcome:
    """What a test case's sealed checks showed."""

    checks: int
    failed: list[str]  # "line N: got ..." for each check that did not hold
    #: Whether a strong check (:attr:`Seal.strong`) is among the failed.
    strong_failed: bool = False


#: A fingerprint longer than this is kept as its sha256.
_FINGERPRINT_CHARS = 512
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
#: The repr ``object`` gives: it names a class, nothing of the value.
_DEFAULT_REPR = re.compile(r"^<[\w.]+ object at 0x\?>$")


def fingerprint(got: object) -> str | None:
    """What a gold check compares of one reported value: its canonical encoding, or for
    an object that has none (``opaque``) its repr with addresses blanked; for a ``raises``
    record, the exception's class (module and qualified name: the one gold raised, not only
    one the test accepts) and its message so blanked. None for a malformed record."""
    if not isinstance(got, dict):
        return None
    if "raised" in got:  # the exact class gold raised, and its message
        message, raised = got.get("message"), got.get("raised")
        if not isinstance(message, str) or not isinstance(raised, str) or not raised:
            return None
        text = f"m:{got.get('module')}:{raised}\n" + _ADDRESS.sub("0x?", message)
    elif "digest" in got:
        text = "d:" + str(got["digest"])[:80]
    else:
        try:
            data = canon.dumps(got.get("v"))
        except (TypeError, ValueError, RecursionError):
            return None
        if '"opaque"' in data:
            text = "o:" + _ADDRESS.sub("0x?", str(got.get("shown", ""))[:400])
        else:
            text = "v:" + data
    if len(text) > _FINGERPRINT_CHARS:
        import hashlib

        text = "h:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return text


def informative(prints: Iterable[str]) -> bool:
    """Whether gold values with these fingerprints carry more than a bit or two: not only
    booleans and None, and not an object's default repr."""
    weak = {"v:null", 'v:{"n":"0"}', 'v:{"n":"1"}'}
    prints = list(prints)
    return bool(prints) and not all(
        p in weak
        or (p.startswith("o:") and _DEFAULT_REPR.match(p[2:]))
        or (p.startswith("m:") and p.endswith("\n"))
        for p in prints
    )


def message_fits(got: object, prints: frozenset[str]) -> bool:
    """Whether a ``raises`` record's message is no longer than twice the longest message
    gold's exceptions had there, plus 64 characters: a pattern is searched in a text of
    about gold's length, never in one the forger made of every word it could find. (The
    message itself is the code's to choose: a correct fix may word it differently.)"""
    golds = [p.split("\n", 1)[1] for p in prints if p.startswith("m:") and "\n" in p]
    message = got.get("message") if isinstance(got, dict) else None
    return (
        bool(golds) and isinstance(message, str) and len(message) <= 2 * max(map(len, golds)) + 64
    )


def size_print(got: object) -> str | None:
    """What gold's run records of a ``contains`` check's value: ``n:<length>``, the length of
    its canonical text, when it is a text or a container the grader can search (else
    ``x:``: the check is not judged where gold's value was not one either); None for a
    malformed record."""
    if not isinstance(got, dict):
        return None
    if "v" in got:
        try:
            value = canon.decode(got["v"])
            if isinstance(value, _HAYSTACKS):
                return f"n:{len(canon.dumps(got['v']))}"
        except (canon.NotCanonical, TypeError, ValueError, RecursionError):
            pass
    return "x:"


def sized(prints: Iterable[str]) -> bool:
    """Whether gold's values of a ``contains`` check (:func:`size_print`) were all texts or
    containers: only then is the text searched bounded by gold's length."""
    prints = list(prints)
    return bool(prints) and all(p.startswith("n:") for p in prints)


def contains_failure(s: Seal, case: str, values: list[object]) -> str | None:
    """Why ``case``'s values of a ``contains`` check fail, or None. Each must hold the hidden
    text, and where gold's values were texts or containers, be one whose canonical text is
    no longer than twice gold's longest there plus 64 characters: the text is searched in
    one of about gold's length, never in one a forger made of every phrase it could find.
    Where gold's value was neither (an object of the package's own, a text past the record
    cap), the check is not judged (and is no value seal there: :meth:`Seal.strong_in`)."""
    prints = s.cases.get(case)
    lengths = [int(p[2:]) for p in prints or () if p.startswith("n:")]
    for got in values:
        size = size_print(got)
        if size is None:
            return f"{s.where}: got {s.shown(got)}"
        if size == "x:":
            if prints and not lengths:
                continue  # gold's value was no text or container there either
            return f"{s.where}: got {s.shown(got)}"
        if not s.holds(got):
            return f"{s.where}: got {s.shown(got)}"
        if lengths and int(size[2:]) > 2 * max(lengths) + 64:
            return f"{s.where}: got a value far longer than gold's ({s.shown(got)[:80]})"
    return None


def _gold_failure(s: Seal, case: str, values: list[object]) -> str | None:
    """Why ``case``'s values of a gold check differ from gold's, or None."""
    want = s.cases[case]
    got = {fingerprint(v) for v in values}
    if got == want:
        return None
    bad = next((v for v in values if fingerprint(v) not in want), values[0])
    return f"{s.where}: got {s.shown(bad)}"


def judge_case(
    case: str, seals: Iterable[Seal], records: dict[tuple[str, int], list[object]]
) -> CheckOutcome:
    """The outcome of every sealed check of ``case``'s function, for that case.

    A gold check (:attr:`Seal.gold`) counts only for the cases gold reached it in; there
    the set of values reported must be the set gold reported.
    """
    own = [s for s in seals if s.test == function_of(case) and (not s.gold or case in s.cases)]
    failed, strong = [], False
    for s in own:
        before = len(failed)
        got = records.get((case, s.cid), [])
        values = [g for g in got if not (isinstance(g, dict) and "calls" in g)]
        calls = [g["calls"] for g in got if isinstance(g, dict) and "calls" in g]
        if not values:
            failed.append(f"{s.where}: not reached")
        elif s.gold and (why := _gold_failure(s, case, values)):
            failed.append(why)
        elif s.op == "contains" and (why := contains_failure(s, case, values)):
            failed.append(why)
        elif (
            not s.gold
            and s.op != "contains"
            and (bad := next((g for g in values if not s.holds(g)), None))
        ):
            failed.append(f"{s.where}: got {s.shown(bad)}")
        elif (
            s.op == "raises"
            and case in s.cases
            and (bad := next((g for g in values if not message_fits(g, s.cases[case])), None))
        ):
            failed.append(f"{s.where}: got {s.shown(bad)}")  # a message far past gold's
        elif calls != [s.times]:
            failed.append(f"{s.where}: reached {calls[0] if calls else 0} times of {s.times}")
        strong = strong or (len(failed) > before and s.strong_in(case))
    return CheckOutcome(len(own), failed, strong)
