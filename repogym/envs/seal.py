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
wrong), so the statements after it still run. Only checks that every passing run of the
test reaches are sealed: top-level statements of a test that has no ``return`` or
``yield``, and the bodies of ``for`` loops over non-empty literals that never ``break``.
In ``assert a and b``, each part is checked in turn. What is not sealed (assertions on computed expectations, truthiness, helper
functions, parametrized expectations) is still checked by pytest inside the sandbox, where
a forger can flip it; :func:`seal_stats` measures each task's share, and
docs/grading.md says what an unsealed test still allows.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import importlib
import random
import re
from collections.abc import Iterable, Iterator

from repogym.envs.launcher import canon

#: Name of the module the launcher provides inside the sandbox.
RUNTIME_MODULE = "_repogym_seal"
#: Comparison operators a sealed ``check`` can stand for.
_OPS = {ast.Eq: "==", ast.In: "in", ast.Is: "is"}
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
        op: ``==``, ``in``, ``is``, ``truth``, ``approx`` or ``raises``.
        expected: The hidden value (for ``raises``: the accepted class names).
        options: ``approx``'s keyword arguments; ``raises``' ``match`` pattern.
        times: How often a passing run of the test reaches it (loops over literals).
        leaked: Whether a sandbox of the task can read its expected value (the task's own
            files state it; ``repogym.quality.leaks``): it is weak, however long the value.
    """

    cid: int
    test: str
    line: int
    op: str
    expected: object
    options: tuple[tuple[str, object], ...] = ()
    times: int = 1
    leaked: bool = False

    @property
    def strong(self) -> bool:
        """Whether guessing its hidden expectation is hopeless: a value (``==``, ``approx``,
        ``in``) or an exception with a message pattern, that the task's files do not state
        (:attr:`leaked`). A truth or ``is`` check carries a bit or two, an exception class a
        few: a forger can guess those."""
        return not self.leaked and (self.op in ("==", "approx", "in") or (
            self.op == "raises" and bool(dict(self.options).get("match"))))

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
        except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError,
                RecursionError, MemoryError, re.error):
            return False  # e.g. approx of a number past float's range, an ``in`` of a str

    def _holds(self, got: dict) -> bool:
        if self.op == "raises":
            chain = raised_chain(got)
            pattern = dict(self.options).get("match")
            return chain is not None and any(_names_class(n, chain) for n in self.expected) \
                and (pattern is None or re.search(pattern, got["message"]) is not None)
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
            return f"an exception message that is not a string of at most " \
                   f"{canon.MESSAGE_CHARS} characters"
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
    if chain[0] != (module, raised) or chain[-1] != ("builtins", "object") or \
            ("builtins", "BaseException") not in chain:
        return None
    return chain if _builtins_consistent(chain) else None


def _builtins_consistent(chain: list[tuple[str, str]]) -> bool:
    # a "builtins" class that the builtins module does not hold (a C extension's exception
    # without a dotted name) cannot be checked, like the repository's own classes
    names = [name for mod, name in chain
             if mod == "builtins" and isinstance(getattr(builtins, name, None), type)]
    classes = [getattr(builtins, n) for n in names]
    for i, c in enumerate(classes):
        bases = [b.__qualname__ for b in c.__mro__]
        rest = iter(names[i:])
        if not all(b in rest for b in bases):  # its bases, in order, after it
            return False
    leaves = [c for c in classes if issubclass(c, BaseException)
              and not any(d is not c and issubclass(d, c) for d in classes)]
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


#: Modules whose names a sealed expectation may call (pure value constructors).
_VALUE_MODULES = ("datetime", "decimal", "fractions", "uuid", "math")
#: Attributes a sealed expectation never uses (time- or randomness-dependent, or contexts).
_IMPURE = {"now", "today", "utcnow", "uuid1", "uuid4", "getcontext", "setcontext",
           "localcontext", "fromtimestamp", "utcfromtimestamp"}
_BUILTINS = {name: getattr(builtins, name) for name in (
    "abs", "bool", "bytes", "complex", "dict", "enumerate", "float", "frozenset", "int", "len",
    "list", "max", "min", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip")}
_NODES = (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.UAdd,
          ast.USub, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
          ast.Call, ast.keyword, ast.Name, ast.Load, ast.Store, ast.Attribute, ast.ListComp,
          ast.SetComp, ast.GeneratorExp, ast.comprehension)
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
        elif isinstance(node, ast.ImportFrom) and node.module in _VALUE_MODULES and \
                not node.level:
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
    bound = {n.id for c in ast.walk(node) if isinstance(c, ast.comprehension)
             for n in ast.walk(c.target) if isinstance(n, ast.Name)}
    for n in ast.walk(node):
        if not isinstance(n, _NODES):
            return False, None
        if isinstance(n, ast.Name) and n.id not in bound and (
                n.id in local or (n.id not in ns and n.id not in _BUILTINS
                                  and n.id != "range")):
            return False, None
        if isinstance(n, ast.Attribute) and (n.attr.startswith("_") or n.attr in _IMPURE):
            return False, None
    for n in ast.walk(node):  # 10**18 yes, 10**10**10 no
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) and not (
                isinstance(n.left, ast.Constant) and isinstance(n.right, ast.Constant)
                and isinstance(n.right.value, int) and 0 <= n.right.value <= 1000):
            return False, None
    try:
        code = compile(ast.Expression(node), "<expected value>", "eval")
        scope = {"__builtins__": {**_BUILTINS, "range": _bounded_range}, **ns}
        value = eval(code, scope)
    except Exception:  # noqa: BLE001 - an expectation the grader cannot compute stays unsealed
        return False, None
    if "opaque" in canon.dumps(canon.encode(value)):
        return False, None
    return True, value


def _stores(fn: ast.FunctionDef) -> set[str]:
    """Names the function binds (arguments, assignments, loop and ``with`` targets)."""
    names = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    return names | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Store)}


def _is_pytest_attr(node: ast.expr, attr: str, pytest_names: set[str]) -> bool:
    """``pytest.<attr>`` or a bare ``<attr>`` imported from pytest."""
    if isinstance(node, ast.Attribute) and node.attr == attr and \
            isinstance(node.value, ast.Name) and node.value.id in pytest_names:
        return True
    return isinstance(node, ast.Name) and node.id == attr and f"from:{attr}" in pytest_names


def _pytest_names(tree: ast.Module) -> set[str]:
    """How the file refers to pytest: its module aliases and ``from:<name>`` imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name == "pytest"}
        elif isinstance(node, ast.ImportFrom) and node.module == "pytest":
            names |= {f"from:{a.name}" for a in node.names if a.asname is None}
    return names


