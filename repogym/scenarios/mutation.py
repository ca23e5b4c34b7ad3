"""Mutants of Python functions that keep the file's own formatting (the one mutation library).

Both ``repogym validate --mutation`` (are a task's hidden tests strong enough to reject wrong
fixes?) and ``repogym synth`` (make tasks by injecting bugs) take their mutants from
:func:`mutants`. Each mutant changes one site of one function, edited in place in the
concrete syntax tree (``libcst``): quotes, spacing and comments elsewhere are untouched,
and a dropped statement leaves no ``pass`` behind.

Operators (``Mutant.operator``, with the variant in parentheses in the id):

- ``compare``: a comparison's boundary or sense (``<`` / ``<=``, ``==`` / ``!=``,
  ``is`` / ``is not``, ``in`` / ``not in``);
- ``arith_op``: a wrong arithmetic or bitwise operator, also in ``+=`` and the like;
- ``bool_op``: ``and`` / ``or``;
- ``drop_condition``: one side of an ``and``/``or`` kept, the other dropped;
- ``constant``: an integer one off (``+1``/``-1``), ``True`` / ``False`` flipped;
- ``wrong_default``: a parameter's default changed (a number ``+1``, a bool flipped,
  a string emptied or, when empty, made ``'x'``);
- ``swap_args``: two neighbouring positional arguments of a call swapped;
- ``return_value``: ``return X`` made ``return None``;
- ``exception_type``: the class raised or caught replaced (``ValueError`` -> ``TypeError``);
- ``invert_condition``: ``if c`` / ``while c`` / ``x if c else y`` made ``not c`` (or back);
- ``drop_statement``: an assignment to an existing name, attribute or item, a ``+=``,
  ``continue`` or ``break`` removed from a block that keeps other statements;
- ``drop_guard``: an ``if`` without ``else`` removed from such a block;
- ``remove_call``: a call statement removed, or ``f(x)`` replaced by ``x``.

A mutant's :attr:`Mutant.id` is stable across runs: file, function, operator, variant and
the position of the edit (line counted from the function's ``def`` line, and column), never
a counter. :func:`equivalence` finds the mutants that are trivially the same program (same
AST, or the same bytecode once compiled).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import difflib
import re
import tomllib
import types
import warnings
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from repogym.scenarios.task import TaskError

OPERATORS: tuple[str, ...] = (
    "compare",
    "arith_op",
    "bool_op",
    "drop_condition",
    "constant",
    "wrong_default",
    "swap_args",
    "return_value",
    "exception_type",
    "invert_condition",
    "drop_statement",
    "drop_guard",
    "remove_call",
)

_COMPARE: dict[type, tuple[type, str]] = {
    cst.LessThan: (cst.LessThanEqual, "<="),
    cst.LessThanEqual: (cst.LessThan, "<"),
    cst.GreaterThan: (cst.GreaterThanEqual, ">="),
    cst.GreaterThanEqual: (cst.GreaterThan, ">"),
    cst.Equal: (cst.NotEqual, "!="),
    cst.NotEqual: (cst.Equal, "=="),
    cst.Is: (cst.IsNot, "is_not"),
    cst.IsNot: (cst.Is, "is"),
    cst.In: (cst.NotIn, "not_in"),
    cst.NotIn: (cst.In, "in"),
}
_ARITH: dict[type, tuple[type, str]] = {
    cst.Add: (cst.Subtract, "-"),
    cst.Subtract: (cst.Add, "+"),
    cst.Multiply: (cst.Divide, "/"),
    cst.Divide: (cst.Multiply, "*"),
    cst.FloorDivide: (cst.Divide, "/"),
    cst.Modulo: (cst.FloorDivide, "//"),
    cst.Power: (cst.Multiply, "*"),
    cst.LeftShift: (cst.RightShift, ">>"),
    cst.RightShift: (cst.LeftShift, "<<"),
    cst.BitAnd: (cst.BitOr, "|"),
    cst.BitOr: (cst.BitAnd, "&"),
    cst.BitXor: (cst.BitAnd, "&"),
    cst.AddAssign: (cst.SubtractAssign, "-="),
    cst.SubtractAssign: (cst.AddAssign, "+="),
    cst.MultiplyAssign: (cst.DivideAssign, "/="),
    cst.DivideAssign: (cst.MultiplyAssign, "*="),
    cst.FloorDivideAssign: (cst.DivideAssign, "/="),
    cst.ModuloAssign: (cst.FloorDivideAssign, "//="),
    cst.BitOrAssign: (cst.BitAndAssign, "&="),
    cst.BitAndAssign: (cst.BitOrAssign, "|="),
}
_BOOL: dict[type, tuple[type, str]] = {cst.And: (cst.Or, "or"), cst.Or: (cst.And, "and")}
_EXCEPTIONS = {
    "ValueError": "TypeError",
    "TypeError": "ValueError",
    "KeyError": "IndexError",
    "IndexError": "KeyError",
    "RuntimeError": "ValueError",
}
_NOT_EXCEPTIONS = {
    "StopIteration",
    "StopAsyncIteration",
    "GeneratorExit",
    "KeyboardInterrupt",
    "SystemExit",
    "BaseException",
    "Exception",
}
_NO_UNWRAP = {"super", "print"}
_SELF_NEGATING = (cst.Is, cst.IsNot, cst.In, cst.NotIn, cst.Equal, cst.NotEqual)


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One single-site change of one function.

    Attributes:
        file: Path of the module, relative to the repository root.
        function: Qualified name of the enclosing function (``Class.method``, ``outer.inner``).
        operator: One of :data:`OPERATORS`.
        variant: What the site became (``<=``, ``+1``, ``TypeError``, ``None``...).
        line: Line of the edit in the original source (1-based).
        col: Column of the edit (0-based).
        offset: ``line`` counted from the function's ``def`` line (0 is the ``def`` line).
        source: The whole mutated module.
    """

    file: str
    function: str
    operator: str
    variant: str
    line: int
    col: int
    offset: int
    source: str

    @property
    def id(self) -> str:
        """Stable id: ``file::function::operator(variant)@offset:col``."""
        return (
            f"{self.file}::{self.function}::{self.operator}({self.variant})"
            f"@{self.offset}:{self.col}"
        )


@dataclasses.dataclass(frozen=True)
class _Site:
    target: cst.CSTNode
    new: cst.CSTNode | cst.RemovalSentinel
    operator: str
    variant: str
    anchor: cst.CSTNode
    function: str
    def_line: int


# -- finding the sites --------------------------------------------------------------------
def _like(cls: type, op: cst.CSTNode) -> cst.CSTNode:
    """An operator of class ``cls`` with the whitespace of ``op``."""
    return cls(whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after)


def _parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` in parentheses unless it is an atom or already parenthesised."""
    atoms = (
        cst.Name,
        cst.Attribute,
        cst.Call,
        cst.Subscript,
        cst.Integer,
        cst.Float,
        cst.SimpleString,
        cst.List,
        cst.Dict,
        cst.Tuple,
        cst.Set,
    )
    if expr.lpar or isinstance(expr, atoms):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _negate(test: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        return inner.with_changes(lpar=[*test.lpar, *inner.lpar], rpar=[*inner.rpar, *test.rpar])
    wrapped = test
    if (
        isinstance(test, cst.BooleanOperation | cst.IfExp | cst.NamedExpr | cst.Lambda)
        and not test.lpar
    ):
        wrapped = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.UnaryOperation(operator=cst.Not(), expression=wrapped)


def _exception_swap(name: str, local_classes: set[str]) -> str | None:
    if name in _NOT_EXCEPTIONS:
        return None
    if name in _EXCEPTIONS:
        return _EXCEPTIONS[name]
    obj = getattr(builtins, name, None)
    is_builtin = isinstance(obj, type) and issubclass(obj, BaseException)
    if is_builtin or name in local_classes or name.endswith(("Error", "Exception")):
        return "RuntimeError"
    return None


def _int_value(node: cst.Integer) -> int | None:
    try:
        return int(node.value, 0)
    except ValueError:
        return None


def _names_in(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

    node.visit(_Names())
    return out


class _Finder(cst.CSTVisitor):
    """Collects every mutation site inside the selected functions."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, functions: Collection[str] | None, local_classes: set[str]) -> None:
        super().__init__()
        self.functions = functions
        self.local_classes = local_classes
        self.sites: list[_Site] = []
        self.scope: list[str] = []
        self.fn_stack: list[tuple[str, int, bool, dict[str, int]]] = []
        self.skip = 0  # inside annotations and decorators
        self.defaults: set[int] = set()
        self.kept_calls: set[int] = set()  # calls never unwrapped to their argument

    # scope bookkeeping
    def _current(self) -> tuple[str, int, bool, dict[str, int]] | None:
        return self.fn_stack[-1] if self.fn_stack else None

    def _active(self) -> bool:
        cur = self._current()
        return cur is not None and cur[2] and not self.skip

    def _add(
        self,
        target: cst.CSTNode,
        new,
        operator: str,
        variant: str,
        anchor: cst.CSTNode | None = None,
    ) -> None:
        if not self._active():
            return
        name, def_line, _, _ = self._current()
        self.sites.append(_Site(target, new, operator, variant, anchor or target, name, def_line))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.scope.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.append(node.name.value)
        qual = ".".join(self.scope)
        outer = self._current()
        selected = (
            self.functions is None or qual in self.functions or (outer is not None and outer[2])
        )
        bound = _bindings(node, self.metadata[PositionProvider])
        self.fn_stack.append(
            (qual, self.get_metadata(PositionProvider, node.name).start.line, selected, bound)
        )

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scope.pop()
        self.fn_stack.pop()

    def visit_Annotation(self, node: cst.Annotation) -> None:
        self.skip += 1

    def leave_Annotation(self, original_node: cst.Annotation) -> None:
        self.skip -= 1

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self.skip += 1

    def leave_Decorator(self, original_node: cst.Decorator) -> None:
        self.skip -= 1

    # operators
    def visit_ComparisonTarget(self, node: cst.ComparisonTarget) -> None:
        swap = _COMPARE.get(type(node.operator))
        if swap:
            self._add(node.operator, _like(swap[0], node.operator), "compare", swap[1])

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        swap = _ARITH.get(type(node.operator))
        if swap:
            self._add(node.operator, _like(swap[0], node.operator), "arith_op", swap[1])

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        swap = _ARITH.get(type(node.operator))
        if swap:
            self._add(node.operator, _like(swap[0], node.operator), "arith_op", swap[1])

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        swap = _BOOL[type(node.operator)]
        self._add(node.operator, _like(swap[0], node.operator), "bool_op", swap[1])
        for side, keep in (("left", node.left), ("right", node.right)):
            new = keep.with_changes(lpar=[*node.lpar, *keep.lpar], rpar=[*keep.rpar, *node.rpar])
            self._add(node, new, "drop_condition", f"keep_{side}", anchor=node.operator)

    def visit_Integer(self, node: cst.Integer) -> None:
        value = _int_value(node)
        if value is None or id(node) in self.defaults:
            return
        self._add(node, node.with_changes(value=str(value + 1)), "constant", "+1")
        if value > 0:
            self._add(node, node.with_changes(value=str(value - 1)), "constant", "-1")

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in ("True", "False") and id(node) not in self.defaults:
            flipped = "False" if node.value == "True" else "True"
            self._add(node, node.with_changes(value=flipped), "constant", flipped)

    def visit_Param(self, node: cst.Param) -> None:
        d = node.default
        if d is None:
            return
        self.defaults.add(id(d))
        new, variant = None, ""
        if isinstance(d, cst.Integer) and _int_value(d) is not None:
            new, variant = d.with_changes(value=str(_int_value(d) + 1)), "+1"
        elif isinstance(d, cst.Float):
            new, variant = d.with_changes(value=repr(float(d.value) + 1)), "+1"
        elif isinstance(d, cst.Name) and d.value in ("True", "False"):
            variant = "False" if d.value == "True" else "True"
            new = d.with_changes(value=variant)
        elif isinstance(d, cst.SimpleString) and '"""' not in d.value and "'''" not in d.value:
            prefix, quote = d.prefix, d.quote
            empty = d.evaluated_value in ("", b"")
            new = d.with_changes(value=f"{prefix}{quote}{'x' if empty else ''}{quote}")
            variant = "x" if empty else "empty"
        if new is not None:
            self._add(d, new, "wrong_default", variant)

    def visit_Call(self, node: cst.Call) -> None:
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if len(positional) == len(node.args):
            for i in range(len(node.args) - 1):
                a, b = node.args[i], node.args[i + 1]
                if cst.Module([]).code_for_node(a.value) == cst.Module([]).code_for_node(b.value):
                    continue
                args = list(node.args)
                args[i], args[i + 1] = a.with_changes(value=b.value), b.with_changes(value=a.value)
                self._add(node, node.with_changes(args=args), "swap_args", f"{i}-{i + 1}", anchor=a)
        func = node.func
        name = (
            func.value
            if isinstance(func, cst.Name)
            else (func.attr.value if isinstance(func, cst.Attribute) else None)
        )
        if (
            len(node.args) == 1
            and positional
            and name not in (None, *_NO_UNWRAP)
            and id(node) not in self.kept_calls
        ):
            arg = _parens(node.args[0].value)
            new = arg.with_changes(lpar=[*node.lpar, *arg.lpar], rpar=[*arg.rpar, *node.rpar])
            self._add(node, new, "remove_call", "arg", anchor=node.args[0])

    def visit_Return(self, node: cst.Return) -> None:
        v = node.value
        if v is None or (isinstance(v, cst.Name) and v.value in ("None", "True", "False")):
            return
        self._add(v, cst.Name("None"), "return_value", "None")

    def visit_Raise(self, node: cst.Raise) -> None:
        exc = node.exc
        if isinstance(exc, cst.Call):
            self.kept_calls.add(id(exc))  # `raise "message"` is no plausible bug
        self._exception(exc.func if isinstance(exc, cst.Call) else exc)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        t = node.type
        for name in [e.value for e in t.elements] if isinstance(t, cst.Tuple) else [t]:
            self._exception(name)

    def _exception(self, name: cst.CSTNode | None) -> None:
        if isinstance(name, cst.Name):
            new = _exception_swap(name.value, self.local_classes)
            if new:
                self._add(name, name.with_changes(value=new), "exception_type", new)

    def _invert(self, test: cst.BaseExpression) -> None:
        # `a is b`, `a in b`, `a == b` are negated by `compare` already, in their own style
        if (
            isinstance(test, cst.Comparison)
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, _SELF_NEGATING)
        ):
            return
        self._add(test, _negate(test), "invert_condition", "not")

    def visit_If(self, node: cst.If) -> None:
        self._invert(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._invert(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._invert(node.test)

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self.kept_calls.add(id(node.value))  # removed whole by `remove_call(statement)`

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        body = list(node.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        if len(body) < 2 or not self._active():
            return
        for stmt in body:
            op = self._droppable(stmt)
            if op:
                self._add(stmt, cst.RemovalSentinel.REMOVE, op[0], op[1])

    def _droppable(self, stmt: cst.BaseStatement) -> tuple[str, str] | None:
        if isinstance(stmt, cst.If):
            return ("drop_guard", "removed") if stmt.orelse is None else None
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None
        small = stmt.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            return "remove_call", "statement"
        if isinstance(small, cst.AugAssign | cst.Continue | cst.Break):
            return "drop_statement", "removed"
        if isinstance(small, cst.Assign) and self._rebinds(small, stmt):
            return "drop_statement", "removed"
        return None

    def _rebinds(self, assign: cst.Assign, stmt: cst.CSTNode) -> bool:
        """Every name the assignment binds is bound before it (so dropping it keeps an old
        value rather than raising NameError)."""
        line = self.get_metadata(PositionProvider, stmt).start.line
        bound = self._current()[3]
        for t in assign.targets:
            if isinstance(t.target, cst.Attribute | cst.Subscript):
                continue
            for n in _names_in(t.target):
                if bound.get(n, line) >= line:
                    return False
        return True


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


def _bindings(fn: cst.FunctionDef, positions) -> dict[str, int]:
    """Name -> first line it is bound on in ``fn`` (parameters: the ``def`` line)."""
    first: dict[str, int] = {}
    def_line = positions[fn.name].start.line
    for p in [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]:
        first[p.name.value] = def_line
    for star in (fn.params.star_arg, fn.params.star_kwarg):
        if isinstance(star, cst.Param):
            first[star.name.value] = def_line

    class _Binds(cst.CSTVisitor):
        def _record(self, target: cst.CSTNode, node: cst.CSTNode) -> None:
            if isinstance(target, cst.Attribute | cst.Subscript):
                return
            line = positions[node].start.line
            for n in _names_in(target):
                first[n] = min(first.get(n, line), line)

        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                self._record(t.target, node)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if node.value is not None:
                self._record(node.target, node)

        def visit_For(self, node: cst.For) -> None:
            self._record(node.target, node)

        def visit_AsName(self, node: cst.AsName) -> None:
            self._record(node.name, node)

    fn.body.visit(_Binds())
    return first


# -- making the mutants -------------------------------------------------------------------
class _Replace(cst.CSTTransformer):
    def __init__(self, target: cst.CSTNode, new) -> None:
        super().__init__()
        self.target, self.new = target, new

    def on_leave(self, original_node, updated_node):
        return self.new if original_node is self.target else updated_node


def mutants(
    source: str,
    file: str,
    functions: Collection[str] | None = None,
    operators: Collection[str] | None = None,
) -> list[Mutant]:
    """Every single-site mutant of ``source`` that compiles and changes the text.

    Args:
        source: A module's text.
        file: Its path relative to the repository root (used in ids and diffs).
        functions: Qualified names to mutate (nested functions included); None: all.
        operators: Operators to use (default: all of :data:`OPERATORS`).

    Returns:
        The mutants in source order, ids unique.

    Raises:
        cst.ParserSyntaxError: ``source`` is not valid Python.
    """
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    local_classes = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)}
    finder = _Finder(functions, local_classes)
    wrapper.visit(finder)
    positions = wrapper.resolve(PositionProvider)
    ops = set(OPERATORS if operators is None else operators)
    out: list[Mutant] = []
    seen_code, seen_ids = {source}, set()

    def where(site: _Site) -> tuple[int, int]:
        start = positions[site.anchor].start
        return start.line, start.column

    for site in sorted(finder.sites, key=where):  # stable sort: source order
        if site.operator not in ops:
            continue
        code = module.visit(_Replace(site.target, site.new)).code
        if code in seen_code or not _compiles(code, file):
            continue
        seen_code.add(code)
        line, col = where(site)
        m = Mutant(
            file, site.function, site.operator, site.variant, line, col, line - site.def_line, code
        )
        n = 2
        while m.id in seen_ids:  # two edits anchored at one position (rare): number them
            m = dataclasses.replace(m, variant=f"{site.variant}#{n}")
            n += 1
        seen_ids.add(m.id)
        out.append(m)
    return out


def _compiles(code: str, file: str) -> bool:
    with warnings.catch_warnings():  # a mutant such as `1(x)` warns: say nothing
        warnings.simplefilter("ignore")
        try:
            compile(code, file, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


# -- trivially equivalent mutants ---------------------------------------------------------
def equivalence(original: str, mutated: str) -> str | None:
    """Why ``mutated`` is trivially the same program as ``original``, or None.

    ``same AST``: the two parse to equal abstract syntax trees (only layout differs).
    ``same bytecode``: CPython compiles them to the same code objects (constants, names
    and instructions, ignoring line numbers), e.g. a change inside unreachable code.
    """
    if ast.dump(ast.parse(original)) == ast.dump(ast.parse(mutated)):
        return "same AST"
    a, b = (
        compile(original, "m", "exec", dont_inherit=True),
        compile(mutated, "m", "exec", dont_inherit=True),
    )
    if _code_key(a) == _code_key(b):
        return "same bytecode"
    return None


def _code_key(code: types.CodeType) -> tuple:
    consts = tuple(
        _code_key(c) if isinstance(c, types.CodeType) else (type(c), repr(c))
        for c in code.co_consts
    )
    return (
        code.co_code,
        consts,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_argcount,
        code.co_kwonlyargcount,
        code.co_flags,
    )


# -- which functions a fix touches --------------------------------------------------------
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def changed_lines(diff: str) -> dict[str, set[int]]:
    """Lines of the *new* files that a unified diff adds or deletes next to, by path.

    A deletion is recorded at the lines around it. Deleted files are left out.
    """
    out: dict[str, set[int]] = {}
    path: str | None = None
    line = 0
    for text in diff.splitlines():
        if text.startswith("+++ "):
            name = text[4:].strip().split("\t")[0]
            path = None if name == "/dev/null" else re.sub(r"^b/", "", name)
            if path is not None:
                out.setdefault(path, set())
        elif (m := _HUNK.match(text)) and path is not None:
            line = int(m.group(1))
        elif path is None or text.startswith(("--- ", "diff ", "index ", "\\")):
            continue
        elif text.startswith("+"):
            out[path].add(line)
            line += 1
        elif text.startswith("-"):
            out[path].update({max(line - 1, 1), line})
        elif text.startswith(" "):
            line += 1
    return out


@dataclasses.dataclass(frozen=True)
class _Fn:
    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    start: int
    end: int
    cls: str | None


def _functions(tree: ast.Module) -> list[_Fn]:
    out: list[_Fn] = []

    def walk(node: ast.AST, prefix: list[str], cls: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                q = [*prefix, child.name]
                out.append(_Fn(".".join(q), child, start, child.end_lineno, cls))
                walk(child, q, None)
            elif isinstance(child, ast.ClassDef):
                walk(child, [*prefix, child.name], ".".join([*prefix, child.name]))
            else:
                walk(child, prefix, cls)

    walk(tree, [], None)
    return out


def function_names(source: str) -> list[str]:
    """Qualified names (``Class.method``, ``outer.inner``) of every function, in source order,
    each once (a property's getter and setter share one: ``Version.patch``)."""
    return list(dict.fromkeys(f.qualname for f in _functions(ast.parse(source))))


def touched_functions(source: str, lines: Iterable[int]) -> set[str]:
    """Qualified names of the functions that hold ``lines`` of ``source``.

    A changed line in a class body outside any method selects the class's methods; a
    changed module-level statement selects the functions that read a name it binds.
    """
    tree = ast.parse(source)
    fns = _functions(tree)
    out: set[str] = set()
    for line in lines:
        inside = [f for f in fns if f.start <= line <= f.end]
        if inside:
            out.add(max(inside, key=lambda f: f.start).qualname)
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.lineno <= line <= node.end_lineno:
                out |= {f.qualname for f in fns if f.cls == node.name}
        bound = {
            n.id
            for stmt in tree.body
            if stmt.lineno <= line <= stmt.end_lineno and not isinstance(stmt, ast.ClassDef)
            for n in ast.walk(stmt)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        out |= {
            f.qualname
            for f in fns
            if bound & {n.id for n in ast.walk(f.node) if isinstance(n, ast.Name)}
        }
    return out


def callers(source: str, names: Collection[str]) -> set[str]:
    """Qualified names of the functions in ``source`` that call any of ``names`` directly
    (``name(...)`` or ``obj.name(...)``; a class name counts as a call of its ``__init__``)."""
    out: set[str] = set()
    for f in _functions(ast.parse(source)):
        for n in ast.walk(f.node):
            if not isinstance(n, ast.Call):
                continue
            callee = (
                n.func.id
                if isinstance(n.func, ast.Name)
                else (n.func.attr if isinstance(n.func, ast.Attribute) else None)
            )
            if callee in names:
                out.add(f.qualname)
                break
    return out


# -- diffs --------------------------------------------------------------------------------
def file_diff(path: str, before: str | None, after: str) -> str:
    """A ``git apply``-able diff of one file from ``before`` (None: a new file) to ``after``."""
    a = before.splitlines(keepends=True) if before is not None else []
    b = after.splitlines(keepends=True)
    body = []
    for line in difflib.unified_diff(
        a, b, "/dev/null" if before is None else f"a/{path}", f"b/{path}", n=3
    ):
        body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    if not body:
        return ""
    head = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if before is None else "")
    return head + "".join(body)


# -- reviewed equivalent survivors (task.toml [mutation]) --------------------------------
def reviewed_equivalents(task_dir: Path) -> dict[str, str]:
    """Mutant id -> reason, from ``[mutation] equivalent`` in ``task_dir/task.toml``.

    The format is ``equivalent = [{ mutant = "<id>", why = "<argument>" }, ...]``.

    Raises:
        TaskError: the table is malformed (naming the file, the key and the fix).
    """
    file = task_dir / "task.toml"
    data = tomllib.loads(file.read_text())
    table = data.get("mutation", {})
    fix = (
        'write [mutation] equivalent = [{ mutant = "<id printed by repogym validate '
        '--mutation>", why = "<why no correct test can tell them apart>" }]'
    )
    if not isinstance(table, dict):
        raise TaskError(f"{file}: key 'mutation': expected a table. Fix: {fix}")
    unknown = set(table) - {"equivalent"}
    if unknown:
        raise TaskError(f"{file}: key 'mutation.{min(unknown)}': unknown key. Fix: {fix}")
    entries = table.get("equivalent", [])
    if not isinstance(entries, list):
        raise TaskError(f"{file}: key 'mutation.equivalent': expected a list. Fix: {fix}")
    out: dict[str, str] = {}
    for i, e in enumerate(entries):
        ok = (
            isinstance(e, dict)
            and set(e) == {"mutant", "why"}
            and all(isinstance(e[k], str) and e[k].strip() for k in ("mutant", "why"))
        )
        if not ok:
            raise TaskError(
                f"{file}: key 'mutation.equivalent[{i}]': {e!r} needs exactly a "
                f"non-empty mutant and why. Fix: {fix}"
            )
        if e["mutant"] in out:
            raise TaskError(
                f"{file}: key 'mutation.equivalent[{i}]': {e['mutant']} is listed "
                "twice. Fix: keep one entry per mutant"
            )
        out[e["mutant"]] = e["why"].strip()
    return out


def iter_sources(root: Path, skip: Iterable[str] = ()) -> Iterator[tuple[str, str]]:
    """(path relative to ``root``, text) of every ``*.py`` file under ``root`` except
    ``skip`` and ``__pycache__``, sorted."""
    skip = set(skip)
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if "__pycache__" not in p.parts and rel not in skip:
            yield rel, p.read_text(encoding="utf-8")