def _expectation(test: ast.expr, pytest_names: set[str], ns: dict[str, object],
                 local: set[str]) -> tuple[str, object, tuple, ast.expr] | None:
    """(op, expected, options, computed side) of an assertion that can be sealed."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and \
            isinstance(test.operand, _TRUTHY):
        return "truth", False, (), test.operand
    if isinstance(test, _TRUTHY):
        return "truth", True, (), test
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    op = _OPS.get(type(test.ops[0]))
    left, right = test.left, test.comparators[0]
    if op is None:
        return None
    if op == "==" and isinstance(right, ast.Call) and _is_pytest_attr(right.func, "approx",
                                                                       pytest_names):
        ok, args = _literal(ast.Tuple(elts=list(right.args), ctx=ast.Load()))
        kwargs = {}
        for kw in right.keywords:
            good, value = _literal(kw.value)
            if kw.arg is None or not good:
                return None
            kwargs[kw.arg] = value
        if not ok or len(args) != 1:
            return None
        return "approx", args[0], tuple(sorted(kwargs.items())), left
    ok, value = _value(right, ns, local)
    if not ok and op == "==":
        ok, value = _value(left, ns, local)
        left = right
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


def _raises(item: ast.withitem, pytest_names: set[str]) -> tuple[tuple[str, ...],
                                                                  tuple] | None:
    call = item.context_expr
    if not isinstance(call, ast.Call) or not _is_pytest_attr(call.func, "raises",
                                                             pytest_names):
        return None
    if len(call.args) != 1 or any(kw.arg != "match" for kw in call.keywords):
        return None
    names = _exception_names(call.args[0])
    if names is None:
        return None
    options: tuple = ()
    for kw in call.keywords:
        ok, pattern = _literal(kw.value)
        if not ok or not isinstance(pattern, str):
            return None
        options = (("match", pattern),)
    return names, options


def _sealable(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A test whose top-level statements all run whenever it passes."""
    if isinstance(fn, ast.AsyncFunctionDef):
        return False

    def walk(node: ast.AST) -> Iterator[ast.AST]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda |
                          ast.ClassDef):
                continue
            yield child
            yield from walk(child)

    return not any(isinstance(n, _NO_SEAL) for n in walk(fn))


def _iterations(loop: ast.For) -> int:
    """How many times the body of a ``for`` runs to its end, when the source says so: a loop
    over a literal sequence (or ``range`` of literals) with no ``break``, ``continue`` or
    ``else``; 0 otherwise."""
    if loop.orelse or any(isinstance(n, ast.Break | ast.Continue) for n in ast.walk(loop)):
        return 0
    it = loop.iter
    if isinstance(it, ast.Tuple | ast.List) and not any(isinstance(e, ast.Starred)
                                                        for e in it.elts):
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
        return self.data[self.at(node.lineno, node.col_offset):
                         self.at(node.end_lineno, node.end_col_offset)].decode(
            "utf-8", "surrogateescape")

    def replace(self, node: ast.AST, new: str) -> None:
        """Replace ``node``'s span with ``new``, padded to the same number of lines."""
        pad = (node.end_lineno - node.lineno) - new.count("\n")
        assert pad >= 0 and new.endswith(")")
        new = new[:-1] + "\n" * pad + ")"
        self.edits.append((self.at(node.lineno, node.col_offset),
                           self.at(node.end_lineno, node.end_col_offset),
                           new.encode("utf-8", "surrogateescape")))

    def text(self) -> str:
        data = self.data
        for start, end, new in sorted(self.edits, reverse=True):
            data = data[:start] + new + data[end:]
        return data.decode("utf-8", "surrogateescape")


def _tests(tree: ast.Module, rel: str) -> Iterator[tuple[str, ast.FunctionDef]]:
    """(node id, function) of every module-level test and method of a ``Test*`` class."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                node.name.startswith("test"):
            yield f"{rel}::{node.name}", node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and \
                        sub.name.startswith("test"):
                    yield f"{rel}::{node.name}::{sub.name}", sub


def seal_file(text: str, tree: ast.Module, rel: str, rng: random.Random,
              taken: set[str]) -> tuple[str, Sealed]:
    """``text`` with its sealable assertions replaced by sealed checks.

    The returned text has the same lines as ``text`` (line numbers stay true); the file must
    end with ``Sealed.footer`` (empty when nothing was sealed).

    Args:
        text: The test file (already renamed, as installed).
        tree: ``text`` parsed.
        rel: The file's workspace path (node ids are ``rel::...``).
        rng: Draws the check numbers and the runtime module's alias.
        taken: Names the file uses (the alias avoids them).
    """
    pytest_names = _pytest_names(tree)
    ns = value_names(tree)
    src = _Text(text)
    out = Sealed()
    alias = "_rg_seal_" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6))
    while alias in taken:
        alias += rng.choice("abcdefghijklmnopqrstuvwxyz")
    used: set[int] = set()

    def cid() -> int:
        while (n := rng.randrange(10_000, 10_000_000)) in used:
            pass
        used.add(n)
        return n

    def compare(node_id: str, test: ast.expr, line: int, local: set[str],
                times: int) -> str | None:
        """The sealed check for one assertion's test, or None."""
        if not (exp := _expectation(test, pytest_names, ns, local)):
            return None
        op, expected, options, computed = exp
        n = cid()
        out.seals.append(Seal(n, node_id, line, op, expected, options, times))
        return f"{alias}.check({n}, ({src.segment(computed)}))"

    def block(node_id: str, body: list[ast.stmt], local: set[str], times: int = 1) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Assert):
                parts = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and \
                    isinstance(stmt.test.op, ast.And) else [stmt.test]
                calls = [compare(node_id, p, stmt.lineno, local, times) for p in parts]
                if not any(calls):
                    continue
                if len(parts) == 1:
                    src.replace(stmt, calls[0])
                else:  # assert a and b: each part checked in turn, as the ``and`` would
                    src.replace(stmt, "(" + ", ".join(
                        c or f"{alias}.hold(({src.segment(p)}))" for c, p in zip(calls, parts))
                        + ")")
            elif isinstance(stmt, ast.With):
                for item in stmt.items:
                    if found := _raises(item, pytest_names):
                        names, options = found
                        n = cid()
                        src.replace(item.context_expr, f"{alias}.raises({n})")
                        out.seals.append(Seal(n, node_id, stmt.lineno, "raises", names,
                                              options, times))
            elif isinstance(stmt, ast.For) and (k := _iterations(stmt)):
                block(node_id, stmt.body, local, times * k)

    for node_id, fn in _tests(tree, rel):
        out.checks_by_test[node_id] = 0
        if _sealable(fn):
            block(node_id, fn.body, _stores(fn))
    for s in out.seals:
        out.checks_by_test[s.test] += 1
    if out.seals:
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


def judge_case(case: str, seals: Iterable[Seal],
               records: dict[tuple[str, int], list[object]]) -> CheckOutcome:
    """The outcome of every sealed check of ``case``'s function, for that case."""
    own = [s for s in seals if s.test == function_of(case)]
    failed, strong = [], False
    for s in own:
        before = len(failed)
        got = records.get((case, s.cid), [])
        values = [g for g in got if not (isinstance(g, dict) and "calls" in g)]
        calls = [g["calls"] for g in got if isinstance(g, dict) and "calls" in g]
        if not values:
            failed.append(f"line {s.line}: not reached")
        elif bad := next((g for g in values if not s.holds(g)), None):
            failed.append(f"line {s.line}: got {s.shown(bad)}")
        elif calls != [s.times]:
            failed.append(f"line {s.line}: reached {calls[0] if calls else 0} times of "
                          f"{s.times}")
        strong = strong or (len(failed) > before and s.strong)
    return CheckOutcome(len(own), failed, strong)
